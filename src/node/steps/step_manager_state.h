// The step manager's per-job and per-step state, shared by its .cc files only.
#pragma once

#include <deque>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "node/steps/step_manager.h"

namespace corral::node {

struct StepManager::Step {
  enum class State { pending, running, ended };

  uint32_t id = 0;
  uint64_t serial = 0;
  State state = State::pending;
  ClientId client = 0;
  StepClientSink sink;  // empty once the client is gone
  v1::StepSpec spec;
  StepRequest req;
  std::string name, command;
  double t_submit = 0, t_start = 0, t_end = 0;

  // Placement.
  StepShare share;
  std::optional<job::PortRange> ports;
  std::string nodelist;
  uint32_t nnodes = 0, ntasks = 0, ncores = 0;

  // The launch tree.
  std::optional<StepLauncher::LaunchId> launch_id;
  std::vector<v1::LaunchDown> held;         // for the tree before its launch id is known
  std::map<uint32_t, v1::PmiFence> fences;  // barrier -> contributions merged so far

  // Ends.
  std::vector<v1::TaskExit> exits;  // by rank
  std::vector<bool> exited;
  uint32_t nexited = 0;
  double cpu_seconds = 0;
  bool cancelled = false;
  bool killed = false;  // SIGKILL sent (kill_on_bad_exit, client gone, job end)
  std::string error;
  std::optional<EventLoop::TimerId> kill_timer;
  // `created`, held back briefly so that a short step's client gets created, output and
  // exit in one message (see StepManager::hold_created).
  std::optional<v1::StepServerMessage> created;
  std::optional<EventLoop::TimerId> created_timer;
  std::string final_state;
  int waitstatus = -1;

  void add_error(const std::string& e) {
    if (e.empty()) return;
    if (!error.empty()) error += "; ";
    error += e;
  }
};

struct StepManager::Job {
  uint64_t id = 0;
  uint32_t uid = 0, gid = 0;
  std::string name;
  std::string step_key;
  std::string stepmgr;
  bool alloc = false;                                  // `corral alloc`: ends with its interactive step
  bool batch = false;                                  // a batch script runs: listed as the "batch" step
  std::vector<v1::JobNode> nodes;                      // job order (empty when the controller sent none)
  std::unordered_map<std::string, size_t> node_index;  // name -> position in `nodes`
  std::optional<StepAllocator> allocator;
  std::optional<job::PortShare> ports;
  uint32_t ports_per_step = 0;
  uint32_t fanout_width = 0;
  std::string mpi = "auto";  // the job's --mpi, else the site's [steps] mpi-default (canonical)
  google::protobuf::Map<std::string, std::string> extra_env;
  google::protobuf::RepeatedPtrField<std::string> env;  // the jobspec's (KEY=VALUE), when a client sends none
  double t_start = 0;

  uint32_t next_step = 0;
  std::map<uint32_t, Step> steps;  // pending and running
  std::deque<v1::StepInfo> finished;
  bool ending = false;  // the job's own tasks ended: no new steps
  int batch_waitstatus = -1;
  std::optional<EventLoop::TimerId> kill_timer;
  bool starting = false, start_again = false;  // start_ready() is not reentrant
};

// "job 42 has no step manager here (...)": RunStep and ListSteps of a job this agent lacks.
Error no_step_manager(uint64_t jobid);

}  // namespace corral::node
