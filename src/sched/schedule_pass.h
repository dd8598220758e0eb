// One scheduling pass: priority order with EASY backfill behind one reservation.
#pragma once

#include <vector>

#include "sched/job_queue.h"
#include "sched/resource_pool.h"

namespace corral::sched {

// Starts what may start at `now` (allocating it in `pool`, removing it from `queue`) and sets
// every remaining job's wait reason.
std::vector<Decision> run_schedule_pass(const topology::Placer& placer, ResourcePool& pool,
                                        JobQueue& queue, double now);

}  // namespace corral::sched
