// How jobs and nodes look to users: squeue-style state codes, elapsed times, exit codes,
// scontrol-style Key=Value text and stable JSON objects for scripts.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "client.pb.h"

namespace corral::cli {

// A wait status as a shell exit code: exited -> status, signalled -> 128 + signal.
int shell_exit_code(int waitstatus);
// "code:signal" as Slurm prints ExitCode.
std::string exit_code_pair(int waitstatus);
// The exit code `corral run` / `corral wait` return for a finished job: the tasks' code;
// 1 for a fatal exception when tasks didn't fail by themselves (or never ran).
int job_exit_code(const corral::v1::JobInfo& job);

// "2024-05-01T10:00:00" in local time; "" for 0.
std::string format_timestamp(double epoch);

std::string show_job_text(const corral::v1::JobInfo& job, double now);
nlohmann::json job_to_json(const corral::v1::JobInfo& job);
nlohmann::json node_to_json(const corral::v1::NodeInfo& node);

}  // namespace corral::cli
