#include "fabric/infiniband/pci_names.h"

#include <fstream>

#include <fmt/format.h>

#include "fabric/infiniband/parse_unsigned.h"

namespace corral::fabric::infiniband {
namespace {

// "15b3  Mellanox Technologies" (after any leading tabs): the id and the name.
bool id_and_name(const std::string& line, size_t at, uint16_t& id, std::string& name) {
  if (line.size() < at + 6) return false;
  auto v = parse_unsigned(std::string_view(line).substr(at, 4), 16, 0xffff);
  if (!v || line.find_first_of("xX", at) < at + 4) return false;
  size_t start = line.find_first_not_of(' ', at + 4);
  if (start == std::string::npos || start == at + 4) return false;
  id = static_cast<uint16_t>(*v);
  name = line.substr(start);
  while (!name.empty() && (name.back() == '\r' || name.back() == ' ')) name.pop_back();
  return true;
}

}  // namespace

Result<PciNames> lookup_pci_names(const std::string& path, const std::set<std::pair<uint16_t, uint16_t>>& wanted) {
  std::ifstream in(path);
  if (!in) return not_found(fmt::format("cannot read the PCI ID database {} (Debian package pci.ids)", path));
  std::set<uint16_t> vendors;
  for (const auto& [v, d] : wanted) vendors.insert(v);
  PciNames out;
  std::string line, name;
  uint16_t id = 0;
  int vendor = -1;  // the vendor section we are in, when it is one we want
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] != '\t') {
      // A new vendor (or, at the end of the file, the device classes: "C 02  ...").
      vendor = -1;
      if (id_and_name(line, 0, id, name) && vendors.count(id)) {
        vendor = id;
        out.vendors[id] = name;
      }
      continue;
    }
    if (vendor < 0 || line.size() < 2 || line[1] == '\t') continue;  // subsystems: not needed
    if (id_and_name(line, 1, id, name) && wanted.count({static_cast<uint16_t>(vendor), id}))
      out.devices[{static_cast<uint16_t>(vendor), id}] = name;
  }
  return out;
}

}  // namespace corral::fabric::infiniband
