// The node side of job steps on one agent: for each LaunchTasks request it verifies the
// step credential for this agent's nodes, starts those nodes' tasks (with a PMI server
// per node), forwards the rest of the request down the fan-out tree to child agents, and
// reports its whole subtree upward: task output, exits, PMI fence contributions (merged,
// one per barrier for the subtree) and start errors. Lives on the agent's event loop.
//
// The same call serves the step manager (the root of a step's tree, on this agent) and
// the LaunchTasks rpc from a parent agent (serve_launch_tasks in step_launch_rpc.h).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "job/step_cred.h"
#include "steps.pb.h"

namespace corral {
class EventLoop;
}  // namespace corral

namespace corral::node {

class PmixHost;
class TaskCgroups;
class TaskSupervisor;
struct AgentConfig;

class JobKeys;

struct StepNodeConfig {
  std::string cluster_key;            // raw key bytes; empty: the job keys the controller sends
  std::string self_uri;               // this agent's StepService address (unix:/... or host:port)
  double clock_skew = 5.0;            // tolerated disagreement with the step manager's clock
  const JobKeys* job_keys = nullptr;  // those keys (the agent's); null with neither: all refused
  PmixHost* pmix = nullptr;           // the agent's PMIx server, for --mpi=pmix (null: none)
};

class StepNode {
 public:
  using LaunchId = uint64_t;
  // Everything the subtree reports, in order. Called on the loop thread. Read a message's
  // fields in declaration order (started, errors, output, exits, fence, pmi_aborts): a
  // rank's output, with its EOF, always comes before its exit. A fence goes up once
  // every node with tasks in the subtree contributed to it (PmiFence.nodes).
  using Up = std::function<void(v1::LaunchUp&&)>;
  // The subtree is finished: every task of it exited and was reported through `up`,
  // every child stream closed. `error` is non-empty when the launch as a whole failed
  // (malformed request); per-node failures travel as LaunchUp.errors instead.
  using Done = std::function<void(const std::string& error)>;

  // Tasks run under `tasks`, which must outlive this.
  StepNode(EventLoop& loop, TaskSupervisor& tasks, const AgentConfig& config, StepNodeConfig sc);
  ~StepNode();
  StepNode(const StepNode&) = delete;
  StepNode& operator=(const StepNode&) = delete;

  // Starts `req` on this agent's nodes among req.nodes and forwards the others to child
  // agents (grouped by LaunchNode.agent, tree of width req.fanout_width). A node whose
  // credential check fails is reported in LaunchUp.errors and counts as finished with
  // exit code 1 for each of its ranks (a TaskExit per rank, so a parent can count ranks).
  // `made_here`: the credential this agent's own step manager made for `req` (passed in
  // process, never over the wire): taken as verified; null: req.cred is verified.
  LaunchId launch(v1::LaunchTasksRequest req, Up up, Done done, const job::StepCred* made_here = nullptr);
  // stdin (to the node of rank 0), signals (to every task), fence results (to every
  // node's PMI server), window sizes (rank 0's terminal): applied here and forwarded.
  void deliver(LaunchId id, const v1::LaunchDown& down);
  // The parent went away: SIGKILL the subtree; `done` is still called once it is gone.
  void abandon(LaunchId id);

  // Signals every step task of the job on this agent (the job ended or was canceled).
  void signal_job(uint64_t jobid, int sig);
  void kill_all(int sig);  // agent shutdown
  // Each launch's tasks go into a cgroup of their own (null: process groups only).
  void set_cgroups(TaskCgroups* cgroups);
  size_t live_tasks() const;  // started here and not yet exited

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace corral::node
