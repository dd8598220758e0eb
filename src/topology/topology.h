// The network topology model: what topology.conf / topology.yaml describe (Slurm's syntax,
// see docs/admin.md "Topology"), by node and switch names. Placers bind it to the pool's
// node indices as nodes appear (Placer::node_added); the controller uses it for hostlist
// functions, CORRAL_TOPOLOGY_ADDR and `corral topo show`.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "util/result.h"

namespace corral::topology {

enum class Kind { flat, tree, dragonfly, block, torus };
std::string_view kind_name(Kind k);

struct Switch {
  std::string name;
  std::vector<uint32_t> children;  // indices into Topology::switches (inner switch)
  std::vector<std::string> nodes;  // leaf switch: its nodes, in file order
  std::optional<uint32_t> parent;  // the first switch listing this one in Switches=
  unsigned level = 0;              // 0 = leaf; a parent is one above its highest child
  uint64_t link_speed = 0;         // LinkSpeed=, 0 if not given (recorded, not used)
  unsigned line = 0;               // where it was defined, for messages
};

struct Block {
  std::string name;
  std::vector<std::string> nodes;  // in file order
  unsigned line = 0;
};

// A chassis: nodes that share a near-node storage appliance (a Rabbit) with its own
// capacity. Independent of the network kind; the storage issue schedules storage per
// chassis. topology.conf: `ChassisName=c0 Nodes=node[0-15] Storage=38TB`.
struct Chassis {
  std::string name;
  std::vector<std::string> nodes;
  uint64_t storage_bytes = 0;  // 0: not given
  unsigned line = 0;
};

struct TorusNode {
  std::string name;
  std::array<int, 3> coord{};
};

struct Topology {
  std::string name = "default";
  Kind kind = Kind::flat;
  // tree / dragonfly
  std::vector<Switch> switches;
  bool topo_optional = false;  // TopologyParam=TopoOptional: jobs may span unconnected trees
  // block
  std::vector<Block> blocks;          // base blocks, in file order (which is adjacency order)
  std::vector<unsigned> block_sizes;  // BlockSizes=, in nodes per block level, ascending, the
                                      // first the base block size; default: the base block
                                      // size times 1, 2, 4, ... up to all blocks
  // torus
  std::vector<TorusNode> torus;  // coordinates given or derived from the names
  // near-node storage groups, any kind
  std::vector<Chassis> chassis;
  // flat: no structure
  std::vector<std::string> flat_nodes;  // flat / torus with names only: the node list

  // Lookups, valid after finalize() (the parsers call it).
  std::optional<uint32_t> find_switch(const std::string& name) const;
  std::optional<uint32_t> find_block(const std::string& name) const;
  std::optional<uint32_t> leaf_of(const std::string& node) const;  // switch or block index
  std::optional<uint32_t> chassis_of(const std::string& node) const;
  std::vector<std::string> nodes_under_switch(uint32_t sw) const;  // all leaves below
  std::vector<std::string> all_nodes() const;
  // Derived indices (names to switch/block, node to leaf). Returns an error for
  // inconsistencies: unknown child switch, cycles, a node on two leaves, duplicate names.
  Status finalize(const std::string& file);

  std::map<std::string, uint32_t> switch_index, block_index, node_leaf, node_chassis;
};

// Several named topologies (topology.yaml) or one (topology.conf); partitions name one.
struct TopologySet {
  std::vector<Topology> topologies;
  std::string cluster_default;  // name of the default one
  const Topology* find(const std::string& name) const;
  const Topology* default_topology() const;
};

// Parsers. `file` is used in error messages: "FILE:LINE: problem". Nothing is returned
// on error. load_topology picks the syntax by extension (.yaml/.yml or else conf).
Result<TopologySet> parse_topology_conf(const std::string& text, const std::string& file);
Result<TopologySet> parse_topology_yaml(const std::string& text, const std::string& file);
Result<TopologySet> load_topology(const std::string& path);

// Hostlist functions: expands switch{s1}, block{b1}, switchwith{node}, blockwith{node}
// inside a node list expression (mixed with ordinary hostlist text, comma separated) to a
// plain hostlist. Unknown switch/block/node names are errors. Without functions, the input
// is returned unchanged.
Result<std::string> expand_topology_functions(const std::string& expr, const Topology& topo);
bool has_topology_functions(const std::string& expr);

// CORRAL_TOPOLOGY_ADDR / _PATTERN for a node, Slurm's format: switch names from the top
// switch down to the leaf, then the node, joined by '.', and the pattern "switch.switch.node".
// Block topologies give "block.node" style addresses; flat ones just the node name.
struct TopologyAddr {
  std::string addr, pattern;
};
TopologyAddr topology_addr(const Topology& topo, const std::string& node);

// Torus helpers: coordinates from the last three base-36 characters of a name, and a
// node's position along a 3-D Hilbert curve covering the given extent.
std::optional<std::array<int, 3>> coords_from_name(const std::string& name);
uint64_t hilbert_index(const std::array<int, 3>& coord, unsigned bits_per_axis);

}  // namespace corral::topology
