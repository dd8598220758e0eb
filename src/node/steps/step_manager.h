// The step managers of the jobs whose first node this agent hosts: accepts `corral run`
// requests (RunStep), places steps inside the job with a StepAllocator (strict FIFO
// waiting), signs each step's credential with the job's key, launches the step's tree
// through a StepLauncher (StepNode in the agent), relays output, stdin, signals and PMI
// fences between the client and the tree, and keeps each finished step's accounting
// record until the controller acknowledges it.
//
// Lives on the agent's event loop: every method is called on the loop thread (the gRPC
// side posts there), and sinks are called there too. No I/O of its own.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "agent.pb.h"
#include "common.pb.h"
#include "job/port_range.h"
#include "job/step_cred.h"
#include "node/steps/step_alloc.h"
#include "steps.pb.h"
#include "util/event_loop.h"
#include "util/result.h"

namespace corral::job {
struct Jobspec;
}  // namespace corral::job

namespace corral::node {

namespace v1 = ::corral::v1;

// What the step manager needs from the launch tree; StepNode in the agent, a fake in tests.
class StepLauncher {
 public:
  using LaunchId = uint64_t;
  using Up = std::function<void(v1::LaunchUp&&)>;
  using Done = std::function<void(const std::string& error)>;
  virtual ~StepLauncher() = default;
  // `up` and `done` may be called from inside launch().
  // `made_here`: the credential behind req.cred (req.cred itself is empty when every node
  // of the step is this agent's own: nothing leaves the process to be checked).
  virtual LaunchId launch(v1::LaunchTasksRequest req, Up up, Done done, const job::StepCred& made_here) = 0;
  virtual void deliver(LaunchId id, const v1::LaunchDown& down) = 0;
};

// Output a step's client has not read yet, past which the client is taken for gone (its
// step ends): a step that prints faster than its client reads cannot fill the agent.
inline constexpr size_t kMaxUnreadOutput = 256u << 20;

// The loop's end of one RunStep call. Both must return at once (they queue).
struct StepClientSink {
  std::function<void(v1::StepServerMessage&&)> send;  // the message carrying `exit` is the last
  std::function<void(const Error&)> fail;             // ends the call with an error status instead
};

struct StepManagerConfig {
  std::string self_uri;         // this agent's StepService (nodes without an agent address)
  double kill_grace = 2.0;      // cancel: SIGTERM, then SIGKILL this much later
  size_t keep_finished = 1000;  // finished steps listed per job
  double cred_lifetime = 60.0;  // step credentials expire this long after signing
  // The controller names a job's step manager as it sends StartJob, so a client (corral
  // alloc, --jobid) can ask before this agent has the job: such a request waits this
  // long for it before "no step manager here".
  double early_open_wait = 5.0;
  // `created` waits this long for the step's first output or exit to travel with (0: sent
  // at once). Most steps of a busy job are short: one message per step instead of two
  // halves the writes and the client's wake-ups; a longer step's client hears of its
  // start this much later.
  double created_linger = 0.010;
};

class StepManager {
 public:
  using ClientId = uint64_t;
  // A finished step's accounting record, for the controller (Uplink::step).
  using RecordSink = std::function<void(const v1::StepInfo&)>;
  // The interactive step of an alloc job ended with this wait status (posted to the loop).
  using InteractiveEnd = std::function<void(uint64_t jobid, int waitstatus)>;

  StepManager(EventLoop& loop, StepLauncher& launcher, StepManagerConfig config, RecordSink records);
  ~StepManager();
  StepManager(const StepManager&) = delete;
  StepManager& operator=(const StepManager&) = delete;

  void set_interactive_end(InteractiveEnd cb) { interactive_end_ = std::move(cb); }

  // ---- jobs (from the controller, through the agent)
  // Starts managing the job when `msg` carries a step key (this agent hosts its first node).
  void add_job(const v1::StartJob& msg);
  // The same with the job's jobspec already read (null: it did not parse) and its step key
  // unwrapped: the agent reads each jobspec once for its executor and this.
  void add_job(const v1::StartJob& msg, const job::Jobspec* spec, const std::string& step_key);
  bool manages(uint64_t jobid) const { return jobs_.count(jobid) != 0; }
  // SignalJob: every running step of the job gets `sig` (and SIGKILL after kill_after > 0).
  void signal_job(uint64_t jobid, int sig, double kill_after);
  // The job's own tasks on this agent ended (its batch script, its alloc placeholder, its
  // command): running steps are killed, pending ones fail, the entry goes once all ended.
  void job_tasks_ended(uint64_t jobid, int waitstatus, double cpu_seconds);
  // The controller persisted the job's end: whatever still runs is abandoned now.
  void forget_job(uint64_t jobid);

  // ---- clients (RunStep)
  // The first message of a call; `uid` is the caller's (SO_PEERCRED).
  void open(ClientId id, uint32_t uid, v1::StepSpec spec, StepClientSink sink);
  // stdin, stdin_eof, signal, winsize.
  void client_message(ClientId id, v1::StepClientMessage&& msg);
  // The call was cancelled (client gone): its step is killed, a pending one dropped.
  void client_gone(ClientId id);

  // ListSteps: permission_denied unless `uid` owns the job (or is root); not_found for an
  // unknown job. jobid 0: every job of the caller (all of them for root).
  Result<v1::ListStepsReply> list(uint32_t uid, uint64_t jobid) const;

  // ---- controller
  void cancel(const v1::CancelStep& msg);
  void stored(const v1::StepRef& ref);          // the record is persisted: drop it
  void fill_register(v1::Register& reg) const;  // records not acknowledged yet

  size_t jobs() const { return jobs_.size(); }
  size_t parked_opens() const { return parked_.size(); }

 private:
  struct Step;
  struct Job;
  using StepKey = std::pair<uint64_t, uint32_t>;  // job, step id

  Job* find(uint64_t jobid);
  const Job* find(uint64_t jobid) const;
  Step* find_step(uint64_t jobid, uint32_t stepid);
  void fail_open(StepClientSink& sink, const std::string& error);
  // open() of a job this agent does not have yet: parked until add_job or the wait ends.
  void park_open(ClientId id, uint32_t uid, v1::StepSpec spec, StepClientSink sink);
  void replay_parked(uint64_t jobid);
  Status check_owner(const Job& job, uint32_t uid) const;

  // Placement and launch (step_launch.cc).
  Result<StepRequest> to_request(const Job& job, const v1::StepSpec& spec) const;
  void start_ready(Job& job);
  void launch(Job& job, Step& step);
  // The request and its credential; signed into req.cred only when a node of the step is
  // another agent's.
  Result<v1::LaunchTasksRequest> build_launch(Job& job, Step& step, job::StepCred& cred);
  Status add_pals_fields(const Job& job, const Step& step, v1::LaunchTasksRequest& req);

  // Running steps (step_manager.cc).
  void on_up(uint64_t jobid, uint32_t stepid, uint64_t serial, v1::LaunchUp&& up);
  void on_done(uint64_t jobid, uint32_t stepid, uint64_t serial, const std::string& error);
  void on_exits(Job& job, Step& step, const v1::LaunchUp& up);
  void on_fence(Step& step, v1::PmiFence&& fence);
  void on_errors(Step& step, const v1::LaunchUp& up, v1::StepServerMessage& msg);
  void signal_step(Step& step, int sig);
  void deliver(Step& step, v1::LaunchDown&& down);
  void cancel_running(Step& step, int sig, double grace);
  void send(Step& step, v1::StepServerMessage&& msg);
  // Sends `created` with the step's next message, or alone after a short while.
  void hold_created(const Job& job, Step& step, v1::StepServerMessage&& created);
  // Ends the step: exit to the client, allocation released, record, waiting steps
  // started. `state` overrides COMPLETED/FAILED/CANCELED (pending steps that never ran).
  void finish(Job& job, uint32_t stepid, const std::string& state = {});
  void end_job_steps(Job& job, bool now);
  void maybe_drop(uint64_t jobid);
  Step* find_step(uint64_t jobid, uint32_t stepid, uint64_t serial);

  // Records (step_record.cc).
  v1::StepInfo info(const Job& job, const Step& step) const;
  v1::StepInfo batch_info(const Job& job) const;
  void record(Job& job, v1::StepInfo info);

  EventLoop& loop_;
  StepLauncher& launcher_;
  StepManagerConfig config_;
  RecordSink records_sink_;
  InteractiveEnd interactive_end_;
  std::unordered_map<uint64_t, std::unique_ptr<Job>> jobs_;
  std::unordered_map<ClientId, StepKey> clients_;
  struct ParkedOpen {
    uint32_t uid = 0;
    v1::StepSpec spec;
    StepClientSink sink;
    EventLoop::TimerId timer;
  };
  std::unordered_map<ClientId, ParkedOpen> parked_;
  std::map<std::pair<uint64_t, std::string>, v1::StepInfo> records_;  // not acknowledged yet
  uint64_t next_serial_ = 1;  // tells a reused step id (interactive) from its predecessor
};

// "corral_<job>_<step>": the PMI kvsname of a step.
std::string step_kvsname(uint64_t jobid, uint32_t stepid);

}  // namespace corral::node
