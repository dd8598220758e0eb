// Tree and dragonfly placement. Tree: the fewest leaf switches the job can use, on the
// lowest switch that reaches that count (best fit among equals), then best-fit nodes on its
// leaves. Dragonfly: one leaf when the job fits in one, else one node per leaf round robin
// over the groups. Single-node jobs, the common case, look at a few free-core buckets only.
#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "placers/placers.h"
#include "placers/share_builder.h"
#include "placers/tree_index.h"
#include "placers/tree_search.h"
#include "topology/topology.h"

namespace corral::topology {
namespace {

// The allocation of `plan`, with the number of leaf switches it uses.
Allocation build_on(const Request& r, const std::vector<NodeState>& nodes, const TreeIndex& index, Plan plan) {
  std::vector<uint32_t> leaves;
  for (const auto& step : plan) leaves.push_back(index.leaf_of(step.first));
  Allocation alloc = build(r, nodes, std::move(plan));
  alloc.leaves = static_cast<unsigned>(sorted_unique(std::move(leaves)).size());
  return alloc;
}

// Exactly r.nnodes nodes in block distribution: the lowest-indexed nodes that can hold one
// task more take the `ntasks % nnodes` extra tasks. `chosen` all hold ntasks / nnodes.
std::optional<Plan> distribute(const Request& r, std::vector<Candidate> chosen) {
  if (chosen.size() != r.nnodes) return std::nullopt;
  std::sort(chosen.begin(), chosen.end(), [](const Candidate& a, const Candidate& b) { return a.node < b.node; });
  const unsigned base = r.ntasks / r.nnodes;
  unsigned extra = r.ntasks % r.nnodes;
  Plan plan;
  for (const Candidate& c : chosen) {
    bool more = extra > 0 && c.cap > base;
    plan.emplace_back(c.node, base + (more ? 1 : 0));
    extra -= more ? 1 : 0;
  }
  if (extra > 0) return std::nullopt;
  return plan;
}

// What one placement decision works with.
struct Job {
  const Request& req;
  const Capacity& capacity;
  Need need;
  std::vector<Candidate> must;   // required nodes
  std::vector<uint32_t> leaves;  // their leaves, sorted
};

// Required nodes must be known, allowed and able to take their share.
bool take_required(Job& job, const TreeIndex& index) {
  for (uint32_t n : sorted_unique(job.req.required_nodes)) {
    unsigned cap = job.capacity.cap(n);
    if (cap == 0 || (job.need.spread && cap < job.need.thr)) return false;
    job.must.push_back({n, cap, job.capacity.free(n)});
    job.leaves.push_back(index.leaf_of(n));
  }
  job.leaves = sorted_unique(std::move(job.leaves));
  return !(job.need.spread && job.must.size() > job.need.units);
}

bool is_required(const Job& job, uint32_t n) {
  return std::any_of(job.must.begin(), job.must.end(), [&](const Candidate& c) { return c.node == n; });
}

// The nodes of `leaf` that may take a share (required ones excluded).
void gather(const Job& job, const TreeIndex& index, uint32_t leaf, std::vector<Candidate>& out) {
  for (uint32_t n : index.leaves()[leaf].nodes) {
    if (job.capacity.unit(n, job.need) == 0 || is_required(job, n)) continue;
    out.push_back({n, job.capacity.cap(n), job.capacity.free(n)});
  }
}

std::optional<Plan> plan_on_leaves(const Job& job, const TreeIndex& index, const std::vector<uint32_t>& leaves) {
  std::vector<Candidate> others;
  for (uint32_t l : leaves) gather(job, index, l, others);
  if (!job.need.spread) return pack_plan(job.req, job.must, std::move(others));
  size_t k = job.req.nnodes - job.must.size();
  if (others.size() < k) return std::nullopt;
  std::partial_sort(others.begin(), others.begin() + static_cast<long>(k), others.end(), tighter);
  std::vector<Candidate> chosen = job.must;
  chosen.insert(chosen.end(), others.begin(), others.begin() + static_cast<long>(k));
  return distribute(job.req, std::move(chosen));
}

// Leaves of `leaves` in round-robin order over their groups (the switch above each leaf):
// the first leaf of every group, then the second of every group, and so on.
std::vector<uint32_t> round_robin(const TreeIndex& index, const std::vector<uint32_t>& leaves) {
  std::map<uint32_t, std::vector<uint32_t>> by_group;  // keyed by the group's first leaf
  for (uint32_t l : leaves) {
    uint32_t parent = index.groups()[index.leaves()[l].group].parent;
    uint32_t k = parent == TreeIndex::kNone ? l : index.groups()[parent].leaf_begin;
    by_group[k].push_back(l);
  }
  std::vector<uint32_t> order;
  for (size_t round = 0; order.size() < leaves.size(); ++round) {
    for (const auto& [k, ls] : by_group) {
      if (round < ls.size()) order.push_back(ls[round]);
    }
  }
  return order;
}

// Dragonfly, more than one leaf: one node per leaf per round, so the job is spread over as
// many leaves (and groups) as it has nodes, at most max_leaves.
std::optional<Plan> spread_over_leaves(const Job& job, const TreeIndex& index, const LeafChooser& chooser) {
  const unsigned limit = job.req.max_leaves;
  std::vector<uint32_t> leaves;
  for (uint32_t root : chooser.candidate_roots()) {
    std::vector<uint32_t> ls = chooser.roomiest(root, limit);
    uint64_t sum = 0;
    for (uint32_t l : ls) sum += chooser.units(l);
    if (sum >= chooser.need()) {
      leaves = std::move(ls);
      break;
    }
  }
  if (leaves.empty()) return std::nullopt;
  std::vector<uint32_t> order = round_robin(index, leaves);
  std::vector<std::vector<Candidate>> lists(order.size());
  std::vector<size_t> next(order.size(), 0);
  std::vector<Candidate> chosen = job.must;
  uint64_t got = 0;
  for (const Candidate& c : chosen) got += job.capacity.unit(c.node, job.need);
  for (bool progress = true; got < chooser.need() && progress;) {
    progress = false;
    for (size_t i = 0; i < order.size() && got < chooser.need(); ++i) {
      if (next[i] == 0) {
        gather(job, index, order[i], lists[i]);
        std::sort(lists[i].begin(), lists[i].end(), job.need.spread ? tighter : roomier);
      }
      if (next[i] >= lists[i].size()) continue;
      const Candidate& c = lists[i][next[i]++];
      chosen.push_back(c);
      got += job.capacity.unit(c.node, job.need);
      progress = true;
    }
  }
  if (got < chooser.need()) return std::nullopt;
  if (job.need.spread) return distribute(job.req, std::move(chosen));
  std::vector<Candidate> others(chosen.begin() + static_cast<long>(job.must.size()), chosen.end());
  return pack_plan(job.req, job.must, std::move(others));
}

class TreePlacer final : public Placer {
 public:
  TreePlacer(const Topology& topo, bool dragonfly) : index_(topo), dragonfly_(dragonfly) {}

  std::string name() const override { return dragonfly_ ? "dragonfly" : "tree"; }
  void node_added(uint32_t node, const std::string& name, const NodeState& state) override {
    index_.add_node(node, name, state);
  }
  void node_changed(uint32_t node, const NodeState& state) override { index_.update(node, state); }

  // The true minimum for both kinds. A tree placement on an empty machine always gets it; a
  // dragonfly one only when the job fits one leaf (larger jobs are spread on purpose).
  unsigned fewest_leaves(const Request& req) const override {
    auto need = first_need(req);
    if (!need) return 0;
    Capacity capacity(index_, req, nullptr);
    Job job{req, capacity, *need, {}, {}};
    if (!take_required(job, index_)) return 0;
    LeafChooser chooser(index_, capacity.leaf_units(job.need), job.need.units, job.leaves);
    return chooser.fewest().value_or(0);
  }

  std::optional<Allocation> place(const Request& req, const std::vector<NodeState>& nodes) const override {
    auto need = first_need(req);
    if (!need) return std::nullopt;
    Capacity capacity(index_, req, &nodes);
    if (req.nnodes <= 1 && req.required_nodes.size() <= 1) {
      if (auto n = single_node(req, nodes, capacity)) {
        return build_on(req, nodes, index_, {{*n, req.ntasks}});
      }
      if (req.nnodes == 1 || req.ntasks == 1) return std::nullopt;
    }
    if (auto plan = place_with(req, capacity, *need)) return build_on(req, nodes, index_, *plan);
    // Block distribution put an extra task on a node that could not take it: ask every node
    // for one task more.
    if (need->spread && req.ntasks % req.nnodes != 0) {
      need->thr += 1;
      if (auto plan = place_with(req, capacity, *need)) return build_on(req, nodes, index_, *plan);
    }
    return std::nullopt;
  }

 private:
  static std::optional<Need> first_need(const Request& req) {
    if (req.ntasks == 0) return std::nullopt;
    if (req.nnodes == 0) return Need{false, 1, req.ntasks};
    if (req.nnodes > req.ntasks) return std::nullopt;
    return Need{true, req.ntasks / req.nnodes, req.nnodes};
  }

  std::optional<Plan> place_with(const Request& req, const Capacity& capacity, const Need& need) const {
    Job job{req, capacity, need, {}, {}};
    if (!take_required(job, index_)) return std::nullopt;
    LeafChooser chooser(index_, capacity.leaf_units(need), need.units, job.leaves);
    // Dragonfly spreads what one leaf cannot hold; the leaf count matters only for a limit.
    if (dragonfly_ && !chooser.fits_one_leaf()) {
      if (req.max_leaves > 0) {
        auto k = chooser.fewest();
        if (!k || *k > req.max_leaves) return std::nullopt;
      }
      return spread_over_leaves(job, index_, chooser);
    }
    auto k = chooser.fewest();
    if (!k || (req.max_leaves > 0 && *k > req.max_leaves)) return std::nullopt;
    auto group = chooser.lowest_group(*k);
    if (!group) return std::nullopt;
    return plan_on_leaves(job, index_, chooser.pick(*group, *k));
  }

  // Best fit for a job on one node: fewest free cores that still fit; among equals a node on
  // a partly used leaf (whole leaves stay free for jobs that need them), then the lower index.
  std::optional<uint32_t> single_node(const Request& req, const std::vector<NodeState>& nodes,
                                      const Capacity& capacity) const {
    auto holds = [&](uint32_t n) { return capacity.cap(n) >= req.ntasks; };
    if (!req.required_nodes.empty()) {
      uint32_t n = req.required_nodes.front();
      return holds(n) ? std::optional<uint32_t>(n) : std::nullopt;
    }
    // A short allowed list is searched whole; a long one (most of the machine offers what
    // the job needs) through the index like an unrestricted job, skipping what is not allowed.
    if (!req.allowed_nodes.empty() && req.allowed_nodes.size() * 8 < index_.node_count())
      return best_allowed(req, nodes, capacity);
    const uint64_t need = uint64_t{req.ntasks} * cores_per_task(req);
    const auto& leaves = index_.leaves();
    std::optional<uint32_t> found;
    for (uint64_t f = need; f < index_.max_free_bucket() && !found; ++f) {
      index_.for_leaves_with(static_cast<unsigned>(f), req.exclusive, [&](uint32_t leaf) {
        for (uint32_t n : leaves[leaf].nodes) {
          const auto& info = index_.node(n);
          if (info.free != f || !(req.exclusive ? info.idle : info.eligible)) continue;
          if (holds(n)) {
            found = n;
            return true;
          }
        }
        return false;
      });
    }
    if (found) return found;
    return std::nullopt;
  }

  // The same best fit over the allowed nodes alone: the index's free counts rank them, and
  // only a node that would be the new best is asked whether it really holds the job.
  std::optional<uint32_t> best_allowed(const Request& req, const std::vector<NodeState>&,
                                       const Capacity& capacity) const {
    const uint64_t need = uint64_t{req.ntasks} * cores_per_task(req);
    std::optional<uint32_t> best;
    std::tuple<unsigned, bool, uint32_t> best_rank{};
    for (uint32_t n : req.allowed_nodes) {
      if (n >= index_.node_count() || index_.leaf_of(n) == TreeIndex::kNone) continue;
      const auto& info = index_.node(n);
      if (info.free < need || !(req.exclusive ? info.idle : info.eligible)) continue;
      const std::tuple<unsigned, bool, uint32_t> rank{info.free, index_.leaves()[info.leaf].busy == 0, n};
      if ((best && !(rank < best_rank)) || capacity.cap(n) < req.ntasks) continue;
      best = n;
      best_rank = rank;
    }
    return best;
  }

  TreeIndex index_;
  bool dragonfly_;
};

}  // namespace

std::unique_ptr<Placer> make_tree_placer(const Topology& topo, bool dragonfly) {
  return std::make_unique<TreePlacer>(topo, dragonfly);
}

}  // namespace corral::topology
