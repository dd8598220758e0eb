#include "fabric/infiniband/parse_unsigned.h"

#include <charconv>

namespace corral::fabric::infiniband {

std::optional<uint64_t> parse_unsigned(std::string_view s, int base, uint64_t max) {
  if (base == 16 && (s.rfind("0x", 0) == 0 || s.rfind("0X", 0) == 0)) s.remove_prefix(2);
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v > max) return std::nullopt;
  return v;
}

}  // namespace corral::fabric::infiniband
