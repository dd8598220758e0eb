// Step identifiers: steps started by `corral run` inside a job are numbered 0, 1, ...;
// the batch script and the interactive shell of `corral alloc` are steps too, with
// reserved numbers that print as names ("42.batch", "42.interactive").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "util/result.h"

namespace corral::job {

inline constexpr uint32_t kInteractiveStep = 0xFFFFFFFAu;
inline constexpr uint32_t kBatchStep = 0xFFFFFFFBu;
inline constexpr uint32_t kMaxStepNumber = 0xFFFFFFF0u;  // numbered steps stay below

// "0", "17", "batch", "interactive".
std::string step_name(uint32_t step);
// The inverse; the error names the text ("step 'x': not a step number or name").
Result<uint32_t> parse_step_name(std::string_view text);

struct JobStep {
  uint64_t jobid = 0;
  uint32_t step = 0;
};
// "42.3", "42.batch"; the error names the text and what was expected.
Result<JobStep> parse_job_step(std::string_view text);

}  // namespace corral::job
