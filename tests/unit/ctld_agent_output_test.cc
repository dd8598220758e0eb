// Task output from agents: numbered entries are taken once, so what an agent resends
// after a broken link (with its next register) is not shown twice, and the controller
// acknowledges what it has with the agent's heartbeats.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include "ctld/agent_link.h"
#include "ctld/controller.h"
#include "ctld/watch_hub.h"
#include "ctld_test_controller.h"
#include "job/jobspec.h"
#include "temp_dir.h"

namespace corral::ctld {
namespace {

class CtldAgentOutput : public ::testing::Test {
 protected:
  CtldAgentOutput() { spdlog::set_level(spdlog::level::warn); }
  void SetUp() override {
    ctl_ = test::start_test_controller(dir_, test::test_config(dir_));
    ASSERT_TRUE(ctl_);
    link_ = connect({});
    jobid_ = test::submit_command(*ctl_, {"true"});
    ASSERT_NE(jobid_, 0u);
  }
  std::shared_ptr<AgentLink> connect(const std::vector<v1::TaskOutput>& spooled) {
    return test::register_one_node(*ctl_, "inc-1", spooled);
  }
  v1::TaskOutput chunk(const std::string& data, uint64_t seq) const {
    v1::TaskOutput o;
    o.set_jobid(jobid_);
    o.set_node("node0");
    o.set_data(data);
    o.set_seq(seq);
    return o;
  }
  std::string history() {
    v1::WatchRequest req;
    req.add_jobids(jobid_);
    req.set_output(true);
    req.set_history(true);
    std::shared_ptr<Subscriber> sub;
    EXPECT_TRUE(ctl_->subscribe(Caller{0, 0}, req, &sub).ok());
    std::string text;
    v1::WatchReply rep;
    while (sub->next(rep, 200) && rep.items_size() > 0) {
      for (const auto& item : rep.items())
        if (item.has_output()) text += item.output().data();
      rep.Clear();
    }
    return text;
  }
  uint64_t acked(AgentLink& link) {
    uint64_t seq = 0;
    v1::ControllerMessage m;
    while (link.next(m, 50) && m.ByteSizeLong() > 0) {
      if (m.output_acked() > 0) seq = m.output_acked();
      m.Clear();
    }
    return seq;
  }

  test::TempDir dir_{"corral-ctld-output"};
  std::unique_ptr<Controller> ctl_;
  std::shared_ptr<AgentLink> link_;
  uint64_t jobid_ = 0;
};

TEST_F(CtldAgentOutput, OutputResentAfterABrokenLinkIsTakenOnce) {
  v1::AgentMessage msg;
  *msg.add_output() = chunk("one ", 1);
  *msg.add_output() = chunk("two ", 2);
  ctl_->agent_message(*link_, msg);
  // The link broke before the acknowledgement: the agent resends both, and the rest.
  auto again = connect({chunk("one ", 1), chunk("two ", 2), chunk("three", 3)});
  EXPECT_EQ(history(), "one two three");
  EXPECT_EQ(acked(*again), 3u);  // the registration's answer says what arrived
}

TEST_F(CtldAgentOutput, HeartbeatsAcknowledgeWhatArrived) {
  v1::AgentMessage msg;
  *msg.add_output() = chunk("x", 1);
  ctl_->agent_message(*link_, msg);
  acked(*link_);
  v1::AgentMessage beat;
  beat.set_heartbeat(true);
  ctl_->agent_message(*link_, beat);
  EXPECT_EQ(acked(*link_), 1u);
  ctl_->agent_message(*link_, beat);
  EXPECT_EQ(acked(*link_), 0u);  // nothing new: no second acknowledgement
}

}  // namespace
}  // namespace corral::ctld
