// step_create_frame writes {create: spec} from the spec itself: the message the agent
// parses, for small specs and for ones whose length needs several varint bytes. (Map
// entries have no fixed order on the wire, so a spec with an environment is compared
// once parsed.)
#include <gtest/gtest.h>

#include <string>

#include "cli/client/step_socket_client.h"
#include "net/step_frames.h"
#include "steps.pb.h"

namespace corral::cli {
namespace {

std::string frame_of_message(const pb::StepSpec& spec) {
  pb::StepClientMessage msg;
  *msg.mutable_create() = spec;
  std::string frame;
  net::append_step_frame(frame, net::kStepFrameMessage, msg.SerializeAsString());
  return frame;
}

TEST(StepCreateFrameTest, AnEmptySpecIsTheMessagesFrame) {
  EXPECT_EQ(step_create_frame(pb::StepSpec()), frame_of_message(pb::StepSpec()));
}

TEST(StepCreateFrameTest, ASpecWithAnEnvironmentIsTheMessagesFrameAndParsesBack) {
  pb::StepSpec spec;
  spec.set_jobid(42);
  spec.add_argv("/bin/echo");
  spec.add_argv(std::string(300, 'x'));
  spec.set_ntasks(16);
  for (int i = 0; i < 200; ++i) spec.add_env("VAR_" + std::to_string(i) + "=" + std::string(i, 'v'));
  const std::string frame = step_create_frame(spec);
  ASSERT_EQ(frame.size(), frame_of_message(spec).size());

  net::StepFrameReader reader(1 << 24);
  reader.feed(frame);
  auto got = reader.next();
  ASSERT_TRUE(got) << got.message();
  ASSERT_TRUE(*got);
  pb::StepClientMessage parsed;
  ASSERT_TRUE(parsed.ParseFromString((*got)->payload));
  ASSERT_TRUE(parsed.has_create());
  EXPECT_EQ(parsed.create().jobid(), 42u);
  EXPECT_EQ(parsed.create().argv(1), std::string(300, 'x'));
  ASSERT_EQ(parsed.create().env_size(), 200);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(parsed.create().env(i), spec.env(i));
  EXPECT_EQ(parsed.create().ntasks(), 16u);
}

}  // namespace
}  // namespace corral::cli
