// Blocking frames over a socket (net/frame_channel.h), the agent stream's wire without
// gRPC: frames of any size arrive whole and in order, and a stuck reader can be ended.
#include "net/frame_channel.h"

#include <sys/socket.h>

#include <gtest/gtest.h>

#include <string>
#include <thread>

namespace corral::net {
namespace {

struct Pair {
  std::unique_ptr<FrameChannel> a, b;
};

Pair make_pair(size_t max_in) {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  return {std::make_unique<FrameChannel>(UniqueFd(fds[0]), max_in),
          std::make_unique<FrameChannel>(UniqueFd(fds[1]), max_in)};
}

TEST(FrameChannel, FramesLargerThanTheSocketBufferArriveWholeAndInOrder) {
  auto p = make_pair(8u << 20);
  const std::string big(5u << 20, 'x');  // far over a socket's buffer: written in many pieces
  std::thread writer([&] {
    EXPECT_TRUE(p.a->write(kStepFrameMessage, "first"));
    EXPECT_TRUE(p.a->write(kStepFrameMessage, big));
    EXPECT_TRUE(p.a->write(kStepFrameStatus, step_status_payload(7, "bye")));
  });
  auto f1 = p.b->read();
  ASSERT_TRUE(f1) << f1.message();
  EXPECT_EQ(f1->payload, "first");
  EXPECT_TRUE(p.b->heard());
  auto f2 = p.b->read();
  ASSERT_TRUE(f2) << f2.message();
  EXPECT_EQ(f2->payload.size(), big.size());
  EXPECT_EQ(f2->payload, big);
  auto f3 = p.b->read();
  ASSERT_TRUE(f3) << f3.message();
  EXPECT_EQ(f3->type, kStepFrameStatus);
  writer.join();
  p.a.reset();  // closed: the reader hears the end
  auto end = p.b->read();
  ASSERT_FALSE(end);
  EXPECT_EQ(end.error().code, Errc::unavailable);
}

TEST(FrameChannel, AFrameOverTheLimitIsRefusedAndNothingHeard) {
  auto p = make_pair(16);
  ASSERT_TRUE(p.a->write(kStepFrameMessage, std::string(17, 'y')));
  auto f = p.b->read();
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().code, Errc::invalid_argument);
  EXPECT_NE(f.message().find("over the limit of 16"), std::string::npos) << f.message();
  EXPECT_FALSE(p.b->heard());
}

TEST(FrameChannel, ReadWithinGivesUpWhenNothingComes) {
  auto p = make_pair(16);
  auto f = p.b->read_within(20);
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().code, Errc::unavailable);
  ASSERT_TRUE(p.a->write(kStepFrameMessage, "late"));
  auto g = p.b->read_within(1000);
  ASSERT_TRUE(g) << g.message();
  EXPECT_EQ(g->payload, "late");
}

TEST(FrameChannel, ShutdownEndsABlockedReadAndLaterWrites) {
  auto p = make_pair(16);
  Result<StepFrameReader::Frame> got = Error{};
  std::thread reader([&] { got = p.b->read(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  p.b->shutdown();
  reader.join();
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code, Errc::unavailable);
  EXPECT_FALSE(p.b->write(kStepFrameMessage, "after"));
}

}  // namespace
}  // namespace corral::net
