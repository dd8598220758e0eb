// Which network topology, and so which placer, each partition's jobs are placed with, and
// node lists written with topology functions (switch{s1}, block{b2}, ...with{}) as plain
// hostlists. Built once when corrald starts and only read after that, so it needs no lock.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ctld/config.h"
#include "topology/topology.h"
#include "util/result.h"

namespace corral::sched {
class Scheduler;
}

namespace corral::ctld {

class TopologyRouting {
 public:
  // Loads `topology_file` (empty: no topology, every job places flat), adds one placer per
  // topology to `sched`, and writes the partitions' node lists as plain hostlists.
  // Errors name the partition or the file.
  static Result<TopologyRouting> configure(const std::string& topology_file, std::vector<PartitionConfig>& partitions,
                                           sched::Scheduler& sched);

  uint32_t placer_of(const std::string& partition) const;
  const topology::Topology* topology_of(const std::string& partition) const;  // null: none
  // `expr` may use topology functions, resolved in the partition's topology.
  Result<std::string> expand_nodes(const std::string& expr, const std::string& partition) const;
  const topology::TopologySet& topologies() const { return topo_; }

 private:
  topology::TopologySet topo_;
  std::map<std::string, uint32_t> topo_placer_;       // placer index per topology name
  std::map<std::string, uint32_t> partition_placer_;  // and per partition
  uint32_t default_placer_ = 0;
};

}  // namespace corral::ctld
