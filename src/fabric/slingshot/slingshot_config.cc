#include "fabric/slingshot/slingshot_config.h"

#include <fmt/format.h>

#include "fabric/slingshot/vni_pool.h"

namespace corral::fabric::slingshot {
namespace {

Status apply(SlingshotConfig& c, const hook::Setting& s) {
  if (s.key == "enabled") return hook::read_bool(s, c.enabled);
  if (s.key == "vni-pool") {
    if (auto st = hook::read_string(s, c.vni_pool); !st) return st;
    if (auto pool = make_vni_pool(c.vni_pool); !pool) return invalid(fmt::format("{}: {}", s.where, pool.message()));
    return {};
  }
  if (s.key == "vnis-per-job") return hook::read_uint(s, c.vnis_per_job, kMaxVnisPerService);
  if (s.key == "vni-reserve-fatal") return hook::read_bool(s, c.vni_reserve_fatal);
  if (s.key == "command") return hook::read_string(s, c.command);
  if (s.key == "prolog-timeout") return hook::read_duration(s, c.prolog_timeout);
  if (s.key == "epilog-retry") return hook::read_duration(s, c.epilog_retry);
  if (s.key == "housekeeping-timeout") return hook::read_duration(s, c.housekeeping_timeout);
  return hook::unknown_key(s);
}

}  // namespace

Result<SlingshotConfig> parse_slingshot_settings(const hook::Settings& settings) {
  SlingshotConfig c;
  for (const auto& s : settings)
    if (auto st = apply(c, s); !st) return st.error();
  return c;
}

}  // namespace corral::fabric::slingshot
