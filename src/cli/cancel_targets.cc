#include "cli/cancel_targets.h"

#include "cli/values.h"

namespace corral::cli {

Result<CancelTargets> parse_cancel_targets(const std::vector<std::string>& words) {
  CancelTargets out;
  for (const auto& word : words) {
    for (const auto& item : split_list(word)) {
      if (item.find('.') != std::string::npos) {
        auto step = job::parse_job_step(item);
        if (!step) return step.error();
        out.steps.push_back(*step);
        continue;
      }
      auto id = parse_jobid(item);
      if (!id) return invalid("'" + item + "' is not a job or step id (expected 42 or 42.3)");
      out.jobids.push_back(*id);
    }
  }
  return out;
}

}  // namespace corral::cli
