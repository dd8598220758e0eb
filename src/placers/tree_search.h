// Choosing leaf switches for one request on a TreeIndex: what each leaf can give the request,
// the fewest leaves any tree of the forest needs, the lowest switch reaching that count and
// the leaves under it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "placers/placement.h"
#include "placers/tree_index.h"

namespace corral::topology {

// A request in units a leaf can be measured in.
struct Need {
  bool spread = false;  // exactly `units` nodes, each holding at least `thr` tasks
  unsigned thr = 1;
  uint64_t units = 0;  // spread: nodes; otherwise tasks
};

// What nodes can give one request: now (`nodes` given) or on an empty machine (null).
class Capacity {
 public:
  Capacity(const TreeIndex& index, const Request& req, const std::vector<NodeState>* nodes);
  Capacity(const Capacity&) = delete;
  Capacity& operator=(const Capacity&) = delete;

  bool allowed(uint32_t n) const;   // known to the topology and in the allowed set
  unsigned cap(uint32_t n) const;   // tasks node n can take; 0 if not allowed
  unsigned free(uint32_t n) const;  // free cores, for best fit
  uint64_t unit(uint32_t n, const Need& need) const {
    unsigned c = cap(n);
    return need.spread ? (c >= need.thr ? 1 : 0) : c;
  }
  // Per leaf position: units the leaf can give.
  std::vector<uint64_t> leaf_units(const Need& need) const;

 private:
  bool from_histogram() const;
  std::vector<uint64_t> units_from_histograms(const Need& need) const;

  const TreeIndex& index_;
  const Request& req_;
  const std::vector<NodeState>* nodes_;
  // Sorted, unique; empty: all. Points at the request's list when it is already so.
  const std::vector<uint32_t>* allowed_ = nullptr;
  std::vector<uint32_t> own_allowed_;
  // A bit per node, made once a placement asks about many nodes (a scan of every leaf):
  // then each question costs one load instead of a binary search of a long list.
  mutable std::vector<bool> mask_;
  mutable uint32_t asked_ = 0;
};

class LeafChooser {
 public:
  // `mandatory`: leaves of required nodes, sorted and unique.
  LeafChooser(const TreeIndex& index, std::vector<uint64_t> units, uint64_t need, std::vector<uint32_t> mandatory);

  // The fewest leaves a tree that may hold the job needs (a job spans one tree, or a group
  // joining trees); nullopt if none can hold it.
  std::optional<unsigned> fewest() const;
  // Whether one leaf can hold the job (cheaper than fewest() == 1).
  bool fits_one_leaf() const;
  // The lowest-level group holding the job on exactly `k` leaves: ties go to the one with
  // the least spare units, then the lower position.
  std::optional<uint32_t> lowest_group(unsigned k) const;
  // `k` leaves of `group` holding the job: the mandatory ones, then those that hold the
  // most, the last a best fit (preferring a sibling of one already chosen). Ascending.
  std::vector<uint32_t> pick(uint32_t group, unsigned k) const;
  // The `limit` leaves of `group` giving the most units (mandatory ones first), ascending.
  std::vector<uint32_t> roomiest(uint32_t group, unsigned limit) const;
  // Groups that may hold the job alone (roots containing the mandatory leaves).
  std::vector<uint32_t> candidate_roots() const;

  uint64_t sum(uint32_t group) const;
  uint64_t units(uint32_t leaf) const { return units_[leaf]; }
  uint64_t need() const { return need_; }
  std::optional<unsigned> fewest_in(uint32_t group) const;

 private:
  bool is_mandatory(uint32_t leaf) const;
  bool holds_mandatory(uint32_t group) const;
  // Max-heap keys (units << 32 | ~position) of the non-mandatory leaves of `group` with units.
  std::vector<uint64_t> heap_of(uint32_t group) const;

  const TreeIndex& index_;
  std::vector<uint64_t> units_;
  std::vector<uint64_t> prefix_;  // prefix_[i] = sum of units_[0..i)
  uint64_t need_;
  std::vector<uint32_t> mandatory_;
  uint64_t mandatory_units_ = 0;
  uint32_t lca_ = TreeIndex::kNone;  // lowest group holding every mandatory leaf
  bool split_ = false;               // mandatory leaves in trees no group joins
};

}  // namespace corral::topology
