// Runs jobs on this agent's nodes: starts their tasks (or, in mock mode, only a
// timer), collects output and exit statuses, delivers signals, and keeps each
// JobNodeExit until the controller says it was persisted (`forget`).
// Lives on the event-loop thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "job/mpi_kind.h"
#include "node/exec/agent_config.h"
#include "node/exec/spawn_process.h"
#include "node/exec/task_supervisor.h"
#include "node/pals/node_pals.h"
#include "node/pmi/pmi_server.h"
#include "node/pmix/pmix_server.h"
#include "node/uplink.h"
#include "util/event_loop.h"
#include "util/result.h"

namespace corral::job {
struct Jobspec;
}

namespace corral::node {

class TaskCgroups;

class JobExecutor {
 public:
  // Jobs submitted together (`--cc`, job scripts, benchmarks) often carry the same
  // jobspec text, and the agent reads each for the step manager too: the last parse is
  // reused.
  Result<std::shared_ptr<const job::Jobspec>> parse_cached(const std::string& text);
  // Tasks run under `tasks`, which must outlive this.
  // `pmix`: the agent's PMIx server, for jobs whose tasks use PMIx (null: none here).
  JobExecutor(EventLoop& loop, TaskSupervisor& tasks, Uplink& out, const AgentConfig& config, PmixHost* pmix = nullptr);
  ~JobExecutor();
  JobExecutor(const JobExecutor&) = delete;
  JobExecutor& operator=(const JobExecutor&) = delete;

  // Every node of a job on this agent reported its exit: the largest wait status and
  // the cpu time of its tasks here (the step manager ends the job's steps).
  using JobEnded = std::function<void(uint64_t jobid, int waitstatus, double cpu_seconds)>;
  void set_job_ended(JobEnded cb) { job_ended_ = std::move(cb); }
  // Tasks go into a cgroup per job (null: process groups only). Must outlive this.
  void set_cgroups(TaskCgroups* cgroups) { cgroups_ = cgroups; }

  // A StartJob of a later attempt (a requeued job) replaces the run held here: it starts
  // once every task of the earlier run has ended (they are killed now).
  void start(const v1::StartJob& msg);
  // The attempt of the run of `jobid` held here, if there is one.
  std::optional<uint32_t> attempt_of(uint64_t jobid) const;
  // A signal for another run than the newest one here (held or waiting to start).
  bool for_earlier_run(const v1::SignalJob& msg) const;
  void signal(const v1::SignalJob& msg);
  void forget(uint64_t jobid);
  // An alloc job (StartJob.alloc) runs no process: it ends when its interactive step
  // does, with that step's wait status, or when a terminating signal reaches it.
  void end_alloc(uint64_t jobid, int waitstatus);
  // Adds `running` and `exited` to a register message.
  void fill_register(v1::Register& reg) const;
  // Shutdown: signals every task; pending mock jobs are dropped silently.
  void kill_all(int sig);
  size_t jobs() const { return jobs_.size(); }

 private:
  struct Task {
    uint32_t rank = 0;
    pid_t pid = -1;  // -1: never started
    bool done = false;
    int waitstatus = 0;
    double cpu_seconds = 0;
  };
  // A task spawn that waits for resources (spawn_task), with what it takes along.
  struct Deferred {
    uint32_t task = 0;
    SpawnRequest req;
    std::optional<PmiTaskEnd> pmi_end;
  };
  struct Node {
    std::string name;
    uint32_t index = 0;
    uint32_t first_rank = 0;
    uint32_t ntasks = 0;
    std::vector<Task> tasks;
    size_t live = 0;
    std::string error;
    bool reported = false;
    bool fault = false;  // the node itself could not start a task (not the task's own fault)
    std::vector<Deferred> deferred;
    std::function<void()> restart;  // the whole node's start, waiting for resources
    std::optional<double> deferred_since;
    // PMI for the job's own tasks (MPI programs run with `corral run` outside an
    // allocation): barriers across nodes go through the step manager (JobFence).
    std::unique_ptr<PmiExchange> exchange;
    std::unique_ptr<PmiServer> pmi;  // PMI-1/PMI-2; PMIx is the job's (Job::pmix)
    std::unique_ptr<PalsNode> pals;  // --mpi=cray-pals: the spool directory and apinfo file
  };
  struct Job {
    uint64_t id = 0;
    std::vector<Node> nodes;
    std::optional<EventLoop::TimerId> mock_timer, kill_timer, retry_timer;
    double retry_delay = 0;                          // seconds; grows while spawns keep waiting
    std::string script_dir;                          // batch jobs: removed on forget
    std::optional<std::vector<std::string>> cgroup;  // created with the first task (empty: none)
    bool contained = false;                          // has a cgroup directory with its limits (not mock jobs)
    uint64_t oom_kills = 0;                          // reported so far
    size_t unreported = 0;
    bool alloc = false;
    uint32_t attempt = 0;  // StartJob.attempt
    int worst = 0;         // over the nodes reported so far
    double cpu_seconds = 0;
    job::MpiService mpi = job::MpiService::pmi;
    // PMIx: one namespace for the job's nodes on this agent, fencing through their
    // exchanges (declared first: it outlives the namespace).
    std::unique_ptr<SharedNodesExchange> pmix_exchange;
    std::unique_ptr<PmixNamespace> pmix;
    std::shared_ptr<const PalsStep> pals;  // --mpi=cray-pals: checked, its file made, once
  };
  struct UserInfo {
    std::string name, home;
  };

  void start_mock(Job& job, const v1::StartJob& msg, double seconds);
  // Where the hooks' notes go for the first task: into `req` (its error file, written by
  // whoever opens that file) or to the controller when stderr is captured.
  void place_notes(const Job& job, const Node& node, const v1::StartJob& msg, SpawnRequest& req);
  void finish_mock(uint64_t jobid, int waitstatus);
  void start_alloc(Job& job, const v1::StartJob& msg);
  void start_real(Job& job, const v1::StartJob& msg, const job::Jobspec& spec);
  void start_node(Job& job, uint32_t ni, const v1::NodeTasks& nt, const v1::StartJob& msg, const job::Jobspec& spec,
                  const std::vector<std::string>& argv, const UserInfo& user);
  void fail_node(Job& job, Node& node, const std::string& error);
  void spawn_task(Job& job, uint32_t ni, uint32_t ti, Deferred d);
  TaskSupervisor::Handlers task_handlers(uint64_t jobid, uint32_t ni, uint32_t ti);
  bool patient(const Node& node) const;  // may it still wait for resources?
  void defer_node(Job& job, uint32_t ni, const v1::NodeTasks& nt, const v1::StartJob& msg, const job::Jobspec& spec,
                  const std::vector<std::string>& argv, const UserInfo& user, const std::string& why);
  void schedule_retry(Job& job, const std::string& why);
  void retry_spawns(uint64_t jobid);
  void drop_deferred(Job& job, int sig);
  Status start_pmi(Job& job, Node& node, const v1::StartJob& msg);
  Status start_pmix(Job& job, const v1::StartJob& msg);
  Status start_pals(Job& job, Node& node, const v1::StartJob& msg);
  void pmi_failed(uint64_t jobid, const std::string& node, const std::string& text);
  Node& add_node(Job& job, const v1::NodeTasks& t);
  Result<std::string> write_batch_script(Job& job, const v1::StartJob& msg, const job::Jobspec& spec);
  void task_exited(Job& job, Node& node, Task& task, const TaskSupervisor::Exit& exit);
  void signal_tasks(Job& job, int sig);
  void report_node(Job& job, Node& node);
  // The next run waits for this one (start): runs it once the earlier run has ended.
  void start_waiting_run(uint64_t jobid);
  std::string error_prefix(const Job& job, const Node& node) const;
  Job* find(uint64_t jobid);
  const std::vector<std::string>& cgroup_of(Job& job);
  // The job's memory, process and CPU limits on this agent's nodes, in its cgroup.
  void limit_job(const Job& job, const v1::StartJob& msg);
  EventLoop& loop_;
  TaskSupervisor& tasks_;
  Uplink& out_;
  const AgentConfig& config_;
  PmixHost* pmix_;
  TaskCgroups* cgroups_ = nullptr;
  std::unordered_map<uint64_t, Job> jobs_;
  std::unordered_map<uint64_t, std::vector<v1::JobNodeExit>> exits_;  // not yet forgotten
  // A requeued job's next run, and the signals sent to it, while its earlier run ends.
  struct WaitingRun {
    v1::StartJob start;
    std::vector<v1::SignalJob> signals;
  };
  std::unordered_map<uint64_t, WaitingRun> waiting_runs_;
  double last_wait_warning_ = -1e9;
  std::string last_spec_text_;
  std::shared_ptr<const job::Jobspec> last_spec_;
  JobEnded job_ended_;
};

}  // namespace corral::node
