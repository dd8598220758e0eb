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
#include "node/uplink.h"
#include "util/event_loop.h"
#include "util/unique_fd.h"

namespace corral::node {

class PerilogRunner {
 public:
  static constexpr size_t kOutputTail = 4096;

  PerilogRunner(EventLoop& loop, Uplink& out, const AgentConfig& config);
  ~PerilogRunner();
  PerilogRunner(const PerilogRunner&) = delete;
  PerilogRunner& operator=(const PerilogRunner&) = delete;

  void run(const v1::RunPerilog& msg);
  bool on_child_exit(pid_t pid, int waitstatus);
  void kill_all(int sig);
  size_t live_processes() const { return runs_.size(); }
  // What still runs, so a restarted controller keeps those nodes out of scheduling.
  void fill_register(v1::Register& reg) const;

 private:
  struct Run {
    uint64_t jobid = 0;
    std::string kind, node;
    pid_t pid = -1;
    UniqueFd output;
    std::string tail;
    bool timed_out = false;
    std::optional<EventLoop::TimerId> term_timer, kill_timer;
  };
  void start_one(const v1::RunPerilog& msg, const std::string& node);
  void on_timeout(pid_t pid);
  bool read_output(Run& run);  // false at EOF
  void append_tail(Run& run, std::string_view data);
  void report(Run& run, int waitstatus);

  EventLoop& loop_;
  Uplink& out_;
  const AgentConfig& config_;
  std::unordered_map<pid_t, Run> runs_;
};

}  // namespace corral::node
