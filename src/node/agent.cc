#include "node/agent.h"

#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "net/munge_cred.h"

namespace corral::node {

namespace {
// A missed SIGCHLD (another thread had it unblocked) must not strand a finished task.
constexpr double kReapSweepSeconds = 1.0;
// Longest a finished step's record waits for other traffic to the controller.
constexpr double kStepRecordLinger = 0.05;
// After SIGKILL, how long shutdown waits for the last children before giving up.
constexpr double kShutdownSlack = 1.0;

double cpu_seconds(const rusage& ru) {
  auto secs = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6; };
  return secs(ru.ru_utime) + secs(ru.ru_stime);
}

// The step manager launches through this agent's StepNode: it is the root of every tree.
class NodeLauncher final : public StepLauncher {
 public:
  explicit NodeLauncher(StepNode& node) : node_(node) {}
  LaunchId launch(v1::LaunchTasksRequest req, Up up, Done done, const job::StepCred& made_here) override {
    return node_.launch(std::move(req), std::move(up), std::move(done), &made_here);
  }
  void deliver(LaunchId id, const v1::LaunchDown& down) override { node_.deliver(id, down); }

 private:
  StepNode& node_;
};

}  // namespace

Agent::Agent(EventLoop& loop, AgentConfig config, Uplink::Sink sink, StepNodeConfig steps)
    : loop_(loop), config_(std::move(config)), out_(std::move(sink)) {
  if (!config_.credentials) config_.credentials = net::munge_credentials("");
  pmix_ = std::make_unique<PmixHost>(loop_, config_.state_dir.empty() ? "" : config_.state_dir + "/pmix",
                                     config_.nodes.empty() ? "" : config_.nodes.front().name);
  tasks_.set_spawn_helpers(config_.spawn_helpers);
  jobs_ = std::make_unique<JobExecutor>(loop_, tasks_, out_, config_, pmix_.get());
  perilogs_ = std::make_unique<PerilogRunner>(loop_, tasks_, out_, config_);
  if (steps.self_uri.empty()) steps.self_uri = config_.step_uri;
  steps.job_keys = &keys_;
  steps.pmix = pmix_.get();
  step_node_ = std::make_unique<StepNode>(loop_, tasks_, config_, std::move(steps));
  launcher_ = std::make_unique<NodeLauncher>(*step_node_);
  StepManagerConfig sc;
  sc.self_uri = config_.step_uri;
  sc.kill_grace = config_.kill_grace;
  steps_ = std::make_unique<StepManager>(loop_, *launcher_, sc, [this](const v1::StepInfo& i) { out_.step(i); });
  // A job's own tasks ending ends its steps; an alloc job ends with its interactive step.
  jobs_->set_job_ended(
      [this](uint64_t jobid, int waitstatus, double cpu) { steps_->job_tasks_ended(jobid, waitstatus, cpu); });
  steps_->set_interactive_end([this](uint64_t jobid, int waitstatus) { jobs_->end_alloc(jobid, waitstatus); });
}

Agent::~Agent() {
  if (signal_fd_.valid()) loop_.remove_fd(signal_fd_.get());
  if (sweep_timer_) loop_.cancel_timer(*sweep_timer_);
  if (records_timer_) loop_.cancel_timer(*records_timer_);
  loop_.set_end_of_iteration(nullptr);
}

// The loop's thread starts and reads every task; when tasks keep the node's CPUs busy, a
// launch waits for a CPU at every step (docs/performance.md). So the loop may run at a
// higher priority than the tasks, which start back at the agent's own. Only the loop: the
// threads that talk to corrald do no launch work, and above the node's own processes they
// would only take its CPUs first.
void Agent::raise_loop_priority() {
  errno = 0;
  const int own = ::getpriority(PRIO_PROCESS, 0);
  if (errno != 0 || config_.loop_nice >= own) return;
  if (::setpriority(PRIO_PROCESS, 0, config_.loop_nice) != 0) {  // this thread only
    spdlog::info("the event loop stays at nice {} ({}): tasks and launches share the CPUs alike", own,
                 std::strerror(errno));
    return;
  }
  tasks_.set_task_nice(own);
  spdlog::info("event loop at nice {}, tasks at {}", config_.loop_nice, own);
}

Status Agent::start() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  if (config_.handle_termination) {
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
  }
  signal_fd_.reset(::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!signal_fd_.valid()) return io_error(std::string("signalfd: ") + std::strerror(errno));
  if (auto st = loop_.add_fd(signal_fd_.get(), EPOLLIN, [this](uint32_t) { on_signal(); }); !st) return st;
  loop_.set_end_of_iteration([this] { end_of_iteration(); });
  if (auto st = open_cgroups(); !st) return st;
  open_spool();
  arm_sweep();
  return {};
}

void Agent::open_spool() {
  if (config_.state_dir.empty() || config_.output_spool_max == 0) return;
  auto spool = OutputSpool::open(config_.state_dir + "/output.spool", config_.output_spool_max);
  if (!spool) {
    spdlog::warn("{}: output produced while the controller is unreachable will be lost", spool.message());
    return;
  }
  spool_.emplace(std::move(*spool));
  if (spool_->bytes() > 0)
    spdlog::info("{} bytes of task output an earlier run of this agent kept go with the next registration",
                 spool_->bytes());
  out_.set_spool(&*spool_, config_.incarnation);
}

Status Agent::open_cgroups() {
  std::string why_off;
  auto cg = TaskCgroups::open(loop_, config_.cgroups, config_.agent_id, config_.state_dir, &why_off);
  if (!cg) return cg.error();
  cgroups_ = std::move(*cg);
  if (!cgroups_) {
    spdlog::info("task containment: process groups only ({})", why_off);
    return {};
  }
  if (size_t n = cgroups_->clear_leftovers(); n > 0)
    spdlog::warn("killed {} process(es) an earlier run of this agent left in {}", n, cgroups_->root());
  spdlog::info("task containment: cgroups under {}", cgroups_->describe());
  if (!cgroups_->missing().empty()) spdlog::warn("task containment: {}", cgroups_->missing());
  jobs_->set_cgroups(cgroups_.get());
  step_node_->set_cgroups(cgroups_.get());
  return {};
}

void Agent::end_of_iteration() {
  out_.flush();
  if (!out_.has_lingering() || records_timer_) return;
  records_timer_ = loop_.add_timer(kStepRecordLinger, [this] {
    records_timer_.reset();
    out_.flush(true);
  });
}

void Agent::arm_sweep() {
  sweep_timer_ = loop_.add_timer(kReapSweepSeconds, [this] {
    reap();
    arm_sweep();
  });
}

void Agent::on_signal() {
  signalfd_siginfo info[16];
  bool child = false;
  for (;;) {
    ssize_t n = ::read(signal_fd_.get(), info, sizeof info);
    if (n <= 0) break;
    for (size_t i = 0; i < static_cast<size_t>(n) / sizeof(signalfd_siginfo); ++i) {
      if (info[i].ssi_signo == SIGCHLD) {
        child = true;
      } else if (!shutting_down_) {
        spdlog::info("received {}, shutting down", strsignal(static_cast<int>(info[i].ssi_signo)));
        shutdown();
      }
    }
    // A read that did not fill the buffer took all there was (one more is only EAGAIN);
    // a signal after it makes the descriptor readable again.
    if (static_cast<size_t>(n) < sizeof info) break;
  }
  if (child) reap();
}

void Agent::reap() {
  int status = 0;
  pid_t pid;
  rusage ru{};
  while ((pid = ::wait4(-1, &status, WNOHANG, &ru)) > 0) {
    const double cpu = cpu_seconds(ru);
    // Unknown pids are orphans of tasks reparented to us as the child subreaper.
    tasks_.on_child_exit(pid, status, cpu);
  }
  if (shutting_down_) check_shutdown_done();
}

v1::AgentMessage Agent::begin_register(uint64_t session) {
  session_ = session;
  out_.set_registering(session);
  v1::AgentMessage msg;
  auto* reg = msg.mutable_register_();
  reg->set_agent_id(config_.agent_id);
  reg->set_incarnation(config_.incarnation);
  for (const auto& n : config_.nodes) {
    auto* r = reg->add_nodes();
    r->set_name(n.name);
    r->set_cores(n.cores);
    r->set_gpus(n.gpus);
    r->set_memory_mb(n.memory_mb);
    for (auto& [hook, what] : config_.hooks->hardware(n.name)) (*r->mutable_hardware())[hook] = std::move(what);
  }
  reg->set_step_uri(config_.step_uri);
  jobs_->fill_register(*reg);
  perilogs_->fill_register(*reg);
  steps_->fill_register(*reg);
  out_.add_spooled(msg);  // corrald takes it before the register's exits; kept until acked
  return msg;
}

void Agent::on_registered(uint64_t session, const v1::ControllerMessage& first) {
  if (session != session_) return;
  keys_.set_session_key(first.session_key());
  take_settings(first.node_settings());
  out_.set_online(session);
  handle(first);
}

void Agent::on_disconnected(uint64_t session) { out_.set_offline(session); }

void Agent::handle(const v1::ControllerMessage& msg) {
  if (shutting_down_) return;
  // Forgets first: a batch may also carry the keys and start of a requeued job's next run.
  for (uint64_t id : msg.forget()) {
    jobs_->forget(id);
    drop_steps_of(id);
    keys_.drop(id);
  }
  take_job_keys(msg);
  for (const auto& s : msg.start()) {
    // A requeued job's next run: the steps of the earlier one end here.
    if (auto held = jobs_->attempt_of(s.jobid()); held && *held < s.attempt()) drop_steps_of(s.jobid());
    if (!s.step_key().empty()) {  // this agent hosts the job's first node: its step manager
      auto key = keys_.unwrap(s.step_key());
      if (!key) spdlog::error("job {}: its step key does not unwrap: {}", s.jobid(), key.message());
      auto spec = jobs_->parse_cached(s.jobspec());
      // First: a job that ends at once must find its step manager.
      steps_->add_job(s, spec ? spec->get() : nullptr, key ? *key : std::string());
    }
    jobs_->start(s);
  }
  for (const auto& s : msg.signal()) {
    if (!jobs_->for_earlier_run(s)) {  // an earlier run's steps were dropped when the next one came
      steps_->signal_job(s.jobid(), s.signal(), s.kill_after());
      if (s.signal() != 0) step_node_->signal_job(s.jobid(), s.signal());
    }
    jobs_->signal(s);
  }
  for (const auto& p : msg.perilog()) perilogs_->run(p);
  for (const auto& c : msg.cancel_step()) steps_->cancel(c);
  for (const auto& r : msg.steps_stored()) steps_->stored(r);
  if (msg.output_acked() > 0) out_.acked(msg.output_acked());
}

// The site's settings, for jobs started from now on; what the command line set stays.
void Agent::take_settings(const v1::NodeSettings& s) {
  std::vector<std::string> taken;
  if (s.has_job_pids_max() && !config_.local_job_pids_max && s.job_pids_max() != config_.job_pids_max) {
    config_.job_pids_max = s.job_pids_max();
    taken.push_back("job-pids-max=" + std::to_string(s.job_pids_max()));
  }
  if (s.has_cpu_bind() && !config_.local_cpu_bind && s.cpu_bind() != config_.cpu_bind) {
    config_.cpu_bind = s.cpu_bind();
    taken.push_back(std::string("cpu-bind=") + (s.cpu_bind() ? "cores" : "none"));
  }
  if (!taken.empty()) spdlog::info("settings from the controller: {}", fmt::join(taken, ", "));
}

void Agent::take_job_keys(const v1::ControllerMessage& msg) {
  for (const auto& k : msg.job_keys())
    if (auto st = keys_.add(k); !st) spdlog::error("{}: steps of that job cannot start here", st.message());
}

void Agent::drop_steps_of(uint64_t jobid) {
  steps_->forget_job(jobid);
  step_node_->signal_job(jobid, SIGKILL);  // step tasks here whose tree is gone
  fences_.drop_job(jobid);
}

void Agent::shutdown() {
  if (shutting_down_) return;
  shutting_down_ = true;
  out_.close();
  jobs_->kill_all(SIGTERM);
  step_node_->kill_all(SIGTERM);
  perilogs_->kill_all(SIGTERM);
  loop_.add_timer(config_.kill_grace, [this] {
    jobs_->kill_all(SIGKILL);
    step_node_->kill_all(SIGKILL);
    perilogs_->kill_all(SIGKILL);
    loop_.add_timer(kShutdownSlack, [this] {
      spdlog::warn("{} process(es) did not exit after SIGKILL", tasks_.live());
      loop_.stop();
    });
  });
  check_shutdown_done();
}

void Agent::check_shutdown_done() {
  if (tasks_.live() == 0) loop_.stop();
}

}  // namespace corral::node
