// Supervises every process the agent starts (a job's tasks, a step's tasks, prolog,
// epilog and housekeeping scripts) one way, on the event loop: spawns it (spawn_process:
// process group, cgroup, CPU binding, limits, corral-imp), reads its stdout and stderr as
// they come, feeds its stdin from a buffer (a pipe or a pseudo terminal), signals its
// process group, and reports its exit once, after the last of its output, having killed
// what its process group left behind. Its owners keep only what is theirs: which job or
// step a process belongs to and what its output and exit mean there.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "node/exec/spawn_process.h"
#include "util/result.h"

namespace corral {
class EventLoop;
class WorkerPool;
}  // namespace corral

namespace corral::node {

class TaskSupervisor {
 public:
  struct Exit {
    int waitstatus = 0;
    double cpu_seconds = 0;  // user + system (wait4's rusage)
  };
  // Called on the loop thread. A handler may spawn, signal or forget any process,
  // including its own.
  struct Handlers {
    // A chunk of stdout (is_err false) or stderr; once a stream ended, one call with `eof`
    // and no data. Only for streams captured through a pipe or the terminal.
    std::function<void(bool is_err, std::string_view data, bool eof)> output;
    // corral-imp could not run the command as the user (its report, before the final
    // output). Optional.
    std::function<void(std::string_view message)> spawn_failed;
    // Reaped, after every captured stream's EOF. Optional.
    std::function<void(const Exit&)> exited;
  };
  // Where stdin comes from: the request's input file (or /dev/null), a pipe fed by feed(),
  // or a pseudo terminal that is also stdout and stderr (reported as stdout).
  enum class Stdin { file, pipe, terminal };

  explicit TaskSupervisor(EventLoop& loop);
  ~TaskSupervisor();
  TaskSupervisor(const TaskSupervisor&) = delete;
  TaskSupervisor& operator=(const TaskSupervisor&) = delete;

  // Errors are spawn_process's (Errc::unavailable: the node lacks descriptors, processes
  // or memory; nothing was started).
  Result<pid_t> spawn(const SpawnRequest& req, Handlers handlers, Stdin in = Stdin::file);
  // What spawn returns, given to the one who queued it.
  using Spawned = std::function<void(Result<pid_t>)>;
  // spawn (stdin from the request's file), later in this turn of the loop, together with
  // every other spawn queued in the turn: the agent reads all the requests that came at
  // once before it starts their tasks. A lone spawn runs on the loop's thread at the end
  // of the turn; several go to the spawn threads (set_spawn_helpers), side by side, while
  // the loop goes on, and are taken in by a later turn. `done` is called on the loop
  // thread with the process already supervised, and before its exit is reported (an exit
  // reaped before its spawn is taken in waits for it).
  void spawn_later(SpawnRequest req, Handlers handlers, Spawned done);
  // Starts what spawn_later queued now rather than at the end of the turn (a batch handed
  // to the spawn threads is still taken in by a later turn).
  void spawn_queued();
  // Threads besides the loop's that start queued processes; none by default. Takes effect
  // when nothing is queued or being started.
  void set_spawn_helpers(unsigned n);
  // What a node gets unless told: half its CPUs, at most 8 (each mostly waits for a
  // child's exec; more would only contend for the kernel's process locks); none on one CPU.
  static unsigned default_spawn_helpers();
  // The scheduling priority every process starts with from now on, when the loop's
  // thread runs at another (set_loop_nice).
  void set_task_nice(int nice) { task_nice_ = nice; }
  // Queues `data` for the process's stdin; `eof` closes it once everything is written (a
  // terminal gets its end-of-file character instead). False when it has no fed stdin.
  bool feed(pid_t pid, std::string_view data, bool eof);
  void set_window_size(pid_t pid, unsigned rows, unsigned cols);
  // Signals the process group while the process is supervised (not once reaped).
  void signal(pid_t pid, int sig);
  // From the agent's SIGCHLD handling: true when `pid` is supervised here (or may be, see
  // below). While spawns
  // are being started on the spawn threads, an unknown pid's exit is kept until they are
  // taken in: it may be one of theirs.
  bool on_child_exit(pid_t pid, int waitstatus, double cpu_seconds);
  // No more handler calls for `pid` (its owner is going away); its descriptors close.
  void forget(pid_t pid);
  size_t live() const { return procs_.size(); }

 private:
  static void let_the_caller_block();
  std::optional<int> task_nice_;
  struct Proc;
  Proc* find(pid_t pid);
  void watch_output(Proc& p, bool is_err);
  void on_readable(pid_t pid, bool is_err);
  // One read and its report; false at the end of the stream (EOF, or EIO from a terminal
  // nobody holds open), whose EOF is then reported.
  bool pass_output(Proc& p, bool is_err);
  void close_output(Proc& p, bool is_err);
  void write_stdin(Proc& p);
  void close_stdin(Proc& p);
  // Out of the table; destroyed later, as a handler of its own may be running.
  void retire(std::unique_ptr<Proc> p);
  // Supervises a started process: its output watched from now on. A valid `pty_master`:
  // it runs on that terminal; `stdin_w`: the write end of its stdin pipe.
  pid_t adopt(SpawnedProcess spawned, Handlers handlers, UniqueFd pty_master, UniqueFd stdin_w);

  // The exit of a supervised process, its group killed: its last output, then its handler.
  void finish(pid_t pid, const Exit& exit);

  struct Queued {
    SpawnRequest req;
    Handlers handlers;
    Spawned done;
    std::optional<Result<SpawnedProcess>> result;
  };
  struct Batch;  // spawns on the spawn threads
  // Supervises what a batch started and tells those who queued it, in queue order.
  void take_in(std::vector<Queued>& spawned);
  void batch_spawned(const std::shared_ptr<Batch>& batch);
  std::vector<Queued> queued_;
  bool queue_posted_ = false;
  std::vector<std::shared_ptr<Batch>> in_flight_;
  std::unordered_map<pid_t, Exit> early_exits_;  // reaped while in_flight_ was not empty
  std::unique_ptr<WorkerPool> spawners_;         // null: every spawn on the loop's thread

  EventLoop& loop_;
  // stdin of every queued task that reads nothing (a step's): opened once, not once per
  // task. spawn() leaves its caller's request as it is (a job's tasks, a perilog).
  UniqueFd dev_null_;
  std::unordered_map<pid_t, std::unique_ptr<Proc>> procs_;
  std::vector<std::unique_ptr<Proc>> retired_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // posted work checks it
};

}  // namespace corral::node
