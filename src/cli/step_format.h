// How steps look to users: squeue -s style rows, JSON objects with the StepInfo fields,
// and one list per job merging the step manager's live view with the controller's records.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common.pb.h"

namespace corral::cli {

// "42.3", "42.batch".
std::string step_id_text(const corral::v1::StepInfo& s);
// Seconds the step ran (so far, if it still runs); 0 if it never started.
double step_elapsed(const corral::v1::StepInfo& s, double now);
// STEPID NAME STATE NODES TASKS CPUS TIME NODELIST.
std::vector<std::string> step_cells(const corral::v1::StepInfo& s, double now);
nlohmann::json step_to_json(const corral::v1::StepInfo& s);

// `live` (from the step manager) and `recorded` (finished steps the controller stored)
// as one list without duplicates, the live record winning; ordered by job, then the batch
// and interactive steps, then by step number.
std::vector<corral::v1::StepInfo> merge_steps(const std::vector<corral::v1::StepInfo>& live,
                                              const std::vector<corral::v1::StepInfo>& recorded);

}  // namespace corral::cli
