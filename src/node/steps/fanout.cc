#include "node/steps/fanout.h"

#include <algorithm>
#include <string>

namespace corral::node {

Status check_fanout_width(size_t width) {
  if (width < 2)
    return invalid("fan-out width " + std::to_string(width) +
                   " is too small: a launch tree needs a width of at least 2");
  return {};
}

std::vector<std::pair<size_t, size_t>> fanout_chunks(size_t count, size_t width) {
  std::vector<std::pair<size_t, size_t>> out;
  if (count <= 1 || width < 2) return out;
  const size_t rest = count - 1;
  const size_t chunks = std::min(width, rest);
  const size_t base = rest / chunks, extra = rest % chunks;  // the first `extra` chunks get one more
  size_t first = 1;
  for (size_t k = 0; k < chunks; ++k) {
    size_t last = first + base + (k < extra ? 1 : 0);
    out.emplace_back(first, last);
    first = last;
  }
  return out;
}

Result<FanoutTree> FanoutTree::build(size_t nodes, size_t width) {
  if (auto st = check_fanout_width(width); !st) return st.error();
  if (nodes == 0) return invalid("fan-out tree needs at least one node (the step manager's own)");
  FanoutTree t;
  t.width_ = width;
  t.nodes_.resize(nodes);
  t.nodes_[0].end = nodes;
  // Node i's subtree is already known when i is reached, since parents precede children.
  for (size_t i = 0; i < nodes; ++i) {
    Node& n = t.nodes_[i];
    for (auto [first, last] : fanout_chunks(n.end - i, width)) {
      size_t c = i + first;
      t.nodes_[c].parent = i;
      t.nodes_[c].end = i + last;
      t.nodes_[c].level = n.level + 1;
      n.children.push_back(c);
    }
    t.depth_ = std::max(t.depth_, n.level);
  }
  return t;
}

std::optional<size_t> FanoutTree::parent(size_t i) const {
  if (i == 0) return std::nullopt;
  return nodes_.at(i).parent;
}

std::vector<std::vector<size_t>> FanoutTree::subtree_batches(size_t i) const {
  std::vector<std::vector<size_t>> out;
  for (size_t c : children(i)) {
    std::vector<size_t> batch;
    batch.reserve(nodes_[c].end - c);
    for (size_t k = c; k < nodes_[c].end; ++k) batch.push_back(k);
    out.push_back(std::move(batch));
  }
  return out;
}

}  // namespace corral::node
