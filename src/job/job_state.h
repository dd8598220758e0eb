// Job states and the event-driven state machine of Flux RFC 21.
//
//  NEW --validate--> DEPEND --depend--> PRIORITY --priority--> SCHED --alloc--> RUN
//  RUN --finish | fatal exception--> CLEANUP --clean--> INACTIVE
//  a fatal exception before RUN goes straight to CLEANUP.
//  CLEANUP --requeue--> SCHED (a run lost to a node failure, resources freed: run again).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "job/eventlog.h"
#include "util/result.h"

namespace corral::job {

enum class JobState : uint8_t {
  NEW = 1,
  DEPEND = 2,
  PRIORITY = 4,
  SCHED = 8,
  RUN = 16,
  CLEANUP = 32,
  INACTIVE = 64,
};

std::string_view state_name(JobState s);    // "SCHED"
std::string_view state_abbrev(JobState s);  // "S" (as flux jobs prints)
// Accepts names case-insensitively and groups: "pending" (DEPEND|PRIORITY|SCHED),
// "running" (RUN|CLEANUP), "active" (all but INACTIVE), "inactive". Returns a bitmask.
Result<uint32_t> parse_state_mask(std::string_view name);

// What the eventlog says about a job: enough to resume it after a restart.
struct JobStatus {
  JobState state = JobState::NEW;
  bool submitted = false;                // submit event seen
  bool allocated = false;                // alloc event seen (resources must be freed)
  std::set<std::string> dependencies;    // outstanding dependency-add descriptions
  std::set<std::string> prolog_actions;  // prolog-start without prolog-finish
  std::set<std::string> epilog_actions;  // epilog-start without epilog-finish
  bool prolog_failed = false;            // a prolog-finish had a non-zero status
  bool started = false;                  // start event seen
  bool finished = false;                 // finish event seen
  int waitstatus = -1;                   // from finish
  bool released = false;                 // release with final=true
  bool freed = false;                    // free event
  int64_t priority = 0;
  unsigned urgency = 16;
  bool fatal_exception = false;
  std::string exception_type;  // the first fatal exception's type
  std::string exception_note;
  bool out_of_memory = false;  // an "oom" exception (any severity) was raised
  bool canceled = false;       // a "cancel" exception was raised (never requeued)
  unsigned requeues = 0;       // requeue events: the run now is attempt `requeues`
  double t_submit = 0, t_run = 0, t_cleanup = 0, t_inactive = 0;
};

// Applies one event. Events that make no sense in the current state (e.g. "alloc" while
// DEPEND) are an error naming the event and the state; the status is left unchanged.
Status apply_event(JobStatus& status, const Event& ev);

// COMPLETED, FAILED, CANCELED, TIMEOUT or OUT_OF_MEMORY for an INACTIVE job (RFC 21's
// "result"; OUT_OF_MEMORY as Slurm names it: the kernel killed tasks over the job's --mem).
std::string job_result(const JobStatus& status);

}  // namespace corral::job
