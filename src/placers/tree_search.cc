#include "placers/tree_search.h"

#include <algorithm>

#include "placers/share_builder.h"

namespace corral::topology {
namespace {

uint64_t key(uint64_t units, uint32_t pos) {
  return (std::min<uint64_t>(units, 0xffffffffu) << 32) | (~pos & 0xffffffffu);
}
// Questions answered by binary search before the allowed set becomes a bit mask.
constexpr uint32_t kMaskAfter = 256;

uint32_t pos_of(uint64_t key) { return ~static_cast<uint32_t>(key & 0xffffffffu); }
uint64_t units_of(uint64_t key) { return key >> 32; }

}  // namespace

Capacity::Capacity(const TreeIndex& index, const Request& req, const std::vector<NodeState>* nodes)
    : index_(index), req_(req), nodes_(nodes), allowed_(&req.allowed_nodes) {
  const auto& a = req.allowed_nodes;
  if (req.allowed_sorted || (std::is_sorted(a.begin(), a.end()) && std::adjacent_find(a.begin(), a.end()) == a.end()))
    return;
  own_allowed_ = a;
  std::sort(own_allowed_.begin(), own_allowed_.end());
  own_allowed_.erase(std::unique(own_allowed_.begin(), own_allowed_.end()), own_allowed_.end());
  allowed_ = &own_allowed_;
}

bool Capacity::allowed(uint32_t n) const {
  if (n >= index_.node_count() || index_.leaf_of(n) == TreeIndex::kNone) return false;
  if (nodes_ && n >= nodes_->size()) return false;
  if (allowed_->empty()) return true;
  if (!mask_.empty()) return mask_[n];
  if (++asked_ > kMaskAfter) {
    mask_.assign(index_.node_count(), false);
    for (uint32_t a : *allowed_)
      if (a < mask_.size()) mask_[a] = true;
    return mask_[n];
  }
  return std::binary_search(allowed_->begin(), allowed_->end(), n);
}

unsigned Capacity::cap(uint32_t n) const {
  if (!allowed(n)) return 0;
  if (nodes_) return task_capacity(req_, (*nodes_)[n]);
  // An empty machine: everything configured is free.
  const TreeIndex::NodeInfo& info = index_.node(n);
  if (info.memory_mb < req_.mem_per_node_mb) return 0;
  unsigned c = info.cores / cores_per_task(req_);
  if (req_.gpus_per_task > 0) c = std::min(c, info.gpus / req_.gpus_per_task);
  return c;
}

unsigned Capacity::free(uint32_t n) const {
  if (nodes_) return static_cast<unsigned>((*nodes_)[n].free_cores.count());
  return index_.node(n).cores;
}

// The histograms know free cores only: exact for requests of cores alone.
bool Capacity::from_histogram() const {
  return nodes_ && req_.gpus_per_task == 0 && req_.mem_per_node_mb == 0 && allowed_->empty();
}

std::vector<uint64_t> Capacity::units_from_histograms(const Need& need) const {
  const auto& leaves = index_.leaves();
  std::vector<uint64_t> out(leaves.size(), 0);
  const unsigned pt = cores_per_task(req_);
  const unsigned min_free = need.spread ? need.thr * pt : pt;
  for (size_t l = 0; l < leaves.size(); ++l) {
    const FreeHistogram& h = req_.exclusive ? leaves[l].idle : leaves[l].eligible;
    uint64_t u = 0;
    for (auto [free, count] : h.buckets()) {
      if (free < min_free) continue;
      u += need.spread ? count : uint64_t{free / pt} * count;
    }
    out[l] = u;
  }
  return out;
}

std::vector<uint64_t> Capacity::leaf_units(const Need& need) const {
  if (from_histogram()) return units_from_histograms(need);
  std::vector<uint64_t> out(index_.leaves().size(), 0);
  auto add = [&](uint32_t n) {
    if (n < index_.node_count() && index_.leaf_of(n) != TreeIndex::kNone) {
      out[index_.leaf_of(n)] += unit(n, need);
    }
  };
  if (!allowed_->empty()) {
    for (uint32_t n : *allowed_) add(n);
  } else {
    for (const auto& leaf : index_.leaves()) {
      for (uint32_t n : leaf.nodes) add(n);
    }
  }
  return out;
}

LeafChooser::LeafChooser(const TreeIndex& index, std::vector<uint64_t> units, uint64_t need,
                         std::vector<uint32_t> mandatory)
    : index_(index), units_(std::move(units)), need_(need), mandatory_(std::move(mandatory)) {
  prefix_.resize(units_.size() + 1, 0);
  for (size_t i = 0; i < units_.size(); ++i) prefix_[i + 1] = prefix_[i] + units_[i];
  const auto& leaves = index_.leaves();
  for (size_t i = 0; i < mandatory_.size(); ++i) {
    uint32_t leaf = mandatory_[i];
    mandatory_units_ += units_[leaf];
    uint32_t g = leaves[leaf].group;
    lca_ = i == 0 ? g : index_.common_group(lca_, g);
    if (lca_ == TreeIndex::kNone) {
      split_ = true;
      break;
    }
  }
}

uint64_t LeafChooser::sum(uint32_t group) const {
  const auto& g = index_.groups()[group];
  return prefix_[g.leaf_end] - prefix_[g.leaf_begin];
}

bool LeafChooser::is_mandatory(uint32_t leaf) const {
  return std::binary_search(mandatory_.begin(), mandatory_.end(), leaf);
}

bool LeafChooser::holds_mandatory(uint32_t group) const {
  if (split_) return false;
  if (mandatory_.empty()) return true;
  const auto& g = index_.groups()[group];
  return g.leaf_begin <= mandatory_.front() && mandatory_.back() < g.leaf_end &&
         index_.common_group(group, lca_) == group;
}

std::vector<uint64_t> LeafChooser::heap_of(uint32_t group) const {
  const auto& g = index_.groups()[group];
  std::vector<uint64_t> heap;
  for (uint32_t l = g.leaf_begin; l < g.leaf_end; ++l) {
    if (units_[l] > 0 && !is_mandatory(l)) heap.push_back(key(units_[l], l));
  }
  std::make_heap(heap.begin(), heap.end());
  return heap;
}

std::optional<unsigned> LeafChooser::fewest_in(uint32_t group) const {
  if (!holds_mandatory(group) || sum(group) < need_) return std::nullopt;
  auto count = static_cast<unsigned>(mandatory_.size());
  if (mandatory_units_ >= need_) return std::max(count, 1u);
  uint64_t got = mandatory_units_;
  std::vector<uint64_t> heap = heap_of(group);
  while (got < need_ && !heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    got += units_of(heap.back());
    heap.pop_back();
    ++count;
  }
  if (got < need_) return std::nullopt;
  return count;
}

std::vector<uint32_t> LeafChooser::candidate_roots() const {
  std::vector<uint32_t> out;
  for (uint32_t r : index_.roots()) {
    if (holds_mandatory(r) && sum(r) >= need_) out.push_back(r);
  }
  return out;
}

bool LeafChooser::fits_one_leaf() const {
  if (split_ || mandatory_.size() > 1) return false;
  if (mandatory_.size() == 1) return units_[mandatory_.front()] >= need_;
  return std::any_of(units_.begin(), units_.end(), [&](uint64_t u) { return u >= need_; });
}

std::optional<unsigned> LeafChooser::fewest() const {
  if (fits_one_leaf()) return 1;
  std::optional<unsigned> best;
  for (uint32_t r : candidate_roots()) {
    if (auto k = fewest_in(r); k && (!best || *k < *best)) best = k;
  }
  return best;
}

std::optional<uint32_t> LeafChooser::lowest_group(unsigned k) const {
  const auto& groups = index_.groups();
  for (const auto& level : index_.by_level()) {
    std::optional<uint32_t> best;
    uint64_t best_spare = 0;
    for (uint32_t g : level) {
      uint64_t s = sum(g);
      if (s < need_) continue;
      if (groups[g].level == 0 ? (k != 1 || !holds_mandatory(g)) : fewest_in(g) != k) continue;
      uint64_t spare = s - need_;
      if (!best || spare < best_spare || (spare == best_spare && groups[g].leaf_begin < groups[*best].leaf_begin)) {
        best = g;
        best_spare = spare;
      }
    }
    if (best) return best;
  }
  return std::nullopt;
}

std::vector<uint32_t> LeafChooser::pick(uint32_t group, unsigned k) const {
  std::vector<uint32_t> chosen = mandatory_;
  uint64_t got = mandatory_units_;
  if (got >= need_ || chosen.size() >= k) {
    if (chosen.empty()) chosen.push_back(index_.groups()[group].leaf_begin);
    return chosen;
  }
  std::vector<uint64_t> heap = heap_of(group);
  while (chosen.size() + 1 < k && !heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    chosen.push_back(pos_of(heap.back()));
    got += units_of(heap.back());
    heap.pop_back();
  }
  // The last leaf: the fewest units that still cover the rest, a sibling of a chosen leaf
  // (fewer hops) before a stranger, then the lower position.
  const uint64_t rest = got >= need_ ? 0 : need_ - got;
  const auto& leaves = index_.leaves();
  const auto& groups = index_.groups();
  auto sibling = [&](uint32_t leaf) {
    uint32_t parent = groups[leaves[leaf].group].parent;
    return std::any_of(chosen.begin(), chosen.end(),
                       [&](uint32_t c) { return groups[leaves[c].group].parent == parent; });
  };
  std::optional<uint32_t> last;
  bool last_sibling = false;
  for (uint64_t h : heap) {
    uint64_t u = units_of(h);
    uint32_t pos = pos_of(h);
    if (u < rest) continue;
    bool sib = sibling(pos);
    if (!last || u < units_[*last] ||
        (u == units_[*last] && (sib > last_sibling || (sib == last_sibling && pos < *last)))) {
      last = pos;
      last_sibling = sib;
    }
  }
  if (last) chosen.push_back(*last);
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

std::vector<uint32_t> LeafChooser::roomiest(uint32_t group, unsigned limit) const {
  std::vector<uint32_t> chosen = mandatory_;
  if (limit == 0) {  // all of them: no order needed
    const auto& g = index_.groups()[group];
    for (uint32_t l = g.leaf_begin; l < g.leaf_end; ++l) {
      if (units_[l] > 0 && !is_mandatory(l)) chosen.push_back(l);
    }
    std::sort(chosen.begin(), chosen.end());
    return chosen;
  }
  std::vector<uint64_t> heap = heap_of(group);
  while ((limit == 0 || chosen.size() < limit) && !heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    chosen.push_back(pos_of(heap.back()));
    heap.pop_back();
  }
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

}  // namespace corral::topology
