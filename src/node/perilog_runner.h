// Job prolog / epilog and node housekeeping scripts: run on each listed node of this
// agent, concurrently, with a timeout; the result (status, timed out, the output's
// tail) goes back to the controller. Lives on the event-loop thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "node/exec/agent_config.h"
#include "node/exec/task_supervisor.h"
#include "node/uplink.h"
#include "util/event_loop.h"

namespace corral::node {

class PerilogRunner {
 public:
  static constexpr size_t kOutputTail = 4096;

  // Scripts run under `tasks`, which must outlive this.
  PerilogRunner(EventLoop& loop, TaskSupervisor& tasks, Uplink& out, const AgentConfig& config);
  ~PerilogRunner();
  PerilogRunner(const PerilogRunner&) = delete;
  PerilogRunner& operator=(const PerilogRunner&) = delete;

  void run(const v1::RunPerilog& msg);
  void kill_all(int sig);
  // What still runs, so a restarted controller keeps those nodes out of scheduling.
  void fill_register(v1::Register& reg) const;

 private:
  struct Run {
    uint64_t jobid = 0;
    std::string kind, node;
    pid_t pid = -1;
    std::string tail;
    bool timed_out = false;
    std::optional<EventLoop::TimerId> term_timer, kill_timer;
  };
  void start_one(const v1::RunPerilog& msg, const std::string& node);
  void on_timeout(uint64_t id);
  void exited(uint64_t id, int waitstatus);
  static void append_tail(Run& run, std::string_view data);
  void report(Run& run, int waitstatus);

  EventLoop& loop_;
  TaskSupervisor& tasks_;
  Uplink& out_;
  const AgentConfig& config_;
  std::unordered_map<uint64_t, Run> runs_;  // by run number
  uint64_t next_run_ = 1;
};

}  // namespace corral::node
