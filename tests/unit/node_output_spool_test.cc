// The agent's output spool and the outbox's numbering and acknowledgement: output the
// controller did not confirm survives a broken link, a failed registration and an agent
// restart, and goes out once the link is back, in order.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <string>
#include <vector>

#include "node/output_spool.h"
#include "node/uplink.h"
#include "temp_dir.h"

namespace corral::node {
namespace {

struct Sent {
  std::vector<v1::AgentMessage> msgs;
  std::string text() const {
    std::string s;
    for (const auto& m : msgs)
      for (const auto& o : m.output()) s += o.data();
    return s;
  }
};

std::string text_of(const v1::AgentMessage& m) {
  std::string s;
  for (const auto& o : m.output()) s += o.data();
  return s;
}

class OutputSpoolTest : public ::testing::Test {
 protected:
  std::string path() const { return dir_.str() + "/output.spool"; }
  OutputSpool open(uint64_t max = OutputSpool::kDefaultMaxBytes) {
    auto s = OutputSpool::open(path(), max);
    EXPECT_TRUE(s.ok()) << s.message();
    return std::move(*s);
  }
  static v1::TaskOutput chunk(uint64_t job, const std::string& data, uint64_t seq = 0) {
    v1::TaskOutput o;
    o.set_jobid(job);
    o.set_node("n1");
    o.set_data(data);
    o.set_seq(seq);
    return o;
  }
  test::TempDir dir_;
};

TEST_F(OutputSpoolTest, KeepsInOrderAcrossReopeningAndIsPrivate) {
  {
    OutputSpool s = open();
    s.keep(chunk(1, "a", 1), "inc-1");
    s.keep(chunk(1, "b", 2), "inc-1");
  }
  struct stat st {};
  ASSERT_EQ(::stat(path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  OutputSpool s = open();  // a restarted agent finds what the last one kept
  auto got = s.read();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].data(), "a");
  EXPECT_EQ(got[1].data(), "b");
  EXPECT_EQ(got[1].seq(), 2u);
  EXPECT_EQ(got[0].incarnation(), "inc-1");
  EXPECT_EQ(s.read().size(), 2u);  // reading does not consume
  s.clear();
  EXPECT_TRUE(s.read().empty());
  EXPECT_TRUE(s.empty());
}

TEST_F(OutputSpoolTest, PastTheLimitOutputIsCountedAndTheJobTold) {
  OutputSpool s = open(200);
  s.keep(chunk(7, std::string(100, 'x')), "i");
  s.keep(chunk(7, std::string(150, 'y')), "i");  // does not fit
  s.keep(chunk(7, std::string(50, 'z')), "i");   // does
  auto got = s.read();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].data(), std::string(100, 'x'));
  EXPECT_EQ(got[1].data(), std::string(50, 'z'));
  EXPECT_TRUE(got[2].stderr());
  EXPECT_NE(got[2].data().find("150 bytes of this job's output were lost"), std::string::npos) << got[2].data();
}

TEST_F(OutputSpoolTest, ARecordCutShortByACrashEndsTheList) {
  {
    OutputSpool s = open();
    s.keep(chunk(1, "whole"), "i");
  }
  ASSERT_EQ(::truncate(path().c_str(), 0), 0);  // then write a whole record and half of one
  {
    OutputSpool s = open();
    s.keep(chunk(1, "first"), "i");
    s.keep(chunk(1, "second"), "i");
  }
  struct stat st {};
  ASSERT_EQ(::stat(path().c_str(), &st), 0);
  ASSERT_EQ(::truncate(path().c_str(), st.st_size - 3), 0);
  OutputSpool s = open();
  auto got = s.read();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].data(), "first");
}

class OutboxAckTest : public OutputSpoolTest {
 protected:
  void SetUp() override {
    spool_.emplace(open());
    out_.set_spool(&*spool_, "inc-1");
  }
  void online(uint64_t session) {
    out_.set_registering(session);
    v1::AgentMessage reg;
    out_.add_spooled(reg);
    registers_.push_back(reg);
    out_.set_online(session);
  }
  Sent sent_;
  std::vector<v1::AgentMessage> registers_;
  std::optional<OutputSpool> spool_;
  Uplink out_{[this](uint64_t, v1::AgentMessage&& m) { sent_.msgs.push_back(std::move(m)); }};
};

TEST_F(OutboxAckTest, UnacknowledgedAndOfflineOutputGoesWithTheNextRegister) {
  online(1);
  out_.output(5, 0, "n1", false, "one ", false);
  out_.flush();
  out_.output(5, 0, "n1", false, "two ", false);
  out_.flush();
  ASSERT_EQ(sent_.msgs.size(), 2u);
  EXPECT_EQ(sent_.msgs[0].output(0).seq(), 1u);
  EXPECT_EQ(sent_.msgs[1].output(0).seq(), 2u);
  out_.acked(1);  // "two" may be lost with the link
  out_.set_offline(1);
  out_.output(5, 0, "n1", false, "three", true);
  out_.flush();
  EXPECT_EQ(sent_.msgs.size(), 2u);  // nothing is sent offline

  // A registration that does not get through: the spool is still there for the next.
  out_.set_registering(2);
  v1::AgentMessage lost;
  out_.add_spooled(lost);
  EXPECT_EQ(text_of(lost), "two three");
  out_.set_offline(2);

  online(3);
  EXPECT_EQ(text_of(registers_.back()), "two three");
  EXPECT_EQ(registers_.back().output(0).seq(), 2u);  // the numbers corrald uses to drop copies
  EXPECT_EQ(registers_.back().output(0).incarnation(), "inc-1");
  EXPECT_TRUE(spool_->empty());  // acknowledged by the registration
}

TEST_F(OutboxAckTest, AcknowledgedOutputIsNotKept) {
  online(1);
  out_.output(5, 0, "n1", false, "done", true);
  out_.flush();
  out_.acked(sent_.msgs.back().output(0).seq());
  out_.set_offline(1);
  online(2);
  EXPECT_EQ(registers_.back().output_size(), 0);
}

}  // namespace
}  // namespace corral::node
