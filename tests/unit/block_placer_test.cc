// The block placer on small hand-checked topologies: 8 base blocks of 4 nodes (n00-n31,
// block b<i> holds n[4i .. 4i+3]), BlockSizes=4,8,16,32, 4 cores per node.
#include <map>
#include <random>
#include <set>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "placers/block_placer.h"
#include "placers/placers.h"
#include "sched/scheduler.h"
#include "topology/topology.h"

namespace corral::topology {
namespace {

Topology blocks(unsigned nblocks, unsigned per_block, std::vector<unsigned> sizes) {
  Topology t;
  t.name = "blocks";
  t.kind = Kind::block;
  for (unsigned b = 0; b < nblocks; ++b) {
    Block blk;
    blk.name = fmt::format("b{}", b);
    for (unsigned i = 0; i < per_block; ++i) blk.nodes.push_back(fmt::format("n{:02}", b * per_block + i));
    t.blocks.push_back(std::move(blk));
  }
  t.block_sizes = std::move(sizes);
  EXPECT_TRUE(t.finalize("test").ok());
  return t;
}

NodeState idle_node(unsigned cores) {
  NodeState st;
  st.cores = cores;
  st.free_cores = IdSet::range(0, cores - 1);
  st.usable = true;
  return st;
}

// A placer bound to a pool of identical nodes, and the bookkeeping a pool does.
struct Machine {
  explicit Machine(const Topology& t, unsigned cores = 4) : placer(make_block_placer(t)) {
    auto names = t.all_nodes();
    for (uint32_t n = 0; n < names.size(); ++n) {
      nodes.push_back(idle_node(cores));
      placer->node_added(n, names[n], nodes.back());
    }
  }
  void take(const Allocation& a) {
    for (const NodeShare& s : a.shares) {
      NodeState& st = nodes[s.node];
      st.free_cores = st.free_cores.minus(s.cores);
      ++st.jobs;
      if (a.exclusive) st.exclusive_held = true;
      placer->node_changed(s.node, st);
    }
  }
  // Marks `used` cores of `node` busy with one job (all of them: the node is full).
  void busy(uint32_t node, unsigned used) {
    NodeState& st = nodes[node];
    st.free_cores = st.free_cores.minus(IdSet::range(0, used - 1));
    ++st.jobs;
    placer->node_changed(node, st);
  }
  void busy_block(unsigned block, unsigned count, unsigned per_block = 4) {
    for (unsigned i = 0; i < count; ++i) busy(block * per_block + i, 4);
  }
  std::optional<Allocation> place(const Request& r) const { return placer->place(r, nodes); }
  void expect_exact() const {
    auto why = block_aggregates_mismatch(*placer, nodes);
    EXPECT_FALSE(why) << *why;
  }

  std::unique_ptr<Placer> placer;
  std::vector<NodeState> nodes;
};

Request nodes_req(unsigned nnodes, bool exclusive = true) {
  Request r;
  r.nnodes = nnodes;
  r.ntasks = nnodes;
  r.exclusive = exclusive;
  return r;
}

Request tasks_req(unsigned ntasks) {
  Request r;
  r.ntasks = ntasks;
  return r;
}

std::vector<uint32_t> nodes_of(const Allocation& a) {
  std::vector<uint32_t> out;
  for (const NodeShare& s : a.shares) out.push_back(s.node);
  return out;
}

std::set<uint32_t> blocks_of(const Allocation& a, unsigned per_block = 4) {
  std::set<uint32_t> out;
  for (const NodeShare& s : a.shares) out.insert(s.node / per_block);
  return out;
}

std::vector<uint32_t> range(uint32_t first, uint32_t last) {
  std::vector<uint32_t> out;
  for (uint32_t n = first; n <= last; ++n) out.push_back(n);
  return out;
}

const Topology& small() {
  static const Topology t = blocks(8, 4, {4, 8, 16, 32});
  return t;
}

TEST(BlockPlacer, EmptyMachineGetsTheFewestBlocksForEverySize) {
  for (unsigned n = 1; n <= 32; ++n) {
    Machine m(small());
    const unsigned fewest = (n + 3) / 4;
    Request r = nodes_req(n);
    EXPECT_EQ(m.placer->fewest_leaves(r), fewest) << n;
    auto a = m.place(r);
    ASSERT_TRUE(a) << n;
    EXPECT_EQ(a->shares.size(), n);
    EXPECT_EQ(a->leaves, fewest) << n;
    EXPECT_EQ(blocks_of(*a).size(), fewest) << n;
    EXPECT_EQ(nodes_of(*a), range(0, n - 1)) << n;  // adjacent blocks, from the first

    // Without a node count: n nodes' worth of cores.
    Request t = tasks_req(4 * n);
    EXPECT_EQ(m.placer->fewest_leaves(t), fewest) << n;
    auto b = m.place(t);
    ASSERT_TRUE(b) << n;
    EXPECT_EQ(b->leaves, fewest) << n;
    EXPECT_EQ(blocks_of(*b).size(), fewest) << n;
    EXPECT_EQ(b->shares.size(), n);
  }
}

TEST(BlockPlacer, AllocationsHaveTheFlatPlacersForm) {
  Machine m(small());
  Request r;
  r.nnodes = 3;
  r.ntasks = 7;
  r.cores_per_task = 1;
  auto a = m.place(r);
  ASSERT_TRUE(a);
  ASSERT_EQ(a->shares.size(), 3u);
  EXPECT_FALSE(a->exclusive);
  EXPECT_EQ(a->shares[0].ntasks, 3u);  // block distribution: the lowest node gets the extra
  EXPECT_EQ(a->shares[1].ntasks, 2u);
  EXPECT_EQ(a->shares[2].ntasks, 2u);
  EXPECT_EQ(a->shares[0].cores.encode(), "0-2");
  EXPECT_EQ(a->leaves, 1u);

  Request x = nodes_req(2);
  auto b = m.place(x);
  ASSERT_TRUE(b);
  EXPECT_TRUE(b->exclusive);
  EXPECT_EQ(b->shares[0].cores.encode(), "0-3");  // exclusive: the whole node
}

TEST(BlockPlacer, SmallestLevelThatFitsAndLeastFreeAggregate) {
  Machine m(small());
  // Level-8 aggregates: (b0,b1) 5 idle nodes, (b2,b3) 7, (b4,b5) and (b6,b7) 8.
  m.busy_block(0, 3);
  m.busy_block(2, 1);
  auto a = m.place(nodes_req(5));
  ASSERT_TRUE(a);
  EXPECT_EQ(nodes_of(*a), (std::vector<uint32_t>{3, 4, 5, 6, 7}));  // fills (b0,b1) exactly
  EXPECT_EQ(a->leaves, 2u);

  auto b = m.place(nodes_req(6));
  ASSERT_TRUE(b);
  EXPECT_EQ(blocks_of(*b), (std::set<uint32_t>{2, 3}));  // (b0,b1) is too small
  EXPECT_EQ(b->leaves, 2u);
  m.expect_exact();
}

TEST(BlockPlacer, JobsUseAdjacentBlocksOfOneAggregate) {
  Machine m(small());
  m.busy_block(0, 4);
  // 12 nodes: level 16; (b0-b3) has exactly 12 idle nodes, so it is the least free.
  auto a = m.place(nodes_req(12));
  ASSERT_TRUE(a);
  EXPECT_EQ(nodes_of(*a), range(4, 15));
  EXPECT_EQ(a->leaves, 3u);
}

TEST(BlockPlacer, SmallJobsFillPartlyUsedBlocks) {
  Machine m(small());
  m.busy(21, 1);  // b5: one node with 3 free cores
  auto a = m.place(tasks_req(2));
  ASSERT_TRUE(a);
  ASSERT_EQ(a->shares.size(), 1u);
  EXPECT_EQ(a->shares[0].node, 21u);  // the tightest node of the partly used block
  EXPECT_EQ(a->shares[0].cores.encode(), "1-2");
  m.take(*a);

  // A 2-node job stays in b5 (n21's last core and an idle node) rather than opening an
  // idle block.
  auto b = m.place(nodes_req(2, false));
  ASSERT_TRUE(b);
  EXPECT_EQ(blocks_of(*b), (std::set<uint32_t>{5}));
  m.take(*b);

  // b5 has two idle nodes left: a whole-node 4-node job opens the first idle block.
  auto c = m.place(nodes_req(4));
  ASSERT_TRUE(c);
  EXPECT_EQ(nodes_of(*c), range(0, 3));
  m.expect_exact();
}

TEST(BlockPlacer, SmallJobsPreferTheTightestBlock) {
  Machine m(small());
  m.busy_block(6, 1);  // b6: 3 idle nodes
  m.busy_block(1, 2);  // b1: 2 idle nodes
  auto a = m.place(nodes_req(2));
  ASSERT_TRUE(a);
  EXPECT_EQ(nodes_of(*a), (std::vector<uint32_t>{6, 7}));
  auto b = m.place(nodes_req(3));
  ASSERT_TRUE(b);
  EXPECT_EQ(nodes_of(*b), (std::vector<uint32_t>{25, 26, 27}));
}

TEST(BlockPlacer, ExclusiveJobsFitByWholeNodes) {
  Machine m(small());
  m.busy(4, 1);  // b1: two nodes with 3 free cores, two idle (14 free cores)
  m.busy(5, 1);
  m.busy_block(2, 1);  // b2: three idle nodes (12 free cores)
  auto a = m.place(nodes_req(2));
  ASSERT_TRUE(a);
  EXPECT_EQ(nodes_of(*a), (std::vector<uint32_t>{6, 7}));  // b1 has just two idle nodes
}

TEST(BlockPlacer, JobsBiggerThanTheBiggestBlockCannotRun) {
  Machine m(small());
  EXPECT_FALSE(m.place(nodes_req(33)));
  EXPECT_EQ(m.placer->fewest_leaves(nodes_req(33)), 0u);
  EXPECT_EQ(m.placer->fewest_leaves(tasks_req(4 * 32 + 1)), 0u);

  // With BlockSizes=4,8,16 no job may span more than 16 nodes, though 32 are free.
  Machine m16(blocks(8, 4, {4, 8, 16}));
  EXPECT_TRUE(m16.place(nodes_req(16)));
  EXPECT_FALSE(m16.place(nodes_req(17)));
  EXPECT_EQ(m16.placer->fewest_leaves(nodes_req(17)), 0u);
  EXPECT_FALSE(m16.place(tasks_req(4 * 16 + 1)));
}

TEST(BlockPlacer, RequestingNodesIsRefused) {
  Machine m(small());
  Request r = nodes_req(1);
  r.required_nodes = {5};
  EXPECT_FALSE(m.place(r));
  auto why = block_request_error(r);
  ASSERT_TRUE(why);
  EXPECT_EQ(*why,
            "requesting specific nodes (-w) is not supported with a block topology; use -x to "
            "exclude nodes");
  EXPECT_FALSE(block_request_error(nodes_req(1)));
}

TEST(BlockPlacer, ExcludedNodesAreNeverUsed) {
  Machine m(small());
  Request r = nodes_req(4);
  for (uint32_t n = 0; n < 32; ++n) {
    if (n != 1) r.allowed_nodes.push_back(n);  // -x n01
  }
  auto a = m.place(r);
  ASSERT_TRUE(a);
  EXPECT_EQ(nodes_of(*a), range(4, 7));  // b0 without n01 has only 3 nodes

  Request one = tasks_req(1);
  one.allowed_nodes = {30, 2, 17};  // unsorted is fine
  m.busy(17, 2);
  auto b = m.place(one);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->shares[0].node, 17u);

  r = nodes_req(6);
  r.allowed_nodes = range(0, 4);  // 5 nodes only
  EXPECT_FALSE(m.place(r));
}

TEST(BlockPlacer, MaxLeavesLimitsBaseBlocks) {
  Machine m(small());
  // b0-b3 two idle nodes each (8 in their 16-aggregate); b4 3, b5 2, b6 4, b7 none (9).
  // No level-8 aggregate holds 6 nodes.
  for (unsigned b : {0u, 1u, 2u, 3u}) m.busy_block(b, 2);
  m.busy_block(4, 1);
  m.busy_block(5, 2);
  m.busy_block(7, 4);
  auto a = m.place(nodes_req(6));
  ASSERT_TRUE(a);
  EXPECT_EQ(a->leaves, 3u);  // least free aggregate (b0-b3): three of its blocks
  EXPECT_EQ(blocks_of(*a).size(), 3u);

  Request r = nodes_req(6);
  r.max_leaves = 2;
  auto b = m.place(r);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->leaves, 2u);
  EXPECT_EQ(blocks_of(*b), (std::set<uint32_t>{5, 6}));  // b6 whole, the tightest for 2

  r.max_leaves = 1;
  EXPECT_FALSE(m.place(r));  // 6 nodes never fit in one 4-node block
  r = nodes_req(3);
  r.max_leaves = 1;
  auto c = m.place(r);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->leaves, 1u);
}

TEST(BlockPlacer, PacksTasksOverFewestNodesAndBlocks) {
  Machine m(small());
  m.busy(0, 2);  // n00 has 2 free cores
  // 10 single-core tasks: b0 holds 14 of them; 3 nodes used (4 + 4 + 2).
  auto a = m.place(tasks_req(10));
  ASSERT_TRUE(a);
  EXPECT_EQ(a->leaves, 1u);
  unsigned tasks = 0;
  for (const NodeShare& s : a->shares) tasks += s.ntasks;
  EXPECT_EQ(tasks, 10u);
  EXPECT_EQ(a->shares.size(), 3u);
  EXPECT_EQ(blocks_of(*a), (std::set<uint32_t>{0}));
}

TEST(BlockPlacer, WindowsOfAdjacentLowerLevelBlocks) {
  // BlockSizes=4,12: level-12 blocks are three base blocks; a 6-node job uses two adjacent
  // ones, the window that it leaves least free.
  Machine m(blocks(6, 4, {4, 12}));
  m.busy_block(0, 1);  // b0: 3 idle
  m.busy_block(2, 2);  // b2: 2 idle; windows (b0,b1) 7 idle, (b1,b2) 6
  auto a = m.place(nodes_req(6));
  ASSERT_TRUE(a);
  EXPECT_EQ(nodes_of(*a), (std::vector<uint32_t>{4, 5, 6, 7, 10, 11}));
  EXPECT_EQ(a->leaves, 2u);
  m.expect_exact();
}

TEST(BlockPlacer, EveryNodeTooFullIsRuledOutByTheAggregates) {
  Machine m(small());
  for (uint32_t n = 0; n < 32; ++n) m.busy(n, 2);  // 2 free cores everywhere
  Request r;
  r.nnodes = 2;
  r.ntasks = 6;  // 3 per node
  EXPECT_FALSE(m.place(r));
  r.ntasks = 4;
  auto a = m.place(r);
  ASSERT_TRUE(a);
  EXPECT_EQ(nodes_of(*a), (std::vector<uint32_t>{0, 1}));
  EXPECT_FALSE(m.place(tasks_req(65)));  // 64 cores free in all
  m.expect_exact();
}

TEST(BlockPlacer, UnknownNodesAreNeverUsed) {
  auto placer = make_block_placer(small());
  std::vector<NodeState> nodes{idle_node(4), idle_node(4)};
  placer->node_added(0, "login1", nodes[0]);
  placer->node_added(1, "n07", nodes[1]);
  auto a = placer->place(nodes_req(1), nodes);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->shares[0].node, 1u);
  EXPECT_FALSE(placer->place(nodes_req(2), nodes));
}

TEST(BlockPlacer, DownNodesAreSkipped) {
  Machine m(small());
  m.nodes[2].usable = false;
  m.placer->node_changed(2, m.nodes[2]);
  auto a = m.place(nodes_req(4));
  ASSERT_TRUE(a);
  EXPECT_EQ(nodes_of(*a), range(4, 7));
  m.expect_exact();
}

// Through the scheduler: its pool reports every change, and the aggregates must follow
// allocations, releases, usability changes and the backfill's look-ahead exactly.
TEST(BlockPlacer, AggregatesStayExactThroughTheScheduler) {
  const Topology t = blocks(8, 4, {4, 8, 16, 32});
  auto owned = make_block_placer(t);
  const Placer* placer = owned.get();
  sched::Scheduler s(std::move(owned));
  for (const std::string& name : t.all_nodes()) s.add_node({name, 4, 0, 0});
  auto states = [&] {
    std::vector<NodeState> out;
    for (uint32_t n = 0; n < s.node_count(); ++n) out.push_back(s.node_state(n));
    return out;
  };
  std::mt19937 rng(7);
  std::vector<uint64_t> running;
  std::map<uint64_t, Request> asked;
  size_t started = 0;
  uint64_t next = 1;
  double now = 0;
  for (int step = 0; step < 400; ++step) {
    unsigned what = rng() % 10;
    if (what < 5) {
      sched::PendingJob j;
      j.req.jobid = next;
      j.submit_order = next++;
      j.duration = 10 + rng() % 100;
      unsigned kind = rng() % 3;
      if (kind == 0) {
        j.req = tasks_req(1 + rng() % 6);
      } else {
        j.req = nodes_req(1 + rng() % 12, kind == 1);
      }
      j.req.jobid = j.submit_order;
      asked[j.req.jobid] = j.req;
      s.enqueue(j);
    } else if (what < 8 && !running.empty()) {
      size_t i = rng() % running.size();
      s.release(running[i]);
      running.erase(running.begin() + static_cast<long>(i));
    } else if (what == 8) {
      s.set_usable(rng() % 32, rng() % 4 != 0);
    }
    now += 1;
    for (const auto& d : s.schedule(now)) {
      running.push_back(d.jobid);
      ++started;
      const Request& r = asked.at(d.jobid);
      EXPECT_EQ(d.alloc.leaves, blocks_of(d.alloc).size());
      unsigned tasks = 0;
      for (const NodeShare& sh : d.alloc.shares) tasks += sh.ntasks;
      EXPECT_EQ(tasks, r.ntasks);
      if (r.nnodes > 0) {
        EXPECT_EQ(d.alloc.shares.size(), r.nnodes);
      }
    }
    auto why = block_aggregates_mismatch(*placer, states());
    ASSERT_FALSE(why) << "step " << step << ": " << *why;
  }
  EXPECT_GT(started, 50u);
}

}  // namespace
}  // namespace corral::topology
