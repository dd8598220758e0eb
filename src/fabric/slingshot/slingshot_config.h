// The [slingshot] section of corrald's configuration (docs/admin.md, "Slingshot").
#pragma once

#include <string>

#include "hook/settings.h"
#include "util/result.h"

namespace corral::fabric::slingshot {

struct SlingshotConfig {
  bool enabled = false;                 // the cray-slingshot hook is loaded only then
  std::string vni_pool = "1024-65535";  // RFC 22 idset; never 1 or 10
  unsigned vnis_per_job = 1;            // 0-4; --setopt cray-slingshot.vnicount overrides
  bool vni_reserve_fatal = true;        // false: an exhausted pool is a warning, no VNIs
  std::string command;                  // corral-slingshot; empty: next to corrald
  double prolog_timeout = 60;
  double epilog_retry = 10;           // the epilog's --retry-for
  double housekeeping_timeout = 300;  // housekeeping's --retry-for (+30s for the run)
};

// Most VNIs one CXI service can carry (the driver's limit).
inline constexpr unsigned kMaxVnisPerService = 4;

// The [slingshot] section as corrald read it; errors name the file and key.
Result<SlingshotConfig> parse_slingshot_settings(const hook::Settings& settings);

}  // namespace corral::fabric::slingshot
