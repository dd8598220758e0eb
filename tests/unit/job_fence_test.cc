// The step manager's table for PMI barriers of a job's own tasks across nodes.
#include "node/pmi/job_fence.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>

namespace corral::node {
namespace {

v1::JobFenceRequest contribution(uint64_t job, uint32_t seq, const std::string& node, uint32_t nodes,
                                 const std::string& key) {
  v1::JobFenceRequest r;
  r.set_jobid(job);
  r.set_seq(seq);
  r.set_node(node);
  r.set_nodes(nodes);
  (*r.mutable_kvs())[key] = node;
  return r;
}

auto never() {
  return [] { return false; };
}

TEST(JobFenceTable, AnswersEveryNodeWithEveryonesPutsOnceAllContributed) {
  JobFenceTable table;
  auto a = std::async(std::launch::async, [&] { return table.contribute(contribution(7, 0, "n0", 3, "k0"), never()); });
  auto b = std::async(std::launch::async, [&] { return table.contribute(contribution(7, 0, "n1", 3, "k1"), never()); });
  EXPECT_EQ(a.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);  // n2 is missing
  auto c = table.contribute(contribution(7, 0, "n2", 3, "k2"), never());
  for (auto* r : {&c}) ASSERT_TRUE(r->ok()) << r->message();
  auto ra = a.get(), rb = b.get();
  ASSERT_TRUE(ra.ok() && rb.ok());
  PmiKvs want{{"k0", "n0"}, {"k1", "n1"}, {"k2", "n2"}};
  EXPECT_EQ(*ra, want);
  EXPECT_EQ(*rb, want);
  EXPECT_EQ(*c, want);
  // The next barrier starts empty.
  auto d = std::async(std::launch::async, [&] { return table.contribute(contribution(7, 1, "n0", 2, "x"), never()); });
  auto e = table.contribute(contribution(7, 1, "n1", 2, "y"), never());
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->size(), 2u);
  EXPECT_EQ(d.get()->count("k0"), 0u);
}

TEST(JobFenceTable, RefusesATwiceEnteredBarrierAndDisagreeingNodeCounts) {
  JobFenceTable table;
  std::atomic<bool> stop{false};
  auto first = std::async(std::launch::async, [&] {
    return table.contribute(contribution(1, 0, "n0", 2, "a"), [&] { return stop.load(); });
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto twice = table.contribute(contribution(1, 0, "n0", 2, "a"), never());
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.message().find("twice"), std::string::npos);
  auto other = table.contribute(contribution(1, 0, "n1", 3, "b"), never());
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.message().find("expects 3 nodes"), std::string::npos) << other.message();
  stop = true;  // the first caller went away
  auto r = first.get();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("went away"), std::string::npos) << r.message();
}

TEST(JobFenceTable, DroppingTheJobReleasesItsWaitersWithAReason) {
  JobFenceTable table;
  auto w = std::async(std::launch::async, [&] { return table.contribute(contribution(9, 0, "n0", 2, "a"), never()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  table.drop_job(8);  // another job: nothing happens
  EXPECT_EQ(w.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  table.drop_job(9);
  auto r = w.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), "job 9 ended");
}

}  // namespace
}  // namespace corral::node
