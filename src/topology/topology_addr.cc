// CORRAL_TOPOLOGY_ADDR / CORRAL_TOPOLOGY_ADDR_PATTERN for one node, in the format the
// Slurm topology guide gives for SLURM_TOPOLOGY_ADDR(_PATTERN).
#include <algorithm>

#include "topology/topology.h"

namespace corral::topology {

namespace {

TopologyAddr node_only(const std::string& node) { return {node, "node"}; }

TopologyAddr tree_addr(const Topology& topo, const std::string& node) {
  auto leaf = topo.leaf_of(node);
  if (!leaf || *leaf >= topo.switches.size()) return node_only(node);
  // From the leaf up its first parents; bounded so a malformed model cannot loop.
  std::vector<uint32_t> chain;
  for (std::optional<uint32_t> s = *leaf; s && chain.size() <= topo.switches.size(); s = topo.switches[*s].parent)
    chain.push_back(*s);
  std::reverse(chain.begin(), chain.end());
  TopologyAddr out;
  for (uint32_t s : chain) {
    out.addr += topo.switches[s].name + ".";
    out.pattern += "switch.";
  }
  out.addr += node;
  out.pattern += "node";
  return out;
}

}  // namespace

TopologyAddr topology_addr(const Topology& topo, const std::string& node) {
  switch (topo.kind) {
    case Kind::tree:
    case Kind::dragonfly:
      return tree_addr(topo, node);
    case Kind::block: {
      auto b = topo.leaf_of(node);
      if (!b || *b >= topo.blocks.size()) return node_only(node);
      return {topo.blocks[*b].name + "." + node, "block.node"};
    }
    case Kind::flat:
    case Kind::torus:
      break;
  }
  return node_only(node);
}

}  // namespace corral::topology
