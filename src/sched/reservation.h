// EASY backfill's one reservation: when and where the top blocked job will start if every
// running job ends at its time limit.
#pragma once

#include <optional>
#include <vector>

#include "sched/resource_pool.h"

namespace corral::sched {

struct Reservation {
  double start = 0;             // the shadow time
  std::vector<uint32_t> nodes;  // ascending
};

// The earliest time `req` fits as running jobs with known end times finish, or nullopt if it
// never does (its nodes are down, or jobs without a time limit hold what it needs). The pool
// is used as scratch space and is left as it was.
std::optional<Reservation> find_reservation(const topology::Placer& placer, ResourcePool& pool,
                                            const topology::Request& req, double now);

}  // namespace corral::sched
