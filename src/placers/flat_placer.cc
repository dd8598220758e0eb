// FlatPlacer: best fit on a flat list of nodes. Single-node jobs (the common, hot case) go
// through the free-core index; jobs spanning nodes scan the candidates.
#include <algorithm>
#include <utility>

#include "placers/free_core_index.h"
#include "placers/placement.h"
#include "placers/share_builder.h"

namespace corral::topology {
namespace {

// Tight packing: fewer free cores first, then the lower index.
struct BestFit {
  std::optional<uint32_t> node;
  unsigned free = 0;
  void offer(uint32_t n, unsigned f) {
    if (!node || f < free || (f == free && n < *node)) {
      node = n;
      free = f;
    }
  }
};

std::optional<uint32_t> single_node(const Request& r, const std::vector<NodeState>& nodes, const FreeCoreIndex* index) {
  auto holds_all = [&](uint32_t n) { return task_capacity(r, nodes[n]) >= r.ntasks; };
  if (!r.required_nodes.empty()) {
    uint32_t n = r.required_nodes.front();
    bool allowed = r.allowed_nodes.empty() ||
                   std::find(r.allowed_nodes.begin(), r.allowed_nodes.end(), n) != r.allowed_nodes.end();
    if (n < nodes.size() && allowed && holds_all(n)) return n;
    return std::nullopt;
  }
  BestFit best;
  if (!r.allowed_nodes.empty()) {
    for (uint32_t n : r.allowed_nodes) {
      if (n < nodes.size() && holds_all(n)) best.offer(n, free_core_count(nodes[n]));
    }
    return best.node;
  }
  if (index != nullptr) {
    uint64_t need = uint64_t{r.ntasks} * cores_per_task(r);
    if (need > index->max_free()) return std::nullopt;
    index->find_from(static_cast<unsigned>(need), [&](uint32_t n) {
      if (!holds_all(n)) return false;
      best.node = n;
      return true;
    });
    return best.node;
  }
  for (uint32_t n = 0; n < nodes.size(); ++n) {
    if (holds_all(n)) best.offer(n, free_core_count(nodes[n]));
  }
  return best.node;
}

// Exactly nnodes nodes, tasks in block distribution: the lowest-indexed `extra` nodes get
// one task more than the others.
std::optional<Allocation> spread(const Request& r, const std::vector<NodeState>& nodes,
                                 const std::vector<Candidate>& must, const std::vector<Candidate>& others) {
  unsigned n = r.nnodes;
  if (must.size() > n) return std::nullopt;
  unsigned base = r.ntasks / n, extra = r.ntasks % n;
  if (base == 0) return std::nullopt;
  // Best fit on `base` tasks usually works; if the extra tasks then land on a node too small
  // for them, retry asking every chosen node to hold base+1.
  std::vector<unsigned> needs{base};
  if (extra > 0) needs.push_back(base + 1);
  for (unsigned need : needs) {
    std::vector<Candidate> pool;
    for (const Candidate& c : others) {
      if (c.cap >= need) pool.push_back(c);
    }
    size_t k = n - must.size();
    if (pool.size() < k) continue;
    std::partial_sort(pool.begin(), pool.begin() + static_cast<long>(k), pool.end(), tighter);
    std::vector<Candidate> chosen = must;
    chosen.insert(chosen.end(), pool.begin(), pool.begin() + static_cast<long>(k));
    std::sort(chosen.begin(), chosen.end(), [](const Candidate& a, const Candidate& b) { return a.node < b.node; });
    std::vector<std::pair<uint32_t, unsigned>> plan;
    for (size_t i = 0; i < chosen.size(); ++i) {
      unsigned tasks = base + (i < extra ? 1 : 0);
      if (chosen[i].cap < tasks) break;
      plan.emplace_back(chosen[i].node, tasks);
    }
    if (plan.size() == chosen.size()) return build(r, nodes, std::move(plan));
  }
  return std::nullopt;
}

std::optional<Allocation> pack(const Request& r, const std::vector<NodeState>& nodes,
                               const std::vector<Candidate>& must, std::vector<Candidate> others) {
  auto plan = pack_plan(r, must, std::move(others));
  if (!plan) return std::nullopt;
  return build(r, nodes, std::move(*plan));
}

std::optional<Allocation> multi_node(const Request& r, const std::vector<NodeState>& nodes) {
  std::vector<uint32_t> required = sorted_unique(r.required_nodes);
  std::vector<uint32_t> allowed = sorted_unique(r.allowed_nodes);
  std::vector<Candidate> must, others;
  for (uint32_t n : required) {
    if (n >= nodes.size() || (!allowed.empty() && !in_sorted(allowed, n))) return std::nullopt;
    unsigned cap = task_capacity(r, nodes[n]);
    if (cap == 0) return std::nullopt;
    must.push_back({n, cap, free_core_count(nodes[n])});
  }
  auto consider = [&](uint32_t n) {
    if (n >= nodes.size() || in_sorted(required, n)) return;
    if (unsigned cap = task_capacity(r, nodes[n]); cap > 0) {
      others.push_back({n, cap, free_core_count(nodes[n])});
    }
  };
  if (allowed.empty()) {
    for (uint32_t n = 0; n < nodes.size(); ++n) consider(n);
  } else {
    for (uint32_t n : allowed) consider(n);
  }
  if (r.nnodes > 0) return spread(r, nodes, must, others);
  return pack(r, nodes, must, std::move(others));
}

std::optional<Allocation> place_flat(const Request& r, const std::vector<NodeState>& nodes,
                                     const FreeCoreIndex* index) {
  if (r.ntasks == 0) return std::nullopt;
  if (r.nnodes <= 1 && r.required_nodes.size() <= 1) {
    if (auto node = single_node(r, nodes, index)) {
      return build(r, nodes, {{*node, r.ntasks}});
    }
    if (r.nnodes == 1 || r.ntasks == 1) return std::nullopt;
  }
  return multi_node(r, nodes);
}

class FlatPlacer final : public Placer {
 public:
  std::string name() const override { return "flat"; }
  std::optional<Allocation> place(const Request& req, const std::vector<NodeState>& nodes) const override {
    return place_flat(req, nodes, nullptr);
  }
  std::optional<Allocation> place_indexed(const Request& req, const std::vector<NodeState>& nodes,
                                          const FreeCoreIndex& index) const override {
    return place_flat(req, nodes, &index);
  }
};

}  // namespace

std::unique_ptr<Placer> make_flat_placer() { return std::make_unique<FlatPlacer>(); }

}  // namespace corral::topology
