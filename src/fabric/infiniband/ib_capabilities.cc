#include "fabric/infiniband/ib_capabilities.h"

#include <algorithm>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace corral::fabric::infiniband {

std::vector<IbCapability> capabilities_of(const std::vector<IbDevice>& devices) {
  std::vector<IbDevice> sorted = devices;
  sort_by_slot(sorted);
  std::map<std::tuple<std::string, std::string, std::string>, IbCapability> by_key;
  for (const auto& d : sorted) {
    auto& c = by_key[{d.model, d.vendor, d.fabric}];
    c.name = d.model;
    c.vendor = d.vendor;
    c.fabric = d.fabric;
    if (!d.active()) c.inactive.push_back(c.count);
    ++c.count;
  }
  std::vector<IbCapability> out;
  for (auto& [k, c] : by_key) out.push_back(std::move(c));
  return out;
}

nlohmann::json to_json(const std::vector<IbCapability>& caps) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& c : caps) {
    nlohmann::json e = {
        {"type", "Infiniband"}, {"name", c.name}, {"vendor", c.vendor}, {"fabric", c.fabric}, {"count", c.count}};
    if (!c.inactive.empty()) e["inactive_devices"] = c.inactive;
    out.push_back(std::move(e));
  }
  return out;
}

namespace {

// What `big` has that `small` lacks, when `small` is `big` with cards missing; empty when
// `small` has anything `big` has not (then it is another kind of node, not a broken one).
std::string missing_from(const std::vector<IbCapability>& small, const std::vector<IbCapability>& big) {
  std::string missing;
  for (const auto& s : small) {
    auto it = std::find_if(big.begin(), big.end(), [&](const IbCapability& b) {
      return b.name == s.name && b.vendor == s.vendor && b.fabric == s.fabric;
    });
    if (it == big.end() || it->count < s.count) return {};
  }
  for (const auto& b : big) {
    auto it = std::find_if(small.begin(), small.end(), [&](const IbCapability& s) {
      return b.name == s.name && b.vendor == s.vendor && b.fabric == s.fabric;
    });
    unsigned have = it == small.end() ? 0 : it->count;
    if (have < b.count)
      missing += fmt::format("{}{} x{} on {}", missing.empty() ? "" : ", ", b.name, b.count - have, b.fabric);
  }
  return missing;
}

// A class that is another, larger class with devices missing is a set of broken nodes.
void flag_missing_hardware(std::vector<IbNodeClass>& classes) {
  for (auto& c : classes)
    for (const auto& other : classes) {
      if (&other == &c || other.nodes.size() <= c.nodes.size()) continue;
      std::string missing = missing_from(c.hardware, other.hardware);
      if (missing.empty()) continue;
      for (const auto& n : c.nodes) {
        auto& note = c.degraded[n];
        note += fmt::format("{}missing {} (compared with {} nodes like {})", note.empty() ? "" : "; ", missing,
                            other.nodes.size(), other.nodes.front());
      }
      break;
    }
}

}  // namespace

std::vector<IbNodeClass> node_classes(const std::map<std::string, std::vector<IbCapability>>& by_node) {
  std::map<std::vector<IbCapability>, IbNodeClass> classes;
  for (const auto& [node, caps] : by_node) {
    std::vector<IbCapability> hw = caps;
    std::string down;
    for (auto& c : hw) {
      for (unsigned i : c.inactive)
        down += fmt::format("{}{} on {}: instance {} inactive", down.empty() ? "" : "; ", c.name, c.fabric, i);
      c.inactive.clear();
    }
    auto& cls = classes[hw];
    cls.hardware = hw;
    cls.nodes.push_back(node);
    if (!down.empty()) cls.degraded[node] = down;
  }
  std::vector<IbNodeClass> out;
  for (auto& [k, c] : classes) out.push_back(std::move(c));
  flag_missing_hardware(out);
  return out;
}

}  // namespace corral::fabric::infiniband
