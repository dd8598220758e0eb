// Network topologies in the controller: loading [topology].file, one placer per topology,
// the topology each partition places on, hostlist functions in node lists, and the
// GetTopology answer behind `corral topo show`.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "ctld/controller.h"
#include "placers/placers.h"
#include "util/hostlist.h"

namespace corral::ctld {

using nlohmann::json;

Status Controller::configure_topology() {
  if (!cfg_.topology_file.empty()) {
    auto set = topology::load_topology(cfg_.topology_file);
    if (!set) return invalid("topology: " + set.message());
    topo_ = std::move(*set);
  }
  for (const topology::Topology& t : topo_.topologies)
    topo_placer_[t.name] = sched_.add_placer(topology::make_placer(t));
  if (const topology::Topology* d = topo_.default_topology()) default_placer_ = topo_placer_[d->name];
  for (PartitionConfig& p : cfg_.partitions) {
    const topology::Topology* t = topo_.default_topology();
    if (!p.topology.empty()) {
      t = topo_.find(p.topology);
      if (!t)
        return invalid(fmt::format("partition {}: topology '{}' is not defined in {}", p.name, p.topology,
                                   cfg_.topology_file.empty() ? "[topology].file (none set)" : cfg_.topology_file));
    }
    partition_placer_[p.name] = t ? topo_placer_[t->name] : 0;
    if (t && topology::has_topology_functions(p.nodes)) {
      auto plain = topology::expand_topology_functions(p.nodes, *t);
      if (!plain) return invalid(fmt::format("partition {}: nodes: {}", p.name, plain.message()));
      p.nodes = *plain;
    }
  }
  if (!topo_.topologies.empty())
    spdlog::info("topology: {} topolog{} from {}, default {}", topo_.topologies.size(),
                 topo_.topologies.size() == 1 ? "y" : "ies", cfg_.topology_file, topo_.default_topology()->name);
  return {};
}

uint32_t Controller::placer_of(const std::string& partition) const {
  auto it = partition_placer_.find(partition);
  return it == partition_placer_.end() ? default_placer_ : it->second;
}

const topology::Topology* Controller::topology_of(const std::string& partition) const {
  const uint32_t placer = placer_of(partition);
  for (const auto& [name, index] : topo_placer_)
    if (index == placer) return topo_.find(name);
  return nullptr;
}

Result<std::string> Controller::expand_nodes(const std::string& expr, const std::string& partition) const {
  if (!topology::has_topology_functions(expr)) return expr;
  const topology::Topology* t = topology_of(partition);
  if (!t)
    return invalid(
        fmt::format("{}: switch{{}}, block{{}} and ...with{{}} need a topology, and "
                    "none is configured",
                    expr));
  return topology::expand_topology_functions(expr, *t);
}

namespace {

struct UseCounts {
  unsigned total = 0, idle = 0, allocated = 0, mixed = 0, unavailable = 0;
};

json unit_json(const std::string& name, std::string_view type, unsigned level, const std::string& parent,
               const std::vector<std::string>& nodes, const UseCounts& u) {
  return {{"name", name},
          {"type", type},
          {"level", level},
          {"parent", parent.empty() ? json(nullptr) : json(parent)},
          {"nodes", Hostlist(nodes).encode()},
          {"total", u.total},
          {"idle", u.idle},
          {"allocated", u.allocated},
          {"mixed", u.mixed},
          {"unavailable", u.unavailable}};
}

}  // namespace

Status Controller::get_topology(const v1::GetTopologyRequest& req, v1::GetTopologyReply* rep) {
  std::lock_guard lk(mu_);
  auto count = [&](const std::vector<std::string>& nodes) {
    UseCounts u;
    for (const auto& name : nodes) {
      ++u.total;
      auto it = node_index_.find(name);
      const topology::NodeState* st = it == node_index_.end() ? nullptr : &sched_.node_state(it->second);
      if (!st || !st->usable)
        ++u.unavailable;
      else if (st->jobs == 0)
        ++u.idle;
      else if (st->exclusive_held || st->free_cores.count() == 0)
        ++u.allocated;
      else
        ++u.mixed;
    }
    return u;
  };
  json out = {{"topologies", json::array()}};
  const topology::Topology* def = topo_.default_topology();
  for (const topology::Topology& t : topo_.topologies) {
    if (!req.name().empty() && t.name != req.name()) continue;
    json units = json::array();
    for (const topology::Switch& s : t.switches) {
      auto nodes = t.nodes_under_switch(*t.find_switch(s.name));
      std::string parent = s.parent ? t.switches[*s.parent].name : "";
      units.push_back(unit_json(s.name, "switch", s.level, parent, nodes, count(nodes)));
    }
    for (const topology::Block& b : t.blocks)
      units.push_back(unit_json(b.name, "block", 0, "", b.nodes, count(b.nodes)));
    if (t.kind == topology::Kind::flat || t.kind == topology::Kind::torus) {
      auto nodes = t.all_nodes();
      units.push_back(unit_json(t.name, topology::kind_name(t.kind), 0, "", nodes, count(nodes)));
    }
    out["topologies"].push_back(
        {{"name", t.name}, {"kind", topology::kind_name(t.kind)}, {"default", &t == def}, {"units", std::move(units)}});
  }
  if (!req.name().empty() && out["topologies"].empty())
    return Error{Errc::not_found, fmt::format("no topology named '{}'", req.name())};
  rep->set_json(out.dump());
  return {};
}

}  // namespace corral::ctld
