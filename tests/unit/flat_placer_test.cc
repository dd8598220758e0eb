#include <random>

#include <gtest/gtest.h>

#include "placers/free_core_index.h"
#include "placers/placement.h"

namespace corral::topology {
namespace {

NodeState node(unsigned cores, unsigned gpus = 0, uint64_t mem = 0) {
  NodeState st;
  st.cores = cores;
  st.gpus = gpus;
  st.memory_mb = mem;
  st.free_cores = cores ? IdSet::range(0, cores - 1) : IdSet();
  st.free_gpus = gpus ? IdSet::range(0, gpus - 1) : IdSet();
  st.free_memory_mb = mem;
  st.usable = true;
  return st;
}

// Marks `used` cores of `st` busy (the lowest ids) by one job.
NodeState busy(NodeState st, unsigned used) {
  st.free_cores = st.free_cores.minus(IdSet::range(0, used - 1));
  st.jobs = 1;
  return st;
}

Request cores(unsigned ntasks, unsigned per_task = 1) {
  Request r;
  r.ntasks = ntasks;
  r.cores_per_task = per_task;
  return r;
}

FreeCoreIndex index_of(const std::vector<NodeState>& nodes) {
  FreeCoreIndex index;
  for (uint32_t n = 0; n < nodes.size(); ++n) index.update(n, nodes[n]);
  return index;
}

// Places with and without the index; both must agree.
std::optional<Allocation> place(const Request& r, const std::vector<NodeState>& nodes) {
  auto placer = make_flat_placer();
  auto plain = placer->place(r, nodes);
  auto indexed = placer->place_indexed(r, nodes, index_of(nodes));
  EXPECT_EQ(plain.has_value(), indexed.has_value());
  if (plain && indexed) {
    EXPECT_EQ(plain->shares.size(), indexed->shares.size());
    for (size_t i = 0; i < std::min(plain->shares.size(), indexed->shares.size()); ++i) {
      EXPECT_EQ(plain->shares[i].node, indexed->shares[i].node);
      EXPECT_EQ(plain->shares[i].cores, indexed->shares[i].cores);
    }
  }
  return plain;
}

TEST(FlatPlacer, BestFitPrefersFewestFreeCoresThatFit) {
  std::vector<NodeState> nodes{node(8), busy(node(8), 5), busy(node(8), 3), busy(node(8), 7)};
  auto a = place(cores(2), nodes);
  ASSERT_TRUE(a);
  ASSERT_EQ(a->shares.size(), 1u);
  EXPECT_EQ(a->shares[0].node, 1u);  // 3 free: the tightest that holds 2
  EXPECT_EQ(a->shares[0].cores.encode(), "5-6");
  EXPECT_EQ(a->shares[0].ntasks, 2u);
}

TEST(FlatPlacer, TiesGoToTheLowerIndex) {
  std::vector<NodeState> nodes{node(8), busy(node(8), 4), busy(node(8), 4)};
  auto a = place(cores(1, 4), nodes);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->shares[0].node, 1u);
}

TEST(FlatPlacer, ChoosesTheLowestFreeCoreIds) {
  std::vector<NodeState> nodes{node(8)};
  nodes[0].free_cores = *IdSet::parse("2-3,5-7");
  nodes[0].jobs = 1;
  auto a = place(cores(3), nodes);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->shares[0].cores.encode(), "2-3,5");
}

TEST(FlatPlacer, SkipsUnusableNodes) {
  std::vector<NodeState> nodes{busy(node(8), 6), node(8)};
  nodes[0].usable = false;
  auto a = place(cores(2), nodes);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->shares[0].node, 1u);
  nodes[1].usable = false;
  EXPECT_FALSE(place(cores(2), nodes));
}

TEST(FlatPlacer, ExclusiveTakesAWholeIdleNode) {
  std::vector<NodeState> nodes{busy(node(8, 2, 1000), 1), node(16, 4, 4000), node(8, 2, 2000)};
  Request r = cores(2);
  r.exclusive = true;
  auto a = place(r, nodes);
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->exclusive);
  ASSERT_EQ(a->shares.size(), 1u);
  EXPECT_EQ(a->shares[0].node, 2u);  // node 0 has a job; node 2 is the smaller idle one
  EXPECT_EQ(a->shares[0].cores.encode(), "0-7");
  EXPECT_EQ(a->shares[0].gpus.encode(), "0-1");
  EXPECT_EQ(a->shares[0].memory_mb, 2000u);
}

TEST(FlatPlacer, SharedJobsAvoidExclusivelyHeldNodes) {
  std::vector<NodeState> nodes{node(8)};
  nodes[0].exclusive_held = true;
  nodes[0].jobs = 1;
  EXPECT_FALSE(place(cores(1), nodes));
}

TEST(FlatPlacer, GpusBoundTasksPerNode) {
  std::vector<NodeState> nodes{node(64, 0), node(8, 4)};
  Request r = cores(2);
  r.gpus_per_task = 2;
  auto a = place(r, nodes);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->shares[0].node, 1u);
  EXPECT_EQ(a->shares[0].gpus.encode(), "0-3");
  r.ntasks = 3;  // 6 GPUs: no single node, and only one node has GPUs
  EXPECT_FALSE(place(r, nodes));
}

TEST(FlatPlacer, MemoryIsPerNode) {
  std::vector<NodeState> nodes{node(4, 0, 1000), node(8, 0, 8000)};
  Request r = cores(1);
  r.mem_per_node_mb = 2000;
  auto a = place(r, nodes);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->shares[0].node, 1u);
  EXPECT_EQ(a->shares[0].memory_mb, 2000u);
  nodes[1].free_memory_mb = 1500;
  EXPECT_FALSE(place(r, nodes));
}

TEST(FlatPlacer, RequiredNodesAreAllUsed) {
  std::vector<NodeState> nodes{node(8), node(8), node(8), busy(node(8), 6)};
  Request r = cores(1);
  r.required_nodes = {2};
  auto a = place(r, nodes);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->shares[0].node, 2u);

  r = cores(4);
  r.required_nodes = {0, 2};
  a = place(r, nodes);
  ASSERT_TRUE(a);
  ASSERT_EQ(a->shares.size(), 2u);
  EXPECT_EQ(a->shares[0].node, 0u);
  EXPECT_EQ(a->shares[1].node, 2u);

  nodes[2].usable = false;
  EXPECT_FALSE(place(r, nodes));
}

TEST(FlatPlacer, AllowedNodesRestrict) {
  std::vector<NodeState> nodes{busy(node(8), 7), node(8), node(8)};
  Request r = cores(1);
  r.allowed_nodes = {1, 2};
  auto a = place(r, nodes);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->shares[0].node, 1u);
  r.required_nodes = {0};
  EXPECT_FALSE(place(r, nodes));  // required but not allowed
}

TEST(FlatPlacer, NnodesSpreadsTasksInBlocks) {
  std::vector<NodeState> nodes{node(8), node(8), node(8)};
  Request r = cores(5);
  r.nnodes = 2;
  auto a = place(r, nodes);
  ASSERT_TRUE(a);
  ASSERT_EQ(a->shares.size(), 2u);
  EXPECT_EQ(a->shares[0].node, 0u);
  EXPECT_EQ(a->shares[0].ntasks, 3u);
  EXPECT_EQ(a->shares[1].ntasks, 2u);
  EXPECT_EQ(a->shares[1].cores.encode(), "0-1");
}

TEST(FlatPlacer, NnodesPutsExtraTasksWhereTheyFit) {
  // Node 0 holds 2 tasks, node 1 holds 3: the block distribution (3, 2) fits only if the
  // first node of the allocation can take 3, so best fit on 2 tasks must be reconsidered.
  std::vector<NodeState> nodes{busy(node(8), 6), busy(node(8), 5), node(8)};
  Request r = cores(5);
  r.nnodes = 2;
  auto a = place(r, nodes);
  ASSERT_TRUE(a);
  ASSERT_EQ(a->shares.size(), 2u);
  EXPECT_GE(a->shares[0].cores.count(), 3u);
  EXPECT_EQ(a->shares[0].ntasks + a->shares[1].ntasks, 5u);
}

TEST(FlatPlacer, AnyNodeCountUsesAsFewAsPossible) {
  std::vector<NodeState> nodes{node(4), node(8), node(8), busy(node(8), 6)};
  auto a = place(cores(10), nodes);
  ASSERT_TRUE(a);
  ASSERT_EQ(a->shares.size(), 2u);
  unsigned total = 0;
  for (const auto& s : a->shares) total += s.ntasks;
  EXPECT_EQ(total, 10u);
  // One full 8-core node, the rest (2) on the tightest node that holds it: node 3.
  EXPECT_EQ(a->shares[0].node, 1u);
  EXPECT_EQ(a->shares[0].ntasks, 8u);
  EXPECT_EQ(a->shares[1].node, 3u);
  EXPECT_EQ(a->shares[1].ntasks, 2u);
  EXPECT_FALSE(place(cores(31), nodes));
}

TEST(FlatPlacer, IndexedAndScannedPlacementAgree) {
  std::mt19937 rng(7);
  for (int round = 0; round < 300; ++round) {
    std::vector<NodeState> nodes;
    int n = 1 + static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) {
      NodeState st = node(4 + rng() % 13, rng() % 3, 1000 * (rng() % 4));
      unsigned used = rng() % (st.cores + 1);
      if (used > 0) st = busy(st, used);
      st.usable = rng() % 8 != 0;
      st.exclusive_held = st.jobs > 0 && rng() % 10 == 0;
      nodes.push_back(st);
    }
    Request r = cores(1 + rng() % 6, 1 + rng() % 3);
    r.gpus_per_task = rng() % 4 == 0 ? 1 : 0;
    r.mem_per_node_mb = rng() % 3 == 0 ? 500 : 0;
    r.exclusive = rng() % 6 == 0;
    r.nnodes = rng() % 3 == 0 ? 1 : 0;
    place(r, nodes);  // checks the agreement
  }
}

}  // namespace
}  // namespace corral::topology
