#include "fabric/infiniband/pci_slot.h"

#include <fmt/format.h>

#include "fabric/infiniband/parse_unsigned.h"

namespace corral::fabric::infiniband {
namespace {

// Hex digits of `s` (no "0x") as a number no larger than `max`; false when not that.
bool hex_field(std::string_view s, uint32_t max, uint32_t& out) {
  if (s.find_first_of("xX") != std::string_view::npos) return false;
  auto v = parse_unsigned(s, 16, max);
  if (!v) return false;
  out = static_cast<uint32_t>(*v);
  return true;
}

}  // namespace

std::string PciSlot::str() const { return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", domain, bus, device, function); }

Result<PciSlot> parse_pci_slot(std::string_view text) {
  auto bad = [&] {
    return invalid(
        fmt::format("'{}' is not a PCI address (domain:bus:device.function, e.g. 0000:ca:00.0)", text.substr(0, 64)));
  };
  PciSlot s;
  std::string_view rest = text;
  size_t dot = rest.rfind('.');
  if (dot == std::string_view::npos || !hex_field(rest.substr(dot + 1), 7, s.function)) return bad();
  rest = rest.substr(0, dot);
  size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos || !hex_field(rest.substr(colon + 1), 31, s.device)) return bad();
  rest = rest.substr(0, colon);
  colon = rest.rfind(':');
  std::string_view bus = colon == std::string_view::npos ? rest : rest.substr(colon + 1);
  if (!hex_field(bus, 255, s.bus)) return bad();
  if (colon != std::string_view::npos && !hex_field(rest.substr(0, colon), 0xfffff, s.domain)) return bad();
  return s;
}

}  // namespace corral::fabric::infiniband
