// The job as hooks see it (hook.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "job/eventlog.h"
#include "job/job_state.h"
#include "job/jobspec.h"
#include "job/resource_set.h"
#include "placers/placement.h"

namespace corral::hook {

// What a hook sees of a job: who submitted what, its state and eventlog, and its
// allocation. Read-only to hooks (they change a job through HookContext); everything here
// can be rebuilt by replaying the eventlog. The controller's own bookkeeping (what the
// scheduler and the agents were told) lives in ctld::JobRecord, which extends it.
struct JobView {
  uint64_t id = 0;
  uint32_t userid = 0;
  uint32_t groupid = 0;
  // Shared by the copies of one submission (--cc): thousands of jobs, one jobspec.
  std::shared_ptr<const std::string> jobspec_text;
  std::shared_ptr<const job::Jobspec> spec;
  job::JobStatus status;
  std::vector<job::Event> events;

  // Allocation (from the alloc event).
  std::optional<job::ResourceSet> R;
  topology::Allocation alloc;
  std::string partition;

  job::JobState state() const { return status.state; }
};

}  // namespace corral::hook
