// The topology model's derived indices and lookups.
#include "topology/topology.h"

#include <algorithm>
#include <functional>

#include <fmt/format.h>

namespace corral::topology {

std::string_view kind_name(Kind k) {
  switch (k) {
    case Kind::flat:
      return "flat";
    case Kind::tree:
      return "tree";
    case Kind::dragonfly:
      return "dragonfly";
    case Kind::block:
      return "block";
    case Kind::torus:
      return "torus";
  }
  return "flat";
}

std::optional<uint32_t> Topology::find_switch(const std::string& n) const {
  auto it = switch_index.find(n);
  if (it == switch_index.end()) return std::nullopt;
  return it->second;
}

std::optional<uint32_t> Topology::find_block(const std::string& n) const {
  auto it = block_index.find(n);
  if (it == block_index.end()) return std::nullopt;
  return it->second;
}

std::optional<uint32_t> Topology::leaf_of(const std::string& node) const {
  auto it = node_leaf.find(node);
  if (it == node_leaf.end()) return std::nullopt;
  return it->second;
}

std::optional<uint32_t> Topology::chassis_of(const std::string& node) const {
  auto it = node_chassis.find(node);
  if (it == node_chassis.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> Topology::nodes_under_switch(uint32_t sw) const {
  std::vector<std::string> out;
  std::vector<uint32_t> todo{sw};
  std::vector<bool> seen(switches.size(), false);
  while (!todo.empty()) {
    uint32_t s = todo.back();
    todo.pop_back();
    if (s >= switches.size() || seen[s]) continue;
    seen[s] = true;
    const Switch& x = switches[s];
    out.insert(out.end(), x.nodes.begin(), x.nodes.end());
    // Children pushed in reverse so nodes come out in file order.
    for (auto it = x.children.rbegin(); it != x.children.rend(); ++it) todo.push_back(*it);
  }
  return out;
}

std::vector<std::string> Topology::all_nodes() const {
  std::vector<std::string> out;
  switch (kind) {
    case Kind::tree:
    case Kind::dragonfly:
      for (const Switch& s : switches) out.insert(out.end(), s.nodes.begin(), s.nodes.end());
      break;
    case Kind::block:
      for (const Block& b : blocks) out.insert(out.end(), b.nodes.begin(), b.nodes.end());
      break;
    case Kind::torus:
      for (const TorusNode& t : torus) out.push_back(t.name);
      break;
    case Kind::flat:
      out = flat_nodes;
      break;
  }
  return out;
}

namespace {

std::string where(const std::string& file, unsigned line) { return line ? fmt::format("{}:{}", file, line) : file; }

// Levels: a leaf is 0, a parent one above its highest child. Detects cycles.
Status assign_levels(Topology& t, const std::string& file) {
  enum Mark : uint8_t { unseen, active, done };
  std::vector<Mark> mark(t.switches.size(), unseen);
  std::function<Status(uint32_t)> visit = [&](uint32_t s) -> Status {
    if (mark[s] == done) return {};
    if (mark[s] == active)
      return invalid(fmt::format("{}: switch {} is its own ancestor (a cycle in Switches=)",
                                 where(file, t.switches[s].line), t.switches[s].name));
    mark[s] = active;
    unsigned level = 0;
    for (uint32_t c : t.switches[s].children) {
      if (auto st = visit(c); !st) return st;
      level = std::max(level, t.switches[c].level + 1);
    }
    t.switches[s].level = level;
    mark[s] = done;
    return {};
  };
  for (uint32_t s = 0; s < t.switches.size(); ++s)
    if (auto st = visit(s); !st) return st;
  return {};
}

Status index_switches(Topology& t, const std::string& file) {
  for (uint32_t i = 0; i < t.switches.size(); ++i) {
    Switch& s = t.switches[i];
    if (!t.switch_index.emplace(s.name, i).second)
      return invalid(fmt::format("{}: switch {} is defined twice", where(file, s.line), s.name));
    s.parent.reset();
  }
  for (uint32_t i = 0; i < t.switches.size(); ++i) {
    for (uint32_t c : t.switches[i].children) {
      if (c >= t.switches.size())
        return invalid(
            fmt::format("{}: switch {} has an unknown child", where(file, t.switches[i].line), t.switches[i].name));
      if (!t.switches[c].parent) t.switches[c].parent = i;
    }
    for (const std::string& n : t.switches[i].nodes) {
      auto [it, fresh] = t.node_leaf.emplace(n, i);
      if (!fresh && it->second != i)
        return invalid(fmt::format("{}: node {} is on switch {} and on switch {}", where(file, t.switches[i].line), n,
                                   t.switches[it->second].name, t.switches[i].name));
    }
  }
  return assign_levels(t, file);
}

Status index_blocks(Topology& t, const std::string& file) {
  for (uint32_t i = 0; i < t.blocks.size(); ++i) {
    const Block& b = t.blocks[i];
    if (!t.block_index.emplace(b.name, i).second)
      return invalid(fmt::format("{}: block {} is defined twice", where(file, b.line), b.name));
    for (const std::string& n : b.nodes) {
      auto [it, fresh] = t.node_leaf.emplace(n, i);
      if (!fresh && it->second != i)
        return invalid(fmt::format("{}: node {} is in block {} and in block {}", where(file, b.line), n,
                                   t.blocks[it->second].name, b.name));
    }
  }
  if (t.block_sizes.empty() && !t.blocks.empty()) {
    const size_t base = t.blocks.front().nodes.size();
    for (size_t n = 1; n <= t.blocks.size(); n *= 2) t.block_sizes.push_back(static_cast<unsigned>(n * base));
  }
  return {};
}

Status index_chassis(Topology& t, const std::string& file) {
  std::map<std::string, uint32_t> names;
  for (uint32_t i = 0; i < t.chassis.size(); ++i) {
    const Chassis& c = t.chassis[i];
    if (!names.emplace(c.name, i).second)
      return invalid(fmt::format("{}: chassis {} is defined twice", where(file, c.line), c.name));
    for (const std::string& n : c.nodes) {
      auto [it, fresh] = t.node_chassis.emplace(n, i);
      if (!fresh && it->second != i)
        return invalid(fmt::format("{}: node {} is in chassis {} and in chassis {}", where(file, c.line), n,
                                   t.chassis[it->second].name, c.name));
    }
  }
  return {};
}

}  // namespace

Status Topology::finalize(const std::string& file) {
  switch_index.clear();
  block_index.clear();
  node_leaf.clear();
  node_chassis.clear();
  if (auto st = index_switches(*this, file); !st) return st;
  if (auto st = index_blocks(*this, file); !st) return st;
  return index_chassis(*this, file);
}

const Topology* TopologySet::find(const std::string& n) const {
  for (const Topology& t : topologies)
    if (t.name == n) return &t;
  return nullptr;
}

const Topology* TopologySet::default_topology() const {
  if (const Topology* t = find(cluster_default)) return t;
  return topologies.empty() ? nullptr : &topologies.front();
}

}  // namespace corral::topology
