#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <tuple>

#include <gtest/gtest.h>

#include "placers/placers.h"
#include "placers/tree_index.h"
#include "sched/scheduler.h"
#include "topology/topology.h"

namespace corral::topology {
namespace {

using Names = std::vector<std::string>;

// A topology by hand: leaves with their nodes, then inner switches naming their children.
struct TopoBuilder {
  Topology topo;
  explicit TopoBuilder(Kind kind = Kind::tree) { topo.kind = kind; }
  TopoBuilder& leaf(const std::string& name, Names nodes) {
    Switch s;
    s.name = name;
    s.nodes = std::move(nodes);
    topo.switches.push_back(std::move(s));
    return *this;
  }
  TopoBuilder& inner(const std::string& name, const Names& children) {
    Switch s;
    s.name = name;
    for (const auto& c : children) {
      for (uint32_t i = 0; i < topo.switches.size(); ++i) {
        if (topo.switches[i].name == c) s.children.push_back(i);
      }
    }
    topo.switches.push_back(std::move(s));
    return *this;
  }
  Topology done(bool optional = false) {
    topo.topo_optional = optional;
    auto st = topo.finalize("test");
    EXPECT_TRUE(st) << st.error().message;
    return topo;
  }
};

Names tux(unsigned first, unsigned last) {
  Names out;
  for (unsigned i = first; i <= last; ++i) out.push_back("tux" + std::to_string(i));
  return out;
}

// The guide's eight-node example: a binary tree of three levels.
Topology guide8() {
  return TopoBuilder()
      .leaf("s0", tux(0, 1))
      .leaf("s1", tux(2, 3))
      .leaf("s2", tux(4, 5))
      .leaf("s3", tux(6, 7))
      .inner("s4", {"s0", "s1"})
      .inner("s5", {"s2", "s3"})
      .inner("s6", {"s4", "s5"})
      .done();
}

// The guide's sixteen-node example: four leaves each linked to four top switches.
Topology guide16(bool with_top = true, bool all_tops = true, bool optional = false) {
  TopoBuilder b;
  b.leaf("s0", tux(0, 3)).leaf("s1", tux(4, 7)).leaf("s2", tux(8, 11)).leaf("s3", tux(12, 15));
  if (with_top) b.inner("s4", {"s0", "s1", "s2", "s3"});
  if (with_top && all_tops) {
    for (const char* s : {"s5", "s6", "s7"}) b.inner(s, {"s0", "s1", "s2", "s3"});
  }
  return b.done(optional);
}

// A scheduler whose placer is the topology's, nodes named as in the topology.
struct Cluster {
  sched::Scheduler sched;
  uint64_t next_job = 1000;

  Cluster(const Topology& topo, unsigned cores, Names extra = {}) : sched(make_placer(topo)) {
    for (const auto& n : topo.all_nodes()) sched.add_node({n, cores, 0, 0});
    for (const auto& n : extra) sched.add_node({n, cores, 0, 0});
  }
  const Placer& placer() const { return sched.placer(0); }
  uint32_t idx(const std::string& name) const { return *sched.node_index(name); }
  std::vector<NodeState> states() const {
    std::vector<NodeState> out;
    for (uint32_t n = 0; n < sched.node_count(); ++n) out.push_back(sched.node_state(n));
    return out;
  }
  std::optional<Allocation> place(const Request& r) const { return placer().place(r, states()); }
  // A job holding `ncores` of node `name` (the lowest free ones).
  uint64_t occupy(const std::string& name, unsigned ncores, bool exclusive = false) {
    uint32_t n = idx(name);
    NodeShare share;
    share.node = n;
    share.ntasks = 1;
    auto free = sched.node_state(n).free_cores.to_vector();
    for (unsigned i = 0; i < ncores && i < free.size(); ++i) share.cores.insert(free[i]);
    Allocation a;
    a.shares.push_back(share);
    a.exclusive = exclusive;
    sched.allocate(++next_job, a, 0);
    return next_job;
  }
  Names names(const Allocation& a) const {
    Names out;
    for (const auto& s : a.shares) out.push_back(sched.node_config(s.node).name);
    return out;
  }
};

Request nodes_job(unsigned nnodes, unsigned tasks_per_node = 1) {
  Request r;
  r.nnodes = nnodes;
  r.ntasks = nnodes * tasks_per_node;
  return r;
}

Request tasks_job(unsigned ntasks, unsigned cores_per_task = 1) {
  Request r;
  r.ntasks = ntasks;
  r.cores_per_task = cores_per_task;
  return r;
}

TEST(TreePlacer, Guide8OneLeafWhenItFits) {
  Cluster c(guide8(), 4);
  auto a = c.place(nodes_job(2));
  ASSERT_TRUE(a);
  EXPECT_EQ(c.names(*a), (Names{"tux0", "tux1"}));
  EXPECT_EQ(a->leaves, 1u);
  EXPECT_EQ(c.placer().fewest_leaves(nodes_job(2)), 1u);
}

TEST(TreePlacer, Guide8LowestSwitchThenFewestLeaves) {
  Cluster c(guide8(), 4);
  auto a = c.place(nodes_job(3));
  ASSERT_TRUE(a);
  EXPECT_EQ(c.names(*a), (Names{"tux0", "tux1", "tux2"}));
  EXPECT_EQ(a->leaves, 2u);
  auto b = c.place(nodes_job(5));
  ASSERT_TRUE(b);
  EXPECT_EQ(b->leaves, 3u);
  EXPECT_EQ(c.placer().fewest_leaves(nodes_job(5)), 3u);
  EXPECT_FALSE(c.place(nodes_job(9)));
  EXPECT_EQ(c.placer().fewest_leaves(nodes_job(9)), 0u);
}

TEST(TreePlacer, Guide8LowestCommonSwitchAvoidsBusyPod) {
  Cluster c(guide8(), 4);
  c.occupy("tux0", 1, /*exclusive=*/true);
  c.occupy("tux2", 1, /*exclusive=*/true);
  // s4 keeps two nodes, s5 four: a three-node job belongs under s5.
  auto a = c.place(nodes_job(3));
  ASSERT_TRUE(a);
  EXPECT_EQ(c.names(*a), (Names{"tux4", "tux5", "tux6"}));
  EXPECT_EQ(a->leaves, 2u);
  // Two nodes: the leaves that still hold two are equally good; the first is s2.
  auto b = c.place(nodes_job(2));
  ASSERT_TRUE(b);
  EXPECT_EQ(c.names(*b), (Names{"tux4", "tux5"}));
}

TEST(TreePlacer, BestFitLeafAndNodes) {
  Cluster c(guide8(), 4);
  c.occupy("tux4", 3);  // s2 has tux4 with one core and tux5 free
  auto a = c.place(tasks_job(1));
  ASSERT_TRUE(a);
  EXPECT_EQ(c.names(*a), (Names{"tux4"}));  // fewest free cores that fit
  // Two whole nodes: s2 no longer has two idle ones, s0 does and comes first.
  Request two = nodes_job(2, 4);
  auto b = c.place(two);
  ASSERT_TRUE(b);
  EXPECT_EQ(c.names(*b), (Names{"tux0", "tux1"}));
}

TEST(TreePlacer, SingleNodeJobsPreferPartlyUsedLeaves) {
  Cluster c(guide8(), 4);
  c.occupy("tux4", 1);
  // A whole-node job: tux5 (idle, on the partly used s2) before tux0 (on an unused leaf).
  auto a = c.place(tasks_job(4));
  ASSERT_TRUE(a);
  EXPECT_EQ(c.names(*a), (Names{"tux5"}));
  Request excl = tasks_job(1);
  excl.exclusive = true;
  auto b = c.place(excl);
  ASSERT_TRUE(b);
  EXPECT_EQ(c.names(*b), (Names{"tux5"}));
  EXPECT_EQ(b->shares[0].cores.count(), 4u);
}

TEST(TreePlacer, PackUsesFewestLeavesThenFewestNodes) {
  Cluster c(guide8(), 4);
  auto a = c.place(tasks_job(12));  // three nodes' worth: two leaves under s4
  ASSERT_TRUE(a);
  EXPECT_EQ(a->leaves, 2u);
  EXPECT_EQ(a->shares.size(), 3u);
  unsigned tasks = 0;
  for (const auto& s : a->shares) tasks += s.ntasks;
  EXPECT_EQ(tasks, 12u);
}

TEST(TreePlacer, Guide16MultipleTopSwitches) {
  Cluster c(guide16(), 4);
  auto a = c.place(nodes_job(8));
  ASSERT_TRUE(a);
  EXPECT_EQ(a->leaves, 2u);
  EXPECT_EQ(c.names(*a), tux(0, 7));
  auto b = c.place(nodes_job(16));
  ASSERT_TRUE(b);
  EXPECT_EQ(b->leaves, 4u);
}

TEST(TreePlacer, ForestIsNeverSpanned) {
  Cluster c(guide16(/*with_top=*/false), 4);
  auto a = c.place(nodes_job(4));
  ASSERT_TRUE(a);
  EXPECT_EQ(a->leaves, 1u);
  EXPECT_FALSE(c.place(nodes_job(5)));
  EXPECT_EQ(c.placer().fewest_leaves(nodes_job(5)), 0u);
  // Required nodes on two trees cannot be used together.
  Request r = nodes_job(2);
  r.required_nodes = {c.idx("tux0"), c.idx("tux4")};
  EXPECT_FALSE(c.place(r));
}

TEST(TreePlacer, TopoOptionalSpansTheForest) {
  Cluster c(guide16(/*with_top=*/false, false, /*optional=*/true), 4);
  auto a = c.place(nodes_job(5));
  ASSERT_TRUE(a);
  EXPECT_EQ(a->leaves, 2u);
  EXPECT_EQ(c.placer().fewest_leaves(nodes_job(16)), 4u);
  Request r = nodes_job(2);
  r.required_nodes = {c.idx("tux0"), c.idx("tux4")};
  auto b = c.place(r);
  ASSERT_TRUE(b);
  EXPECT_EQ(c.names(*b), (Names{"tux0", "tux4"}));
}

TEST(TreePlacer, MaxLeaves) {
  Cluster c(guide8(), 4);
  Request r = nodes_job(3);
  r.max_leaves = 1;
  EXPECT_FALSE(c.place(r));
  r.max_leaves = 2;
  auto a = c.place(r);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->leaves, 2u);
  // With s0 and s1 each down to one node, three nodes take three leaves: over the limit.
  c.occupy("tux0", 1, true);
  c.occupy("tux2", 1, true);
  c.occupy("tux4", 1, true);
  c.occupy("tux6", 1, true);
  EXPECT_FALSE(c.place(r));
  r.max_leaves = 3;
  EXPECT_TRUE(c.place(r));
}

TEST(TreePlacer, HopDistanceBreaksTiesForTheLastLeaf) {
  // b1 | a1 a2 | c1 under one top; a1 and c1 hold three nodes, b1 and a2 one each.
  Topology t = TopoBuilder()
                   .leaf("b1", tux(0, 3))
                   .leaf("a1", tux(4, 7))
                   .leaf("a2", tux(8, 11))
                   .leaf("c1", tux(12, 15))
                   .inner("B", {"b1"})
                   .inner("A", {"a1", "a2"})
                   .inner("C", {"c1"})
                   .inner("top", {"B", "A", "C"})
                   .done();
  Cluster c(t, 1);
  for (const char* n : {"tux0", "tux1", "tux2", "tux4", "tux8", "tux9", "tux10", "tux12"}) c.occupy(n, 1);
  // Seven nodes: a1 and c1 give six, the seventh comes from b1 or a2 (one each): a2 shares
  // a switch with a1, b1 would add a hop.
  auto a = c.place(nodes_job(7));
  ASSERT_TRUE(a);
  EXPECT_EQ(a->leaves, 3u);
  EXPECT_EQ(c.names(*a), (Names{"tux5", "tux6", "tux7", "tux11", "tux13", "tux14", "tux15"}));
}

TEST(TreePlacer, RequiredAndAllowedNodes) {
  Cluster c(guide8(), 4);
  Request r = nodes_job(2);
  r.required_nodes = {c.idx("tux6")};
  auto a = c.place(r);
  ASSERT_TRUE(a);
  EXPECT_EQ(c.names(*a), (Names{"tux6", "tux7"}));
  r.required_nodes = {c.idx("tux0"), c.idx("tux6")};
  auto b = c.place(r);
  ASSERT_TRUE(b);
  EXPECT_EQ(c.names(*b), (Names{"tux0", "tux6"}));
  EXPECT_EQ(b->leaves, 2u);
  Request allowed = nodes_job(3);
  for (const char* n : {"tux4", "tux5", "tux6", "tux7"}) allowed.allowed_nodes.push_back(c.idx(n));
  auto d = c.place(allowed);
  ASSERT_TRUE(d);
  EXPECT_EQ(c.names(*d), (Names{"tux4", "tux5", "tux6"}));
  // A required node outside the allowed set, or busy for an exclusive job: no placement.
  allowed.required_nodes = {c.idx("tux0")};
  EXPECT_FALSE(c.place(allowed));
  c.occupy("tux3", 1);
  Request excl = nodes_job(1);
  excl.exclusive = true;
  excl.required_nodes = {c.idx("tux3")};
  EXPECT_FALSE(c.place(excl));
  excl.required_nodes.clear();
  excl.allowed_nodes = {c.idx("tux2"), c.idx("tux3")};
  auto e = c.place(excl);
  ASSERT_TRUE(e);
  EXPECT_EQ(c.names(*e), (Names{"tux2"}));
}

TEST(TreePlacer, NodesOutsideTheTopologyAreNeverUsed) {
  Cluster c(guide8(), 4, {"stray0"});
  for (int i = 0; i < 8; ++i) c.occupy("tux" + std::to_string(i), 4);
  EXPECT_FALSE(c.place(tasks_job(1)));
  Request r = tasks_job(1);
  r.required_nodes = {c.idx("stray0")};
  EXPECT_FALSE(c.place(r));
}

TEST(TreePlacer, ExclusiveSkipsSharedNodes) {
  Cluster c(guide8(), 4);
  c.occupy("tux0", 1);
  Request r = nodes_job(2);
  r.exclusive = true;
  auto a = c.place(r);
  ASSERT_TRUE(a);
  EXPECT_EQ(c.names(*a), (Names{"tux2", "tux3"}));
  EXPECT_TRUE(a->exclusive);
}

TEST(TreePlacer, BlockDistributionOverExactNodeCount) {
  Cluster c(guide8(), 4);
  Request r;
  r.nnodes = 3;
  r.ntasks = 7;
  auto a = c.place(r);
  ASSERT_TRUE(a);
  ASSERT_EQ(a->shares.size(), 3u);
  EXPECT_EQ(a->shares[0].ntasks, 3u);
  EXPECT_EQ(a->shares[1].ntasks, 2u);
  EXPECT_EQ(a->shares[2].ntasks, 2u);
}

Topology dragonfly() {
  // Two groups of two leaves with two nodes each.
  return TopoBuilder(Kind::dragonfly)
      .leaf("l0", tux(0, 1))
      .leaf("l1", tux(2, 3))
      .leaf("l2", tux(4, 5))
      .leaf("l3", tux(6, 7))
      .inner("g0", {"l0", "l1"})
      .inner("g1", {"l2", "l3"})
      .inner("top", {"g0", "g1"})
      .done();
}

TEST(DragonflyPlacer, OneLeafWhenItFits) {
  Cluster c(dragonfly(), 4);
  EXPECT_EQ(c.placer().name(), "dragonfly");
  c.occupy("tux0", 1, /*exclusive=*/true);
  auto a = c.place(nodes_job(2));
  ASSERT_TRUE(a);
  EXPECT_EQ(a->leaves, 1u);
  EXPECT_EQ(c.names(*a), (Names{"tux2", "tux3"}));
}

TEST(DragonflyPlacer, SpreadsOverLeavesAndGroups) {
  Cluster c(dragonfly(), 4);
  auto a = c.place(nodes_job(3));
  ASSERT_TRUE(a);
  EXPECT_EQ(a->leaves, 3u);
  // Round robin: l0 (g0), l2 (g1), then l1 (g0).
  EXPECT_EQ(c.names(*a), (Names{"tux0", "tux2", "tux4"}));
  auto b = c.place(nodes_job(6));
  ASSERT_TRUE(b);
  EXPECT_EQ(b->leaves, 4u);
  Request r = nodes_job(3);
  r.max_leaves = 2;
  auto d = c.place(r);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->leaves, 2u);
  r.max_leaves = 1;
  EXPECT_FALSE(c.place(r));
  EXPECT_EQ(c.placer().fewest_leaves(nodes_job(3)), 2u);
}

TEST(DragonflyPlacer, PackSpreadsTasksOverLeaves) {
  Cluster c(dragonfly(), 4);
  auto a = c.place(tasks_job(12));  // three nodes' worth
  ASSERT_TRUE(a);
  EXPECT_EQ(a->leaves, 3u);
  unsigned tasks = 0;
  for (const auto& s : a->shares) tasks += s.ntasks;
  EXPECT_EQ(tasks, 12u);
}

// A regular tree: `pods` level-1 switches of `per_pod` leaves of `per_leaf` nodes.
Topology regular(unsigned pods, unsigned per_pod, unsigned per_leaf, Kind kind = Kind::tree) {
  TopoBuilder b(kind);
  unsigned node = 0;
  Names pod_names;
  for (unsigned p = 0; p < pods; ++p) {
    Names leaves;
    for (unsigned l = 0; l < per_pod; ++l) {
      std::string name = "l" + std::to_string(p) + "-" + std::to_string(l);
      b.leaf(name, tux(node, node + per_leaf - 1));
      node += per_leaf;
      leaves.push_back(name);
    }
    b.inner("p" + std::to_string(p), leaves);
    pod_names.push_back("p" + std::to_string(p));
  }
  b.inner("top", pod_names);
  return b.done();
}

TEST(TreePlacer, EmptyMachineAlwaysGetsTheFewestLeaves) {
  for (Kind kind : {Kind::tree, Kind::dragonfly}) {
    Cluster c(regular(3, 4, 4, kind), 8);
    for (unsigned n = 1; n <= 48; ++n) {
      for (bool exclusive : {false, true}) {
        Request r = nodes_job(n);
        r.exclusive = exclusive;
        unsigned want = (n + 3) / 4;
        EXPECT_EQ(c.placer().fewest_leaves(r), want) << n;
        auto a = c.place(r);
        ASSERT_TRUE(a) << n;
        // Dragonfly spreads what does not fit in one leaf over as many leaves as it can.
        unsigned expected = kind == Kind::tree || want == 1 ? want : std::min(n, 12u);
        EXPECT_EQ(a->leaves, expected) << n;
      }
      Request t = tasks_job(n * 8);  // n whole nodes' worth of single-core tasks
      EXPECT_EQ(c.placer().fewest_leaves(t), (n + 3) / 4);
      if (kind == Kind::tree) {
        EXPECT_EQ(c.place(t)->leaves, (n + 3) / 4) << n;
      }
    }
  }
}

// The same bookkeeping as the placer, next to it in the scheduler, so the test can look at
// its aggregates.
class Probe final : public Placer {
 public:
  explicit Probe(const Topology& topo) : index(topo) {}
  std::string name() const override { return "probe"; }
  void node_added(uint32_t n, const std::string& name, const NodeState& st) override { index.add_node(n, name, st); }
  void node_changed(uint32_t n, const NodeState& st) override { index.update(n, st); }
  std::optional<Allocation> place(const Request&, const std::vector<NodeState>&) const override { return std::nullopt; }
  TreeIndex index;
};

void expect_aggregates(const TreeIndex& ix, const sched::Scheduler& s) {
  const auto& leaves = ix.leaves();
  const auto& groups = ix.groups();
  std::vector<uint32_t> eligible(groups.size()), idle(groups.size());
  std::vector<uint64_t> free(groups.size());
  for (uint32_t l = 0; l < leaves.size(); ++l) {
    std::map<unsigned, unsigned> hist_e, hist_i;
    uint32_t busy = 0;
    for (uint32_t n : leaves[l].nodes) {
      const NodeState& st = s.node_state(n);
      unsigned f = static_cast<unsigned>(st.free_cores.count());
      bool e = st.usable && !st.exclusive_held, i = e && st.jobs == 0;
      busy += st.usable && st.jobs > 0;
      if (e) ++hist_e[f];
      if (i) ++hist_i[f];
      for (uint32_t g = leaves[l].group; g != TreeIndex::kNone; g = groups[g].parent) {
        eligible[g] += e;
        idle[g] += i;
        free[g] += e ? f : 0;
      }
    }
    EXPECT_EQ(leaves[l].busy, busy);
    std::map<unsigned, unsigned> got_e(leaves[l].eligible.buckets().begin(), leaves[l].eligible.buckets().end());
    std::map<unsigned, unsigned> got_i(leaves[l].idle.buckets().begin(), leaves[l].idle.buckets().end());
    EXPECT_EQ(got_e, hist_e) << "leaf " << l;
    EXPECT_EQ(got_i, hist_i) << "leaf " << l;
    for (unsigned b = 0; b < ix.max_free_bucket(); ++b) {
      EXPECT_EQ(ix.listed(b, false, l), hist_e.contains(b)) << l << " " << b;
      EXPECT_EQ(ix.listed(b, true, l), hist_i.contains(b)) << l << " " << b;
    }
  }
  for (uint32_t g = 0; g < groups.size(); ++g) {
    EXPECT_EQ(groups[g].eligible, eligible[g]) << "group " << g;
    EXPECT_EQ(groups[g].idle, idle[g]) << "group " << g;
    EXPECT_EQ(groups[g].free_cores, free[g]) << "group " << g;
  }
}

// The fewest leaves on the current state, by brute force over each tree's leaves.
unsigned brute_fewest(const Topology& topo, const sched::Scheduler& s, unsigned nnodes, bool exclusive) {
  std::vector<unsigned> per_leaf;
  for (const auto& sw : topo.switches) {
    if (sw.nodes.empty()) continue;
    unsigned k = 0;
    for (const auto& n : sw.nodes) {
      const NodeState& st = s.node_state(*s.node_index(n));
      bool ok = st.usable && !st.exclusive_held && !st.free_cores.empty() && (!exclusive || st.jobs == 0);
      k += ok;
    }
    per_leaf.push_back(k);
  }
  std::sort(per_leaf.rbegin(), per_leaf.rend());
  unsigned got = 0, leaves = 0;
  for (unsigned u : per_leaf) {
    if (got >= nnodes) break;
    got += u;
    ++leaves;
  }
  return got >= nnodes ? leaves : 0;
}

// Best fit for a single-node job by brute force: fewest free cores that fit, a node on a
// partly used leaf before one on an unused leaf, then the lower index.
std::optional<uint32_t> brute_single(const Topology& topo, const sched::Scheduler& s, unsigned cores, bool exclusive) {
  std::optional<std::tuple<size_t, bool, uint32_t>> best;
  for (const auto& sw : topo.switches) {
    bool whole = std::none_of(sw.nodes.begin(), sw.nodes.end(), [&](const std::string& n) {
      const NodeState& st = s.node_state(*s.node_index(n));
      return st.usable && st.jobs > 0;
    });
    for (const auto& name : sw.nodes) {
      uint32_t n = *s.node_index(name);
      const NodeState& st = s.node_state(n);
      if (!st.usable || st.exclusive_held || (exclusive && st.jobs > 0)) continue;
      if (st.free_cores.count() < cores) continue;
      auto key = std::tuple(st.free_cores.count(), whole, n);
      if (!best || key < *best) best = key;
    }
  }
  if (!best) return std::nullopt;
  return std::get<2>(*best);
}

TEST(TreePlacer, AggregatesStayExactThroughSchedulerChurn) {
  Topology topo = regular(3, 3, 4);
  auto probe = std::make_unique<Probe>(topo);
  Probe* p = probe.get();
  sched::Scheduler s(make_placer(topo));
  s.add_placer(std::move(probe));
  for (const auto& n : topo.all_nodes()) s.add_node({n, 4, 0, 0});
  std::mt19937 rng(7);
  std::vector<uint64_t> running;
  uint64_t id = 0;
  double now = 0;
  unsigned checked = 0, started = 0;
  for (int step = 0; step < 400; ++step) {
    now += 1;
    int what = static_cast<int>(rng() % 10);
    if (what < 5) {
      Request r;
      r.jobid = ++id;
      if (rng() % 2) {
        r.ntasks = 1 + rng() % 6;
      } else {
        r.nnodes = 1 + rng() % 10;
        r.ntasks = r.nnodes * (1 + rng() % 2);
      }
      r.exclusive = rng() % 4 == 0;
      // The placement must use exactly the fewest leaves the current state allows.
      if (r.nnodes > 0 && r.ntasks == r.nnodes) {
        auto st = std::vector<NodeState>();
        for (uint32_t n = 0; n < s.node_count(); ++n) st.push_back(s.node_state(n));
        auto a = s.placer(0).place(r, st);
        unsigned want = brute_fewest(topo, s, r.nnodes, r.exclusive);
        EXPECT_EQ(a.has_value(), want > 0);
        checked += want > 0;
        if (a) {
          EXPECT_EQ(a->leaves, want);
        }
      }
      s.enqueue({r, 16, r.jobid, static_cast<double>(1 + rng() % 20)});
      for (const auto& d : s.schedule(now)) {
        running.push_back(d.jobid);
        ++started;
      }
    } else if (what < 8 && !running.empty()) {
      size_t i = rng() % running.size();
      s.release(running[i]);
      running.erase(running.begin() + static_cast<long>(i));
    } else if (what < 9) {
      s.set_usable(static_cast<uint32_t>(rng() % s.node_count()), rng() % 3 != 0);
    } else if (!running.empty()) {
      uint64_t j = running[rng() % running.size()];
      s.release_node(j, static_cast<uint32_t>(rng() % s.node_count()));
    }
    expect_aggregates(p->index, s);
    std::vector<NodeState> st;
    for (uint32_t n = 0; n < s.node_count(); ++n) st.push_back(s.node_state(n));
    for (unsigned cores = 1; cores <= 4; ++cores) {
      Request one = tasks_job(cores);
      one.nnodes = 1;
      one.exclusive = cores == 4 && step % 2 == 0;
      auto a = s.placer(0).place(one, st);
      auto want = brute_single(topo, s, cores, one.exclusive);
      ASSERT_EQ(a.has_value(), want.has_value()) << "step " << step << " cores " << cores;
      if (a) {
        EXPECT_EQ(a->shares.at(0).node, *want) << "step " << step << " cores " << cores;
      }
    }
    if (HasFailure()) return;
  }
  EXPECT_GT(checked, 20u);
  EXPECT_GT(started, 50u);
}

}  // namespace
}  // namespace corral::topology
