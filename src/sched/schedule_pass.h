// One scheduling pass: priority order with EASY backfill behind one reservation.
#pragma once

#include <memory>
#include <vector>

#include "sched/job_queue.h"
#include "sched/resource_pool.h"

namespace corral::sched {

using Placers = std::vector<std::unique_ptr<topology::Placer>>;

// Starts what may start at `now` (allocating it in `pool`, removing it from `queue`) and sets
// every remaining job's wait reason. Each request uses placers[req.placer] (0 if out of range).
std::vector<Decision> run_schedule_pass(const Placers& placers, ResourcePool& pool, JobQueue& queue, double now);

}  // namespace corral::sched
