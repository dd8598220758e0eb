#include "cli/step_target.h"

#include <fmt/format.h>

#include "cli/values.h"

namespace corral::cli {

Result<std::optional<StepTarget>> step_target_from_env(const std::map<std::string, std::string>& env, uint64_t jobid) {
  auto job = env.find("CORRAL_JOBID");
  auto mgr = env.find("CORRAL_STEPMGR");
  if (job == env.end() || mgr == env.end() || job->second.empty() || mgr->second.empty())
    return std::optional<StepTarget>{};
  auto id = parse_jobid(job->second);
  if (!id) return invalid("CORRAL_JOBID in the environment: " + id.message());
  if (jobid != 0 && *id != jobid) return std::optional<StepTarget>{};
  return std::optional<StepTarget>{StepTarget{*id, mgr->second}};
}

std::string not_running_message(const pb::JobInfo& job) {
  const std::string& state = job.state();
  if (state == "INACTIVE" || state == "CLEANUP")
    return fmt::format("job {} has ended ({}); it has no running steps", job.id(),
                       job.result().empty() ? state : job.result());
  if (state == "RUN")
    return fmt::format("job {} is running but its step manager is not known yet; try again", job.id());
  return fmt::format("job {} is not running (it is {}{})", job.id(), state,
                     job.reason().empty() ? "" : ": " + job.reason());
}

Result<StepTarget> find_step_manager(Client& client, uint64_t jobid) {
  pb::GetJobRequest req;
  req.set_jobid(jobid);
  auto info = client.get_job(req);
  if (!info) {
    if (info.error().code == Errc::unavailable)
      return Error{Errc::unavailable, info.message() +
                                          "; inside the allocation, CORRAL_JOBID and CORRAL_STEPMGR reach the "
                                          "step manager without the controller"};
    return info.error();
  }
  if (info->stepmgr().empty()) return invalid(not_running_message(*info));
  return StepTarget{jobid, info->stepmgr()};
}

}  // namespace corral::cli
