// Synthetic topologies of any size (fat trees, dragonflies, block systems) and the
// topology.conf text for any topology.
#include "topology/topology_generate.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "topology/topology_build.h"
#include "util/hostlist.h"

namespace corral::topology {

namespace {

constexpr const char* kGenerated = "generated";

unsigned digits(uint64_t n) {
  unsigned d = 1;
  while (n >= 10) n /= 10, ++d;
  return d;
}

// PREFIX00000 ... PREFIX(n-1), zero-padded to the widest index so names sort naturally.
std::vector<std::string> node_names(const std::string& prefix, uint64_t n) {
  std::vector<std::string> out;
  out.reserve(n);
  const unsigned width = digits(n ? n - 1 : 0);
  for (uint64_t i = 0; i < n; ++i) out.push_back(fmt::format("{}{:0{}}", prefix, i, width));
  return out;
}

std::string switch_name(unsigned level, uint64_t index) { return fmt::format("s{}-{}", level, index); }

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

Status check_prefix(const std::string& prefix) {
  if (prefix.find_first_of(",[]{}= \t") != std::string::npos)
    return invalid(fmt::format("node name prefix '{}' may not contain , [ ] {{ }} = or blanks", prefix));
  return {};
}

// Leaf switches s0-<i> holding `per_leaf` consecutive nodes each (the last may hold fewer).
void add_leaves(Topology& t, std::vector<std::string> nodes, uint64_t per_leaf) {
  const uint64_t leaves = ceil_div(nodes.size(), per_leaf);
  t.switches.reserve(t.switches.size() + leaves);
  for (uint64_t l = 0; l < leaves; ++l) {
    Switch s;
    s.name = switch_name(0, l);
    const uint64_t begin = l * per_leaf, end = std::min<uint64_t>(begin + per_leaf, nodes.size());
    s.nodes.assign(std::make_move_iterator(nodes.begin() + static_cast<ptrdiff_t>(begin)),
                   std::make_move_iterator(nodes.begin() + static_cast<ptrdiff_t>(end)));
    t.switches.push_back(std::move(s));
  }
}

// Switches of `level` over the `count` switches starting at `first`, `radix` children each.
uint64_t add_level(Topology& t, unsigned level, uint64_t first, uint64_t count, uint64_t radix) {
  const uint64_t parents = ceil_div(count, radix);
  for (uint64_t p = 0; p < parents; ++p) {
    Switch s;
    s.name = switch_name(level, p);
    for (uint64_t c = p * radix; c < std::min(count, (p + 1) * radix); ++c)
      s.children.push_back(static_cast<uint32_t>(first + c));
    t.switches.push_back(std::move(s));
  }
  return parents;
}

}  // namespace

Result<Topology> generate_fat_tree(const FatTreeSpec& spec) {
  if (spec.nodes == 0) return invalid("fat tree: the number of nodes must be at least 1");
  if (spec.leaf_nodes == 0) return invalid("fat tree: nodes per leaf switch must be at least 1");
  if (spec.levels == 0) return invalid("fat tree: levels must be at least 1 (the leaf switches)");
  if (spec.levels > 1 && spec.radix < 2)
    return invalid("fat tree: the radix (children per inner switch) must be at least 2");
  if (auto st = check_prefix(spec.prefix); !st) return st.error();
  if (spec.levels == 1 && spec.nodes > spec.leaf_nodes)
    return invalid(fmt::format("fat tree: one level is one leaf switch of {} nodes, not {}: add levels",
                               spec.leaf_nodes, spec.nodes));
  Topology t;
  t.kind = Kind::tree;
  add_leaves(t, node_names(spec.prefix, spec.nodes), spec.leaf_nodes);
  // Levels below the top group `radix` switches each; the top switch joins everything
  // below it, standing for the whole core layer.
  uint64_t first = 0, count = t.switches.size();
  for (unsigned level = 1; level < spec.levels; ++level) {
    const uint64_t next = t.switches.size();
    const bool top = level + 1 == spec.levels;
    count = add_level(t, level, first, count, top ? count : spec.radix);
    first = next;
  }
  if (auto st = t.finalize(kGenerated); !st) return st.error();
  return t;
}

Result<Topology> generate_dragonfly(const DragonflySpec& spec) {
  if (spec.groups == 0) return invalid("dragonfly: the number of groups must be at least 1");
  if (spec.switches_per_group == 0) return invalid("dragonfly: switches per group must be at least 1");
  if (spec.nodes_per_switch == 0) return invalid("dragonfly: nodes per switch must be at least 1");
  if (auto st = check_prefix(spec.prefix); !st) return st.error();
  const uint64_t leaves = uint64_t{spec.groups} * spec.switches_per_group;
  const uint64_t nodes = leaves * spec.nodes_per_switch;
  if (nodes > (uint64_t{1} << 31)) return invalid(fmt::format("dragonfly: {} nodes are too many", nodes));
  Topology t;
  t.kind = Kind::dragonfly;
  add_leaves(t, node_names(spec.prefix, nodes), spec.nodes_per_switch);
  // A group switch over each group's leaves, and one top switch joining the groups (the
  // all-to-all global links), so jobs may span groups.
  const uint64_t groups = add_level(t, 1, 0, leaves, spec.switches_per_group);
  if (groups > 1) add_level(t, 2, leaves, groups, groups);
  if (auto st = t.finalize(kGenerated); !st) return st.error();
  return t;
}

Result<Topology> generate_blocks(const BlockSpec& spec) {
  if (spec.nodes == 0) return invalid("blocks: the number of nodes must be at least 1");
  if (spec.base_block_nodes == 0) return invalid("blocks: the base block size must be at least 1");
  if (spec.nodes % spec.base_block_nodes != 0)
    return invalid(
        fmt::format("blocks: {} nodes do not divide into base blocks of {} nodes (base blocks must all be "
                    "the same size)",
                    spec.nodes, spec.base_block_nodes));
  if (auto st = check_prefix(spec.prefix); !st) return st.error();
  Topology t;
  t.kind = Kind::block;
  std::vector<std::string> nodes = node_names(spec.prefix, spec.nodes);
  const uint64_t count = spec.nodes / spec.base_block_nodes;
  t.blocks.reserve(count);
  for (uint64_t b = 0; b < count; ++b) {
    Block blk;
    blk.name = fmt::format("b{}", b);
    auto first = nodes.begin() + static_cast<ptrdiff_t>(b * spec.base_block_nodes);
    blk.nodes.assign(std::make_move_iterator(first), std::make_move_iterator(first + spec.base_block_nodes));
    t.blocks.push_back(std::move(blk));
  }
  t.block_sizes = spec.block_sizes;
  if (auto st = detail::build_blocks(t, kGenerated, 0); !st) return st.error();
  return t;
}

namespace {

std::string encode_names(const std::vector<std::string>& names) { return Hostlist(names).encode(); }

void append_tree(std::string& out, const Topology& t) {
  std::vector<std::string> params;
  if (t.kind == Kind::dragonfly) params.emplace_back("dragonfly");
  if (t.topo_optional) params.emplace_back("TopoOptional");
  if (!params.empty()) out += fmt::format("TopologyParam={}\n", fmt::join(params, ","));
  for (const Switch& s : t.switches) {
    if (s.children.empty()) {
      out += fmt::format("SwitchName={} Nodes={}", s.name, encode_names(s.nodes));
    } else {
      std::vector<std::string> children;
      children.reserve(s.children.size());
      for (uint32_t c : s.children) children.push_back(t.switches[c].name);
      out += fmt::format("SwitchName={} Switches={}", s.name, encode_names(children));
    }
    if (s.link_speed) out += fmt::format(" LinkSpeed={}", s.link_speed);
    out += '\n';
  }
}

void append_blocks(std::string& out, const Topology& t) {
  for (const Block& b : t.blocks) out += fmt::format("BlockName={} Nodes={}\n", b.name, encode_names(b.nodes));
  if (!t.block_sizes.empty()) out += fmt::format("BlockSizes={}\n", fmt::join(t.block_sizes, ","));
}

void append_torus(std::string& out, const Topology& t) {
  // Runs of nodes whose names give their coordinates go on TorusNodes= lines, the others
  // on NodeName= Coords= lines; the order of the nodes is kept.
  std::vector<std::string> run;
  auto flush = [&] {
    if (!run.empty()) out += fmt::format("TorusNodes={}\n", encode_names(run));
    run.clear();
  };
  for (const TorusNode& n : t.torus) {
    if (coords_from_name(n.name) == n.coord) {
      run.push_back(n.name);
      continue;
    }
    flush();
    out += fmt::format("NodeName={} Coords={},{},{}\n", n.name, n.coord[0], n.coord[1], n.coord[2]);
  }
  flush();
}

}  // namespace

std::string to_topology_conf(const Topology& topo) {
  std::string out =
      fmt::format("# topology.conf: {} topology '{}' written by corral\n", kind_name(topo.kind), topo.name);
  switch (topo.kind) {
    case Kind::tree:
    case Kind::dragonfly:
      append_tree(out, topo);
      break;
    case Kind::block:
      append_blocks(out, topo);
      break;
    case Kind::torus:
      append_torus(out, topo);
      break;
    case Kind::flat:
      out += "# flat: no network structure, nodes are one line\n";
      break;
  }
  return out;
}

}  // namespace corral::topology
