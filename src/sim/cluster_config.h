// The simulated cluster (`corral sim --config FILE`): a small TOML file
//
//   nodes = "node[0-255]"       # hostlist; optional when a topology lists the nodes
//   cores_per_node = 1          # default 1
//   gpus_per_node = 0           # default 0
//   topology = "topology.conf"  # optional; relative to the config file's directory
//   topology_name = "fat"       # optional: which topology of a topology.yaml set
//
// The same keys can be given as command-line flags, so the file itself is optional.
#pragma once

#include <string>
#include <string_view>

#include "util/result.h"

namespace corral::sim {

struct ClusterConfig {
  std::string nodes;  // hostlist expression; empty: the topology's nodes
  unsigned cores_per_node = 1;
  unsigned gpus_per_node = 0;
  std::string topology;       // path of a topology.conf / topology.yaml; empty: flat
  std::string topology_name;  // empty: the set's default topology
};

// `file` names the file in messages and anchors a relative `topology` path.
Result<ClusterConfig> parse_cluster_config(std::string_view text, const std::string& file);
Result<ClusterConfig> load_cluster_config(const std::string& path);

}  // namespace corral::sim
