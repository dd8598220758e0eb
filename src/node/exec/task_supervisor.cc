#include "node/exec/task_supervisor.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include <spdlog/spdlog.h>

#include "util/event_loop.h"
#include "util/unique_fd.h"
#include "util/worker_pool.h"

namespace corral::node {

namespace {

constexpr size_t kReadChunk = 64 * 1024;
// Reads of each stream after the exit: bounded, so a leftover writer that escaped the
// process group cannot stall the loop.
constexpr int kMaxDrainReads = 16;
constexpr char kTerminalEof = 4;  // ^D: what a terminal reader at an empty line takes as EOF

struct Pty {
  UniqueFd master;
  std::string slave;
};

// A pseudo terminal for a task; through corral-imp the user opens the slave, so it is
// given to them first.
Result<Pty> open_pty(bool give_to_user, uid_t uid) {
  Pty p;
  p.master.reset(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!p.master.valid()) return io_error(std::string("cannot open a pseudo terminal: ") + std::strerror(errno));
  char name[128];
  if (::grantpt(p.master.get()) != 0 || ::unlockpt(p.master.get()) != 0 ||
      ::ptsname_r(p.master.get(), name, sizeof name) != 0)
    return io_error(std::string("cannot set up a pseudo terminal: ") + std::strerror(errno));
  p.slave = name;
  if (give_to_user && ::chown(name, uid, static_cast<gid_t>(-1)) != 0)
    return io_error("cannot give terminal " + p.slave + " to uid " + std::to_string(uid) + ": " + std::strerror(errno));
  ::fcntl(p.master.get(), F_SETFL, O_NONBLOCK);
  return p;
}

}  // namespace

struct TaskSupervisor::Proc {
  pid_t pid = -1;
  Handlers handlers;
  UniqueFd out, err;  // read ends; a terminal's master is `out`
  UniqueFd status;    // corral-imp's failure report
  UniqueFd stdin_w;   // a pipe's write end, or a duplicate of the terminal's master
  bool terminal = false;
  std::string stdin_buf;
  bool stdin_eof = false;
  bool stdin_watched = false;
};

TaskSupervisor::TaskSupervisor(EventLoop& loop) : loop_(loop), dev_null_(::open("/dev/null", O_RDONLY | O_CLOEXEC)) {}

struct TaskSupervisor::Batch {
  std::vector<Queued> items;  // each spawn thread touches only its own item's result
  std::atomic<size_t> left{0};
};

TaskSupervisor::~TaskSupervisor() {
  spawners_.reset();  // every handed-over spawn has returned
  // Started, but never told to anyone who would end them.
  for (const auto& b : in_flight_)
    for (const auto& q : b->items)
      if (q.result && *q.result) ::killpg((*q.result)->pid, SIGKILL);
  for (auto& [pid, p] : procs_) {
    if (p->out.valid()) loop_.remove_fd(p->out.get());
    if (p->err.valid()) loop_.remove_fd(p->err.get());
    if (p->stdin_watched) loop_.remove_fd(p->stdin_w.get());
  }
}

TaskSupervisor::Proc* TaskSupervisor::find(pid_t pid) {
  auto it = procs_.find(pid);
  return it == procs_.end() ? nullptr : it->second.get();
}

Result<pid_t> TaskSupervisor::spawn(const SpawnRequest& req, Handlers handlers, Stdin in) {
  UniqueFd stdin_r, stdin_w;
  Pty pty;
  SpawnRequest with_stdin;  // the request with the terminal or pipe made here
  if (in == Stdin::terminal) {
    auto opened = open_pty(!req.imp_path.empty(), req.uid);
    if (!opened) return opened.error();
    pty = std::move(*opened);
    with_stdin = req;
    with_stdin.terminal = pty.slave;
  } else if (in == Stdin::pipe) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
      return io_error(std::string("cannot create the stdin pipe: ") + std::strerror(errno));
    stdin_r.reset(fds[0]);
    stdin_w.reset(fds[1]);
    ::fcntl(stdin_w.get(), F_SETFL, O_NONBLOCK);
    with_stdin = req;
    with_stdin.stdin_fd = stdin_r.get();
  }
  auto spawned = spawn_process(in == Stdin::file ? req : with_stdin, task_nice_);
  if (!spawned) return spawned.error();
  return adopt(std::move(*spawned), std::move(handlers), std::move(pty.master), std::move(stdin_w));
}

pid_t TaskSupervisor::adopt(SpawnedProcess spawned, Handlers handlers, UniqueFd pty_master, UniqueFd stdin_w) {
  auto p = std::make_unique<Proc>();
  p->pid = spawned.pid;
  p->handlers = std::move(handlers);
  p->status = std::move(spawned.status_pipe);
  p->terminal = pty_master.valid();
  p->stdin_w = std::move(stdin_w);
  if (p->terminal) {
    p->stdin_w.reset(::fcntl(pty_master.get(), F_DUPFD_CLOEXEC, 0));
    p->out = std::move(pty_master);
  } else {
    p->out = std::move(spawned.stdout_pipe);
    p->err = std::move(spawned.stderr_pipe);
  }
  Proc& proc = *p;
  procs_.emplace(proc.pid, std::move(p));
  if (proc.out.valid()) watch_output(proc, false);
  if (proc.err.valid()) watch_output(proc, true);
  return proc.pid;
}

void TaskSupervisor::spawn_later(SpawnRequest req, Handlers handlers, Spawned done) {
  if (req.stdin_fd < 0 && req.input_path.empty() && dev_null_.valid()) req.stdin_fd = dev_null_.get();
  queued_.push_back({std::move(req), std::move(handlers), std::move(done), std::nullopt});
  if (queue_posted_) return;
  queue_posted_ = true;
  // Posted work runs after every descriptor the loop found ready in this turn: by then
  // all the launch requests that came together are queued.
  std::weak_ptr<int> token = alive_;
  loop_.post([this, token] {
    if (token.lock()) spawn_queued();
  });
}

// The loop often runs because a client's request just woke it, and took the CPU from that
// client before it reached its wait for the answer. A task created now would find this
// CPU busy (the loop, and the client still runnable) and start on another one: an idle
// CPU woken by an interrupt, and on a small or virtual machine a CPU shared with the one
// the client runs on. Yielding once lets the client block first; the task then starts
// on the CPU the loop frees while it waits for the task's exec, as a program's own
// posix_spawn child does. With nothing else runnable here the call returns at once.
void TaskSupervisor::let_the_caller_block() { ::sched_yield(); }

void TaskSupervisor::spawn_queued() {
  queue_posted_ = false;
  std::vector<Queued> batch = std::move(queued_);
  queued_.clear();
  if (batch.empty()) return;
  if (!spawners_ || batch.size() < 2) {  // a lone request's: no hand-off, no wait
    if (batch.size() == 1) let_the_caller_block();
    for (auto& q : batch) q.result = spawn_process(q.req, task_nice_);
    return take_in(batch);
  }
  // spawn_process touches nothing shared: each call has its own request, descriptors and
  // child. The last to return hands the batch back to the loop.
  auto b = std::make_shared<Batch>();
  b->items = std::move(batch);
  b->left = b->items.size();
  in_flight_.push_back(b);
  std::weak_ptr<int> token = alive_;
  EventLoop* loop = &loop_;  // outlives the spawn threads (joined in the destructor)
  for (size_t i = 0; i < b->items.size(); ++i)
    spawners_->post([this, b, i, token, loop, nice = task_nice_] {
      b->items[i].result = spawn_process(b->items[i].req, nice);
      if (b->left.fetch_sub(1) != 1) return;
      loop->post([this, b, token] {
        if (token.lock()) batch_spawned(b);
      });
    });
}

void TaskSupervisor::batch_spawned(const std::shared_ptr<Batch>& batch) {
  std::erase(in_flight_, batch);
  take_in(batch->items);
  if (in_flight_.empty()) early_exits_.clear();  // orphans' exits: no spawn of ours
}

void TaskSupervisor::take_in(std::vector<Queued>& spawned) {
  for (auto& q : spawned) {
    if (!*q.result) {
      q.done(q.result->error());
      continue;
    }
    const pid_t pid = adopt(std::move(**q.result), std::move(q.handlers), UniqueFd(), UniqueFd());
    q.done(pid);
    auto early = early_exits_.find(pid);
    if (early == early_exits_.end()) continue;
    const Exit exit = early->second;
    early_exits_.erase(early);
    if (procs_.contains(pid)) finish(pid, exit);  // unless `done` forgot it
  }
}

unsigned TaskSupervisor::default_spawn_helpers() { return std::min(8u, std::thread::hardware_concurrency() / 2); }

void TaskSupervisor::set_spawn_helpers(unsigned n) {
  if (!queued_.empty() || !in_flight_.empty() || (spawners_ ? spawners_->threads() : 0) == n) return;
  spawners_ = n == 0 ? nullptr : std::make_unique<WorkerPool>(n);
}

void TaskSupervisor::watch_output(Proc& p, bool is_err) {
  const pid_t pid = p.pid;
  const int fd = is_err ? p.err.get() : p.out.get();
  auto st = loop_.add_fd(fd, EPOLLIN, [this, pid, is_err](uint32_t) { on_readable(pid, is_err); });
  if (!st) spdlog::error("cannot watch the output of process {}: {}", pid, st.message());
}

void TaskSupervisor::on_readable(pid_t pid, bool is_err) {
  if (Proc* p = find(pid)) pass_output(*p, is_err);
}

bool TaskSupervisor::pass_output(Proc& p, bool is_err) {
  UniqueFd& fd = is_err ? p.err : p.out;
  if (!fd.valid()) return false;
  char buf[kReadChunk];
  const ssize_t n = ::read(fd.get(), buf, sizeof buf);
  if (n > 0) {
    if (p.handlers.output) p.handlers.output(is_err, std::string_view(buf, static_cast<size_t>(n)), false);
    return true;
  }
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
  close_output(p, is_err);
  return false;
}

void TaskSupervisor::close_output(Proc& p, bool is_err) {
  UniqueFd& fd = is_err ? p.err : p.out;
  if (!fd.valid()) return;
  // A pipe's read end is its file's one descriptor here: the close takes it out of the
  // epoll set. A terminal's master is stdin_w too, which keeps the file, and the
  // registration, alive: that one is taken out first.
  if (p.terminal) {
    loop_.remove_fd(fd.get());
    fd.reset();
  } else {
    loop_.close_fd(fd);
  }
  if (p.handlers.output) p.handlers.output(is_err, {}, true);
}

bool TaskSupervisor::feed(pid_t pid, std::string_view data, bool eof) {
  Proc* p = find(pid);
  if (p == nullptr || !p->stdin_w.valid()) return false;
  p->stdin_buf.append(data);
  p->stdin_eof = p->stdin_eof || eof;
  write_stdin(*p);
  return true;
}

void TaskSupervisor::write_stdin(Proc& p) {
  while (p.stdin_w.valid() && !p.stdin_buf.empty()) {
    const ssize_t n = ::write(p.stdin_w.get(), p.stdin_buf.data(), p.stdin_buf.size());
    if (n > 0) {
      p.stdin_buf.erase(0, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    return close_stdin(p);  // the process closed its stdin (EPIPE): what is left has no reader
  }
  if (!p.stdin_w.valid()) return;
  if (!p.stdin_buf.empty()) {
    if (p.stdin_watched) return;
    const pid_t pid = p.pid;
    auto st = loop_.add_fd(p.stdin_w.get(), EPOLLOUT, [this, pid](uint32_t) {
      if (Proc* q = find(pid)) write_stdin(*q);
    });
    p.stdin_watched = st.ok();
    return;
  }
  if (p.stdin_watched) loop_.remove_fd(p.stdin_w.get());
  p.stdin_watched = false;
  if (!p.stdin_eof) return;
  if (p.terminal) {
    p.stdin_eof = false;  // a terminal has no end of file, and may be given more after it
    if (::write(p.stdin_w.get(), &kTerminalEof, 1) < 0) close_stdin(p);
    return;
  }
  close_stdin(p);
}

void TaskSupervisor::close_stdin(Proc& p) {
  if (p.stdin_watched) loop_.remove_fd(p.stdin_w.get());
  p.stdin_watched = false;
  p.stdin_w.reset();
  p.stdin_buf.clear();
}

void TaskSupervisor::set_window_size(pid_t pid, unsigned rows, unsigned cols) {
  Proc* p = find(pid);
  if (p == nullptr || !p->terminal || !p->out.valid()) return;
  struct winsize ws {};
  ws.ws_row = static_cast<unsigned short>(rows);
  ws.ws_col = static_cast<unsigned short>(cols);
  ::ioctl(p->out.get(), TIOCSWINSZ, &ws);
}

void TaskSupervisor::signal(pid_t pid, int sig) {
  if (procs_.count(pid) != 0) ::killpg(pid, sig);
}

bool TaskSupervisor::on_child_exit(pid_t pid, int waitstatus, double cpu_seconds) {
  if (procs_.contains(pid)) {
    finish(pid, Exit{waitstatus, cpu_seconds});
    return true;
  }
  if (in_flight_.empty()) return false;
  early_exits_[pid] = Exit{waitstatus, cpu_seconds};
  return true;
}

void TaskSupervisor::finish(pid_t pid, const Exit& exit) {
  auto it = procs_.find(pid);
  std::unique_ptr<Proc> owned = std::move(it->second);
  procs_.erase(it);
  Proc& p = *owned;
  // Reaped, but the group names only leftovers (background children), which end with the
  // process: the pid cannot be given to another process while its group has members, and
  // without members nothing is killed (unless the kernel's pid counter went round in the
  // turn or two an early exit waits).
  ::killpg(pid, SIGKILL);
  if (p.status.valid()) {
    char buf[1024];
    const ssize_t n = ::read(p.status.get(), buf, sizeof buf);
    if (n > 0 && p.handlers.spawn_failed) p.handlers.spawn_failed(std::string_view(buf, static_cast<size_t>(n)));
    p.status.reset();
  }
  for (bool is_err : {false, true}) {
    for (int i = 0; i < kMaxDrainReads && pass_output(p, is_err); ++i) {}
    close_output(p, is_err);
  }
  close_stdin(p);
  if (p.handlers.exited) p.handlers.exited(exit);
  retire(std::move(owned));
}

void TaskSupervisor::forget(pid_t pid) {
  auto it = procs_.find(pid);
  if (it == procs_.end()) return;
  std::unique_ptr<Proc> p = std::move(it->second);
  procs_.erase(it);
  if (p->out.valid()) loop_.remove_fd(p->out.get());
  if (p->err.valid()) loop_.remove_fd(p->err.get());
  close_stdin(*p);
  retire(std::move(p));
}

void TaskSupervisor::retire(std::unique_ptr<Proc> p) {
  retired_.push_back(std::move(p));
  if (retired_.size() > 1) return;  // a clearing is already posted
  std::weak_ptr<int> token = alive_;
  loop_.post([this, token] {
    if (token.lock()) retired_.clear();
  });
}

}  // namespace corral::node
