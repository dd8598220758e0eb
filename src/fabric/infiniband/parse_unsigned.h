// Whole-string unsigned numbers as sysfs, pci.ids and users write them, without exceptions.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace corral::fabric::infiniband {

// `s` entirely, in `base` (16 accepts an optional "0x"), no larger than `max`.
std::optional<uint64_t> parse_unsigned(std::string_view s, int base, uint64_t max = UINT64_MAX);

}  // namespace corral::fabric::infiniband
