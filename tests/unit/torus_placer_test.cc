// The torus placer on a 4x4x4 torus: Hilbert curve order, then one-dimensional best fit.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "placers/placers.h"
#include "sched/scheduler.h"
#include "topology/topology.h"

namespace corral::topology {
namespace {

using Coord = std::array<int, 3>;

NodeState idle_node(unsigned cores) {
  NodeState st;
  st.cores = cores;
  st.free_cores = IdSet::range(0, cores - 1);
  st.usable = true;
  return st;
}

// Nodes "node-<i>" (no coordinates in the name) with coordinates from the topology, added
// in x, y, z order.
struct Torus {
  Torus() {
    topo.kind = Kind::torus;
    for (int x = 0; x < 4; ++x)
      for (int y = 0; y < 4; ++y)
        for (int z = 0; z < 4; ++z) {
          topo.torus.push_back({fmt::format("node-{}", topo.torus.size()), {x, y, z}});
        }
    EXPECT_TRUE(topo.finalize("test").ok());
    placer = make_torus_placer(topo);
    for (uint32_t n = 0; n < topo.torus.size(); ++n) {
      nodes.push_back(idle_node(4));
      placer->node_added(n, topo.torus[n].name, nodes.back());
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
  std::optional<Allocation> place(const Request& r) const { return placer->place(r, nodes); }
  Coord coord(uint32_t n) const { return topo.torus[n].coord; }

  Topology topo;
  std::unique_ptr<Placer> placer;
  std::vector<NodeState> nodes;
};

Request nodes_req(unsigned nnodes) {
  Request r;
  r.nnodes = nnodes;
  r.ntasks = nnodes;
  r.exclusive = true;
  return r;
}

std::vector<uint32_t> nodes_of(const Allocation& a) {
  std::vector<uint32_t> out;
  for (const NodeShare& s : a.shares) out.push_back(s.node);
  return out;
}

// The extent of a set of coordinates along each axis.
Coord extent(const std::vector<Coord>& cs) {
  Coord lo{99, 99, 99}, hi{-1, -1, -1};
  for (const Coord& c : cs) {
    for (int i = 0; i < 3; ++i) {
      lo[i] = std::min(lo[i], c[i]);
      hi[i] = std::max(hi[i], c[i]);
    }
  }
  return {hi[0] - lo[0] + 1, hi[1] - lo[1] + 1, hi[2] - lo[2] + 1};
}

// The curve order, as the placer sees it: on an empty machine single-node jobs go to the
// earliest node along the curve.
std::vector<uint32_t> curve_order() {
  Torus copy;
  std::vector<uint32_t> order;
  while (auto a = copy.place(nodes_req(1))) {
    order.push_back(a->shares[0].node);
    copy.take(*a);
  }
  return order;
}

TEST(TorusPlacer, TheCurveStepsToNeighbours) {
  Torus t;
  auto order = curve_order();
  ASSERT_EQ(order.size(), 64u);
  EXPECT_EQ(t.coord(order.front()), (Coord{0, 0, 0}));
  for (size_t i = 1; i < order.size(); ++i) {
    Coord a = t.coord(order[i - 1]), b = t.coord(order[i]);
    int dist = std::abs(a[0] - b[0]) + std::abs(a[1] - b[1]) + std::abs(a[2] - b[2]);
    EXPECT_EQ(dist, 1) << "step " << i;
  }
}

TEST(TorusPlacer, ConsecutiveJobsGetCompactCubes) {
  Torus t;
  std::vector<uint32_t> seen;
  for (int job = 0; job < 8; ++job) {
    auto a = t.place(nodes_req(8));
    ASSERT_TRUE(a) << job;
    EXPECT_EQ(a->leaves, 0u);
    std::vector<Coord> cs;
    for (uint32_t n : nodes_of(*a)) cs.push_back(t.coord(n));
    EXPECT_EQ(extent(cs), (Coord{2, 2, 2})) << job;  // an aligned octant of the 4x4x4
    t.take(*a);
    for (uint32_t n : nodes_of(*a)) seen.push_back(n);
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(std::unique(seen.begin(), seen.end()), seen.end());
  EXPECT_FALSE(t.place(nodes_req(1)));
}

TEST(TorusPlacer, ThirtyTwoNodesAreAHalfCube) {
  Torus t;
  auto a = t.place(nodes_req(32));
  ASSERT_TRUE(a);
  std::vector<Coord> cs;
  for (uint32_t n : nodes_of(*a)) cs.push_back(t.coord(n));
  Coord e = extent(cs);
  EXPECT_EQ(e[0] * e[1] * e[2], 32);  // a 4x4x2 slab in some orientation
}

TEST(TorusPlacer, BestFitOverRunsAlongTheCurve) {
  Torus t;
  auto order = curve_order();
  ASSERT_EQ(order.size(), 64u);
  // Free along the curve: positions 0-2 (3 nodes), 4-8 (5), 10-11 (2); the rest busy.
  for (size_t pos = 0; pos < 64; ++pos) {
    bool is_free = pos <= 2 || (pos >= 4 && pos <= 8) || pos == 10 || pos == 11;
    if (!is_free) {
      Allocation a;
      a.exclusive = true;
      a.shares.push_back({order[pos], 1, IdSet::range(0, 3), {}, 0});
      t.take(a);
    }
  }
  auto at = [&](std::vector<size_t> positions) {
    std::vector<uint32_t> out;
    for (size_t p : positions) out.push_back(order[p]);
    std::sort(out.begin(), out.end());
    return out;
  };
  auto a = t.place(nodes_req(2));
  ASSERT_TRUE(a);
  EXPECT_EQ(nodes_of(*a), at({10, 11}));  // the smallest run that holds it
  a = t.place(nodes_req(4));
  ASSERT_TRUE(a);
  EXPECT_EQ(nodes_of(*a), at({4, 5, 6, 7}));
  a = t.place(nodes_req(7));
  ASSERT_TRUE(a);
  EXPECT_EQ(nodes_of(*a), at({4, 5, 6, 7, 8, 10, 11}));  // largest run, then the tightest
  a = t.place(nodes_req(8));
  ASSERT_TRUE(a);
  EXPECT_EQ(nodes_of(*a), at({0, 1, 2, 4, 5, 6, 7, 8}));
  EXPECT_FALSE(t.place(nodes_req(11)));

  // Tasks without a node count: capacity runs of 12, 20 and 8 cores; 8 tasks fit the last.
  Request r;
  r.ntasks = 8;
  a = t.place(r);
  ASSERT_TRUE(a);
  EXPECT_EQ(nodes_of(*a), at({10, 11}));
}

TEST(TorusPlacer, SingleNodeJobsTakeTheTightestNode) {
  Torus t;
  Allocation busy;
  busy.shares.push_back({37, 1, IdSet::range(0, 2), {}, 0});
  t.take(busy);
  Request r;
  r.ntasks = 1;
  auto a = t.place(r);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->shares[0].node, 37u);
  EXPECT_EQ(a->shares[0].cores.encode(), "3");
}

TEST(TorusPlacer, CoordinatesFromNamesAndUnplacedNodesLast) {
  Topology topo;
  topo.kind = Kind::torus;
  ASSERT_TRUE(topo.finalize("test").ok());
  auto placer = make_torus_placer(topo);
  std::vector<NodeState> nodes;
  std::vector<Coord> coords;
  nodes.push_back(idle_node(4));
  placer->node_added(0, "login_x", nodes.back());  // '_' is no base-36 digit: no coordinates
  coords.push_back({-1, -1, -1});
  for (int x = 3; x >= 0; --x)
    for (int y = 0; y < 4; ++y)
      for (int z = 0; z < 4; ++z) {
        nodes.push_back(idle_node(4));
        placer->node_added(static_cast<uint32_t>(nodes.size() - 1), fmt::format("bgq{}{}{}", x, y, z), nodes.back());
        coords.push_back({x, y, z});
      }
  Request one;
  one.ntasks = 1;
  auto a = placer->place(one, nodes);
  ASSERT_TRUE(a);
  EXPECT_EQ(coords[a->shares[0].node], (Coord{0, 0, 0}));  // the curve's first node

  auto b = placer->place(nodes_req(8), nodes);
  ASSERT_TRUE(b);
  std::vector<Coord> cs;
  for (uint32_t n : nodes_of(*b)) cs.push_back(coords[n]);
  EXPECT_EQ(extent(cs), (Coord{2, 2, 2}));

  auto c = placer->place(nodes_req(65), nodes);
  ASSERT_TRUE(c);  // every node, the unplaced one too
  auto d = placer->place(nodes_req(64), nodes);
  ASSERT_TRUE(d);
  for (uint32_t n : nodes_of(*d)) EXPECT_NE(n, 0u);  // the unplaced node comes last
}

TEST(TorusPlacer, ExcludedAndRequiredNodes) {
  Torus t;
  auto order = curve_order();
  Request r = nodes_req(1);
  r.allowed_nodes = {order[5], order[9]};
  auto a = t.place(r);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->shares[0].node, order[5]);
  r = nodes_req(3);
  r.required_nodes = {order[40]};
  a = t.place(r);
  ASSERT_TRUE(a);
  auto got = nodes_of(*a);
  EXPECT_NE(std::find(got.begin(), got.end(), order[40]), got.end());
}

TEST(TorusPlacer, ThroughTheScheduler) {
  Torus t;
  sched::Scheduler s(make_torus_placer(t.topo));
  for (const TorusNode& n : t.topo.torus) s.add_node({n.name, 4, 0, 0});
  std::mt19937 rng(3);
  std::map<uint64_t, Request> asked;
  std::vector<uint64_t> running;
  size_t started = 0;
  for (uint64_t id = 1; id <= 300; ++id) {
    sched::PendingJob j;
    j.req = nodes_req(1 + rng() % 10);
    if (rng() % 2) {
      j.req.nnodes = 0;
      j.req.ntasks = 1 + rng() % 20;
      j.req.exclusive = false;
    }
    j.req.jobid = id;
    j.submit_order = id;
    j.duration = 5 + rng() % 20;
    asked[id] = j.req;
    s.enqueue(j);
    if (!running.empty() && rng() % 2) {
      size_t i = rng() % running.size();
      s.release(running[i]);
      running.erase(running.begin() + static_cast<long>(i));
    }
    for (const auto& d : s.schedule(static_cast<double>(id))) {
      ++started;
      running.push_back(d.jobid);
      const Request& r = asked.at(d.jobid);
      unsigned tasks = 0;
      for (const NodeShare& sh : d.alloc.shares) tasks += sh.ntasks;
      EXPECT_EQ(tasks, r.ntasks);
      if (r.nnodes > 0) {
        EXPECT_EQ(d.alloc.shares.size(), r.nnodes);
      }
    }
  }
  EXPECT_GT(started, 100u);
}

}  // namespace
}  // namespace corral::topology
