// corral run [OPTIONS] COMMAND [ARGS...]: submit, wait, stream the tasks' output, and
// exit with the job's status, like srun or flux run. Inside an allocation ($CORRAL_JOBID
// and $CORRAL_STEPMGR set) or with --jobid it starts a step of that job instead.
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <thread>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/job_format.h"
#include "cli/job_submit.h"
#include "cli/job_watch.h"
#include "cli/mpi_detect.h"
#include "cli/progress.h"
#include "cli/step_attach.h"
#include "cli/step_spec.h"
#include "cli/step_target.h"
#include "cli/values.h"
#include "util/write_all.h"

namespace corral::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct RunState {
  JobOptions job;
  SubmitFlags flags;
  bool label = false;
  std::string jobid;  // --jobid: a step of this job
  StepFlags step;
  std::vector<std::string> command;
};

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// SIGINT and SIGTERM arrive through a signalfd so the helper thread can turn them into
// rpcs; they are blocked before the client starts gRPC's threads.
class SignalFd {
 public:
  SignalFd() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, &old_);
    fd_ = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  }
  ~SignalFd() {
    if (fd_ >= 0) ::close(fd_);
    if (wake_fd_ >= 0) ::close(wake_fd_);
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SignalFd(const SignalFd&) = delete;
  SignalFd& operator=(const SignalFd&) = delete;

  // Ends a wait() in progress at once (the job is over: don't make the user wait).
  void wake() const {
    uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof one);
  }

  // The next signal within timeout_ms, or 0.
  int wait(int timeout_ms) const {
    pollfd p[2] = {{fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (::poll(p, 2, timeout_ms) <= 0 || !(p[0].revents & POLLIN)) return 0;
    signalfd_siginfo si{};
    if (::read(fd_, &si, sizeof si) != static_cast<ssize_t>(sizeof si)) return 0;
    return static_cast<int>(si.ssi_signo);
  }

 private:
  int fd_ = -1;
  int wake_fd_ = -1;
  sigset_t old_{};
};

// One attached job: output to our stdout/stderr, a progress line while it pends,
// Ctrl-C forwarded, and its exit code at the end.
class AttachedJob {
 public:
  AttachedJob(Client& client, uint64_t id, bool label, const SignalFd& signals)
      : client_(client), id_(id), label_(label), signals_(signals) {}

  int run() {
    std::thread helper([this] { helper_loop(); });
    pb::WatchRequest req;
    req.add_jobids(id_);
    req.set_output(true);
    req.set_history(true);
    req.set_until_inactive(true);
    Status st = follow_jobs(client_, req, "run", [this](const pb::WatchItem& item) {
      if (item.has_event()) on_event(item.event());
      if (item.has_output()) on_output(item.output());
    });
    done_ = true;
    signals_.wake();
    helper.join();
    progress_.clear();
    if (!st.ok()) fail_rpc("run", st.error());
    return finish();
  }

 private:
  void on_event(const pb::JobEvent& ev) {
    if (ev.name() == "alloc" || ev.name() == "start" || ev.name() == "clean") {
      started_ = true;
      progress_.clear();
    }
    // The stream carries the outcome, so no GetJob round trip is needed at the end.
    if (ev.name() == "finish") {
      auto ctx = nlohmann::json::parse(ev.context(), nullptr, false);
      if (ctx.is_object()) outcome_.set_waitstatus(ctx.value("status", 0));
    } else if (ev.name() == "exception" && outcome_.exception_type().empty()) {
      auto ctx = nlohmann::json::parse(ev.context(), nullptr, false);
      if (ctx.is_object() && ctx.value("severity", 0) == 0) {
        outcome_.set_exception_type(ctx.value("type", "exception"));
        outcome_.set_exception_note(ctx.value("note", ""));
      }
    } else if (ev.name() == "clean") {
      cleaned_ = true;
    }
  }

  void on_output(const pb::TaskOutput& out) {
    started_ = true;
    progress_.clear();
    const int fd = out.stderr() ? 2 : 1;
    if (!label_) {
      write_all(fd, out.data());
      return;
    }
    bool& at_start = line_start_.try_emplace({out.rank(), out.stderr()}, true).first->second;
    std::string text;
    for (char c : out.data()) {
      if (at_start) text += fmt::format("{}: ", out.rank());
      text += c;
      at_start = c == '\n';
    }
    if (out.eof() && !at_start) {
      text += '\n';
      at_start = true;
    }
    write_all(fd, text);
  }

  int finish() {
    pb::JobInfo info = cleaned_ ? outcome_ : fetch_job();
    if (!info.exception_type().empty())
      fmt::print(stderr, "corral: job {}: exception: {}: {}\n", id_, info.exception_type(), info.exception_note());
    return job_exit_code(info);
  }

  pb::JobInfo fetch_job() {
    pb::GetJobRequest req;
    req.set_jobid(id_);
    return expect_ok("run", client_.get_job(req));
  }

  void helper_loop() {
    while (!done_) {
      if (int sig = signals_.wait(100)) on_signal(sig);
      update_progress();
    }
  }

  void on_signal(int sig) {
    const bool quick_repeat = interrupted_ && seconds_since(last_interrupt_) < 1.0;
    last_interrupt_ = Clock::now();
    interrupted_ = true;
    if (sig == SIGINT && canceled_ && quick_repeat) {
      progress_.clear();
      fmt::print(stderr, "corral: detaching from job {}\n", id_);
      std::fflush(nullptr);
      ::_exit(128 + SIGINT);
    }
    if (sig == SIGTERM || !started_ || quick_repeat || canceled_) {
      send_cancel(0, "canceling");
      canceled_ = true;
      return;
    }
    send_cancel(SIGINT, "sending SIGINT to");
  }

  void send_cancel(int signal, std::string_view verb) {
    progress_.clear();
    if (signal == SIGINT)
      fmt::print(stderr, "corral: {} job {} (press Ctrl-C again within 1s to cancel)\n", verb, id_);
    else
      fmt::print(stderr, "corral: {} job {}\n", verb, id_);
    pb::CancelRequest req;
    req.add_jobids(id_);
    req.set_signal(signal);
    req.set_message("interrupted by corral run");
    auto reply = client_.cancel(req);
    if (!reply) {
      fmt::print(stderr, "corral run: {}\n", reply.message());
      return;
    }
    for (const auto& r : reply->results())
      if (!r.ok()) fmt::print(stderr, "corral run: job {}: {}\n", r.jobid(), r.error());
  }

  void update_progress() {
    if (started_ || !progress_.enabled()) return;
    const double waited = seconds_since(begin_);
    if (waited < 1.0) return;
    if (waited - last_reason_check_ >= 1.0) {
      last_reason_check_ = waited;
      pb::GetJobRequest req;
      req.set_jobid(id_);
      if (auto info = client_.get_job(req)) reason_ = info->reason();
    }
    if (started_) return;
    progress_.show(reason_.empty() ? fmt::format("corral: job {} pending {:.1f}s", id_, waited)
                                   : fmt::format("corral: job {} pending ({}) {:.1f}s", id_, reason_, waited));
  }

  Client& client_;
  const uint64_t id_;
  const bool label_;
  const SignalFd& signals_;
  ProgressLine progress_;
  std::atomic<bool> started_{false};
  std::atomic<bool> done_{false};
  bool cleaned_ = false;
  pb::JobInfo outcome_ = initial_outcome();

  static pb::JobInfo initial_outcome() {
    pb::JobInfo info;
    info.set_waitstatus(-1);
    info.set_result("COMPLETED");
    return info;
  }
  std::map<std::pair<uint32_t, bool>, bool> line_start_;  // per (rank, stderr)
  // Used by the helper thread only:
  Clock::time_point begin_ = Clock::now();
  Clock::time_point last_interrupt_{};
  bool interrupted_ = false;
  bool canceled_ = false;
  double last_reason_check_ = 0;
  std::string reason_;
};

// The job whose step this run is: --jobid, else $CORRAL_JOBID with $CORRAL_STEPMGR; 0 for
// none (a new job).
uint64_t step_jobid(const RunState& st, const JobContext& ctx) {
  if (!st.jobid.empty()) {
    auto id = parse_jobid(st.jobid);
    if (!id) usage_error("run", "--jobid: " + id.message());
    return *id;
  }
  auto target = step_target_from_env(ctx.env, 0);
  if (!target) usage_error("run", target.message());
  return *target ? (*target)->jobid : 0;
}

void print_step_spec(const pb::StepSpec& spec) {
  nlohmann::json doc = {{"jobid", spec.jobid()},
                        {"argv", std::vector<std::string>(spec.argv().begin(), spec.argv().end())},
                        {"cwd", spec.cwd()},
                        {"nnodes", spec.nnodes()},
                        {"ntasks", spec.ntasks()},
                        {"cores_per_task", spec.cores_per_task()},
                        {"gpus_per_task", spec.gpus_per_task()},
                        {"nodelist", spec.nodelist()},
                        {"overlap", spec.overlap()},
                        {"immediate", spec.immediate()},
                        {"kill_on_bad_exit", spec.kill_on_bad_exit()},
                        {"name", spec.name()},
                        {"input", spec.input()},
                        {"output", spec.output()},
                        {"error", spec.error()},
                        {"stdin_open", spec.stdin_open()},
                        {"env_count", spec.env_size()}};
  fmt::print("{}\n", doc.dump(2));
}

void run_step(const Globals& g, const RunState& st, uint64_t jobid, const JobContext& ctx,
              const std::vector<std::string>& command) {
  auto spec = build_step_spec(jobid, st.job, st.step, command, ctx);
  if (!spec) usage_error("run", spec.message());
  if (st.flags.dry_run) {
    print_step_spec(*spec);
    return;
  }
  StepSignals signals;  // before any channel, so gRPC's threads inherit the blocked mask
  auto target = step_target_from_env(ctx.env, jobid);
  StepTarget where;
  if (target && *target) {
    where = **target;
  } else {
    Client client(resolve_uri(g.uri));
    auto found = find_step_manager(client, jobid);
    if (!found) fail_rpc("run", found.error());
    where = *found;
  }
  if (st.flags.verbose) fmt::print(stderr, "corral run: starting a step of job {} through {}\n", jobid, where.stepmgr);
  StepClient steps(where.stepmgr, jobid);
  AttachOptions opts;
  opts.label = st.label;
  opts.verbose = st.flags.verbose;
  const int code = attach_step(steps, *spec, opts, signals).exit_code;
  exit_now(code);
}

void run_run(const Globals& g, const RunState& st) {
  const std::vector<std::string>& command = g.command.empty() ? st.command : g.command;
  if (command.empty()) usage_error("run", "missing COMMAND (e.g. corral run -N2 hostname)");
  const JobContext ctx = current_context();
  if (const uint64_t jobid = step_jobid(st, ctx); jobid != 0) {
    run_step(g, st, jobid, ctx, command);
    return;
  }
  if (st.step.overlap || st.step.immediate || st.step.kill_on_bad_exit)
    usage_error("run",
                "--overlap, --immediate and --kill-on-bad-exit apply to steps: use them "
                "inside an allocation (corral alloc, a batch script) or with --jobid");
  if (!st.job.cc.empty()) usage_error("run", "--cc submits several jobs; use it with corral submit");
  ParsedJob job = parse_or_exit("run", st.job, ctx);
  job.request.command = command;
  if (job.request.mpi.empty()) job.request.mpi = mpi_for_program(command.front(), ctx);
  pb::SubmitRequest req = build_submit_request("run", job, st.flags);
  if (dry_run(st.flags, req)) return;
  SignalFd signals;  // before the client, so gRPC's threads inherit the blocked mask
  Client client(resolve_uri(g.uri));
  const uint64_t id = submit_request(client, "run", st.flags, req).front();
  if (st.flags.verbose) fmt::print(stderr, "corral run: job {}\n", id);
  AttachedJob attached(client, id, st.label, signals);
  exit_now(attached.run());
}

}  // namespace

void add_run_command(CLI::App& app, Globals& g) {
  auto st = std::make_shared<RunState>();
  CLI::App* sub =
      app.add_subcommand("run", "Run COMMAND as a job, stream its output and exit with its status (like srun)");
  g.takes_command.insert("run");
  add_job_options(*sub, st->job);
  sub->add_flag("-l,--label,--label-io", st->label, "Prefix each output line with its task rank");
  const char* steps = "Step options";
  sub->add_option("--jobid", st->jobid,
                  "Start a step of this running job instead of a new job (the default inside "
                  "an allocation: $CORRAL_JOBID)")
      ->type_name("ID")
      ->group(steps);
  sub->add_flag("--overlap", st->step.overlap,
                "Share cores with the job's running steps instead of waiting for free ones")
      ->group(steps);
  sub->add_flag("--immediate", st->step.immediate, "Fail at once if the step would have to wait for cores")
      ->group(steps);
  sub->add_flag("-K,--kill-on-bad-exit", st->step.kill_on_bad_exit,
                "Kill the step's other tasks when one exits non-zero")
      ->group(steps);
  sub->add_flag("--dry-run", st->flags.dry_run, "Print the jobspec instead of running it");
  sub->add_flag("-v,--verbose", st->flags.verbose, "Say what is sent where");
  sub->add_option("COMMAND", st->command, "The command to run and its arguments")->expected(-1);
  sub->footer(
      "Output streams here unless -o/-e are given. corral exits with the job's exit code\n"
      "(128+N if a task was killed by signal N; 1 if the job failed before its tasks ran).\n"
      "Ctrl-C sends SIGINT to the tasks; a second Ctrl-C within a second cancels the job.\n\n"
      "Inside an allocation (a batch script, corral alloc: $CORRAL_JOBID is set) or with\n"
      "--jobid, COMMAND runs as a step of that job on a subset of its nodes and cores:\n"
      "-N -n -c --gpus-per-task -w choose the subset, stdin goes to task 0, a second\n"
      "Ctrl-C within a second kills the step, and the exit code is the step's.\n\n"
      "Example: corral run -N2 -n4 -l hostname");
  sub->callback([&g, st] { run_run(g, *st); });
}

}  // namespace corral::cli
