// Containment of tasks in cgroups: each unit of work on this agent (a job's own tasks,
// one launch of a step) gets a cgroup, every task of it is moved there, and when the
// unit ends whatever is still in it (a daemon that called setsid, a double fork) is
// killed with cgroup.kill and the cgroup removed. Process groups alone cannot do this:
// a process that leaves its group escapes every killpg. The job's directory carries its
// limits on this node (cgroup_limits.h: memory.max from --mem, pids.max, its CPUs), which
// every unit below it shares.
//
//   ROOT/job_42                  the job's limits
//   ROOT/job_42/job_tasks        the job's own tasks (batch script, command, alloc)
//   ROOT/job_42/step_slot_5      a step's tasks (one launch of a step on this agent)
//
// Making a cgroup populates every controller's files and removing one tears them down:
// on a hybrid machine (four hierarchies) that was a third of a short step's cost. So a
// step's cgroup is a slot of its job: one that ends empty stays, free, and the job's next
// step gets it (cgroup v2 cannot rename a cgroup, so slots are numbered, not named after
// steps). Free slots go when the job's own unit is released.
// The first hierarchy is cgroup v2 (tracking, killing, and the limit controllers it
// delegates); a limit controller only a v1 hierarchy has here gets a ROOT of its own
// there, with the same layout. ROOT is per agent (several agents may share a machine),
// derived from the agent's id and state directory so that a restarted agent finds what
// its predecessor left. Lives on the agent's event loop; removal of a cgroup whose
// processes are still dying is retried there.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "node/exec/cgroup_limits.h"
#include "util/event_loop.h"
#include "util/result.h"
#include "util/unique_fd.h"

namespace corral::node {

class TaskCgroups {
 public:
  // The unit of a job's own tasks (`job_`: "tasks" is a control file of every v1 cgroup).
  static constexpr const char* kJobUnit = "job_tasks";

  // `setting`: "none" (containment off: nullptr), "auto" (a writable cgroup v2 hierarchy
  // if the machine has one, else cgroup v1 if it has that, else nullptr with `why_off`
  // saying why), or a directory inside a cgroup v2 hierarchy to use as ROOT's parent (an
  // error if it cannot be used).
  static Result<std::unique_ptr<TaskCgroups>> open(EventLoop& loop, const std::string& setting,
                                                   const std::string& agent_id, const std::string& state_dir,
                                                   std::string* why_off = nullptr);
  ~TaskCgroups();  // shutdown: kills and removes every unit still here
  TaskCgroups(const TaskCgroups&) = delete;
  TaskCgroups& operator=(const TaskCgroups&) = delete;

  const std::string& root() const { return trees_.front().root; }
  // For the agent's log: each hierarchy and the limits it enforces.
  std::string describe() const;
  // The limit controllers no hierarchy here gives us, and why (empty: none missing).
  const std::string& missing() const { return missing_; }

  // Creates the unit's cgroup in every hierarchy (kJobUnit; any other unit is a step's and
  // gets a free slot of the job, or a new one): the directories a task joins, for
  // SpawnRequest::cgroups.
  Result<std::vector<std::string>> create(uint64_t jobid, const std::string& unit);
  // The unit's cgroup in the first hierarchy, open (O_PATH) for clone3 to create its
  // tasks in (CLONE_INTO_CGROUP), or null: no cgroup v2 here, a unit create() did not
  // make, or it cannot be opened. A step slot's is opened once and kept while the slot
  // lives, as a job's sequential steps reuse one slot: a path lookup in the cgroup
  // filesystem and a close fewer per task. Whoever holds it keeps it open.
  std::shared_ptr<const UniqueFd> entry(uint64_t jobid, const std::string& unit);
  // The job starts on this agent: its emptied step slots are kept for its next steps
  // until its own unit (kJobUnit) is released.
  void open_job(uint64_t jobid);
  // Sets the job's limits on this node (creating its directory when no unit has yet).
  Status limit_job(uint64_t jobid, const JobLimits& limits);
  // Processes of the job killed by the out-of-memory killer so far.
  uint64_t oom_kills(uint64_t jobid) const;
  // The unit ended: kills what is left in it, removes it (and the job's directory once
  // empty), or keeps a step's slot free for the job's next step when nothing is left in
  // it and the job is open. Safe to call for a unit that was never created. Releasing
  // kJobUnit ends the job here: its free slots go, and its OOM count is not asked for again.
  void release(uint64_t jobid, const std::string& unit);
  // Startup: kills and removes everything a previous run of this agent left. Returns how
  // many processes were still there.
  size_t clear_leftovers();

  // Units whose removal waits for their processes to die.
  size_t draining() const { return draining_.size(); }
  // Whether a unit of the job is among them: a new run of the job (a requeue) waits, or
  // its tasks would join a cgroup that is being killed.
  bool draining(uint64_t jobid) const;

 private:
  TaskCgroups(EventLoop& loop, std::vector<CgroupTree> trees, std::string missing);
  // Parts of open(): the v2 tree (an error only for an explicit directory), the v1 trees
  // for the limit controllers it lacks, and what no tree gives.
  static Result<std::optional<CgroupTree>> open_v2(const std::string& setting, const std::string& name,
                                                   std::string& missing);
  static void add_v1_trees(std::vector<CgroupTree>& trees, const std::string& name, std::string& missing);
  static std::string missing_limits(const std::vector<CgroupTree>& trees, const std::string& why);
  static std::string job_path(const CgroupTree& tree, uint64_t jobid);
  Status make_dir(const CgroupTree& tree, const std::string& dir);
  bool holds(uint64_t jobid, const CgroupTree& tree) const;  // the job's units are made there
  // The directory name of a new unit: kJobUnit's own, a free slot of the job (`reused`),
  // or a new slot.
  std::string take_dir(uint64_t jobid, const std::string& unit, bool& reused);
  // Keeps an ended step's slot free when the job is open, the slot empty and not too many
  // are free; false: remove it.
  bool keep_free(uint64_t jobid, const std::string& dir);
  void drop_free_slots(uint64_t jobid);
  void drain();  // retries removal of draining_ cgroups

  EventLoop& loop_;
  std::vector<CgroupTree> trees_;  // never empty; [0] tracks and kills
  std::string missing_;
  std::map<std::string, int> draining_;        // cgroup -> removal attempts
  std::map<uint64_t, uint64_t> oom_released_;  // job -> OOM kills in v1 units already removed
  // Job -> the limit hierarchies (bit i: trees_[i]) it has a limit in. Its units are made
  // in the first hierarchy and these only: a job without a memory, process or CPU limit
  // costs no directories (made at its start, removed at its end, joined by each task) in
  // hierarchies that would enforce nothing for it.
  std::unordered_map<uint64_t, uint32_t> limited_in_;
  std::map<uint64_t, std::vector<std::string>> free_slots_;               // open jobs -> their free slots
  std::map<std::pair<uint64_t, std::string>, std::string> slot_of_unit_;  // (job, step unit) -> slot
  // (job, slot) -> the first hierarchy's cgroup.events (v1: cgroup.procs) of a slot that
  // was emptied once, kept open while the slot lives.
  std::map<std::pair<uint64_t, std::string>, UniqueFd> slot_population_;
  // (job, slot) -> the slot's directory in the first hierarchy, for entry().
  std::map<std::pair<uint64_t, std::string>, std::shared_ptr<const UniqueFd>> slot_entry_;
  uint64_t next_slot_ = 0;
  std::optional<EventLoop::TimerId> timer_;
};

// The cgroup directories of a unit whose tasks are starting, created with the first task
// and kept in `slot` for the others. Without containment (null `cgroups`), or when the
// unit cannot be created (logged: "`who`: tasks run uncontained: ..."), none: the tasks
// still run, in their process groups.
const std::vector<std::string>& unit_cgroup(TaskCgroups* cgroups, std::optional<std::vector<std::string>>& slot,
                                            uint64_t jobid, const std::string& unit, const std::string& who);

}  // namespace corral::node
