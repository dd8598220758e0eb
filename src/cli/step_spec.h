// `corral run` inside an allocation: the job options that make sense for a step turned
// into a StepSpec, and the others refused by name (a step cannot change the job's time
// limit or partition).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cli/job_options.h"
#include "steps.pb.h"
#include "util/result.h"

namespace corral::cli {

// Options of `corral run` that only steps have.
struct StepFlags {
  bool overlap = false;           // share cores with running steps
  bool immediate = false;         // fail instead of waiting for cores
  bool kill_on_bad_exit = false;  // the first task exiting non-zero kills the step
};

// StepSpec from -N -n -c --gpus-per-task -w -J -i -o -e -D --export, the step flags,
// the command and the caller's environment (all of it unless --export says otherwise)
// and working directory. Errors name the option.
Result<corral::v1::StepSpec> build_step_spec(uint64_t jobid, const JobOptions& opts, const StepFlags& flags,
                                             const std::vector<std::string>& argv, const JobContext& ctx);

// The environment a step's tasks start from, as the step protocol carries it (KEY=VALUE).
void set_step_env(corral::v1::StepSpec& spec, const std::map<std::string, std::string>& env);

}  // namespace corral::cli
