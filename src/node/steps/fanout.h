// The fan-out tree used to launch wide steps: the step manager's node (index 0) sends one
// message per child, each carrying the list of nodes that child must serve, and so on
// down. Results travel back up the same tree and are merged at every hop.
//
// Layout: a node that receives the list L (itself first) keeps L[0] and cuts L[1..] into
// min(W, |L|-1) contiguous chunks of near-equal size; the head of each chunk is a child
// and the chunk is exactly what that child receives. A relay therefore needs only the
// list it was sent and W (forward_batches), and every subtree is a contiguous range of
// the original order. Balanced chunks give the minimal depth a W-ary tree allows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "util/result.h"

namespace corral::node {

// The width when none is configured (corrald's [steps] fanout-width default too).
inline constexpr uint32_t kDefaultFanoutWidth = 32;

// Widths below 2 would make a chain, not a tree: refused with a message naming `width`.
Status check_fanout_width(size_t width);

// Half-open ranges [first, last) of the positions 1..count-1 of a received list, one per
// child, in order. Empty when count <= 1. `width` must be >= 2.
std::vector<std::pair<size_t, size_t>> fanout_chunks(size_t count, size_t width);

// The relay's view: `received` is the list this node was sent (itself first); returns one
// batch per child, the child first, then everything below it.
template <class T>
Result<std::vector<std::vector<T>>> forward_batches(const std::vector<T>& received, size_t width) {
  if (auto st = check_fanout_width(width); !st) return st.error();
  std::vector<std::vector<T>> out;
  for (auto [first, last] : fanout_chunks(received.size(), width))
    out.emplace_back(received.begin() + static_cast<std::ptrdiff_t>(first),
                     received.begin() + static_cast<std::ptrdiff_t>(last));
  return out;
}

// The whole tree over nodes 0..size-1, for the step manager (and tests) that need to
// know it globally: who is whose parent, how deep it goes, what each node forwards.
class FanoutTree {
 public:
  // `nodes` >= 1 (the root is the step manager's own node), `width` >= 2.
  static Result<FanoutTree> build(size_t nodes, size_t width);

  size_t size() const { return nodes_.size(); }
  size_t width() const { return width_; }
  const std::vector<size_t>& children(size_t i) const { return nodes_.at(i).children; }
  std::optional<size_t> parent(size_t i) const;                // nullopt for the root
  size_t level(size_t i) const { return nodes_.at(i).level; }  // hops from the root
  size_t depth() const { return depth_; }                      // hops to the deepest node
  // Node i and everything below it: the contiguous range [i, subtree_end(i)).
  size_t subtree_end(size_t i) const { return nodes_.at(i).end; }
  // What node i sends: one batch per child, the child first, then its whole subtree.
  std::vector<std::vector<size_t>> subtree_batches(size_t i) const;

 private:
  struct Node {
    size_t parent = 0;
    size_t end = 0;
    size_t level = 0;
    std::vector<size_t> children;
  };
  std::vector<Node> nodes_;
  size_t width_ = 0;
  size_t depth_ = 0;
};

// Merges per-node results up the tree: every node folds its children's merged results
// into its own, children in order, as the relays do when the replies come back; returns
// the root's value. values[i] is node i's own result.
template <class R, class Combine>
Result<R> reduce_up(const FanoutTree& tree, std::vector<R> values, Combine&& combine) {
  if (values.size() != tree.size())
    return invalid("fan-out merge got " + std::to_string(values.size()) + " results for a tree of " +
                   std::to_string(tree.size()) + " nodes");
  // A child's index is always above its parent's, so walking down from the last index
  // finishes every subtree before its parent is merged.
  for (size_t i = values.size(); i-- > 0;) {
    for (size_t c : tree.children(i)) values[i] = combine(std::move(values[i]), std::move(values[c]));
  }
  return std::move(values.front());
}

}  // namespace corral::node
