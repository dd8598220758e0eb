// The job hook interface (DESIGN.md): fabric, storage and the built-in policies
// (dependencies, prolog/epilog, time limits) are hooks, not special cases in the core.
// A hook sees every event of every job and acts through HookContext. All calls happen
// with the controller's state lock held: hooks must not block. A hook that waits on the
// outside world (a Kubernetes watch) does it on threads of its own and comes back in
// through HookRunner.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hook/job_record.h"
#include "util/result.h"

namespace corral::hook {

struct PerilogOutcome {
  std::string node;
  std::string kind;
  int waitstatus = 0;
  bool timed_out = false;
  std::string output;
};

class HookContext {
 public:
  virtual ~HookContext() = default;
  virtual double now() const = 0;
  virtual const JobView* find_job(uint64_t jobid) const = 0;
  // Result ("COMPLETED", "FAILED", ...) of a job that is no longer active; nullopt when
  // the id was never used.
  virtual std::optional<std::string> inactive_result(uint64_t jobid) const = 0;

  virtual void post_event(uint64_t jobid, std::string name, std::string context_json) = 0;
  virtual void raise_exception(uint64_t jobid, std::string type, int severity, std::string note) = 0;
  virtual void add_dependency(uint64_t jobid, std::string description) = 0;
  virtual void remove_dependency(uint64_t jobid, std::string description) = 0;
  virtual void prolog_start(uint64_t jobid, std::string description) = 0;
  virtual void prolog_finish(uint64_t jobid, std::string description, int status) = 0;
  virtual void epilog_start(uint64_t jobid, std::string description) = 0;
  virtual void epilog_finish(uint64_t jobid, std::string description, int status) = 0;
  // A line for the job's stderr when its tasks start (a prolog's warning, say): written
  // to the error file of a batch job, or streamed to `corral run`.
  virtual void job_note(uint64_t jobid, std::string text) = 0;
  // Adds to the environment of every task of the job (before it starts).
  virtual void set_task_env(uint64_t jobid, std::string key, std::string value) = 0;
  // Replaces the job's jobspec before it is scheduled (resource / constraint rewrites).
  virtual Status rewrite_jobspec(uint64_t jobid, const std::string& jobspec_json) = 0;

  // Runs `command` as root on `nodes`; each node's outcome comes back through
  // JobHook::on_perilog with this `kind`.
  virtual void run_on_nodes(uint64_t jobid, const std::string& kind, const std::string& command, double timeout,
                            const std::vector<std::string>& nodes, const std::map<std::string, std::string>& env) = 0;
  virtual void drain_node(const std::string& node, const std::string& reason) = 0;
  // True when `node` is drained (by an admin or a hook).
  virtual bool node_drained(const std::string& node) const = 0;
  // True when the controller knows `node` (it registered at least once).
  virtual bool node_exists(const std::string& node) const = 0;
  // Runs `fn` (with the lock held) at time `when`.
  virtual void at(double when, std::function<void()> fn) = 0;
  // Runs `fn` once everything posted so far is durable. An action on the outside world
  // that a restart must account for (a workflow moved on, ports put in a partition) waits
  // for the record that leads to it: a crash between the two must not leave the outside
  // ahead of the record. `fn` runs on another thread, without the lock, so it only hands
  // work to the hook's own threads.
  virtual void after_durable(std::function<void()> fn) = 0;

  // State a hook must keep beyond the eventlogs that are replayed at start (for example
  // cleanups that outlive their job): stored with the next group commit under
  // (hook name, key) and handed back through JobHook::on_load after a restart.
  virtual void save_state(std::string_view hook, const std::string& key, const std::string& value) = 0;
  virtual void erase_state(std::string_view hook, const std::string& key) = 0;
};

using SavedState = std::vector<std::pair<std::string, std::string>>;  // key, value

// How a hook's own threads act on jobs: `fn` runs with the controller's lock held, like
// every JobHook call, and what it posts is applied and published before run() returns.
// run() does nothing once corrald is stopping. Safe from any thread but the controller's
// own (a hook must not call it from a JobHook method).
class HookRunner {
 public:
  virtual ~HookRunner() = default;
  virtual void run(std::function<void(HookContext&)> fn) = 0;
};

// What a hook's factory gets besides its configuration section (settings.h).
struct HookSetup {
  std::string program_dir;  // corrald's own directory: a hook's node command is installed beside it
  // A node command's default path: `name` beside corrald (just `name`, from PATH, when the
  // directory is unknown).
  std::string beside(const std::string& name) const { return program_dir.empty() ? name : program_dir + "/" + name; }
};

// A request from `corral <hook> ...` (the HookQuery RPC).
struct HookQuery {
  std::string what;       // e.g. "pool", "clean"
  std::string args_json;  // "{}" when none
  uint32_t uid = 0;
  bool admin = false;  // root or the controller's owner
};

class JobHook {
 public:
  virtual ~JobHook() = default;
  virtual std::string_view name() const = 0;
  // Once, before on_load: the runner for the hook's own threads, valid until stop().
  virtual void attach(HookRunner&) {}
  // corrald is stopping: end the hook's threads (no HookRunner::run after this returns).
  virtual void stop() {}
  // At submit, before anything is stored: an error rejects the job with its message.
  virtual Status validate(HookContext&, const job::Jobspec&, uint32_t /*userid*/) { return {}; }
  // After each event is applied to a job.
  virtual void on_event(HookContext&, const JobView&, const job::Event&) {}
  // After a restart, once for every active job rebuilt from its eventlog.
  virtual void on_restart(HookContext&, const JobView&) {}
  // A node's result of run_on_nodes.
  virtual void on_perilog(HookContext&, const JobView&, const PerilogOutcome&) {}
  // The same for a job that is no longer active (or for jobid 0: work not tied to a job).
  virtual void on_perilog_inactive(HookContext&, uint64_t /*jobid*/, const PerilogOutcome&) {}
  // At start, before any on_restart: what this hook saved with HookContext::save_state.
  virtual void on_load(HookContext&, const SavedState&) {}
  // An admin resumed a drained node.
  virtual void on_node_resume(HookContext&, const std::string& /*node*/) {}
  // A node (re)registered with what its agent's hooks report (NodeHook::hardware, by hook
  // name): the names of what it offers this hook's jobs, for required_properties to match.
  virtual void node_properties(HookContext&, const std::string& /*node*/,
                               const std::map<std::string, std::string>& /*hardware*/,
                               std::vector<std::string>& /*out*/) {}
  // What every node of a job must offer (node_properties' names): the scheduler places it
  // only there. An error rejects the job at submit; it must depend on the jobspec alone.
  virtual Status required_properties(const job::Jobspec&, std::vector<std::string>& /*out*/) const { return {}; }
  // What `corral show job` shows of an active job for this hook: name -> one line
  // ("Storage" -> "PreRun ready (corral-12)"); nothing when the job is none of its business.
  virtual void describe_job(const JobView&, std::map<std::string, std::string>& /*out*/) const {}
  // Answers `corral <hook name> ...`: a JSON document, or an error the user can act on.
  // Every hook may answer "capabilities" (`corral nodes --capabilities` asks all of them):
  // {"nodes": {NODE: {"class": "...", "summary": "one line", "differs": "why it differs
  // from its class (absent when it does not)", "capabilities": <the hook's own JSON>}}}.
  virtual Result<std::string> query(HookContext&, const HookQuery& q) {
    return not_found("hook " + std::string(name()) + " answers no query '" + q.what + "'");
  }
};

}  // namespace corral::hook
