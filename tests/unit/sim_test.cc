// The simulator on traces small enough to work out by hand (see tests/data/sim/tiny.swf).
#include <cstdlib>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim/cluster.h"
#include "sim/report.h"
#include "sim/simulator.h"
#include "sim/swf.h"
#include "topology/topology.h"

namespace corral::sim {
namespace {

Cluster flat_cluster(unsigned nodes) {
  Cluster c;
  for (unsigned i = 0; i < nodes; ++i) c.nodes.push_back("n" + std::to_string(i));
  return c;
}

SwfTrace tiny_trace() {
  const char* data = std::getenv("CORRAL_TEST_DATA");
  EXPECT_NE(data, nullptr);
  auto t = load_swf(std::string(data ? data : ".") + "/sim/tiny.swf");
  EXPECT_TRUE(t) << t.message();
  return t ? *t : SwfTrace{};
}

SwfJob job(uint64_t id, double submit, double run, unsigned procs, double requested = 0) {
  return SwfJob{id, submit, run, procs, requested > 0 ? requested : run, unsigned(id)};
}

// On 4 one-core nodes, with EASY backfill (times in seconds):
//   job 1 (3 nodes, 100 s) starts at 0 and leaves one node free.
//   job 2 (4 nodes) waits for job 1: its reservation is all 4 nodes at 100.
//   job 3 (1 node, asks 60 s) backfills at 20 (ends by 80 <= 100) and runs 30 s, to 50.
//   job 4 (1 node, no requested time: its run time, 5 s) backfills at 50 after job 3, to 55.
//   job 5 (1 node, asks 100 s) would end after 100 on a reserved node: waits until job 2
//   ends at 150 and runs to 170.
//   job 6 (8 processors) is larger than the cluster; job 7 has no run time.
TEST(Simulator, TinyTraceWorkedByHand) {
  SwfTrace trace = tiny_trace();
  SimResult r = simulate(flat_cluster(4), trace);
  ASSERT_EQ(r.jobs.size(), 5u);
  struct Want {
    uint64_t id;
    double submit, start, end;
    unsigned nodes;
  };
  const Want want[] = {
      {1, 0, 0, 100, 3}, {2, 10, 100, 150, 4}, {3, 20, 20, 50, 1}, {4, 30, 50, 55, 1}, {5, 40, 150, 170, 1}};
  for (size_t i = 0; i < 5; ++i) {
    SCOPED_TRACE("job " + std::to_string(want[i].id));
    EXPECT_EQ(r.jobs[i].id, want[i].id);
    EXPECT_EQ(r.jobs[i].submit, want[i].submit);
    EXPECT_EQ(r.jobs[i].start, want[i].start);
    EXPECT_EQ(r.jobs[i].end, want[i].end);
    EXPECT_EQ(r.jobs[i].nodes, want[i].nodes);
    EXPECT_EQ(r.jobs[i].leaves, 0u);  // flat
    EXPECT_EQ(r.jobs[i].fewest, 0u);
  }
  EXPECT_EQ(r.jobs[3].requested, 5);  // fell back to the run time
  ASSERT_EQ(r.too_big.size(), 1u);
  EXPECT_EQ(r.too_big[0].id, 6u);
  EXPECT_EQ(r.too_big[0].line, 11u);
  EXPECT_TRUE(r.never_started.empty());

  Summary s = summarize(r, trace.skipped);
  EXPECT_EQ(s.jobs, 5u);
  EXPECT_EQ(s.skipped_invalid, 1u);
  EXPECT_EQ(s.skipped_too_big, 1u);
  EXPECT_EQ(s.makespan, 170);
  // Busy core-seconds 3*100 + 4*50 + 30 + 5 + 20 = 555 of 4 cores x 170 s.
  EXPECT_DOUBLE_EQ(s.utilization, 555.0 / 680.0);
  // Waits 0, 90, 0, 20, 110.
  EXPECT_DOUBLE_EQ(s.mean_wait, 44);
  EXPECT_EQ(s.max_wait, 110);
  // Bounded slowdowns: 100/100 = 1, 140/50 = 2.8, 30/30 = 1, 25/max(5,10) = 2.5, 130/20 = 6.5.
  EXPECT_DOUBLE_EQ(bounded_slowdown(r.jobs[3]), 2.5);
  EXPECT_DOUBLE_EQ(s.mean_bounded_slowdown, 13.8 / 5);
  EXPECT_EQ(s.jobs_above_fewest, 0u);
}

TEST(Simulator, ShortJobsAreBoundedAtOne) {
  SwfTrace trace;
  trace.jobs = {job(1, 0, 2, 1)};  // (0 + 2) / max(2, 10) = 0.2, bounded to 1
  SimResult r = simulate(flat_cluster(1), trace);
  ASSERT_EQ(r.jobs.size(), 1u);
  EXPECT_EQ(bounded_slowdown(r.jobs[0]), 1);
}

TEST(Simulator, ZeroLengthJobsAtOneInstant) {
  SwfTrace trace;
  trace.jobs = {job(1, 5, 0, 1), job(2, 5, 0, 1), job(3, 5, 0, 1)};
  SimResult r = simulate(flat_cluster(1), trace);
  ASSERT_EQ(r.jobs.size(), 3u);
  for (const auto& j : r.jobs) EXPECT_EQ(j.end, 5);
  Summary s = summarize(r, 0);
  EXPECT_EQ(s.makespan, 0);
  EXPECT_EQ(s.utilization, 0);
  EXPECT_EQ(s.mean_wait, 0);
}

TEST(Simulator, SubmitOrderNotFileOrder) {
  SwfTrace trace;
  trace.jobs = {job(1, 50, 10, 1), job(2, 0, 100, 1)};
  SimResult r = simulate(flat_cluster(1), trace);
  ASSERT_EQ(r.jobs.size(), 2u);
  EXPECT_EQ(r.jobs[0].start, 100);  // job 1 waits for job 2, submitted earlier
  EXPECT_EQ(r.jobs[1].start, 0);
}

TEST(Simulator, ReportAsJson) {
  SwfTrace trace = tiny_trace();
  SimResult r = simulate(flat_cluster(4), trace);
  Summary s = summarize(r, trace.skipped, 0.5);
  auto doc = summary_json(s, r);
  EXPECT_EQ(doc["makespan"], 170);
  EXPECT_EQ(doc["speedup"], 340);  // 170 virtual seconds in 0.5 s
  EXPECT_EQ(doc["skipped"]["too_big_jobs"][0]["id"], 6);
  EXPECT_EQ(doc["cluster"]["placer"], "flat");
  auto jobs = jobs_json(r);
  ASSERT_EQ(jobs.size(), 5u);
  EXPECT_EQ(jobs[1]["wait"], 90);
  EXPECT_EQ(jobs[1]["bounded_slowdown"], 2.8);
}

TEST(Cluster, NodesFromFlagsOrTopology) {
  ClusterConfig c;
  c.nodes = "n[0-3]";
  auto cl = resolve_cluster(c);
  ASSERT_TRUE(cl) << cl.message();
  EXPECT_EQ(cl->nodes.size(), 4u);
  EXPECT_FALSE(cl->topology);

  c.nodes = "n[0-";
  EXPECT_FALSE(resolve_cluster(c));
  c.nodes.clear();
  auto none = resolve_cluster(c);
  ASSERT_FALSE(none);
  EXPECT_NE(none.message().find("no nodes"), std::string::npos);
  c.topology = "/nonexistent/topology.conf";
  auto missing = resolve_cluster(c);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.message().find("/nonexistent/topology.conf"), std::string::npos);
}

// Two leaf switches of 4 nodes under one top switch. Job 1 (2 nodes) takes one leaf, job 2
// (3 nodes) the other, so job 3 (3 nodes) fits in one leaf on an empty machine but has to
// span both now; job 4 (8 nodes) needs both leaves anyway and waits for the others.
TEST(Simulator, LeavesAgainstTheFewestOnATree) {
  auto set = topology::parse_topology_conf(
      "SwitchName=s0 Nodes=n[0-3]\nSwitchName=s1 Nodes=n[4-7]\nSwitchName=top Switches=s[0-1]\n", "tree.conf");
  ASSERT_TRUE(set) << set.message();
  Cluster cluster;
  cluster.topology = *set->default_topology();
  cluster.nodes = cluster.topology->all_nodes();
  SwfTrace trace;
  trace.jobs = {job(1, 0, 1000, 2), job(2, 1, 1000, 3), job(3, 2, 1000, 3), job(4, 3, 10, 8)};
  SimResult r = simulate(cluster, trace);
  ASSERT_EQ(r.jobs.size(), 4u);
  const unsigned leaves[] = {1, 1, 2, 2}, fewest[] = {1, 1, 1, 2};
  for (size_t i = 0; i < 4; ++i) {
    SCOPED_TRACE("job " + std::to_string(i + 1));
    EXPECT_EQ(r.jobs[i].leaves, leaves[i]);
    EXPECT_EQ(r.jobs[i].fewest, fewest[i]);
  }
  EXPECT_EQ(r.jobs[3].start, 1002);
  Summary s = summarize(r, 0);
  EXPECT_EQ(s.jobs_above_fewest, 1u);
  EXPECT_DOUBLE_EQ(s.mean_leaves, 6.0 / 4);
  EXPECT_DOUBLE_EQ(s.mean_fewest, 5.0 / 4);
}

}  // namespace
}  // namespace corral::sim
