// Topologies written for sites and benchmarks: from `ibnetdiscover` output (as
// slurmibtopology does) and synthetic fat trees, dragonflies and block systems of any size.
// `corral topo generate` prints them as topology.conf text.
#pragma once

#include <string>

#include "topology/topology.h"
#include "util/result.h"

namespace corral::topology {

// Node names are PREFIX followed by a zero-padded index ("node00042"), switch names
// s<level>-<index>, block names b<index>; generated names sort naturally.
struct FatTreeSpec {
  unsigned nodes = 0;        // total compute nodes
  unsigned leaf_nodes = 32;  // nodes per leaf switch
  unsigned radix = 32;       // children per inner switch
  unsigned levels = 3;       // switch levels including the leaves; one top switch
  std::string prefix = "node";
};
struct DragonflySpec {
  unsigned groups = 0;
  unsigned switches_per_group = 0;
  unsigned nodes_per_switch = 0;
  std::string prefix = "node";
};
struct BlockSpec {
  unsigned nodes = 0;
  unsigned base_block_nodes = 16;
  std::vector<unsigned> block_sizes;  // empty: default sizes
  std::string prefix = "node";
};

Result<Topology> generate_fat_tree(const FatTreeSpec& spec);
Result<Topology> generate_dragonfly(const DragonflySpec& spec);
Result<Topology> generate_blocks(const BlockSpec& spec);

// Parses `ibnetdiscover` output: switches become leaf switches with their hosts (by the
// host's node description, first word) or inner switches of the switches they link to.
Result<Topology> from_ibnetdiscover(const std::string& text, const std::string& file);

// topology.conf text for `topo` (tree, dragonfly, block, torus), which parse_topology_conf
// reads back to the same topology.
std::string to_topology_conf(const Topology& topo);

}  // namespace corral::topology
