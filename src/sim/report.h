// What a simulation measured: the usual scheduling metrics over the jobs that ran, how
// many jobs used more leaf switches / blocks than they had to, and how fast it ran.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "sim/simulator.h"

namespace corral::sim {

// Bounded slowdown's lower bound on the run time: max(1, (wait + run) / max(run, 10 s)).
inline constexpr double kSlowdownBound = 10;
double bounded_slowdown(const JobOutcome& job);

struct Summary {
  size_t jobs = 0;             // simulated to completion
  size_t skipped_invalid = 0;  // trace lines with run time < 0 or no processor count
  size_t skipped_too_big = 0;  // larger than the cluster
  size_t never_started = 0;
  size_t nodes = 0;
  uint64_t total_cores = 0;
  std::string placer;
  double first_submit = 0, last_end = 0;
  double makespan = 0;     // last end - first submit
  double utilization = 0;  // busy core-seconds / (total cores x makespan)
  double mean_wait = 0, max_wait = 0;
  double mean_bounded_slowdown = 0;
  // Topology: jobs placed on more leaf switches / blocks than the fewest possible.
  size_t jobs_above_fewest = 0;
  double mean_leaves = 0, mean_fewest = 0;
  size_t passes = 0;            // scheduling passes
  size_t passes_skipped = 0;    // event batches where no pending job could fit
  double simulate_seconds = 0;  // the event loop
  double wall_seconds = 0;      // what the caller timed (loading included)
  double speedup = 0;           // makespan / wall_seconds
};

// `wall_seconds` is the caller's measure of the whole run; 0 uses the event loop's time.
Summary summarize(const SimResult& result, size_t skipped_invalid, double wall_seconds = 0);

nlohmann::json summary_json(const Summary& s, const SimResult& result);
nlohmann::json jobs_json(const SimResult& result);  // one object per job that ran
std::string summary_text(const Summary& s, const SimResult& result);

}  // namespace corral::sim
