// Containment of tasks in cgroup v2: each unit of work on this agent (a job's own tasks,
// one launch of a step) gets a cgroup, every task of it is moved there, and when the
// unit ends whatever is still in it (a daemon that called setsid, a double fork) is
// killed with cgroup.kill and the cgroup removed. Process groups alone cannot do this:
// a process that leaves its group escapes every killpg.
//
//   ROOT/job_42/tasks            the job's own tasks (batch script, command, alloc)
//   ROOT/job_42/step_3-17        step 3, launch 17 of this agent
//
// ROOT is per agent (several agents may share a machine), derived from the agent's id and
// state directory so that a restarted agent finds what its predecessor left. Lives on the
// agent's event loop; removal of a cgroup whose processes are still dying is retried there.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <map>
#include <string>

#include "node/event_loop.h"
#include "util/result.h"

namespace corral::node {

class TaskCgroups {
 public:
  // `setting`: "none" (containment off: nullptr), "auto" (a writable cgroup v2 hierarchy
  // if the machine has one, else nullptr with `why_off` saying why), or a directory inside
  // a cgroup v2 hierarchy to use as ROOT's parent (an error if it cannot be used).
  static Result<std::unique_ptr<TaskCgroups>> open(EventLoop& loop, const std::string& setting,
                                                   const std::string& agent_id, const std::string& state_dir,
                                                   std::string* why_off = nullptr);
  ~TaskCgroups();  // shutdown: kills and removes every unit still here
  TaskCgroups(const TaskCgroups&) = delete;
  TaskCgroups& operator=(const TaskCgroups&) = delete;

  const std::string& root() const { return root_; }

  // Creates the unit's cgroup; its path, for LaunchRequest::cgroup.
  Result<std::string> create(uint64_t jobid, const std::string& unit);
  // The unit ended: kills what is left in it, removes it (and the job's directory once
  // empty). Safe to call for a unit that was never created.
  void release(uint64_t jobid, const std::string& unit);
  // Startup: kills and removes everything a previous run of this agent left. Returns how
  // many processes were still there.
  size_t clear_leftovers();

  // Units whose removal waits for their processes to die.
  size_t draining() const { return draining_.size(); }

 private:
  TaskCgroups(EventLoop& loop, std::string root);
  std::string unit_path(uint64_t jobid, const std::string& unit) const;
  void drain();  // retries removal of draining_ cgroups

  EventLoop& loop_;
  std::string root_;
  std::map<std::string, int> draining_;  // cgroup -> removal attempts
  std::optional<EventLoop::TimerId> timer_;
};

}  // namespace corral::node
