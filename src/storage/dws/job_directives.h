// A job's `#DW` directives from its jobspec (attributes.system.dw: one string or a list),
// split the way Flux does: at each "#DW ", blank pieces dropped. Bounded: a hostile
// jobspec cannot make the controller hold or check more than `max_count` directives.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "util/result.h"

namespace corral::storage::dws {

inline constexpr size_t kMaxDirectiveText = 4096;

// Empty when the job asks for no storage. Errors name what is wrong.
Result<std::vector<std::string>> job_directives(const nlohmann::json& jobspec, size_t max_count);

}  // namespace corral::storage::dws
