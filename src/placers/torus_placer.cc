// TorusPlacer: Slurm's approach for three-dimensional tori. Nodes are ordered along a
// Hilbert curve, which keeps consecutive nodes close in space, and then placed by the
// one-dimensional best fit: a single-node job on the tightest node, a wider job on the
// smallest run of consecutive free nodes that holds it, or else on the fewest runs.
#include <algorithm>
#include <array>
#include <limits>
#include <unordered_map>
#include <utility>

#include "placers/placers.h"
#include "placers/share_builder.h"
#include "topology/topology.h"

namespace corral::topology {
namespace {

// Name-derived coordinates are base-36 digits (0-35): six bits per axis cover them, and a
// Hilbert curve of a larger cube passes through its corner sub-cubes whole, so a smaller
// torus keeps its own curve order.
constexpr unsigned kMinBits = 6;
constexpr uint64_t kUnplaced = std::numeric_limits<uint64_t>::max();

unsigned bits_for(int max_coord) {
  unsigned bits = kMinBits;
  while (bits < 21 && (int64_t{1} << bits) <= max_coord) ++bits;
  return bits;
}

struct Entry {
  uint64_t key = 0;  // position along the curve; kUnplaced: no coordinates, at the end
  uint32_t seq = 0;  // order added, for ties
  uint32_t node = 0;
  bool operator<(const Entry& o) const { return key != o.key ? key < o.key : seq < o.seq; }
};

struct Cand {
  uint32_t node = 0;
  unsigned cap = 0;
  unsigned free = 0;
  size_t pos = 0;  // along the curve
};

class TorusPlacer final : public Placer {
 public:
  explicit TorusPlacer(const Topology& topo) {
    int max_coord = 0;
    for (const TorusNode& t : topo.torus) {
      coords_.emplace(t.name, t.coord);
      for (int v : t.coord) max_coord = std::max(max_coord, v);
    }
    bits_ = bits_for(max_coord);
  }

  std::string name() const override { return "torus"; }

  void node_added(uint32_t node, const std::string& name, const NodeState& state) override {
    (void)state;
    Entry e;
    e.seq = static_cast<uint32_t>(line_.size());
    e.node = node;
    e.key = key_of(name);
    if (!line_.empty() && e < line_.back()) sorted_ = false;
    line_.push_back(e);
  }

  void node_changed(uint32_t node, const NodeState& state) override {
    (void)node, (void)state;
    if (!sorted_) {
      std::sort(line_.begin(), line_.end());
      sorted_ = true;
    }
  }

  std::optional<Allocation> place(const Request& req, const std::vector<NodeState>& nodes) const override;

 private:
  uint64_t key_of(const std::string& name) const {
    auto it = coords_.find(name);
    std::optional<std::array<int, 3>> c;
    if (it != coords_.end()) {
      c = it->second;
    } else {
      c = coords_from_name(name);
    }
    if (!c) return kUnplaced;
    for (int v : *c) {
      if (v >= (int64_t{1} << bits_)) return kUnplaced;  // outside the curve's cube
    }
    return hilbert_index(*c, bits_);
  }

  std::unordered_map<std::string, std::array<int, 3>> coords_;
  unsigned bits_ = kMinBits;
  std::vector<Entry> line_;  // in curve order when sorted_
  bool sorted_ = true;
};

// The nodes in curve order; until the first change after nodes were added out of order,
// a sorted copy.
std::vector<uint32_t> curve(const std::vector<Entry>& line, bool sorted) {
  std::vector<Entry> copy;
  const std::vector<Entry>* src = &line;
  if (!sorted) {
    copy = line;
    std::sort(copy.begin(), copy.end());
    src = &copy;
  }
  std::vector<uint32_t> out;
  out.reserve(src->size());
  for (const Entry& e : *src) out.push_back(e.node);
  return out;
}

// One decision: the request, the pool, and the nodes in curve order.
class Decision {
 public:
  Decision(const Request& r, const std::vector<NodeState>& nodes, std::vector<uint32_t> order)
      : r_(r),
        nodes_(nodes),
        order_(std::move(order)),
        required_(sorted_unique(r.required_nodes)),
        allowed_(sorted_unique(r.allowed_nodes)) {}

  std::optional<Allocation> run() const {
    if (r_.ntasks == 0) return std::nullopt;
    for (uint32_t n : required_) {
      if (n >= nodes_.size() || !allowed(n)) return std::nullopt;
    }
    if (r_.nnodes <= 1 && required_.size() <= 1) {
      if (auto node = single_node()) return build(r_, nodes_, {{*node, r_.ntasks}});
      if (r_.nnodes == 1 || r_.ntasks == 1) return std::nullopt;
    }
    return r_.nnodes > 0 ? spread() : pack();
  }

 private:
  bool allowed(uint32_t n) const { return allowed_.empty() || in_sorted(allowed_, n); }

  std::optional<uint32_t> single_node() const {
    if (!required_.empty()) {
      uint32_t n = required_.front();
      if (task_capacity(r_, nodes_[n]) >= r_.ntasks) return n;
      return std::nullopt;
    }
    std::optional<Cand> best;
    for (size_t pos = 0; pos < order_.size(); ++pos) {
      uint32_t n = order_[pos];
      if (n >= nodes_.size() || !allowed(n)) continue;
      if (task_capacity(r_, nodes_[n]) < r_.ntasks) continue;
      unsigned f = free_core_count(nodes_[n]);
      if (!best || f < best->free) best = Cand{n, r_.ntasks, f, pos};
    }
    if (!best) return std::nullopt;
    return best->node;
  }

  // Runs of consecutive nodes (in curve order, required ones aside) taking >= `need` tasks.
  std::vector<std::vector<Cand>> runs(unsigned need) const {
    std::vector<std::vector<Cand>> out;
    std::vector<Cand> cur;
    for (size_t pos = 0; pos < order_.size(); ++pos) {
      uint32_t n = order_[pos];
      unsigned cap = 0;
      if (n < nodes_.size() && allowed(n) && !in_sorted(required_, n)) cap = task_capacity(r_, nodes_[n]);
      if (cap >= need && cap > 0) {
        cur.push_back({n, cap, free_core_count(nodes_[n]), pos});
      } else if (!cur.empty()) {
        out.push_back(std::move(cur));
        cur.clear();
      }
    }
    if (!cur.empty()) out.push_back(std::move(cur));
    return out;
  }

  // Exactly nnodes nodes, block distribution of the tasks.
  std::optional<Allocation> spread() const {
    if (required_.size() > r_.nnodes) return std::nullopt;
    const unsigned base = r_.ntasks / r_.nnodes;
    if (base == 0) return std::nullopt;
    std::vector<unsigned> needs{base};
    if (r_.ntasks % r_.nnodes != 0) needs.push_back(base + 1);
    const uint64_t want = r_.nnodes - required_.size();
    for (unsigned need : needs) {
      std::vector<uint32_t> chosen = required_;
      if (want > 0) {
        auto found = runs(need);
        std::vector<uint64_t> lengths;
        for (const auto& run : found) lengths.push_back(run.size());
        auto pick = choose_groups(lengths, want);
        if (!pick) return std::nullopt;
        for (auto [i, take] : *pick) {
          for (uint64_t k = 0; k < take; ++k) chosen.push_back(found[i][k].node);
        }
      }
      if (auto a = build_spread(r_, nodes_, std::move(chosen))) return a;
    }
    return std::nullopt;
  }

  // Any number of nodes: required ones first, then the best-fitting runs by task capacity,
  // each used from its start.
  std::optional<Allocation> pack() const {
    if (required_.size() > r_.ntasks) return std::nullopt;
    std::vector<std::pair<uint32_t, unsigned>> plan;
    unsigned remaining = r_.ntasks - static_cast<unsigned>(required_.size());
    for (uint32_t n : required_) {
      unsigned cap = task_capacity(r_, nodes_[n]);
      if (cap == 0) return std::nullopt;
      unsigned more = std::min(cap - 1, remaining);
      plan.emplace_back(n, 1 + more);
      remaining -= more;
    }
    if (remaining > 0) {
      auto found = runs(1);
      std::vector<uint64_t> caps;
      for (const auto& run : found) {
        uint64_t sum = 0;
        for (const Cand& c : run) sum += c.cap;
        caps.push_back(sum);
      }
      auto pick = choose_groups(caps, remaining);
      if (!pick) return std::nullopt;
      for (auto [i, take] : *pick) {
        for (const Cand& c : found[i]) {
          if (take == 0) break;
          auto tasks = static_cast<unsigned>(std::min<uint64_t>(c.cap, take));
          plan.emplace_back(c.node, tasks);
          take -= tasks;
        }
      }
    }
    return build(r_, nodes_, std::move(plan));
  }

  const Request& r_;
  const std::vector<NodeState>& nodes_;
  std::vector<uint32_t> order_;
  std::vector<uint32_t> required_, allowed_;
};

std::optional<Allocation> TorusPlacer::place(const Request& req, const std::vector<NodeState>& nodes) const {
  return Decision(req, nodes, curve(line_, sorted_)).run();
}

}  // namespace

std::unique_ptr<Placer> make_torus_placer(const Topology& topo) { return std::make_unique<TorusPlacer>(topo); }

}  // namespace corral::topology
