// Vendor and device names from the PCI ID database (Debian's pci.ids package:
// /usr/share/misc/pci.ids), as lspci prints them: "Mellanox Technologies",
// "MT28908 Family [ConnectX-6]". Names, not ids, are what users select devices by.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "util/result.h"

namespace corral::fabric::infiniband {

inline constexpr const char* kDefaultPciIds = "/usr/share/misc/pci.ids";

struct PciNames {
  std::map<uint16_t, std::string> vendors;
  std::map<std::pair<uint16_t, uint16_t>, std::string> devices;  // (vendor, device)
};

// The names of these (vendor, device) pairs, read in one pass over the database. A pair the
// database does not know has no entry (callers show its ids); a missing file is an error.
Result<PciNames> lookup_pci_names(const std::string& path, const std::set<std::pair<uint16_t, uint16_t>>& wanted);

}  // namespace corral::fabric::infiniband
