// Nodes grouped by how many free cores they have, so a best fit for a small job is a walk
// over a few buckets instead of a scan of every node (100k-node clusters, thousands of
// placements a second).
#pragma once

#include <cstdint>
#include <set>
#include <vector>

#include "placers/placement.h"

namespace corral::topology {

class FreeCoreIndex {
 public:
  // Files `node` under its current free core count, or removes it when it cannot take new
  // work (not usable, or held by an exclusive job). Call after every change to the node.
  void update(uint32_t node, const NodeState& state);

  // Calls `visit(node)` for the indexed nodes with at least `min_free` free cores, fewest
  // free cores first, then ascending index, until `visit` returns true. Returns whether it did.
  template <class Visit>
  bool find_from(unsigned min_free, Visit&& visit) const {
    for (size_t n = min_free; n < buckets_.size(); ++n) {
      for (uint32_t node : buckets_[n]) {
        if (visit(node)) return true;
      }
    }
    return false;
  }

  unsigned max_free() const;  // most free cores on one indexed node (0 if none)
  uint64_t total_free() const { return total_free_; }
  size_t size() const { return indexed_; }

 private:
  static constexpr unsigned kAbsent = ~0u;
  std::vector<std::set<uint32_t>> buckets_;  // by free core count
  std::vector<unsigned> filed_under_;        // per node: its bucket, or kAbsent
  uint64_t total_free_ = 0;
  size_t indexed_ = 0;
};

}  // namespace corral::topology
