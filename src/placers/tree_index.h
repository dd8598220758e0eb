// The switch hierarchy of a tree or dragonfly topology, bound to the pool's node indices,
// with aggregates kept current node change by node change: per leaf switch a histogram of
// its nodes by free cores (all nodes that may take work, and the idle ones), per switch the
// totals, and per free-core count the leaves having such a node. A placement then looks at
// leaves and switches, not at every node.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "placers/placement.h"

namespace corral::topology {

struct Topology;

// Nodes of one leaf by free core count: sorted (free cores, node count) pairs, no zero counts.
class FreeHistogram {
 public:
  // Adds `delta` (+1/-1) nodes with `free` cores; returns whether the bucket appeared or vanished.
  bool add(unsigned free, int delta);
  const std::vector<std::pair<unsigned, unsigned>>& buckets() const { return buckets_; }

 private:
  std::vector<std::pair<unsigned, unsigned>> buckets_;
};

class TreeIndex {
 public:
  static constexpr uint32_t kNone = ~0u;

  // A switch of the placer's tree: a real switch, or a virtual root joining the trees of a
  // forest that may be spanned (TopoOptional, or top switches linked by another switch).
  struct Group {
    uint32_t topo_switch = kNone;  // index in Topology::switches; kNone when virtual
    uint32_t parent = kNone;
    unsigned level = 0;                     // 0 = leaf
    uint32_t leaf_begin = 0, leaf_end = 0;  // its leaves: positions [begin, end)
    // Over the nodes below that may take work (usable, not held exclusively):
    uint32_t eligible = 0, idle = 0;
    uint64_t free_cores = 0;
  };
  struct Leaf {
    uint32_t group = 0;            // its Group
    std::vector<uint32_t> nodes;   // bound pool indices, ascending
    FreeHistogram eligible, idle;  // by free cores
    uint32_t busy = 0;             // usable nodes running a job
  };

  explicit TreeIndex(const Topology& topo);

  void add_node(uint32_t node, const std::string& name, const NodeState& st);
  void update(uint32_t node, const NodeState& st);

  const std::vector<Group>& groups() const { return groups_; }
  const std::vector<Leaf>& leaves() const { return leaves_; }
  const std::vector<uint32_t>& roots() const { return roots_; }
  const std::vector<std::vector<uint32_t>>& by_level() const { return by_level_; }
  // The leaf position of a pool node, or kNone if the topology does not know it.
  uint32_t leaf_of(uint32_t node) const { return node < nodes_.size() ? nodes_[node].leaf : kNone; }
  // The lowest group containing both (kNone if in different trees).
  uint32_t common_group(uint32_t a, uint32_t b) const;

  // Per node, as last seen.
  struct NodeInfo {
    uint32_t leaf = kNone;
    unsigned free = 0;             // free cores
    unsigned cores = 0, gpus = 0;  // configured
    uint64_t memory_mb = 0;
    bool eligible = false, idle = false, busy = false;
  };
  const NodeInfo& node(uint32_t n) const { return nodes_[n]; }
  size_t node_count() const { return nodes_.size(); }

  // Calls `visit(leaf)` for the leaves having an eligible (or, `idle_only`, an idle) node
  // with exactly `free` free cores, partly used leaves first (whole leaves stay free for jobs
  // that need them), each kind by position, until `visit` returns true. Returns whether it did.
  template <class Visit>
  bool for_leaves_with(unsigned free, bool idle_only, Visit&& visit) const {
    if (free >= with_free_.size()) return false;
    const Bucket& b = with_free_[free][idle_only ? 1 : 0];
    if (b.count == 0) return false;
    for (bool whole : {false, true}) {
      for (size_t w = 0; w < b.bits.size(); ++w) {
        uint64_t word = b.bits[w] & (whole ? whole_[w] : ~whole_[w]);
        for (; word != 0; word &= word - 1) {
          auto bit = static_cast<unsigned>(__builtin_ctzll(word));
          if (visit(static_cast<uint32_t>(w * 64 + bit))) return true;
        }
      }
    }
    return false;
  }
  bool listed(unsigned free, bool idle_only, uint32_t leaf) const;  // for tests
  unsigned max_free_bucket() const { return static_cast<unsigned>(with_free_.size()); }

 private:
  void build(const Topology& topo);
  void join_forest(const Topology& topo, const std::vector<uint32_t>& tops);
  uint32_t add_subtree(const Topology& topo, uint32_t sw, const std::vector<std::vector<uint32_t>>& kids_of);
  void contribute(uint32_t leaf, const NodeInfo& info, int sign);
  void file(uint32_t leaf, unsigned free, bool idle_only, int delta);

  // Leaves as bits: one set per free core count and kind (eligible, idle).
  struct Bucket {
    std::vector<uint64_t> bits;
    uint32_t count = 0;
  };

  std::vector<Group> groups_;
  std::vector<Leaf> leaves_;
  std::vector<uint32_t> roots_;
  std::vector<std::vector<uint32_t>> by_level_;
  std::vector<unsigned> depth_;  // per group, 0 at a root
  std::unordered_map<std::string, uint32_t> leaf_by_node_;
  std::vector<NodeInfo> nodes_;
  std::vector<std::array<Bucket, 2>> with_free_;  // [free cores][idle only]
  std::vector<uint64_t> whole_;                   // leaves with no busy node
};

}  // namespace corral::topology
