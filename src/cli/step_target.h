// Which step manager a step command talks to: inside an allocation $CORRAL_JOBID and
// $CORRAL_STEPMGR say it; from anywhere else `--jobid ID` asks the controller (GetJob's
// stepmgr). Inside an allocation steps need no controller at all, so they go on starting
// while it restarts.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "cli/client/client.h"
#include "util/result.h"

namespace corral::cli {

struct StepTarget {
  uint64_t jobid = 0;
  std::string stepmgr;  // StepService address
};

// From the environment alone: CORRAL_JOBID and CORRAL_STEPMGR both set (and naming
// `jobid` if it is not 0). nullopt otherwise; an error if CORRAL_JOBID is not a job id.
Result<std::optional<StepTarget>> step_target_from_env(const std::map<std::string, std::string>& env, uint64_t jobid);

// "job 42 is not running (it is pending: Resources)", "job 42 has ended (COMPLETED)".
std::string not_running_message(const pb::JobInfo& job);

// Asks the controller for the step manager of `jobid`. Errors are ready to print.
Result<StepTarget> find_step_manager(Client& client, uint64_t jobid);

}  // namespace corral::cli
