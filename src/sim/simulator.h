// Replays a trace through the real scheduler (sched::Scheduler) in virtual time: arrivals
// and completions are events, and after each batch of events with the same timestamp one
// scheduling pass decides what starts. A job runs for its trace run time; the scheduler
// sees its requested time as the time limit that EASY backfill plans with.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/cluster.h"
#include "sim/swf.h"

namespace corral::sim {

struct JobOutcome {
  uint64_t id = 0;  // the trace's job number
  double submit = 0, start = 0, end = 0;
  double run = 0, requested = 0;
  unsigned procs = 0;
  unsigned nodes = 0;   // nodes of its allocation
  unsigned leaves = 0;  // leaf switches / base blocks used (0 without a topology)
  unsigned fewest = 0;  // the fewest it could have used on an empty machine
  double wait() const { return start - submit; }
};

struct SkippedJob {
  uint64_t id = 0;
  unsigned line = 0;
  std::string reason;  // the scheduler's account of what cannot be satisfied
};

struct SimResult {
  std::vector<JobOutcome> jobs;         // jobs that ran, in trace order
  std::vector<SkippedJob> too_big;      // could never run on this cluster; not simulated
  std::vector<uint64_t> never_started;  // still waiting when no event was left
  size_t nodes = 0;
  uint64_t total_cores = 0;
  std::string placer;         // the placer's name
  size_t passes = 0;          // scheduling passes run
  size_t passes_skipped = 0;  // event batches after which no pending job could fit
  double wall_seconds = 0;    // of the event loop alone
};

SimResult simulate(const Cluster& cluster, const SwfTrace& trace);

}  // namespace corral::sim
