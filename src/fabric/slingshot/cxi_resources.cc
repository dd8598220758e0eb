#include "fabric/slingshot/cxi_resources.h"

#include <algorithm>

#include <fmt/format.h>

namespace corral::fabric::slingshot {

namespace {

struct TableRow {
  Rsrc rsrc;
  uint32_t per_core;  // reserved = per_core * ncores
  uint32_t max;       // 0: the special case, max = reserved
};

// The seed's "NIC Resource Management" table.
constexpr TableRow kTable[] = {
    {Rsrc::TXQ, 2, 2048}, {Rsrc::TGQ, 1, 1024}, {Rsrc::EQ, 2, 2047},   {Rsrc::CT, 1, 2047},
    {Rsrc::TLE, 1, 0},    {Rsrc::PTE, 6, 2048}, {Rsrc::LE, 16, 16384}, {Rsrc::AC, 2, 1022},
};

size_t idx(Rsrc r) { return static_cast<size_t>(r); }

uint32_t clamp_product(uint32_t a, uint32_t b) {
  uint64_t p = uint64_t{a} * b;
  return p > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(p);
}

}  // namespace

Limits desired_limits(uint32_t ncores) {
  Limits out{};
  for (const auto& row : kTable) {
    Limit& l = out[idx(row.rsrc)];
    l.reserved = clamp_product(row.per_core, ncores);
    l.max = row.max;
  }
  Limit& tle = out[idx(Rsrc::TLE)];
  tle.reserved = std::max(tle.reserved, kMinTles);
  tle.max = tle.reserved;
  return out;
}

Limits available_limits(const Nic& nic) {
  Limits left = nic.capacity;
  for (size_t i = 0; i < kNumRsrc; ++i) {
    uint64_t used = 0;
    for (const auto& svc : nic.services)
      if (svc.desc.limited) used += svc.desc.limits[i].reserved;
    left[i].reserved = 0;
    left[i].max = used >= nic.capacity[i].max ? 0 : nic.capacity[i].max - static_cast<uint32_t>(used);
  }
  return left;
}

FittedLimits fit_limits(const Limits& desired, const Nic& nic) {
  FittedLimits out;
  const Limits left = available_limits(nic);
  for (size_t i = 0; i < kNumRsrc; ++i) {
    const auto r = static_cast<Rsrc>(i);
    const uint32_t avail = left[i].max;
    Limit got = desired[i];
    got.max = std::min(got.max, avail);
    if (got.reserved > avail) {
      uint32_t scaled = avail;
      std::string why = fmt::format("NIC {} has {} left", nic.name, avail);
      // A TLE pool below the driver's minimum cannot exist: share the NIC's instead.
      if (r == Rsrc::TLE && scaled < kMinTles) {
        scaled = 0;
        why += fmt::format("; the driver needs at least {}", kMinTles);
      }
      out.warnings.push_back(fmt::format("{} reserved {} -> {} ({})", rsrc_name(r), got.reserved, scaled, why));
      got.reserved = scaled;
    }
    if (r == Rsrc::TLE) got.max = got.reserved;  // the driver wants TLE max == reserved
    got.reserved = std::min(got.reserved, got.max);
    out.limits[i] = got;
  }
  return out;
}

}  // namespace corral::fabric::slingshot
