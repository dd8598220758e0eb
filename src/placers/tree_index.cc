#include "placers/tree_index.h"

#include <algorithm>
#include <numeric>

#include "topology/topology.h"

namespace corral::topology {

bool FreeHistogram::add(unsigned free, int delta) {
  auto it =
      std::lower_bound(buckets_.begin(), buckets_.end(), free, [](const auto& b, unsigned f) { return b.first < f; });
  if (it == buckets_.end() || it->first != free) {
    if (delta <= 0) return false;  // nothing filed there: a caller bug, ignore
    buckets_.insert(it, {free, static_cast<unsigned>(delta)});
    return true;
  }
  if (delta < 0 && it->second <= static_cast<unsigned>(-delta)) {
    buckets_.erase(it);
    return true;
  }
  it->second = static_cast<unsigned>(static_cast<int>(it->second) + delta);
  return false;
}

namespace {

// Switches linked through any Switches= listing share a component: a job may span them
// through their common switch even when the placer's tree (first parents) splits them.
class Components {
 public:
  explicit Components(size_t n) : up_(n) { std::iota(up_.begin(), up_.end(), 0u); }
  uint32_t find(uint32_t x) {
    while (up_[x] != x) x = up_[x] = up_[up_[x]];
    return x;
  }
  void join(uint32_t a, uint32_t b) { up_[find(a)] = find(b); }

 private:
  std::vector<uint32_t> up_;
};

}  // namespace

TreeIndex::TreeIndex(const Topology& topo) { build(topo); }

void TreeIndex::build(const Topology& topo) {
  const auto& sws = topo.switches;
  std::vector<uint32_t> tops;
  for (uint32_t s = 0; s < sws.size(); ++s) {
    if (!sws[s].parent) tops.push_back(s);
  }
  join_forest(topo, tops);
  depth_.assign(groups_.size(), 0);
  // Parents are created after their children; walk from the roots down by id order reversed.
  for (uint32_t g = static_cast<uint32_t>(groups_.size()); g-- > 0;) {
    if (groups_[g].parent != kNone) depth_[g] = depth_[groups_[g].parent] + 1;
  }
  for (uint32_t g = 0; g < groups_.size(); ++g) {
    const Group& x = groups_[g];
    if (x.parent == kNone) roots_.push_back(g);
    if (by_level_.size() <= x.level) by_level_.resize(x.level + 1);
    by_level_[x.level].push_back(g);
  }
  whole_.assign((leaves_.size() + 63) / 64, ~uint64_t{0});
  for (uint32_t l = 0; l < leaves_.size(); ++l) {
    const Switch& sw = sws[groups_[leaves_[l].group].topo_switch];
    for (const std::string& n : sw.nodes) leaf_by_node_.emplace(n, l);
  }
}

void TreeIndex::join_forest(const Topology& topo, const std::vector<uint32_t>& tops) {
  const auto& sws = topo.switches;
  Components comp(sws.size());
  std::vector<std::vector<uint32_t>> kids_of(sws.size());
  for (uint32_t s = 0; s < sws.size(); ++s) {
    for (uint32_t c : sws[s].children) {
      if (c >= sws.size()) continue;
      comp.join(s, c);
      if (sws[c].parent == s) kids_of[s].push_back(c);
    }
  }
  // Trees of one component are laid out side by side so a virtual root covers a range.
  std::vector<uint32_t> order;  // components in order of their first top switch
  std::vector<std::vector<uint32_t>> members;
  for (uint32_t t : tops) {
    uint32_t c = topo.topo_optional ? 0u : comp.find(t);
    auto it = std::find(order.begin(), order.end(), c);
    if (it == order.end()) {
      order.push_back(c);
      members.emplace_back();
      it = order.end() - 1;
    }
    members[static_cast<size_t>(it - order.begin())].push_back(t);
  }
  for (const auto& trees : members) {
    auto first_leaf = static_cast<uint32_t>(leaves_.size());
    std::vector<uint32_t> made;
    for (uint32_t t : trees) {
      uint32_t g = add_subtree(topo, t, kids_of);
      if (g != kNone) made.push_back(g);
    }
    if (made.size() < 2) continue;
    Group root;
    root.leaf_begin = first_leaf;
    root.leaf_end = static_cast<uint32_t>(leaves_.size());
    for (uint32_t g : made) root.level = std::max(root.level, groups_[g].level + 1);
    auto id = static_cast<uint32_t>(groups_.size());
    groups_.push_back(root);
    for (uint32_t g : made) groups_[g].parent = id;
  }
}

// Adds switch `sw` and what is below it; kNone if no node is below it.
uint32_t TreeIndex::add_subtree(const Topology& topo, uint32_t sw, const std::vector<std::vector<uint32_t>>& kids_of) {
  const Switch& s = topo.switches[sw];
  auto first_leaf = static_cast<uint32_t>(leaves_.size());
  std::vector<uint32_t> made;
  auto add_leaf = [&] {
    auto g = static_cast<uint32_t>(groups_.size());
    Group leaf;
    leaf.topo_switch = sw;
    leaf.leaf_begin = static_cast<uint32_t>(leaves_.size());
    leaf.leaf_end = leaf.leaf_begin + 1;
    groups_.push_back(leaf);
    leaves_.push_back(Leaf{g, {}, {}, {}, 0});
    return g;
  };
  if (!s.nodes.empty()) {
    uint32_t g = add_leaf();
    if (kids_of[sw].empty()) return g;
    made.push_back(g);  // a switch with nodes and switches: its nodes form a leaf below it
  }
  for (uint32_t c : kids_of[sw]) {
    uint32_t g = add_subtree(topo, c, kids_of);
    if (g != kNone) made.push_back(g);
  }
  if (made.empty()) return kNone;
  Group inner;
  inner.topo_switch = sw;
  inner.leaf_begin = first_leaf;
  inner.leaf_end = static_cast<uint32_t>(leaves_.size());
  for (uint32_t g : made) inner.level = std::max(inner.level, groups_[g].level + 1);
  auto id = static_cast<uint32_t>(groups_.size());
  groups_.push_back(inner);
  for (uint32_t g : made) groups_[g].parent = id;
  return id;
}

uint32_t TreeIndex::common_group(uint32_t a, uint32_t b) const {
  while (depth_[a] > depth_[b]) a = groups_[a].parent;
  while (depth_[b] > depth_[a]) b = groups_[b].parent;
  while (a != b) {
    a = groups_[a].parent;
    b = groups_[b].parent;
    if (a == kNone || b == kNone) return kNone;
  }
  return a;
}

bool TreeIndex::listed(unsigned free, bool idle_only, uint32_t leaf) const {
  if (free >= with_free_.size()) return false;
  const Bucket& b = with_free_[free][idle_only ? 1 : 0];
  return (b.bits[leaf / 64] >> (leaf % 64)) & 1;
}

void TreeIndex::file(uint32_t leaf, unsigned free, bool idle_only, int delta) {
  Leaf& l = leaves_[leaf];
  bool changed = (idle_only ? l.idle : l.eligible).add(free, delta);
  if (!changed) return;
  const size_t words = (leaves_.size() + 63) / 64;
  while (with_free_.size() <= free) {
    with_free_.emplace_back();
    for (Bucket& b : with_free_.back()) b.bits.assign(words, 0);
  }
  Bucket& b = with_free_[free][idle_only ? 1 : 0];
  const uint64_t bit = uint64_t{1} << (leaf % 64);
  if (delta > 0) {
    b.bits[leaf / 64] |= bit;
    ++b.count;
  } else {
    b.bits[leaf / 64] &= ~bit;
    --b.count;
  }
}

// Adds (sign +1) or removes (-1) a node's share of the leaf's and its switches' totals.
void TreeIndex::contribute(uint32_t leaf, const NodeInfo& info, int sign) {
  uint32_t& busy = leaves_[leaf].busy;
  busy += static_cast<uint32_t>(sign * int{info.busy});
  const uint64_t bit = uint64_t{1} << (leaf % 64);
  whole_[leaf / 64] = busy == 0 ? whole_[leaf / 64] | bit : whole_[leaf / 64] & ~bit;
  for (uint32_t g = leaves_[leaf].group; g != kNone; g = groups_[g].parent) {
    Group& x = groups_[g];
    if (info.eligible) {
      x.eligible += static_cast<uint32_t>(sign);
      x.free_cores += static_cast<uint64_t>(static_cast<int64_t>(sign) * info.free);
    }
    if (info.idle) x.idle += static_cast<uint32_t>(sign);
  }
}

void TreeIndex::add_node(uint32_t node, const std::string& name, const NodeState& st) {
  if (nodes_.size() <= node) nodes_.resize(node + 1);
  auto it = leaf_by_node_.find(name);
  if (it == leaf_by_node_.end() || nodes_[node].leaf != kNone) return;
  NodeInfo& info = nodes_[node];
  info.leaf = it->second;
  info.cores = st.cores;
  info.gpus = st.gpus;
  info.memory_mb = st.memory_mb;
  auto& list = leaves_[info.leaf].nodes;
  list.insert(std::upper_bound(list.begin(), list.end(), node), node);
  update(node, st);  // from "unusable, nothing free", which counts for nothing
}

void TreeIndex::update(uint32_t node, const NodeState& st) {
  if (node >= nodes_.size() || nodes_[node].leaf == kNone) return;
  NodeInfo& info = nodes_[node];
  NodeInfo now = info;
  now.free = static_cast<unsigned>(st.free_cores.count());
  now.eligible = st.usable && !st.exclusive_held;
  now.idle = now.eligible && st.jobs == 0;
  now.busy = st.usable && st.jobs > 0;
  if (now.free == info.free && now.eligible == info.eligible && now.idle == info.idle && now.busy == info.busy) {
    return;
  }
  const uint32_t leaf = info.leaf;
  if (info.eligible) file(leaf, info.free, false, -1);
  if (info.idle) file(leaf, info.free, true, -1);
  contribute(leaf, info, -1);
  contribute(leaf, now, +1);
  if (now.eligible) file(leaf, now.free, false, +1);
  if (now.idle) file(leaf, now.free, true, +1);
  info = now;
}

}  // namespace corral::topology
