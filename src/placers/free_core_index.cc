#include "placers/free_core_index.h"

namespace corral::topology {

void FreeCoreIndex::update(uint32_t node, const NodeState& state) {
  if (node >= filed_under_.size()) filed_under_.resize(node + 1, kAbsent);
  unsigned& old = filed_under_[node];
  if (old != kAbsent) {
    buckets_[old].erase(node);
    total_free_ -= old;
    --indexed_;
    old = kAbsent;
  }
  if (!state.usable || state.exclusive_held) return;
  auto free = static_cast<unsigned>(state.free_cores.count());
  if (free >= buckets_.size()) buckets_.resize(free + 1);
  buckets_[free].insert(node);
  total_free_ += free;
  ++indexed_;
  old = free;
}

unsigned FreeCoreIndex::max_free() const {
  for (size_t n = buckets_.size(); n-- > 0;) {
    if (!buckets_[n].empty()) return static_cast<unsigned>(n);
  }
  return 0;
}

}  // namespace corral::topology
