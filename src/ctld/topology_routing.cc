#include "ctld/topology_routing.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "placers/placers.h"
#include "sched/scheduler.h"

namespace corral::ctld {

Result<TopologyRouting> TopologyRouting::configure(const std::string& topology_file,
                                                   std::vector<PartitionConfig>& partitions, sched::Scheduler& sched) {
  TopologyRouting r;
  if (!topology_file.empty()) {
    auto set = topology::load_topology(topology_file);
    if (!set) return invalid("topology: " + set.message());
    r.topo_ = std::move(*set);
  }
  for (const topology::Topology& t : r.topo_.topologies)
    r.topo_placer_[t.name] = sched.add_placer(topology::make_placer(t));
  if (const topology::Topology* d = r.topo_.default_topology()) r.default_placer_ = r.topo_placer_[d->name];
  for (PartitionConfig& p : partitions) {
    const topology::Topology* t = r.topo_.default_topology();
    if (!p.topology.empty()) {
      t = r.topo_.find(p.topology);
      if (!t)
        return invalid(fmt::format("partition {}: topology '{}' is not defined in {}", p.name, p.topology,
                                   topology_file.empty() ? "[topology].file (none set)" : topology_file));
    }
    r.partition_placer_[p.name] = t ? r.topo_placer_[t->name] : 0;
    if (t && topology::has_topology_functions(p.nodes)) {
      auto plain = topology::expand_topology_functions(p.nodes, *t);
      if (!plain) return invalid(fmt::format("partition {}: nodes: {}", p.name, plain.message()));
      p.nodes = *plain;
    }
  }
  if (!r.topo_.topologies.empty())
    spdlog::info("topology: {} topolog{} from {}, default {}", r.topo_.topologies.size(),
                 r.topo_.topologies.size() == 1 ? "y" : "ies", topology_file, r.topo_.default_topology()->name);
  return r;
}

uint32_t TopologyRouting::placer_of(const std::string& partition) const {
  auto it = partition_placer_.find(partition);
  return it == partition_placer_.end() ? default_placer_ : it->second;
}

const topology::Topology* TopologyRouting::topology_of(const std::string& partition) const {
  const uint32_t placer = placer_of(partition);
  for (const auto& [name, index] : topo_placer_)
    if (index == placer) return topo_.find(name);
  return nullptr;
}

Result<std::string> TopologyRouting::expand_nodes(const std::string& expr, const std::string& partition) const {
  if (!topology::has_topology_functions(expr)) return expr;
  const topology::Topology* t = topology_of(partition);
  if (!t)
    return invalid(
        fmt::format("{}: switch{{}}, block{{}} and ...with{{}} need a topology, and none is configured", expr));
  return topology::expand_topology_functions(expr, *t);
}

}  // namespace corral::ctld
