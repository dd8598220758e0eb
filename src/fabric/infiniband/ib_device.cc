#include "fabric/infiniband/ib_device.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fabric/infiniband/parse_unsigned.h"

namespace corral::fabric::infiniband {

using nlohmann::json;

bool IbDevice::active() const {
  return std::any_of(ports.begin(), ports.end(), [](const IbPort& p) { return p.active(); });
}

std::string IbDevice::port_summary() const {
  if (ports.empty()) return "no Infiniband port";
  std::string out;
  for (const auto& p : ports) {
    if (!out.empty()) out += ", ";
    out += fmt::format("port {} {}", p.num, p.state.empty() ? "state unknown" : p.state);
    if (!p.phys_state.empty()) out += fmt::format(" ({})", p.phys_state);
  }
  return out;
}

json to_json(const IbDevice& d) {
  json ports = json::array();
  for (const auto& p : d.ports)
    ports.push_back({{"port", p.num},
                     {"state", p.state},
                     {"phys_state", p.phys_state},
                     {"rate", p.rate},
                     {"lid", p.lid},
                     {"subnet_prefix", fmt::format("{:016x}", p.subnet_prefix)}});
  return {{"name", d.name},
          {"slot", d.slot.str()},
          {"vendor_id", fmt::format("0x{:04x}", d.vendor_id)},
          {"device_id", fmt::format("0x{:04x}", d.device_id)},
          {"vendor", d.vendor},
          {"model", d.model},
          {"node_guid", d.node_guid},
          {"sys_image_guid", d.sys_image_guid},
          {"firmware", d.firmware},
          {"numa_node", d.numa_node},
          {"fabric", d.fabric},
          {"sriov_total", d.sriov_total},
          {"sriov_enabled", d.sriov_enabled},
          {"ports", ports}};
}

namespace {

constexpr size_t kMaxText = 256;
constexpr size_t kMaxPorts = 16;

Status text(const json& j, const char* key, std::string& out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string() || it->get_ref<const std::string&>().size() > kMaxText)
    return invalid(fmt::format("infiniband device: '{}' must be a string of at most {} bytes", key, kMaxText));
  out = it->get<std::string>();
  return {};
}

Status number(const json& j, const char* key, uint64_t max, uint64_t& out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_unsigned() || it->get<uint64_t>() > max)
    return invalid(fmt::format("infiniband device: '{}' must be a number up to {}", key, max));
  out = it->get<uint64_t>();
  return {};
}

Status hex16(const json& j, const char* key, uint16_t& out) {
  std::string s;
  if (auto st = text(j, key, s); !st) return st;
  auto v = s.size() == 6 && s.rfind("0x", 0) == 0 ? parse_unsigned(s, 16, 0xffff) : std::nullopt;
  if (!v) return invalid(fmt::format("infiniband device: '{}' is not 0xNNNN", key));
  out = static_cast<uint16_t>(*v);
  return {};
}

Result<IbPort> port_from_json(const json& j) {
  if (!j.is_object()) return invalid("infiniband device: a port is not an object");
  IbPort p;
  uint64_t v = 0;
  if (auto st = number(j, "port", 255, v); !st) return st.error();
  p.num = static_cast<unsigned>(v);
  if (auto st = number(j, "lid", 0xffff, v); !st) return st.error();
  p.lid = static_cast<uint32_t>(v);
  for (auto [key, out] : {std::pair{"state", &p.state}, {"phys_state", &p.phys_state}, {"rate", &p.rate}})
    if (auto st = text(j, key, *out); !st) return st.error();
  std::string prefix;
  if (auto st = text(j, "subnet_prefix", prefix); !st) return st.error();
  auto v16 = prefix.size() == 16 ? parse_unsigned(prefix, 16) : std::nullopt;
  if (!v16) return invalid("infiniband device: 'subnet_prefix' is not 16 hex digits");
  p.subnet_prefix = *v16;
  p.link_layer = "InfiniBand";
  return p;
}

}  // namespace

Result<IbDevice> device_from_json(const json& j) {
  if (!j.is_object()) return invalid("infiniband device: not an object");
  IbDevice d;
  std::string slot;
  for (auto [key, out] : {std::pair{"name", &d.name},
                          {"slot", &slot},
                          {"vendor", &d.vendor},
                          {"model", &d.model},
                          {"node_guid", &d.node_guid},
                          {"sys_image_guid", &d.sys_image_guid},
                          {"firmware", &d.firmware},
                          {"fabric", &d.fabric}})
    if (auto st = text(j, key, *out); !st) return st.error();
  auto s = parse_pci_slot(slot);
  if (!s) return invalid("infiniband device: " + s.message());
  d.slot = *s;
  if (auto st = hex16(j, "vendor_id", d.vendor_id); !st) return st.error();
  if (auto st = hex16(j, "device_id", d.device_id); !st) return st.error();
  auto numa = j.find("numa_node");
  if (numa == j.end() || !numa->is_number_integer() || numa->get<int64_t>() < -1 || numa->get<int64_t>() > 4096)
    return invalid("infiniband device: 'numa_node' must be a number from -1 to 4096");
  d.numa_node = numa->get<int>();
  uint64_t v = 0;
  if (auto st = number(j, "sriov_total", 4096, v); !st) return st.error();
  d.sriov_total = static_cast<unsigned>(v);
  if (auto st = number(j, "sriov_enabled", 4096, v); !st) return st.error();
  d.sriov_enabled = static_cast<unsigned>(v);
  auto ports = j.find("ports");
  if (ports == j.end() || !ports->is_array() || ports->size() > kMaxPorts)
    return invalid(fmt::format("infiniband device: 'ports' must be a list of at most {}", kMaxPorts));
  for (const auto& pj : *ports) {
    auto p = port_from_json(pj);
    if (!p) return p.error();
    d.ports.push_back(std::move(*p));
  }
  return d;
}

void sort_by_slot(std::vector<IbDevice>& devices) {
  std::stable_sort(devices.begin(), devices.end(),
                   [](const IbDevice& a, const IbDevice& b) { return a.slot < b.slot; });
}

}  // namespace corral::fabric::infiniband
