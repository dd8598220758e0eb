#include "job/step_id.h"

#include <charconv>

namespace corral::job {

std::string step_name(uint32_t step) {
  if (step == kInteractiveStep) return "interactive";
  if (step == kBatchStep) return "batch";
  return std::to_string(step);
}

Result<uint32_t> parse_step_name(std::string_view text) {
  if (text == "interactive") return kInteractiveStep;
  if (text == "batch") return kBatchStep;
  uint32_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || n >= kMaxStepNumber)
    return invalid("step '" + std::string(text) + "': not a step number, 'batch' or 'interactive'");
  return n;
}

Result<JobStep> parse_job_step(std::string_view text) {
  auto dot = text.find('.');
  if (dot == std::string_view::npos) return invalid("'" + std::string(text) + "': expected JOBID.STEP, e.g. 42.0");
  uint64_t jobid = 0;
  auto jt = text.substr(0, dot);
  auto [end, ec] = std::from_chars(jt.data(), jt.data() + jt.size(), jobid);
  if (jt.empty() || ec != std::errc() || end != jt.data() + jt.size() || jobid == 0)
    return invalid("'" + std::string(text) + "': '" + std::string(jt) + "' is not a job id");
  auto step = parse_step_name(text.substr(dot + 1));
  if (!step) return invalid("'" + std::string(text) + "': " + step.message());
  return JobStep{jobid, *step};
}

}  // namespace corral::job
