// A job as the controller holds it while it is active: what hooks see (hook::JobView) and
// the controller's own bookkeeping. The view can be rebuilt by replaying the eventlog
// (plus the jobspec); the runtime fields are re-learned from the node agents after a
// restart.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "hook/job_record.h"

namespace corral::ctld {

struct OutputChunk {
  uint32_t rank = 0;
  bool is_stderr = false;
  bool eof = false;
  std::string node;
  std::string data;
};

struct JobRecord : hook::JobView {
  // Execution, tracked per node name.
  std::map<std::string, unsigned> exec_tasks;  // node -> ntasks it runs (StartJob sent)
  std::set<std::string> exited;                // nodes that reported their tasks' exit
  // node -> incarnation of the agent StartJob went to (from the start event), so a restart
  // can tell "the agent never got it" (same incarnation) from "the agent restarted".
  std::map<std::string, std::string> start_incarnations;
  int max_waitstatus = 0;
  std::map<std::string, std::string> extra_env;  // set by hooks for the tasks
  std::vector<std::string> notes;                // hooks' lines for the job's stderr
  bool kill_sent = false;

  // Output of a job whose client attaches (corral run), kept for late subscribers.
  std::vector<OutputChunk> output;  // not persisted
  size_t output_bytes = 0;
  bool interactive = false;

  std::string reason;  // Dependency / BeginTime / JobHeldUser, or "" (ask the scheduler)
  bool in_scheduler = false;
  bool counts_as_running = false;  // against limits.max-running-jobs (queued or holding resources)
  bool unsaved = false;            // just submitted, not yet durable: never scheduled until it is
  bool dirty = false;
};

}  // namespace corral::ctld
