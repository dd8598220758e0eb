// The simulated cluster, resolved from a ClusterConfig: node names expanded and the
// topology file loaded.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sim/cluster_config.h"
#include "topology/topology.h"
#include "util/result.h"

namespace corral::sim {

struct Cluster {
  std::vector<std::string> nodes;  // in the order the scheduler adds them
  unsigned cores_per_node = 1;
  unsigned gpus_per_node = 0;
  std::optional<topology::Topology> topology;  // nullopt: the flat placer
  size_t nodes_outside_topology = 0;           // named in `nodes` but not in the topology: never used
};

// Errors name the bad hostlist, the topology file's problem, or a cluster without nodes.
Result<Cluster> resolve_cluster(const ClusterConfig& config);

}  // namespace corral::sim
