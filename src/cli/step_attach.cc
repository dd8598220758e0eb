#include "cli/step_attach.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "cli/progress.h"
#include "cli/step_io.h"
#include "util/write_all.h"

namespace corral::cli {

namespace {

using Clock = std::chrono::steady_clock;

void wake_fd(int fd) {
  uint64_t one = 1;
  (void)!::write(fd, &one, sizeof one);
}

// Reading a terminal from a background process group stops us (SIGTTIN); forward only
// when we own the terminal, or stdin is not one.
bool may_read_stdin() {
  if (::isatty(0) != 1) return true;
  return ::tcgetpgrp(0) == ::getpgrp();
}

// stdin is /dev/null (a batch script's, `< /dev/null`): nothing to forward but its end.
bool stdin_is_dev_null() {
  struct stat st {};
  return ::fstat(0, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3);
}

// An eventfd that ends the stdin thread's poll.
class WakeFd {
 public:
  WakeFd() : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}
  ~WakeFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  WakeFd(const WakeFd&) = delete;
  WakeFd& operator=(const WakeFd&) = delete;
  int fd() const { return fd_; }
  void wake() const { wake_fd(fd_); }

 private:
  int fd_;
};

class AttachedStep {
 public:
  AttachedStep(StepClient& client, StepStream& stream, const AttachOptions& opts, const StepSignals& signals)
      : client_(client), stream_(stream), opts_(opts), signals_(signals) {}

  ~AttachedStep() { stop_threads(); }
  AttachedStep(const AttachedStep&) = delete;
  AttachedStep& operator=(const AttachedStep&) = delete;

  bool started() const { return created_; }

  int run() {
    helper_ = std::thread([this] { helper_loop(); });
    if (opts_.pty) send_winsize();
    pb::StepServerMessage msg;
    while (stream_.read(msg)) on_message(msg);
    stop_threads();
    progress_.clear();
    const auto [out, err] = labeler_.flush();
    write_all(1, out);
    write_all(2, err);
    Status st = stream_.finish();
    if (exit_) return finish_step();
    if (interrupted_before_start_) {
      say("canceled the step before it started");
      return 128 + SIGINT;
    }
    if (!st.ok()) {
      fmt::print(stderr, "corral {}: {}\n", opts_.cmd, st.message());
      return 1;
    }
    say(fmt::format("the step manager of job {} at {} ended the stream without the step's exit", client_.jobid(),
                    client_.address()));
    return 1;
  }

 private:
  std::string step_text() const { return step_label(client_.jobid(), stepid_.load()); }

  void say(std::string_view text) {
    progress_.clear();
    fmt::print(stderr, "corral {}: {}\n", opts_.cmd, text);
  }

  void on_message(const pb::StepServerMessage& msg) {
    if (!msg.waiting().empty() && (opts_.verbose || progress_.enabled()))
      say(fmt::format("step of job {} waiting: {}", client_.jobid(), msg.waiting()));
    if (msg.has_created()) on_created(msg.created());
    for (const auto& out : msg.output()) on_output(out);
    if (msg.has_exit()) {
      exit_ = msg.exit();
      stream_.close_writes();  // whether the server waits for it or not, the stream ends
    }
  }

  void on_created(const pb::StepCreated& created) {
    stepid_ = created.stepid();
    created_ = true;
    if (opts_.verbose)
      say(fmt::format("step {} on {} ({} tasks{})", step_text(), created.nodelist(), created.ntasks(),
                      created.mpi_ports().empty() ? "" : ", MPI ports " + created.mpi_ports()));
    if (!opts_.forward_stdin || !may_read_stdin() || stdin_.joinable() || stdin_done_) return;
    if (stdin_is_dev_null()) {  // no thread for it: the end goes at once
      stdin_done_ = true;
      stream_.send_stdin_eof();
      return;
    }
    stdin_ = std::thread([this] { stdin_loop(); });
  }

  void on_output(const pb::TaskOutput& out) {
    const int fd = out.stderr() ? 2 : 1;
    if (opts_.label && !opts_.pty)
      write_all(fd, labeler_.label(out.rank(), out.stderr(), out.data(), out.eof()));
    else
      write_all(fd, out.data());
  }

  int finish_step() {
    if (!exit_->error().empty()) {
      if (created_)
        say(fmt::format("step {}: {}", step_text(), exit_->error()));
      else
        say(fmt::format("step of job {}: {}", client_.jobid(), exit_->error()));
    }
    return step_exit_code(*exit_);
  }

  void stop_threads() {
    done_ = true;
    signals_.wake();
    stdin_wake_.wake();
    if (helper_.joinable()) helper_.join();
    if (stdin_.joinable()) stdin_.join();
  }

  // ------------------------------------------------ helper thread: signals

  void helper_loop() {
    while (!done_) {
      if (int sig = signals_.wait(-1)) on_signal(sig);
    }
  }

  void on_signal(int sig) {
    if (done_) return;
    if (sig == SIGWINCH) {
      if (opts_.pty) send_winsize();
      return;
    }
    if (!created_) {
      // Nothing runs yet: dropping the call withdraws the waiting step.
      interrupted_before_start_ = true;
      stream_.cancel();
      return;
    }
    if (sig != SIGINT) {
      stream_.send_signal(sig);
      return;
    }
    const bool again = last_interrupt_ && Clock::now() - *last_interrupt_ < std::chrono::seconds(1);
    last_interrupt_ = Clock::now();
    if (again) {
      say(fmt::format("killing step {}", step_text()));
      stream_.send_signal(SIGKILL);
    } else {
      say(fmt::format("sending SIGINT to step {} (again within 1s to kill)", step_text()));
      stream_.send_signal(SIGINT);
    }
  }

  void send_winsize() {
    winsize ws{};
    if (::ioctl(0, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0) stream_.send_winsize(ws.ws_row, ws.ws_col);
  }

  // ------------------------------------------------ stdin thread

  void stdin_loop() {
    std::string buf(64 * 1024, '\0');
    while (!done_) {
      pollfd p[2] = {{0, POLLIN, 0}, {stdin_wake_.fd(), POLLIN, 0}};
      if (::poll(p, 2, -1) < 0) {
        if (errno == EINTR) continue;
        break;
      }
      if (p[1].revents & POLLIN) return;
      if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = ::read(0, buf.data(), buf.size());
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) break;
      if (!stream_.send_stdin(std::string_view(buf.data(), static_cast<size_t>(n)))) return;
    }
    stream_.send_stdin_eof();
  }

  StepClient& client_;
  StepStream& stream_;
  const AttachOptions& opts_;
  const StepSignals& signals_;
  ProgressLine progress_;
  LineLabeler labeler_;
  WakeFd stdin_wake_;
  std::thread helper_, stdin_;
  std::atomic<bool> done_{false};
  std::atomic<bool> created_{false};
  bool stdin_done_ = false;  // stdin's end was sent without a thread
  std::atomic<uint32_t> stepid_{0};
  std::atomic<bool> interrupted_before_start_{false};
  std::optional<pb::StepExit> exit_;
  std::optional<Clock::time_point> last_interrupt_;  // helper thread only
};

}  // namespace

StepSignals::StepSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGWINCH}) sigaddset(&set, sig);
  pthread_sigmask(SIG_BLOCK, &set, &old_);
  fd_ = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

StepSignals::~StepSignals() {
  if (fd_ >= 0) ::close(fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  pthread_sigmask(SIG_SETMASK, &old_, nullptr);
}

void StepSignals::wake() const { wake_fd(wake_fd_); }

int StepSignals::wait(int timeout_ms) const {
  pollfd p[2] = {{fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  if (::poll(p, 2, timeout_ms) <= 0 || !(p[0].revents & POLLIN)) return 0;
  signalfd_siginfo si{};
  if (::read(fd_, &si, sizeof si) != static_cast<ssize_t>(sizeof si)) return 0;
  return static_cast<int>(si.ssi_signo);
}

RawTerminal::RawTerminal() {
  if (::isatty(0) != 1 || ::tcgetattr(0, &saved_) != 0) return;
  termios raw = saved_;
  ::cfmakeraw(&raw);
  active_ = ::tcsetattr(0, TCSADRAIN, &raw) == 0;
}

RawTerminal::~RawTerminal() {
  if (active_) ::tcsetattr(0, TCSADRAIN, &saved_);
}

StepOutcome attach_step(StepClient& client, const pb::StepSpec& spec, const AttachOptions& opts,
                        const StepSignals& signals) {
  auto stream = client.run(spec);
  if (!stream) {
    fmt::print(stderr, "corral {}: {}\n", opts.cmd, stream.message());
    return {};
  }
  AttachedStep attached(client, **stream, opts, signals);
  StepOutcome out;
  out.exit_code = attached.run();
  out.started = attached.started();
  return out;
}

}  // namespace corral::cli
