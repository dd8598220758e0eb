// The node agent's state machine on the event-loop thread: dispatches controller
// messages to the job executor and the perilog runner, reaps children, and owns the
// outbox whose batches the ControllerLink writes. Knows nothing about gRPC.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "node/exec/agent_config.h"
#include "node/exec/task_cgroups.h"
#include "node/exec/task_supervisor.h"
#include "node/job_exec.h"
#include "node/perilog_runner.h"
#include "node/pmi/job_fence.h"
#include "node/pmix/pmix_server.h"
#include "node/steps/job_keys.h"
#include "node/steps/step_manager.h"
#include "node/steps/step_node.h"
#include "node/uplink.h"
#include "util/event_loop.h"
#include "util/result.h"
#include "util/unique_fd.h"

namespace corral::node {

class Agent {
 public:
  // SIGCHLD (and SIGTERM/SIGINT when config.handle_termination) must already be
  // blocked in every thread of the process: the agent reads them from a signalfd.
  // `steps`: the cluster key and this agent's StepService address for StepNode
  // (without a key every step launch on this agent is refused).
  Agent(EventLoop& loop, AgentConfig config, Uplink::Sink sink, StepNodeConfig steps = {});
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  Status start();
  // Raises the calling thread (the event loop's) to --loop-nice and starts tasks back at
  // the agent's own priority. Called last, just before the loop runs: threads made before
  // it (the link to corrald, gRPC's) stay at the agent's own priority; those the loop makes
  // for launches (child links, fences) share its priority.
  void raise_loop_priority();

  // Connection life cycle, driven by the ControllerLink through EventLoop::post.
  v1::AgentMessage begin_register(uint64_t session);
  void on_registered(uint64_t session, const v1::ControllerMessage& first);
  void on_disconnected(uint64_t session);
  void handle(const v1::ControllerMessage& msg);

  // SIGTERM to every task and perilog, SIGKILL after the grace period, then stops
  // the loop. Nothing more is reported to the controller.
  void shutdown();

  const AgentConfig& config() const { return config_; }
  JobExecutor& executor() { return *jobs_; }
  // For the StepService (loop thread only, but for the thread-safe fence table).
  StepManager& steps() { return *steps_; }
  StepNode& step_node() { return *step_node_; }
  const TaskCgroups* cgroups() const { return cgroups_.get(); }
  JobFenceTable& fences() { return fences_; }
  size_t live_processes() const { return tasks_.live(); }  // tasks and scripts not yet reaped

 private:
  void arm_sweep();
  Status open_cgroups();    // config_.cgroups; logs whether tasks are contained
  void open_spool();        // STATE_DIR/output.spool, for output while the controller is away
  void end_of_iteration();  // flushes the outbox; step records that linger get a timer
  void on_signal();
  void reap();
  void check_shutdown_done();
  void drop_steps_of(uint64_t jobid);  // the job's steps here end: it was forgotten or requeued
  void take_job_keys(const v1::ControllerMessage& msg);
  void take_settings(const v1::NodeSettings& s);

  EventLoop& loop_;
  AgentConfig config_;
  std::optional<OutputSpool> spool_;  // before the outbox that writes to it
  Uplink out_;
  std::unique_ptr<TaskCgroups> cgroups_;  // before the users below: destroyed after them
  JobKeys keys_;                          // read by the StepNode
  std::unique_ptr<PmixHost> pmix_;        // started by the first --mpi=pmix; outlives its namespaces
  TaskSupervisor tasks_{loop_};           // every process started here; outlives its users
  std::unique_ptr<JobExecutor> jobs_;
  std::unique_ptr<PerilogRunner> perilogs_;
  // Destroyed in reverse: the tree first, so nothing it still reports finds a dead manager.
  std::unique_ptr<StepManager> steps_;
  std::unique_ptr<StepLauncher> launcher_;
  std::unique_ptr<StepNode> step_node_;
  JobFenceTable fences_;
  UniqueFd signal_fd_;
  std::optional<EventLoop::TimerId> sweep_timer_;
  std::optional<EventLoop::TimerId> records_timer_;  // sends step records that linger
  uint64_t session_ = 0;
  bool shutting_down_ = false;
};

}  // namespace corral::node
