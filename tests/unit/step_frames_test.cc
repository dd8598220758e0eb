// The agent's own step protocol's frames (net/step_frames.h): cut out of a byte stream in
// any pieces, status frames round-trip, and what a hostile sender can do is refused.
#include "net/step_frames.h"

#include <gtest/gtest.h>

namespace corral::net {
namespace {

TEST(StepFrames, FramesComeOutWholeHoweverTheBytesArrive) {
  std::string stream;
  append_step_frame(stream, kStepFrameMessage, "first");
  append_step_frame(stream, kStepFrameMessage, "");
  append_step_frame(stream, kStepFrameStatus, step_status_payload(5, "job 7 is not here"));
  for (size_t piece : {size_t{1}, size_t{3}, size_t{7}, stream.size()}) {
    StepFrameReader reader(1024);
    std::vector<StepFrameReader::Frame> got;
    for (size_t at = 0; at < stream.size(); at += piece) {
      reader.feed(std::string_view(stream).substr(at, piece));
      for (;;) {
        auto f = reader.next();
        ASSERT_TRUE(f) << f.message();
        if (!*f) break;
        got.push_back(std::move(**f));
      }
    }
    ASSERT_EQ(got.size(), 3u) << "pieces of " << piece;
    EXPECT_EQ(got[0].payload, "first");
    EXPECT_EQ(got[1].payload, "");
    EXPECT_EQ(got[2].type, kStepFrameStatus);
    auto st = parse_step_status(got[2].payload);
    ASSERT_TRUE(st);
    EXPECT_EQ(st->code, 5);
    EXPECT_EQ(st->message, "job 7 is not here");
    EXPECT_TRUE(reader.empty());
  }
}

TEST(StepFrames, OversizedAndUnknownFramesAreRefusedBeforeTheirPayload) {
  StepFrameReader big(16);
  std::string header("\x01\x00\x00\x00\x11", 5);  // 17 bytes announced, none sent
  big.feed(header);
  auto f = big.next();
  ASSERT_FALSE(f);
  EXPECT_EQ(f.message(), "step protocol: a frame of 17 bytes is over the limit of 16");
  StepFrameReader unknown(16);
  unknown.feed(std::string("\x07\x00\x00\x00\x00", 5));
  auto u = unknown.next();
  ASSERT_FALSE(u);
  EXPECT_EQ(u.message(), "step protocol: unknown frame type 7");
  EXPECT_FALSE(parse_step_status(""));
}

}  // namespace
}  // namespace corral::net
