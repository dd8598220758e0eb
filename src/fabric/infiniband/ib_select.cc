#include "fabric/infiniband/ib_select.h"

#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

namespace corral::fabric::infiniband {
namespace {

std::string where(const SelectContext& ctx) { return ctx.node.empty() ? "" : " on " + ctx.node; }

std::string models_of(const std::vector<IbDevice>& devices) {
  std::set<std::string> models;
  for (const auto& d : devices) models.insert(fmt::format("\"{}\" ({})", d.model, d.fabric));
  std::string out;
  for (const auto& m : models) out += (out.empty() ? "" : ", ") + m;
  return out.empty() ? "no Infiniband devices" : out;
}

// The devices of one model on one fabric, in slot order (the input is sorted).
std::vector<const IbDevice*> group(const std::vector<IbDevice>& devices, const std::string& model,
                                   const std::string& fabric) {
  std::vector<const IbDevice*> out;
  for (const auto& d : devices)
    if (d.model == model && d.fabric == fabric) out.push_back(&d);
  return out;
}

}  // namespace

Result<std::vector<IbChoice>> select_devices(const std::vector<IbDevice>& unsorted,
                                             const std::vector<IbRequest>& requests, const SelectContext& ctx) {
  if (requests.size() > kMaxIbInterfaces)
    return invalid(fmt::format("infiniband: {} interfaces asked for; at most {}", requests.size(), kMaxIbInterfaces));
  std::vector<IbDevice> devices = unsorted;
  sort_by_slot(devices);
  const std::string default_fabric = ctx.fabrics ? ctx.fabrics->default_name() : std::string(kDefaultFabric);
  std::vector<IbChoice> chosen;
  std::set<std::tuple<std::string, std::string, unsigned, int64_t>>
      seen;                                             // model, fabric, instance, vf id (-1: the PF)
  std::map<std::string, std::pair<int, int>> vf_kinds;  // slot -> (explicit, automatic) counts
  for (size_t i = 0; i < requests.size(); ++i) {
    const IbRequest& r = requests[i];
    const std::string fabric = r.fabric.empty() ? default_fabric : r.fabric;
    const std::string what = fmt::format("\"{}\" instance {} on fabric {}", r.device, r.instance, fabric);
    if (ctx.fabrics && !ctx.fabrics->known(fabric)) {
      std::string names;
      for (const auto& n : ctx.fabrics->names()) names += (names.empty() ? "" : ", ") + n;
      return invalid(fmt::format("infiniband: unknown fabric {} (the fabrics are: {})", fabric, names));
    }
    if (!r.partition.empty() && r.partition != "job" && ctx.partition_known && !ctx.partition_known(r.partition))
      return invalid(
          fmt::format("infiniband: unknown partition {} for {} (a configured partition, or 'job' for "
                      "one of the job's own)",
                      r.partition, what));
    bool any_model = false;
    for (const auto& d : devices) any_model = any_model || d.model == r.device;
    if (!any_model)
      return invalid(
          fmt::format("infiniband: no device \"{}\"{} (there: {})", r.device, where(ctx), models_of(devices)));
    auto g = group(devices, r.device, fabric);
    if (g.empty())
      return invalid(fmt::format("infiniband: no \"{}\" on fabric {}{} (there: {})", r.device, fabric, where(ctx),
                                 models_of(devices)));
    if (r.instance >= g.size())
      return invalid(fmt::format("infiniband: {}: there {} {} of them{} (instances 0-{})", what,
                                 g.size() == 1 ? "is" : "are", g.size(), where(ctx), g.size() - 1));
    const IbDevice& d = *g[r.instance];
    if (!d.active())
      return invalid(fmt::format("infiniband: {} ({} at {}){} is not active: {}", what, d.name, d.slot.str(),
                                 where(ctx), d.port_summary()));
    // Automatic VF ids never repeat; the PF itself and explicit ids can.
    const int64_t vf_key = r.vf ? static_cast<int64_t>(*r.vf) : -1;
    if ((!r.virtual_function || r.vf) && !seen.insert({r.device, fabric, r.instance, vf_key}).second)
      return invalid(fmt::format("infiniband: {}{} is asked for more than once", what,
                                 r.vf ? fmt::format(" virtual function {}", *r.vf) : std::string()));
    if (r.virtual_function) {
      const std::string slot = d.slot.str();
      if (d.sriov_total == 0)
        return invalid(fmt::format("infiniband: {} ({}){} has no virtual functions (SR-IOV is off on it)", what, d.name,
                                   where(ctx)));
      // Per physical function the ids are all given or none (corral numbers those from 0).
      auto& kinds = vf_kinds[slot];
      (r.vf ? kinds.first : kinds.second)++;
      if (kinds.first > 0 && kinds.second > 0)
        return invalid(
            fmt::format("infiniband: {} mixes explicit and automatic virtual function ids; give every "
                        "virtual function on it an id, or none",
                        what));
      if (r.vf && *r.vf >= d.sriov_total)
        return invalid(fmt::format("infiniband: {} virtual function {}: the device has {} (ids 0-{})", what, *r.vf,
                                   d.sriov_total, d.sriov_total - 1));
      if (!r.vf && static_cast<unsigned>(kinds.second) > d.sriov_total)
        return invalid(fmt::format("infiniband: {}: {} virtual functions asked for; the device has {}", what,
                                   kinds.second, d.sriov_total));
    }
    IbChoice c;
    c.request = i;
    c.device = d;
    c.fabric = fabric;
    c.vf = r.vf;
    c.partition = r.partition;
    if (r.virtual_function && !r.vf) c.vf = static_cast<unsigned>(vf_kinds[d.slot.str()].second - 1);
    chosen.push_back(std::move(c));
  }
  return chosen;
}

}  // namespace corral::fabric::infiniband
