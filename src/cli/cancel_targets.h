// What `corral cancel` was asked to cancel: whole jobs ("42") and steps ("42.3",
// "42.batch", "42.interactive"), comma separated or as separate words.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "job/step_id.h"
#include "util/result.h"

namespace corral::cli {

struct CancelTargets {
  std::vector<uint64_t> jobids;
  std::vector<job::JobStep> steps;
};

// The first bad word is the error, named as typed ("'42.x': step 'x': not a step ...").
Result<CancelTargets> parse_cancel_targets(const std::vector<std::string>& words);

}  // namespace corral::cli
