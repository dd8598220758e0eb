// A PCI address ("0000:ca:00.1": domain, bus, device, function) read as numbers, so that
// devices are ordered the same on every node whatever case or width sysfs writes them in.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

#include "util/result.h"

namespace corral::fabric::infiniband {

struct PciSlot {
  uint32_t domain = 0;  // 16 bits usually; VMD domains take 20 ("10000:00:00.0")
  uint32_t bus = 0;
  uint32_t device = 0;
  uint32_t function = 0;

  auto operator<=>(const PciSlot&) const = default;
  // Canonical form: lowercase, the domain at least 4 digits.
  std::string str() const;
};

// "DDDD:BB:DD.F" (domain optional, any case); an error says what is wrong.
Result<PciSlot> parse_pci_slot(std::string_view text);

}  // namespace corral::fabric::infiniband
