#include "fabric/infiniband/ib_sysfs.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "fabric/infiniband/parse_unsigned.h"

namespace corral::fabric::infiniband {
namespace fs = std::filesystem;
namespace {

constexpr std::streamsize kMaxAttr = 4096;
constexpr unsigned kMaxPortNumber = 255;

// A sysfs attribute without its trailing newline; empty when missing or unreadable.
std::string attr(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return {};
  std::string s(static_cast<size_t>(kMaxAttr), '\0');
  in.read(s.data(), kMaxAttr);
  s.resize(static_cast<size_t>(in.gcount()));
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// "4: ACTIVE" -> "ACTIVE"; a value without the number stays as it is.
std::string after_colon(const std::string& s) {
  size_t c = s.find(": ");
  return c == std::string::npos ? s : s.substr(c + 2);
}

uint64_t number(const std::string& s, int base, uint64_t fallback) {
  return parse_unsigned(s, base).value_or(fallback);
}

std::vector<IbPort> read_ports(const fs::path& dev, std::string& why_none) {
  std::vector<IbPort> ports;
  std::error_code ec;
  std::vector<unsigned> nums;
  for (const auto& e : fs::directory_iterator(dev / "ports", ec)) {
    uint64_t n = number(e.path().filename().string(), 10, 0);
    if (n >= 1 && n <= kMaxPortNumber) nums.push_back(static_cast<unsigned>(n));
  }
  std::sort(nums.begin(), nums.end());
  std::set<std::string> layers;
  for (unsigned n : nums) {
    const fs::path p = dev / "ports" / std::to_string(n);
    IbPort port;
    port.num = n;
    port.link_layer = attr(p / "link_layer");
    if (port.link_layer != "InfiniBand") {
      layers.insert(port.link_layer.empty() ? "unknown" : port.link_layer);
      continue;
    }
    port.state = after_colon(attr(p / "state"));
    port.phys_state = after_colon(attr(p / "phys_state"));
    port.rate = attr(p / "rate");
    port.lid = static_cast<uint32_t>(number(attr(p / "lid"), 16, 0) & 0xffff);
    if (auto prefix = gid_subnet_prefix(attr(p / "gids" / "0"))) port.subnet_prefix = *prefix;
    ports.push_back(std::move(port));
  }
  if (ports.empty()) {
    why_none = layers.empty() ? "no ports" : "link layer ";
    for (const auto& l : layers) why_none += (why_none.back() == ' ' ? "" : "/") + l;
  }
  return ports;
}

}  // namespace

Result<Discovery> discover(const DiscoveryOptions& opts, const Fabrics& fabrics) {
  Discovery out;
  const fs::path cls = fs::path(opts.sysfs_root) / "class" / "infiniband";
  std::error_code ec;
  if (!fs::is_directory(cls, ec)) return out;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(cls, ec)) {
    if (names.size() == kMaxIbDevices)
      return invalid(fmt::format("{}: more than {} Infiniband devices", cls.string(), kMaxIbDevices));
    names.push_back(e.path().filename().string());
  }
  if (ec) return io_error(fmt::format("cannot list {}: {}", cls.string(), ec.message()));
  std::sort(names.begin(), names.end());
  std::set<std::pair<uint16_t, uint16_t>> ids;
  for (const auto& name : names) {
    const fs::path dev = cls / name;
    const fs::path pci = fs::canonical(dev / "device", ec);
    if (ec) {
      out.notes.push_back(fmt::format("{}: no PCI function (device link)", name));
      continue;
    }
    auto slot = parse_pci_slot(pci.filename().string());
    if (!slot) {
      out.notes.push_back(fmt::format("{}: {}", name, slot.message()));
      continue;
    }
    if (fs::exists(pci / "physfn", ec)) {
      const auto pf = fs::canonical(pci / "physfn", ec);
      out.notes.push_back(fmt::format("{}: a virtual function of {}", name, ec ? "its PF" : pf.filename().string()));
      continue;
    }
    std::string why;
    IbDevice d;
    d.ports = read_ports(dev, why);
    if (d.ports.empty()) {
      out.notes.push_back(fmt::format("{}: {}: not an Infiniband device", name, why));
      continue;
    }
    d.name = name;
    d.slot = *slot;
    d.vendor_id = static_cast<uint16_t>(number(attr(pci / "vendor"), 16, 0));
    d.device_id = static_cast<uint16_t>(number(attr(pci / "device"), 16, 0));
    d.node_guid = attr(dev / "node_guid");
    d.sys_image_guid = attr(dev / "sys_image_guid");
    d.firmware = attr(dev / "fw_ver");
    const std::string numa = attr(pci / "numa_node");
    d.numa_node = numa.empty() || numa == "-1" ? -1 : static_cast<int>(number(numa, 10, 0) & 0xfff);
    d.sriov_total = static_cast<unsigned>(number(attr(pci / "sriov_totalvfs"), 10, 0) & 0xfff);
    d.sriov_enabled = static_cast<unsigned>(number(attr(pci / "sriov_numvfs"), 10, 0) & 0xfff);
    d.fabric = fabrics.of_prefix(d.ports.front().subnet_prefix);
    ids.insert({d.vendor_id, d.device_id});
    out.devices.push_back(std::move(d));
  }
  if (!out.devices.empty()) {
    auto names_db = lookup_pci_names(opts.pci_ids, ids);
    if (!names_db) return names_db.error();
    for (auto& d : out.devices) {
      auto v = names_db->vendors.find(d.vendor_id);
      auto m = names_db->devices.find({d.vendor_id, d.device_id});
      d.vendor = v != names_db->vendors.end() ? v->second : fmt::format("0x{:04x}", d.vendor_id);
      d.model = m != names_db->devices.end() ? m->second : fmt::format("0x{:04x}", d.device_id);
    }
  }
  sort_by_slot(out.devices);
  return out;
}

}  // namespace corral::fabric::infiniband
