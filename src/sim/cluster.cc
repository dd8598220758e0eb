#include "sim/cluster.h"

#include <algorithm>
#include <unordered_set>

#include <fmt/format.h>

#include "util/hostlist.h"

namespace corral::sim {
namespace {

Result<topology::Topology> load_one_topology(const ClusterConfig& config) {
  auto set = topology::load_topology(config.topology);
  if (!set) return set.error();
  const topology::Topology* topo =
      config.topology_name.empty() ? set->default_topology() : set->find(config.topology_name);
  if (!topo && !config.topology_name.empty())
    return invalid(fmt::format("{}: no topology named '{}'", config.topology, config.topology_name));
  if (!topo) return invalid(fmt::format("{}: defines no topology", config.topology));
  return *topo;
}

size_t count_outside(const std::vector<std::string>& nodes, const topology::Topology& topo) {
  auto known = topo.all_nodes();
  std::unordered_set<std::string> in_topo(known.begin(), known.end());
  return static_cast<size_t>(
      std::count_if(nodes.begin(), nodes.end(), [&](const auto& n) { return !in_topo.contains(n); }));
}

}  // namespace

Result<Cluster> resolve_cluster(const ClusterConfig& config) {
  Cluster c;
  c.cores_per_node = config.cores_per_node;
  c.gpus_per_node = config.gpus_per_node;
  if (c.cores_per_node == 0) return invalid("cores_per_node must be at least 1");
  if (!config.topology.empty()) {
    auto topo = load_one_topology(config);
    if (!topo) return topo.error();
    c.topology = std::move(*topo);
  }
  if (!config.nodes.empty()) {
    auto hl = Hostlist::parse(config.nodes);
    if (!hl) return invalid(fmt::format("nodes '{}': {}", config.nodes, hl.message()));
    c.nodes = hl->uniq().hosts();
  } else if (c.topology) {
    c.nodes = c.topology->all_nodes();
  }
  if (c.nodes.empty())
    return invalid(
        "the cluster has no nodes: give nodes = \"HOSTLIST\" (or --nodes), or a "
        "topology file that lists them");
  if (c.topology) c.nodes_outside_topology = count_outside(c.nodes, *c.topology);
  return c;
}

}  // namespace corral::sim
