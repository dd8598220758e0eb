// The GetTopology answer behind `corral topo show`: each topology's switches and blocks
// with how many of their nodes are idle, allocated, mixed or unavailable.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "ctld/controller.h"
#include "util/hostlist.h"

namespace corral::ctld {

using nlohmann::json;

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
  MutexLock lk(mu_);
  auto count = [&](const std::vector<std::string>& nodes) {
    mu_.assert_held();  // called right here
    UseCounts u;
    for (const auto& name : nodes) {
      ++u.total;
      const NodeEntry* n = nodes_.find(name);
      const topology::NodeState* st = n == nullptr ? nullptr : &sched_.node_state(n->index);
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
  const topology::TopologySet& topo = routing_.topologies();
  const topology::Topology* def = topo.default_topology();
  for (const topology::Topology& t : topo.topologies) {
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
