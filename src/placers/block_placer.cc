// BlockPlacer: Slurm's topology/block. Base blocks (file order is adjacency order) group
// into aligned aggregated blocks, one grouping per BlockSizes level. A job goes to the
// smallest level whose blocks can hold it, to the aggregated block there that it leaves
// least free (least fragmentation), to the fewest adjacent lower-level blocks inside it,
// and to the fewest base blocks and best-fitting nodes within those. Small jobs go to
// partly used base blocks first so whole blocks stay free for big ones. Per-block and
// per-level aggregates, kept exact through node_added/node_changed, rule blocks out without
// looking at their nodes, so a decision scans only the blocks it may use.
#include "placers/block_placer.h"

#include <algorithm>
#include <functional>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "placers/placers.h"
#include "placers/share_builder.h"
#include "topology/topology.h"

namespace corral::topology {
namespace {

constexpr uint32_t kNone = ~0u;

uint64_t ceil_div(uint64_t a, uint64_t b) { return b == 0 ? 0 : (a + b - 1) / b; }

// What a block can offer, reduced to what every request filters on.
struct NodeSummary {
  uint32_t free = 0;  // free cores, counted only when open
  bool open = false;  // usable, not held exclusively, some core free
  bool idle = false;  // open and running no job
  bool operator==(const NodeSummary&) const = default;
};

NodeSummary summarize(const NodeState& st) {
  NodeSummary s;
  const unsigned f = free_core_count(st);
  s.open = st.usable && !st.exclusive_held && f > 0;
  if (s.open) {
    s.free = f;
    s.idle = st.jobs == 0;
  }
  return s;
}

struct Agg {
  uint64_t free = 0;      // free cores of open nodes
  uint32_t open = 0;      // open nodes
  uint32_t idle = 0;      // idle nodes
  uint32_t max_free = 0;  // base blocks only: most free cores on one node
  void add(const NodeSummary& s) {
    free += s.free;
    open += s.open;
    idle += s.idle;
  }
  void remove(const NodeSummary& s) {
    free -= s.free;
    open -= s.open;
    idle -= s.idle;
  }
  bool operator==(const Agg&) const = default;
};

// The most free cores on one node over any range of base blocks, in O(log blocks): a job
// whose nodes each need more than that is ruled out of a whole aggregate at once.
class MaxTree {
 public:
  void resize(size_t n) {
    size_ = 1;
    while (size_ < n) size_ *= 2;
    t_.assign(2 * size_, 0);
  }
  void set(size_t i, uint32_t v) {
    i += size_;
    t_[i] = v;
    for (i /= 2; i >= 1; i /= 2) t_[i] = std::max(t_[2 * i], t_[2 * i + 1]);
  }
  uint32_t max(size_t first, size_t last) const {  // [first, last)
    uint32_t m = 0;
    for (first += size_, last += size_; first < last; first /= 2, last /= 2) {
      if (first & 1) m = std::max(m, t_[first++]);
      if (last & 1) m = std::max(m, t_[--last]);
    }
    return m;
  }

 private:
  size_t size_ = 1;
  std::vector<uint32_t> t_;
};

// The request before any node is looked at.
struct Shape {
  unsigned nodes = 0;       // nodes it needs at least (exactly, when nnodes is given); 0: never
  uint64_t cores = 0;       // cores over all tasks
  uint64_t node_cores = 0;  // cores every node used needs at least
  bool one_node = false;    // may fit on a single node
};

// Partition minus -x: a sorted view of the allowed node indices (empty: all allowed).
class Allowed {
 public:
  explicit Allowed(const std::vector<uint32_t>& ids) {
    if (std::is_sorted(ids.begin(), ids.end())) {
      view_ = &ids;
    } else {
      own_ = ids;
      std::sort(own_.begin(), own_.end());
      view_ = &own_;
    }
  }
  Allowed(const Allowed&) = delete;
  Allowed& operator=(const Allowed&) = delete;
  bool operator()(uint32_t n) const { return view_->empty() || std::binary_search(view_->begin(), view_->end(), n); }

 private:
  std::vector<uint32_t> own_;
  const std::vector<uint32_t>* view_ = nullptr;
};

// How much an aggregate would leave free: whole nodes count for exclusive jobs, which use
// nothing else; free cores for the others. Lower is a tighter fit.
uint64_t fit_key(const Agg& a, const Request& r) { return r.exclusive ? (uint64_t{a.idle} << 40) | a.free : a.free; }

struct Ctx {
  const Request& r;
  const std::vector<NodeState>& nodes;
  const Allowed& allowed;
  Shape shape;
};

struct Cand {
  uint32_t node = 0;
  unsigned cap = 0;   // tasks it can take
  unsigned free = 0;  // free cores
};

bool tighter(const Cand& a, const Cand& b) { return a.free != b.free ? a.free < b.free : a.node < b.node; }

class BlockPlacer final : public Placer {
 public:
  explicit BlockPlacer(const Topology& topo);

  std::string name() const override { return "block"; }
  void node_added(uint32_t node, const std::string& name, const NodeState& state) override;
  void node_changed(uint32_t node, const NodeState& state) override;
  unsigned fewest_leaves(const Request& req) const override;
  std::optional<Allocation> place(const Request& req, const std::vector<NodeState>& nodes) const override;

  std::optional<std::string> mismatch(const std::vector<NodeState>& nodes) const;

 private:
  Shape shape_of(const Request& r) const;
  unsigned full_capacity(const Request& r) const;
  void apply(uint32_t block, const NodeSummary& before, const NodeSummary& after);
  uint32_t block_max_free(uint32_t block) const;

  std::optional<Allocation> at_level(const Ctx& c, size_t level, bool single) const;
  std::optional<Allocation> in_aggregate(const Ctx& c, size_t level, uint32_t agg, bool single) const;
  std::optional<Allocation> single_in(const Ctx& c, uint32_t first, uint32_t last) const;
  std::optional<Allocation> spread_in(const Ctx& c, uint32_t first, uint32_t last) const;
  std::optional<Allocation> pack_in(const Ctx& c, uint32_t first, uint32_t last) const;
  bool passes(const Agg& a, const Ctx& c, bool single, uint32_t first, uint32_t last) const;
  bool too_many_leaves(const Ctx& c, size_t leaves) const { return c.r.max_leaves > 0 && leaves > c.r.max_leaves; }

  // From the topology.
  std::unordered_map<std::string, std::pair<uint32_t, uint32_t>> where_;  // name: block, pos
  std::vector<unsigned> level_nodes_;                                     // BlockSizes: nodes per block of each level
  std::vector<uint32_t> span_;  // base blocks per aggregated block of each level
  unsigned base_nodes_ = 1;
  uint64_t topo_nodes_ = 0;
  // Bound to the pool.
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> members_;  // per block: (pos, node)
  std::vector<uint32_t> node_block_;                                 // per node, or kNone
  std::vector<NodeSummary> summary_;                                 // per node
  std::vector<std::vector<Agg>> levels_;                             // [level][aggregated block]; level 0: base blocks
  MaxTree max_free_;                                                 // levels_[0][b].max_free by base block
  std::set<std::tuple<unsigned, unsigned, uint64_t>> node_kinds_;    // cores, gpus, memory
};

BlockPlacer::BlockPlacer(const Topology& topo) {
  const uint32_t nblocks = static_cast<uint32_t>(topo.blocks.size());
  for (uint32_t b = 0; b < nblocks; ++b) {
    const auto& names = topo.blocks[b].nodes;
    for (uint32_t i = 0; i < names.size(); ++i) where_.emplace(names[i], std::make_pair(b, i));
    topo_nodes_ += names.size();
  }
  level_nodes_ = topo.block_sizes;
  if (level_nodes_.empty() && nblocks > 0) {
    const auto base = static_cast<unsigned>(topo.blocks.front().nodes.size());
    for (unsigned n = 1; n <= nblocks; n *= 2) level_nodes_.push_back(n * base);
  }
  if (level_nodes_.empty()) level_nodes_.push_back(1);
  base_nodes_ = std::max(1u, level_nodes_.front());
  for (unsigned size : level_nodes_) {
    uint32_t span = std::max<uint32_t>(1, size / base_nodes_);
    if (!span_.empty()) span = std::max(span, span_.back());
    span_.push_back(span);
    levels_.emplace_back(std::max<uint64_t>(1, ceil_div(nblocks, span)));
  }
  members_.resize(nblocks);
  max_free_.resize(nblocks);
}

void BlockPlacer::node_added(uint32_t node, const std::string& name, const NodeState& state) {
  if (node_block_.size() <= node) {
    node_block_.resize(node + 1, kNone);
    summary_.resize(node + 1);
  }
  auto it = where_.find(name);
  if (it == where_.end() || node_block_[node] != kNone) return;
  auto [block, pos] = it->second;
  auto& m = members_[block];
  for (const auto& [p, n] : m) {
    if (p == pos) return;  // the same name twice in the pool: keep the first
  }
  m.insert(std::upper_bound(m.begin(), m.end(), std::make_pair(pos, node)), {pos, node});
  node_block_[node] = block;
  node_kinds_.emplace(state.cores, state.gpus, state.memory_mb);
  summary_[node] = summarize(state);
  apply(block, NodeSummary{}, summary_[node]);
}

void BlockPlacer::node_changed(uint32_t node, const NodeState& state) {
  if (node >= node_block_.size() || node_block_[node] == kNone) return;
  NodeSummary after = summarize(state);
  if (after == summary_[node]) return;
  NodeSummary before = summary_[node];
  summary_[node] = after;
  apply(node_block_[node], before, after);
}

void BlockPlacer::apply(uint32_t block, const NodeSummary& before, const NodeSummary& after) {
  for (size_t l = 0; l < levels_.size(); ++l) {
    Agg& a = levels_[l][block / span_[l]];
    a.remove(before);
    a.add(after);
  }
  // summary_ already holds `after`, so a recount sees the new state.
  Agg& base = levels_[0][block];
  const uint32_t old_max = base.max_free;
  if (after.free >= base.max_free) {
    base.max_free = after.free;
  } else if (before.free == base.max_free) {
    base.max_free = block_max_free(block);
  }
  if (base.max_free != old_max) max_free_.set(block, base.max_free);
}

uint32_t BlockPlacer::block_max_free(uint32_t block) const {
  uint32_t m = 0;
  for (const auto& [pos, n] : members_[block]) m = std::max(m, summary_[n].free);
  return m;
}

// Tasks a node of each configured kind takes when it is empty: the most of them bounds
// how few nodes a job can use.
unsigned BlockPlacer::full_capacity(const Request& r) const {
  unsigned best = 0;
  for (const auto& [cores, gpus, memory] : node_kinds_) {
    if (memory < r.mem_per_node_mb) continue;
    unsigned cap = cores / cores_per_task(r);
    if (r.gpus_per_task > 0) cap = std::min(cap, gpus / r.gpus_per_task);
    best = std::max(best, cap);
  }
  return best;
}

Shape BlockPlacer::shape_of(const Request& r) const {
  Shape s;
  s.cores = uint64_t{r.ntasks} * cores_per_task(r);
  if (r.ntasks == 0) return s;
  const unsigned cap = full_capacity(r);
  if (r.nnodes > 0) {
    if (ceil_div(r.ntasks, r.nnodes) > cap || r.ntasks < r.nnodes) return s;
    s.nodes = r.nnodes;
    s.node_cores = uint64_t{r.ntasks / r.nnodes} * cores_per_task(r);
  } else {
    if (cap == 0) return s;
    s.nodes = static_cast<unsigned>(ceil_div(r.ntasks, cap));
    s.node_cores = cores_per_task(r);
  }
  s.one_node = s.nodes == 1;
  return s;
}

unsigned BlockPlacer::fewest_leaves(const Request& req) const {
  if (!req.required_nodes.empty()) return 0;
  Shape s = shape_of(req);
  if (s.nodes == 0 || s.nodes > level_nodes_.back() || s.nodes > topo_nodes_) return 0;
  return static_cast<unsigned>(ceil_div(s.nodes, base_nodes_));
}

std::optional<Allocation> BlockPlacer::place(const Request& req, const std::vector<NodeState>& nodes) const {
  // -w is not supported with blocks (block_request_error explains it to the submitter).
  if (req.ntasks == 0 || !req.required_nodes.empty()) return std::nullopt;
  const unsigned fewest = fewest_leaves(req);
  if (fewest == 0 || (req.max_leaves > 0 && fewest > req.max_leaves)) return std::nullopt;
  Allowed allowed(req.allowed_nodes);
  const Ctx c{req, nodes, allowed, shape_of(req)};
  if (c.shape.one_node) {
    if (auto a = at_level(c, 0, /*single=*/true)) return a;
    if (req.nnodes == 1 || req.ntasks == 1) return std::nullopt;
  }
  for (size_t l = 0; l < levels_.size(); ++l) {
    if (level_nodes_[l] < c.shape.nodes) continue;
    if (auto a = at_level(c, l, /*single=*/false)) return a;
  }
  return std::nullopt;
}

// Whether the aggregate of base blocks [first, last) may hold the job; the checks that
// cost nothing come first.
bool BlockPlacer::passes(const Agg& a, const Ctx& c, bool single, uint32_t first, uint32_t last) const {
  if (a.free < c.shape.cores) return false;
  const uint32_t have = c.r.exclusive ? a.idle : a.open;
  if (have < (single ? 1 : c.shape.nodes)) return false;
  const uint64_t per_node = single ? c.shape.cores : c.shape.node_cores;
  if (last == first + 1) return levels_[0][first].max_free >= per_node;
  return max_free_.max(first, last) >= per_node;
}

// The aggregated blocks of `level` that may hold the job, least free first.
std::optional<Allocation> BlockPlacer::at_level(const Ctx& c, size_t level, bool single) const {
  const std::vector<Agg>& aggs = levels_[level];
  std::vector<std::pair<uint64_t, uint32_t>> cands;
  const auto nblocks = static_cast<uint32_t>(members_.size());
  for (uint32_t j = 0; j < aggs.size(); ++j) {
    const uint32_t first = j * span_[level];
    const uint32_t last = std::min<uint32_t>(first + span_[level], nblocks);
    if (first < last && passes(aggs[j], c, single, first, last)) cands.emplace_back(fit_key(aggs[j], c.r), j);
  }
  // A heap: the first candidate usually fits, so sorting them all would be wasted.
  std::make_heap(cands.begin(), cands.end(), std::greater<>{});
  while (!cands.empty()) {
    std::pop_heap(cands.begin(), cands.end(), std::greater<>{});
    const uint32_t j = cands.back().second;
    cands.pop_back();
    if (auto a = in_aggregate(c, level, j, single)) return a;
  }
  return std::nullopt;
}

// Inside one aggregated block: the fewest adjacent lower-level blocks that hold the job,
// the least free of them first, then the base blocks and nodes inside those.
std::optional<Allocation> BlockPlacer::in_aggregate(const Ctx& c, size_t level, uint32_t agg, bool single) const {
  const auto nblocks = static_cast<uint32_t>(members_.size());
  const uint32_t first = agg * span_[level];
  const uint32_t last = std::min<uint32_t>(first + span_[level], nblocks);
  if (first >= last) return std::nullopt;
  if (single) return single_in(c, first, last);
  if (level == 0) return c.r.nnodes > 0 ? spread_in(c, first, last) : pack_in(c, first, last);

  const uint32_t unit = span_[level - 1];
  const auto units = static_cast<uint32_t>(ceil_div(last - first, unit));
  // Window sums from prefix sums over the base blocks.
  std::vector<Agg> prefix(last - first + 1);
  for (uint32_t b = first; b < last; ++b) {
    Agg& p = prefix[b - first + 1];
    p = prefix[b - first];
    p.free += levels_[0][b].free;
    p.open += levels_[0][b].open;
    p.idle += levels_[0][b].idle;
  }
  const auto w_min =
      static_cast<uint32_t>(std::clamp<uint64_t>(ceil_div(c.shape.nodes, level_nodes_[level - 1]), 1, units));
  for (uint32_t w = w_min; w <= units; ++w) {
    std::vector<std::tuple<uint64_t, uint32_t, uint32_t>> windows;  // fit, first, last
    for (uint32_t u = 0; u + w <= units; ++u) {
      const uint32_t lo = u * unit, hi = std::min(last - first, (u + w) * unit);
      Agg sum;
      sum.free = prefix[hi].free - prefix[lo].free;
      sum.open = prefix[hi].open - prefix[lo].open;
      sum.idle = prefix[hi].idle - prefix[lo].idle;
      if (passes(sum, c, false, first + lo, first + hi))
        windows.emplace_back(fit_key(sum, c.r), first + lo, first + hi);
    }
    std::sort(windows.begin(), windows.end());
    for (const auto& win : windows) {
      const uint32_t lo = std::get<1>(win), hi = std::get<2>(win);
      auto a = c.r.nnodes > 0 ? spread_in(c, lo, hi) : pack_in(c, lo, hi);
      if (a) return a;
    }
  }
  return std::nullopt;
}

// One node for the whole job: the tightest that holds it.
std::optional<Allocation> BlockPlacer::single_in(const Ctx& c, uint32_t first, uint32_t last) const {
  std::optional<Cand> best;
  for (uint32_t b = first; b < last; ++b) {
    if (levels_[0][b].max_free < c.shape.cores) continue;
    for (const auto& [pos, n] : members_[b]) {
      if (n >= c.nodes.size() || summary_[n].free < c.shape.cores || !c.allowed(n)) continue;
      if (task_capacity(c.r, c.nodes[n]) < c.r.ntasks) continue;
      Cand cand{n, c.r.ntasks, free_core_count(c.nodes[n])};
      if (!best || tighter(cand, *best)) best = cand;
    }
  }
  if (!best) return std::nullopt;
  Allocation a = build(c.r, c.nodes, {{best->node, c.r.ntasks}});
  a.leaves = 1;
  return a;
}

// Exactly nnodes nodes in block distribution: the fewest base blocks of [first, last),
// whole ones first, and the tightest nodes of the last one.
std::optional<Allocation> BlockPlacer::spread_in(const Ctx& c, uint32_t first, uint32_t last) const {
  const unsigned base = c.r.ntasks / c.r.nnodes;
  std::vector<unsigned> needs{base};
  if (c.r.ntasks % c.r.nnodes != 0) needs.push_back(base + 1);
  std::vector<std::vector<Cand>> per(last - first);
  std::vector<uint64_t> counts(last - first);
  for (unsigned need : needs) {
    for (uint32_t b = first; b < last; ++b) {
      auto& list = per[b - first];
      list.clear();
      if (levels_[0][b].open == 0) continue;
      for (const auto& [pos, n] : members_[b]) {
        if (n >= c.nodes.size() || !summary_[n].open || !c.allowed(n)) continue;
        unsigned cap = task_capacity(c.r, c.nodes[n]);
        if (cap >= need) list.push_back({n, cap, free_core_count(c.nodes[n])});
      }
      counts[b - first] = list.size();
    }
    auto pick = choose_groups(counts, c.r.nnodes);
    if (!pick) return std::nullopt;  // asking more of each node finds no more of them
    if (too_many_leaves(c, pick->size())) return std::nullopt;
    std::vector<uint32_t> chosen;
    chosen.reserve(c.r.nnodes);
    for (auto [i, take] : *pick) {
      auto& list = per[i];
      if (take < list.size()) {
        std::partial_sort(list.begin(), list.begin() + static_cast<long>(take), list.end(), tighter);
      }
      for (uint64_t k = 0; k < take; ++k) chosen.push_back(list[k].node);
    }
    if (auto a = build_spread(c.r, c.nodes, std::move(chosen))) {
      a->leaves = static_cast<unsigned>(pick->size());
      return a;
    }
  }
  return std::nullopt;
}

// Any number of nodes: the fewest base blocks of [first, last) by task capacity, whole ones
// first; in the last one the roomiest nodes, and for the last task the tightest node.
std::optional<Allocation> BlockPlacer::pack_in(const Ctx& c, uint32_t first, uint32_t last) const {
  std::vector<std::vector<Cand>> per(last - first);
  std::vector<uint64_t> caps(last - first);
  for (uint32_t b = first; b < last; ++b) {
    if (levels_[0][b].open == 0) continue;
    for (const auto& [pos, n] : members_[b]) {
      if (n >= c.nodes.size() || !summary_[n].open || !c.allowed(n)) continue;
      if (unsigned cap = task_capacity(c.r, c.nodes[n]); cap > 0) {
        per[b - first].push_back({n, cap, free_core_count(c.nodes[n])});
        caps[b - first] += cap;
      }
    }
  }
  auto pick = choose_groups(caps, c.r.ntasks);
  if (!pick || too_many_leaves(c, pick->size())) return std::nullopt;
  std::vector<std::pair<uint32_t, unsigned>> plan;
  for (size_t p = 0; p < pick->size(); ++p) {
    auto [i, take] = (*pick)[p];
    std::vector<Cand>& list = per[i];
    if (p + 1 < pick->size()) {
      for (const Cand& cd : list) plan.emplace_back(cd.node, cd.cap);
      continue;
    }
    std::stable_sort(list.begin(), list.end(), [](const Cand& a, const Cand& b) { return a.cap > b.cap; });
    uint64_t rest = take;
    size_t k = 0;
    uint64_t sum = 0;
    while (sum < rest) sum += list[k++].cap;
    for (size_t m = 0; m + 1 < k; ++m) {
      plan.emplace_back(list[m].node, list[m].cap);
      rest -= list[m].cap;
    }
    const Cand* tail = &list[k - 1];
    for (size_t m = k; m < list.size(); ++m) {
      if (list[m].cap >= rest && tighter(list[m], *tail)) tail = &list[m];
    }
    plan.emplace_back(tail->node, static_cast<unsigned>(rest));
  }
  Allocation a = build(c.r, c.nodes, std::move(plan));
  a.leaves = static_cast<unsigned>(pick->size());
  return a;
}

std::optional<std::string> BlockPlacer::mismatch(const std::vector<NodeState>& nodes) const {
  std::vector<std::vector<Agg>> want(levels_.size());
  for (size_t l = 0; l < levels_.size(); ++l) want[l].resize(levels_[l].size());
  for (uint32_t b = 0; b < members_.size(); ++b) {
    for (const auto& [pos, n] : members_[b]) {
      if (n >= nodes.size()) return fmt::format("node {} is not in the pool", n);
      NodeSummary s = summarize(nodes[n]);
      if (!(s == summary_[n])) return fmt::format("node {}: stale summary", n);
      for (size_t l = 0; l < levels_.size(); ++l) want[l][b / span_[l]].add(s);
      want[0][b].max_free = std::max(want[0][b].max_free, s.free);
    }
    if (max_free_.max(b, b + 1) != levels_[0][b].max_free) return fmt::format("block {}: max free tree disagrees", b);
  }
  for (size_t l = 0; l < levels_.size(); ++l) {
    for (size_t j = 0; j < want[l].size(); ++j) {
      const Agg &w = want[l][j], &h = levels_[l][j];
      if (!(w == h)) {
        return fmt::format(
            "level {} block {}: free {} open {} idle {} max {}, expected "
            "free {} open {} idle {} max {}",
            l, j, h.free, h.open, h.idle, h.max_free, w.free, w.open, w.idle, w.max_free);
      }
    }
  }
  return std::nullopt;
}

}  // namespace

std::unique_ptr<Placer> make_block_placer(const Topology& topo) { return std::make_unique<BlockPlacer>(topo); }

std::optional<std::string> block_request_error(const Request& req) {
  if (req.required_nodes.empty()) return std::nullopt;
  return "requesting specific nodes (-w) is not supported with a block topology; use -x to "
         "exclude nodes";
}

std::optional<std::string> block_aggregates_mismatch(const Placer& placer, const std::vector<NodeState>& nodes) {
  const auto* block = dynamic_cast<const BlockPlacer*>(&placer);
  return block ? block->mismatch(nodes) : std::nullopt;
}

}  // namespace corral::topology
