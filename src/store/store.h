// Persistent state in SQLite (WAL). Writes are queued and committed in groups: one
// transaction carries every event queued meanwhile, and a commit callback tells the caller
// when its writes are durable (only then may it acknowledge). A commit starts at once when
// someone waits for one (on_durable), else within commit_interval.
// Finished jobs are moved out of the active set, so loading after a restart reads only
// what is still active.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "job/eventlog.h"
#include "util/result.h"

namespace corral::store {

// An active job as stored: its jobspec and eventlog (replayed at start).
struct StoredJob {
  uint64_t id = 0;
  uint32_t userid = 0;
  std::string jobspec;             // JSON text
  std::vector<job::Event> events;  // in order
};

// Nodes the controller has seen, with the administrative state that must survive a restart.
struct NodeRecord {
  std::string name;
  uint32_t cores = 0, gpus = 0;
  uint64_t memory_mb = 0;
  bool drained = false;
  std::string reason;
  double reason_time = 0;
  uint32_t reason_userid = 0;
};

// A finished step of a job, as its step manager reported it (accounting, like sacct).
struct StepRecord {
  uint64_t jobid = 0;
  std::string step;  // "0", "1", ..., "batch", "interactive"
  uint32_t userid = 0;
  std::string name;
  std::string state;
  std::string nodelist;
  uint32_t nnodes = 0, ntasks = 0, ncores = 0;
  double t_submit = 0, t_start = 0, t_end = 0;
  int32_t waitstatus = -1;
  double cpu_seconds = 0;
  std::string command;
  bool operator==(const StepRecord&) const = default;
};

// Which finished jobs `corral history` shows. Empty lists and zero times select all.
struct HistoryQuery {
  std::vector<uint32_t> userids;
  std::vector<uint64_t> jobids;
  double since = 0;                  // became inactive at or after
  double until = 0;                  // ... at or before
  std::vector<std::string> results;  // COMPLETED FAILED CANCELED TIMEOUT
  size_t max = 0;                    // 0: all, oldest first; else the newest `max`, newest first
};

struct HistoryEntry {
  uint64_t jobid = 0;
  std::string summary;            // as given to finish_job
  std::vector<StepRecord> steps;  // in step number order
};

struct Snapshot {
  uint64_t next_jobid = 1;
  std::vector<StoredJob> active;  // ascending id
  std::vector<NodeRecord> nodes;
  // hook name -> (key, value) saved with put_hook_state, keys in order.
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> hook_state;
};

struct StoreOptions {
  bool synchronous_full = true;    // fsync at every group commit (else at checkpoints)
  double commit_interval = 0.002;  // seconds to gather writes before a commit
  double retry_interval = 1.0;     // seconds between attempts while commits fail (disk full)
};

class Store {
 public:
  using Done = std::function<void(const Status&)>;

  // Opens or creates the database; the error names the path and what failed.
  static Result<std::unique_ptr<Store>> open(const std::string& path, StoreOptions opts = {});
  ~Store();  // commits what is queued, then stops the writer thread
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Reads the active jobs with their eventlogs, the next job id and the nodes.
  Result<Snapshot> load();

  // Queued writes, applied in the order given.
  void insert_job(uint64_t id, uint32_t userid, const std::string& jobspec);
  // Jobs submitted together usually share one jobspec: it is stored once, and passing the
  // same pointer again costs no copy and no comparison.
  void insert_job(uint64_t id, uint32_t userid, std::shared_ptr<const std::string> jobspec);
  void append_event(uint64_t jobid, const job::Event& ev);
  // The job became INACTIVE: `summary_json` is what listings show from now on; its eventlog
  // stays readable with read_eventlog but is no longer loaded at start.
  void finish_job(uint64_t jobid, const std::string& summary_json);
  void put_node(const NodeRecord& node);
  // State a job hook keeps beyond the active eventlogs (HookContext::save_state).
  void put_hook_state(const std::string& hook, const std::string& key, const std::string& value);
  void erase_hook_state(const std::string& hook, const std::string& key);
  // Inserts or replaces the record of (jobid, step).
  void put_step(const StepRecord& step);

  // `done` runs on the writer thread once everything queued before this call is durable
  // (or failed). Keep it short: hand work to another thread.
  //
  // A commit that fails for a reason that may pass (disk full, I/O error: Errc::unavailable)
  // loses nothing: its writes are kept in memory, in order, and retried every
  // `StoreOptions::retry_interval` with what is queued meanwhile, and `done` runs when they
  // commit. With `fail_fast`, `done` is told of that first failure at once instead (the
  // writes stay queued; discard_job takes a job's back).
  void on_durable(Done done, bool fail_fast = false);
  // The same, for a callback that nobody waits on: it does not start a commit, but joins
  // the next one that someone waits for, or the one commit_interval after the oldest write
  // queued. Writes alone (with no callback after them) are committed the same way.
  void on_durable_soon(Done done);
  // Blocks until everything queued so far is durable, or returns at once with the error
  // (Errc::unavailable) while commits fail for a reason that may pass.
  Status flush();
  // Removes job `jobid` from the database, in order after every write queued so far: for
  // a submission that was refused after its writes were queued.
  void discard_job(uint64_t jobid);
  // OK, or why writes are being held (the first failure, since when, how many wait).
  Status health() const;

  // Reads (a separate connection; safe from any thread).
  Result<std::vector<job::Event>> read_eventlog(uint64_t jobid);
  Result<std::string> read_jobspec(uint64_t jobid);
  // Summaries of inactive jobs, newest first; `max` 0 = all.
  Result<std::vector<std::string>> inactive_summaries(size_t max);
  Result<std::string> inactive_summary(uint64_t jobid);  // not_found if not inactive
  Result<uint64_t> count_inactive();
  // Stored steps of one job (jobid 0: every job; userid set: only that user's steps), by
  // job id then step number ("batch" and "interactive" after the numbered steps).
  Result<std::vector<StepRecord>> read_steps(uint64_t jobid, std::optional<uint32_t> userid = std::nullopt);
  // Inactive jobs with their steps: one query per table, whatever the number of jobs.
  Result<std::vector<HistoryEntry>> history(const HistoryQuery& q);

 private:
  struct Impl;
  explicit Store(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace corral::store
