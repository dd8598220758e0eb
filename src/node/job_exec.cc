#include "node/job_exec.h"

#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "job/jobspec.h"
#include "job/mpi_kind.h"
#include "node/exec/cpu_binding.h"
#include "node/exec/output_pattern.h"
#include "node/exec/spawn_process.h"
#include "node/exec/task_cgroups.h"
#include "node/exec/task_env.h"
#include "node/exec/wait_status.h"
#include "node/pmi/job_fence.h"
#include "node/pmi/node_pmi.h"
#include "node/pmix/node_pmix.h"
#include "util/write_all.h"

namespace corral::node {

namespace {

constexpr double kSpawnPatience = 60.0;  // seconds a spawn may wait for resources

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
constexpr double kCgroupWait = 0.05;  // seconds between looks at an earlier run's draining cgroup

EnvMap to_env_map(const google::protobuf::Map<std::string, std::string>& m) { return EnvMap(m.begin(), m.end()); }

// Creates `path` (which must not exist) with `mode`, owned by `owner` when given.
Status write_file(const std::string& path, const std::string& text, mode_t mode,
                  std::optional<std::pair<uid_t, gid_t>> owner) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode & 0700));
  if (!fd.valid()) return io_error("cannot write '" + path + "': " + std::strerror(errno));
  if (owner && ::fchown(fd.get(), owner->first, owner->second) != 0)
    return io_error("cannot give '" + path + "' to uid " + std::to_string(owner->first) + ": " + std::strerror(errno));
  if (!write_all(fd.get(), text)) return io_error("cannot write '" + path + "': " + std::strerror(errno));
  ::fchmod(fd.get(), mode);
  return {};
}

}  // namespace

JobExecutor::JobExecutor(EventLoop& loop, TaskSupervisor& tasks, Uplink& out, const AgentConfig& config,
                         PmixHost* pmix)
    : loop_(loop), tasks_(tasks), out_(out), config_(config), pmix_(pmix) {}

JobExecutor::~JobExecutor() {
  for (auto& [id, job] : jobs_) {
    if (job.mock_timer) loop_.cancel_timer(*job.mock_timer);
    if (job.kill_timer) loop_.cancel_timer(*job.kill_timer);
    if (job.retry_timer) loop_.cancel_timer(*job.retry_timer);
    for (auto& node : job.nodes)
      for (auto& t : node.tasks)
        if (t.pid > 0 && !t.done) tasks_.forget(t.pid);
  }
}

JobExecutor::Job* JobExecutor::find(uint64_t jobid) {
  auto it = jobs_.find(jobid);
  return it == jobs_.end() ? nullptr : &it->second;
}

std::string JobExecutor::error_prefix(const Job& job, const Node& node) const {
  return "corral-node: " + node.name + ": job " + std::to_string(job.id) + ": ";
}

JobExecutor::Node& JobExecutor::add_node(Job& job, const v1::NodeTasks& t) {
  Node& n = job.nodes.emplace_back();
  n.name = t.node();
  n.index = t.node_index();
  n.first_rank = t.first_rank();
  n.ntasks = t.ntasks();
  ++job.unreported;
  return n;
}

// ------------------------------------------------------------------ start

void JobExecutor::start(const v1::StartJob& msg) {
  if (auto w = waiting_runs_.find(msg.jobid()); w != waiting_runs_.end() && w->second.start.attempt() >= msg.attempt())
    return;  // sent again (a reconnect): it already waits
  if (Job* held = find(msg.jobid())) {
    if (held->attempt >= msg.attempt()) {
      spdlog::debug("job {}: duplicate start ignored", msg.jobid());
      return;
    }
    if (held->unreported != 0) {
      spdlog::info("job {}: run {} starts once run {} has ended here", msg.jobid(), msg.attempt(), held->attempt);
      waiting_runs_[msg.jobid()] = WaitingRun{msg, {}};
      v1::SignalJob kill;
      kill.set_jobid(msg.jobid());
      kill.set_signal(SIGKILL);
      kill.set_attempt(held->attempt);
      signal(kill);
      return;
    }
    forget(msg.jobid());  // the earlier run ended: what it left goes
  }
  if (cgroups_ != nullptr && cgroups_->draining(msg.jobid())) {
    // The earlier run's cgroup is still being emptied (and killed): start once it is gone.
    waiting_runs_[msg.jobid()] = WaitingRun{msg, {}};
    loop_.add_timer(kCgroupWait, [this, id = msg.jobid()] { start_waiting_run(id); });
    return;
  }
  Job& job = jobs_[msg.jobid()];
  job.id = msg.jobid();
  job.attempt = msg.attempt();
  job.nodes.reserve(static_cast<size_t>(msg.tasks_size()));

  auto parsed = parse_cached(msg.jobspec());
  if (!parsed) {
    for (const auto& t : msg.tasks()) {
      if (!config_.hosts(t.node())) continue;
      Node& node = add_node(job, t);
      out_.started(job.id, node.name);
      fail_node(job, node, "invalid jobspec: " + parsed.message());
    }
    return;
  }
  std::shared_ptr<const job::Jobspec> spec = *parsed;
  job.contained = cgroups_ != nullptr && (msg.alloc() || spec->mock_duration < 0);  // not mock jobs
  if (job.contained) {
    cgroups_->open_job(job.id);
    limit_job(job, msg);
  }
  if (msg.alloc()) {
    start_alloc(job, msg);
  } else if (spec->mock_duration >= 0) {
    start_mock(job, msg, spec->mock_duration);
  } else {
    job.mpi = job::mpi_service(job::job_mpi_name(spec->mpi, msg.mpi_default()));
    start_real(job, msg, *spec);
  }
}

Result<std::shared_ptr<const job::Jobspec>> JobExecutor::parse_cached(const std::string& text) {
  if (last_spec_ && text == last_spec_text_) return last_spec_;
  auto spec = job::parse_jobspec(text);
  if (!spec) return spec.error();
  last_spec_ = std::make_shared<const job::Jobspec>(std::move(*spec));
  last_spec_text_ = text;
  return last_spec_;
}

void JobExecutor::start_mock(Job& job, const v1::StartJob& msg, double seconds) {
  for (const auto& t : msg.tasks()) {
    if (!config_.hosts(t.node())) continue;
    out_.started(job.id, add_node(job, t).name);
  }
  if (seconds <= 0) {
    finish_mock(job.id, 0);
    return;
  }
  uint64_t id = job.id;
  job.mock_timer = loop_.add_timer(seconds, [this, id] { finish_mock(id, 0); });
}

void JobExecutor::start_alloc(Job& job, const v1::StartJob& msg) {
  job.alloc = true;
  for (const auto& t : msg.tasks()) {
    if (!config_.hosts(t.node())) continue;
    out_.started(job.id, add_node(job, t).name);
  }
}

void JobExecutor::end_alloc(uint64_t jobid, int waitstatus) {
  Job* job = find(jobid);
  if (job == nullptr || !job->alloc) return;
  finish_mock(jobid, waitstatus);  // the same bookkeeping: tasks that never were processes
}

void JobExecutor::finish_mock(uint64_t jobid, int waitstatus) {
  Job* job = find(jobid);
  if (job == nullptr) return;
  job->mock_timer.reset();
  for (auto& node : job->nodes) {
    if (node.reported) continue;
    node.tasks.resize(node.ntasks);
    for (uint32_t i = 0; i < node.ntasks; ++i) {
      node.tasks[i].rank = node.first_rank + i;
      node.tasks[i].done = true;
      node.tasks[i].waitstatus = waitstatus;
    }
    report_node(*job, node);
  }
}

// The directory stays the agent's (0711: the user may reach the script, not replace it),
// and the script is created fresh, never through a link, and given to the user through
// its descriptor, so no name is ever resolved twice.
Result<std::string> JobExecutor::write_batch_script(Job& job, const v1::StartJob& msg, const job::Jobspec& spec) {
  std::string dir = config_.state_dir + "/job-" + std::to_string(job.id);
  if (::mkdir(dir.c_str(), 0711) != 0 && errno != EEXIST)
    return io_error("cannot create '" + dir + "': " + std::strerror(errno));
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid())
    return io_error("'" + dir + "' is not a directory of the agent's own");
  ::chmod(dir.c_str(), 0711);
  job.script_dir = dir;
  std::string path = dir + "/script";
  ::unlink(path.c_str());  // left by an agent that died before the job's forget
  const bool give = config_.as_root && ::geteuid() != msg.userid();
  auto written = write_file(path, spec.batch_script, 0700,
                            give ? std::optional(std::pair(msg.userid(), msg.groupid())) : std::nullopt);
  if (!written) return written.error();
  return path;
}

void JobExecutor::start_real(Job& job, const v1::StartJob& msg, const job::Jobspec& spec) {
  UserInfo user;
  {
    struct passwd pw {};
    struct passwd* found = nullptr;
    std::vector<char> buf(16384);
    if (::getpwuid_r(msg.userid(), &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr) {
      user.name = pw.pw_name;
      user.home = pw.pw_dir;
    } else {
      user.name = std::to_string(msg.userid());
    }
  }
  std::vector<std::string> argv;
  std::string setup_error;
  bool wants_script = false;
  for (const auto& t : msg.tasks()) wants_script |= config_.hosts(t.node()) && t.ntasks() > 0;
  if (!spec.batch_script.empty()) {
    if (wants_script) {
      auto path = write_batch_script(job, msg, spec);
      // A script without "#!" is run by the shell, as sbatch users expect.
      if (!path)
        setup_error = path.message();
      else if (spec.batch_script.rfind("#!", 0) == 0)
        argv = {*path};
      else
        argv = {"/bin/sh", *path};
    }
  } else if (spec.command.empty()) {
    setup_error = "the jobspec has no command";
  } else {
    argv = spec.command;
  }
  for (const auto& t : msg.tasks()) {
    if (!config_.hosts(t.node())) {
      spdlog::warn("job {}: node {} is not hosted by this agent; ignored", job.id, t.node());
      continue;
    }
    Node& node = add_node(job, t);
    if (!setup_error.empty() && node.ntasks > 0) {
      out_.started(job.id, node.name);
      fail_node(job, node, setup_error);
      continue;
    }
    start_node(job, static_cast<uint32_t>(job.nodes.size() - 1), t, msg, spec, argv, user);
  }
}

// Every task of the node fails with `error` (exit 126) before any process started.
void JobExecutor::fail_node(Job& job, Node& node, const std::string& error) {
  node.error = error_prefix(job, node) + error;
  spdlog::warn("{}", node.error);
  node.tasks.resize(node.ntasks);
  for (uint32_t i = 0; i < node.ntasks; ++i) {
    node.tasks[i].rank = node.first_rank + i;
    node.tasks[i].done = true;
    node.tasks[i].waitstatus = exit_status(126);
  }
  report_node(job, node);
}

void JobExecutor::start_node(Job& job, uint32_t ni, const v1::NodeTasks& nt, const v1::StartJob& msg,
                             const job::Jobspec& spec, const std::vector<std::string>& argv, const UserInfo& user) {
  Node& node = job.nodes[ni];
  std::string cwd = !spec.cwd.empty() ? spec.cwd : (!user.home.empty() ? user.home : "/");
  JobNodeEnv je = agent_node_env(config_);
  je.jobid = job.id;
  je.job_name = spec.name;
  je.node_name = node.name;
  je.node_index = node.index;
  je.nodelist = msg.nodelist();
  je.total_nodes = msg.total_nodes();
  je.total_tasks = msg.total_tasks();
  je.restarts = msg.attempt();
  je.cores = nt.cores();
  je.gpus = nt.gpus();
  je.cwd = cwd;
  je.user_name = user.name;
  je.home = user.home;
  EnvMap extra = to_env_map(msg.extra_env());
  for (const auto& [k, v] : nt.env()) extra[k] = v;  // this node's own values win
  // `corral run` inside the job finds its step manager through this.
  if (!msg.stepmgr().empty()) extra["CORRAL_STEPMGR"] = msg.stepmgr();
  EnvMap node_env = build_node_env(spec.environment, je, extra);
  if (auto st = config_.hooks->task_env(node.name, msg.userid(), extra, node_env); !st) {
    out_.started(job.id, node.name);
    fail_node(job, node, st.message());
    return;
  }

  const bool use_imp = config_.as_root && msg.userid() != ::getuid();
  const std::vector<std::vector<int>> cpus = task_cpus(config_, node.name, nt.cores(), node.ntasks);
  // A batch script is no MPI program; the PMI_* it would inherit would only mislead
  // the programs it starts.
  const bool with_pmi = spec.batch_script.empty() && node.ntasks > 0 && job.mpi != job::MpiService::none;
  if (with_pmi) {
    for (auto it = node_env.begin(); it != node_env.end();)
      it = is_pmi_variable(it->first) ? node_env.erase(it) : std::next(it);
    Status st = start_pmi(job, node, msg);
    if (st && job.mpi == job::MpiService::pmix) st = start_pmix(job, msg);
    if (!st) {
      node.exchange.reset();
      if (st.error().code == Errc::unavailable && patient(node))
        return defer_node(job, ni, nt, msg, spec, argv, user, st.message());
      if (st.error().code == Errc::unavailable) node.fault = true;
      out_.started(job.id, node.name);
      fail_node(job, node, st.message());
      return;
    }
  }
  std::vector<std::vector<std::string>> pmix_envs;  // registered before any task starts
  for (uint32_t i = 0; job.pmix && i < node.ntasks; ++i) {
    auto env = job.pmix->task_env(node.first_rank + i);
    if (!env) {
      out_.started(job.id, node.name);
      return fail_node(job, node, env.message());
    }
    pmix_envs.push_back(std::move(*env));
  }
  node.deferred_since.reset();
  node.tasks.resize(node.ntasks);
  for (uint32_t i = 0; i < node.ntasks; ++i) {
    Task& task = node.tasks[i];
    task.rank = node.first_rank + i;
    PatternVars vars{job.id, task.rank, node.index, node.name, spec.name, user.name};
    SpawnRequest req;
    req.argv = argv;
    req.env = build_task_env(node_env, task.rank, i);
    req.cwd = cwd;
    std::optional<PmiTaskEnd> pmi_end;
    if (node.pmi) {
      if (auto end = node.pmi->take_task_end(static_cast<int>(task.rank)); end) {
        pmi_end = std::move(*end);
        req.env.insert(req.env.end(), pmi_end->env.begin(), pmi_end->env.end());
        req.inherit_fds = {pmi_end->fd.get()};
      }
    } else if (job.pmix) {
      const auto& pmix_env = pmix_envs[i];
      req.env.insert(req.env.end(), pmix_env.begin(), pmix_env.end());
    } else if (node.pals) {
      auto pals_env = node.pals->task_env(task.rank);
      req.env.insert(req.env.end(), pals_env.begin(), pals_env.end());
    }
    if (!spec.input.empty()) req.input_path = resolve_path(expand_output_pattern(spec.input, vars), cwd);
    if (!spec.output.path.empty()) req.output_path = resolve_path(expand_output_pattern(spec.output.path, vars), cwd);
    req.error_path =
        spec.error.path.empty() ? req.output_path : resolve_path(expand_output_pattern(spec.error.path, vars), cwd);
    if (use_imp) {
      req.imp_path = config_.imp_path;
      req.uid = msg.userid();
      req.gid = msg.groupid();
    }
    req.cgroups = cgroup_of(job);
    req.cpus = cpus[i];
    req.rlimits = spec.rlimits;
    if (node.index == 0 && i == 0) place_notes(job, node, msg, req);
    spawn_task(job, ni, i, Deferred{i, std::move(req), std::move(pmi_end)});
    if (node.live == 0 && !node.deferred.empty()) {
      // Nothing runs here yet: give back everything the node holds (its PMI sockets)
      // and start it whole later, so waiting nodes never hold what running ones need.
      node.deferred.clear();
      node.tasks.clear();
      node.pmi.reset();
      node.pals.reset();
      node.exchange.reset();
      return defer_node(job, ni, nt, msg, spec, argv, user, "out of resources");
    }
  }
  spdlog::debug("job {}: started {} task(s) on {}", job.id, node.live, node.name);
  out_.started(job.id, node.name);
  if (node.live == 0 && node.deferred.empty()) report_node(job, node);
}

// Out of descriptors, processes or memory, a spawn waits and is tried again (backing off
// to once a second) instead of failing the task; after kSpawnPatience the task fails and
// the node is reported at fault, so the controller can drain it.
void JobExecutor::spawn_task(Job& job, uint32_t ni, uint32_t ti, Deferred d) {
  Node& node = job.nodes[ni];
  Task& task = node.tasks[ti];
  auto proc = tasks_.spawn(d.req, task_handlers(job.id, ni, ti));
  if (!proc && proc.error().code == Errc::unavailable && patient(node)) {
    if (!node.deferred_since) node.deferred_since = now_seconds();
    node.deferred.push_back(std::move(d));
    schedule_retry(job, proc.message());
    return;
  }
  if (!proc) {
    std::string text = error_prefix(job, node) + proc.message();
    if (proc.error().code == Errc::unavailable) {
      text += fmt::format(" (the node has lacked resources for {:.0f} s)", kSpawnPatience);
      node.fault = true;
    }
    spdlog::warn("{}", text);
    if (node.error.empty()) node.error = text;
    task.done = true;
    task.waitstatus = exit_status(spawn_failure_code(proc.error()));
    if (d.req.error_path.empty()) out_.output(job.id, task.rank, node.name, true, text + "\n", true);
    if (d.req.output_path.empty()) out_.output(job.id, task.rank, node.name, false, {}, true);
    return;
  }
  task.pid = *proc;
  ++node.live;
}

TaskSupervisor::Handlers JobExecutor::task_handlers(uint64_t jobid, uint32_t ni, uint32_t ti) {
  TaskSupervisor::Handlers h;
  h.output = [this, jobid, ni, ti](bool is_err, std::string_view data, bool eof) {
    if (Job* job = find(jobid))
      out_.output(jobid, job->nodes[ni].tasks[ti].rank, job->nodes[ni].name, is_err, data, eof);
  };
  h.spawn_failed = [this, jobid, ni](std::string_view message) {
    Job* job = find(jobid);
    if (job == nullptr) return;
    Node& node = job->nodes[ni];
    if (node.error.empty()) node.error = error_prefix(*job, node) + std::string(message);
  };
  h.exited = [this, jobid, ni, ti](const TaskSupervisor::Exit& exit) {
    if (Job* job = find(jobid)) task_exited(*job, job->nodes[ni], job->nodes[ni].tasks[ti], exit);
  };
  return h;
}

bool JobExecutor::patient(const Node& node) const {
  return !node.deferred_since || now_seconds() - *node.deferred_since < kSpawnPatience;
}

void JobExecutor::defer_node(Job& job, uint32_t ni, const v1::NodeTasks& nt, const v1::StartJob& msg,
                             const job::Jobspec& spec, const std::vector<std::string>& argv, const UserInfo& user,
                             const std::string& why) {
  Node& node = job.nodes[ni];
  if (!node.deferred_since) node.deferred_since = now_seconds();
  auto saved = std::make_shared<const v1::StartJob>(msg);
  auto saved_spec = std::make_shared<const job::Jobspec>(spec);
  node.restart = [this, id = job.id, ni, nt, saved, saved_spec, argv, user] {
    if (Job* j = find(id)) start_node(*j, ni, nt, *saved, *saved_spec, argv, user);
  };
  schedule_retry(job, why);
}

void JobExecutor::schedule_retry(Job& job, const std::string& why) {
  if (job.retry_timer) return;
  job.retry_delay = job.retry_delay == 0 ? 0.05 : std::min(1.0, job.retry_delay * 2);
  // One line every few seconds, not one per job: a node out of descriptors has many.
  if (const double t = now_seconds(); t - last_wait_warning_ > 5) {
    last_wait_warning_ = t;
    spdlog::warn("job {} (and maybe others): task spawns wait for resources: {}", job.id, why);
  }
  const uint64_t id = job.id;
  job.retry_timer = loop_.add_timer(job.retry_delay, [this, id] { retry_spawns(id); });
}

void JobExecutor::retry_spawns(uint64_t jobid) {
  Job* job = find(jobid);
  if (job == nullptr) return;
  job->retry_timer.reset();
  for (uint32_t ni = 0; ni < job->nodes.size(); ++ni) {
    if (auto restart = std::move(job->nodes[ni].restart); restart) {
      job->nodes[ni].restart = nullptr;
      restart();
      job = find(jobid);
      if (job == nullptr) return;
      continue;
    }
    std::vector<Deferred> waiting;
    waiting.swap(job->nodes[ni].deferred);
    for (auto& d : waiting) spawn_task(*job, ni, d.task, std::move(d));
    Node& node = job->nodes[ni];
    if (node.deferred.empty()) node.deferred_since.reset();
    if (!node.reported && node.live == 0 && node.deferred.empty() && !waiting.empty()) report_node(*job, node);
  }
  if (!job->retry_timer) job->retry_delay = 0;
}

// Tasks still waiting for resources never start: they end as if `sig` had killed them.
void JobExecutor::drop_deferred(Job& job, int sig) {
  if (job.retry_timer) {
    loop_.cancel_timer(*job.retry_timer);
    job.retry_timer.reset();
  }
  for (auto& node : job.nodes) {
    if (node.restart) {  // never started: every task ends unstarted
      node.restart = nullptr;
      node.tasks.resize(node.ntasks);
      for (uint32_t i = 0; i < node.ntasks; ++i) {
        node.tasks[i].rank = node.first_rank + i;
        node.tasks[i].done = true;
        node.tasks[i].waitstatus = signalled_status(sig);
      }
      out_.started(job.id, node.name);
      if (!node.reported) report_node(job, node);
      continue;
    }
    if (node.deferred.empty()) continue;
    for (auto& d : node.deferred) {
      node.tasks[d.task].done = true;
      node.tasks[d.task].waitstatus = signalled_status(sig);
    }
    node.deferred.clear();
    if (!node.reported && node.live == 0) report_node(job, node);
  }
}

Status JobExecutor::start_pmi(Job& job, Node& node, const v1::StartJob& msg) {
  if (job.mpi == job::MpiService::cray_pals) return start_pals(job, node, msg);
  if (msg.exec_nodes() > 1 && !msg.stepmgr().empty())
    node.exchange = std::make_unique<JobFenceExchange>(loop_, msg.stepmgr(), job.id, node.name, msg.exec_nodes(),
                                                       config_.credentials, config_.tls_ca);
  else
    node.exchange = std::make_unique<LocalPmiExchange>();
  if (job.mpi == job::MpiService::pmix) return {};  // the job's namespace serves the node
  NodePmi pmi;
  pmi.step.kvsname = "corral_" + std::to_string(job.id);
  pmi.step.size = static_cast<int>(std::max(msg.total_tasks(), node.first_rank + node.ntasks));
  pmi.first_rank = node.first_rank;
  pmi.ntasks = node.ntasks;
  pmi.node = node.name;
  auto server = start_node_pmi(
      loop_, *node.exchange, std::move(pmi),
      [this, jobid = job.id, name = node.name](const std::string& text) { pmi_failed(jobid, name, text); });
  if (!server) return server.error();
  node.pmi = std::move(*server);
  return {};
}

Status JobExecutor::start_pals(Job& job, Node& node, const v1::StartJob& msg) {
  if (!job.pals) {  // once for all of this agent's nodes of the job
    auto step = PalsStep::make(
        pals_step_info(msg, std::to_string(msg.jobid()), pals_base(config_.state_dir), msg.userid(), msg.groupid()));
    if (!step) return step.error();
    job.pals = std::move(*step);
  }
  // The layout holds the nodes that run tasks, in rank order: this node's place in it.
  auto index = job.pals->index_of(node.name);
  if (!index) return invalid("--mpi=cray-pals: node " + node.name + " is not in the job's layout");
  auto started = job.pals->start_node(*index, node.name, node.first_rank, node.ntasks);
  if (!started) return started.error();
  node.pals = std::move(*started);
  return {};
}

// One namespace for all of the job's nodes on this agent, made when the first starts.
Status JobExecutor::start_pmix(Job& job, const v1::StartJob& msg) {
  if (job.pmix) return {};
  NodePmix pmix{msg.pmix_namespace(),
                {msg.layout_nodes().begin(), msg.layout_nodes().end()},
                {msg.layout_tasks().begin(), msg.layout_tasks().end()},
                {},
                msg.userid(),
                msg.groupid()};
  for (const auto& t : msg.tasks())
    if (config_.hosts(t.node()) && t.ntasks() > 0) pmix.local.push_back(t.node());
  const NodeHardware* hw = pmix.local.empty() ? nullptr : config_.node(pmix.local.front());
  pmix.virtual_nodes = hw != nullptr && hw->core_cpus.empty();
  const std::string first_node = pmix.local.empty() ? "" : pmix.local.front();
  const uint64_t jobid = job.id;
  job.pmix_exchange = std::make_unique<SharedNodesExchange>([this, jobid]() -> Result<std::vector<PmiExchange*>> {
    Job* j = find(jobid);
    if (j == nullptr) return Error{Errc::unavailable, "the job is ending"};
    std::vector<PmiExchange*> parts;
    for (auto& node : j->nodes)
      if (node.exchange) parts.push_back(node.exchange.get());
    return parts;
  });
  auto ns = start_node_pmix(pmix_, std::move(pmix), *job.pmix_exchange,
                            [this, jobid, first_node](const std::string& text) { pmi_failed(jobid, first_node, text); });
  // Nothing to wait for: a server that cannot start, or a layout that does not hold
  // together, will not do better later.
  if (!ns) return invalid(ns.message());
  job.pmix = std::move(*ns);
  return {};
}

// The other ranks would wait forever in the next barrier: the job's tasks here end.
void JobExecutor::pmi_failed(uint64_t jobid, const std::string& node_name, const std::string& text) {
  Job* job = find(jobid);
  if (job == nullptr) return;
  spdlog::warn("job {}: {}: {}", jobid, node_name, text);
  for (auto& node : job->nodes) {
    if (node.name != node_name) continue;
    if (node.error.empty()) node.error = error_prefix(*job, node) + text;
    out_.output(jobid, node.first_rank, node.name, true, "corral: " + text + "\n", false);
    for (auto& t : node.tasks)
      if (t.pid > 0 && !t.done) tasks_.signal(t.pid, SIGKILL);
  }
}

// ------------------------------------------------------------------ output

// Hooks' notes (a prolog's warnings) go where the first task's stderr goes, before it
// starts. The agent never opens the user's file itself: the spawn writes them through
// the descriptor it opened for the task (as the user, through corral-imp).
void JobExecutor::place_notes(const Job& job, const Node& node, const v1::StartJob& msg, SpawnRequest& req) {
  std::string text;
  for (const auto& n : msg.notes()) text += n + "\n";
  if (text.empty()) return;
  if (req.error_path.empty())
    out_.output(job.id, node.first_rank, node.name, true, text, false);
  else
    req.stderr_note = std::move(text);
}

void JobExecutor::task_exited(Job& job, Node& node, Task& task, const TaskSupervisor::Exit& exit) {
  task.done = true;
  task.waitstatus = exit.waitstatus;
  task.cpu_seconds = exit.cpu_seconds;
  // A rank that failed without finalizing leaves the others waiting. (A rank that exits
  // 0 is taken at its word: its client need not wait for the library to take its finalize.)
  if (job.pmix && exit.waitstatus != 0 && job.pmix->left_unfinalized(task.rank))
    pmi_failed(job.id, node.name,
               "rank " + std::to_string(task.rank) + ": exited without PMIx_Finalize (" +
                   describe_wait_status(exit.waitstatus) + ")");
  if (--node.live == 0 && node.deferred.empty()) report_node(job, node);
}

void JobExecutor::report_node(Job& job, Node& node) {
  v1::JobNodeExit exit;
  exit.set_jobid(job.id);
  exit.set_node(node.name);
  exit.set_attempt(job.attempt);
  int worst = 0;
  double cpu = 0;
  for (const auto& t : node.tasks) {
    auto* te = exit.add_tasks();
    te->set_rank(t.rank);
    te->set_waitstatus(t.waitstatus);
    te->set_cpu_seconds(t.cpu_seconds);
    worst = std::max(worst, t.waitstatus);
    cpu += t.cpu_seconds;
  }
  exit.set_waitstatus(worst);
  exit.set_error(node.error);
  exit.set_node_fault(node.fault);
  exit.set_cpu_seconds(cpu);
  if (job.contained) {
    // Its own tasks' and its steps'. The kernel counts a kill in the job's cgroup before
    // the killed task is reaped.
    const uint64_t kills = cgroups_->oom_kills(job.id);
    if (kills > job.oom_kills) exit.set_oom_kills(kills - job.oom_kills);
    job.oom_kills = std::max(job.oom_kills, kills);
  }
  node.reported = true;
  // Posted: a PMI callback may be on the stack (an abort killed the last task).
  node.pals.reset();  // the spool directory goes with the node's last task
  if (node.pmi || node.exchange)
    loop_.post([pmi = std::shared_ptr<PmiServer>(std::move(node.pmi)),
                ex = std::shared_ptr<PmiExchange>(std::move(node.exchange))]() mutable {
      pmi.reset();
      ex.reset();
    });
  job.worst = std::max(job.worst, worst);
  job.cpu_seconds += cpu;
  out_.exited(exit);
  exits_[job.id].push_back(std::move(exit));
  if (--job.unreported != 0) return;
  if (job.pmix || job.pmix_exchange)  // posted, as the nodes' servers above
    loop_.post([ns = std::shared_ptr<PmixNamespace>(std::move(job.pmix)),
                ex = std::shared_ptr<SharedNodesExchange>(std::move(job.pmix_exchange))]() mutable {
      ns.reset();
      ex.reset();
    });
  if (job.kill_timer) {
    loop_.cancel_timer(*job.kill_timer);
    job.kill_timer.reset();
  }
  // What the tasks left running (daemons, double forks) ends with them.
  // (The job's directory, made for its limits, goes too once its steps' units are gone.)
  if (cgroups_ != nullptr && (job.contained || job.cgroup)) cgroups_->release(job.id, TaskCgroups::kJobUnit);
  if (waiting_runs_.count(job.id)) {
    // The step manager already belongs to the next run; posted: callers still hold `job`.
    loop_.post([this, id = job.id] { start_waiting_run(id); });
    return;
  }
  if (job_ended_) job_ended_(job.id, job.worst, job.cpu_seconds);
}

// ------------------------------------------------------------------ signals

std::optional<uint32_t> JobExecutor::attempt_of(uint64_t jobid) const {
  auto it = jobs_.find(jobid);
  if (it == jobs_.end()) return std::nullopt;
  return it->second.attempt;
}

bool JobExecutor::for_earlier_run(const v1::SignalJob& msg) const {
  if (auto w = waiting_runs_.find(msg.jobid()); w != waiting_runs_.end())
    return w->second.start.attempt() != msg.attempt();
  auto held = attempt_of(msg.jobid());
  return held && *held != msg.attempt();
}

void JobExecutor::start_waiting_run(uint64_t jobid) {
  auto it = waiting_runs_.find(jobid);
  if (it == waiting_runs_.end()) return;
  if (cgroups_ != nullptr && cgroups_->draining(jobid)) {
    loop_.add_timer(kCgroupWait, [this, jobid] { start_waiting_run(jobid); });
    return;
  }
  WaitingRun run = std::move(it->second);
  waiting_runs_.erase(it);
  forget(jobid);
  start(run.start);
  for (const auto& sig : run.signals) signal(sig);
}

void JobExecutor::signal(const v1::SignalJob& msg) {
  if (auto w = waiting_runs_.find(msg.jobid());
      w != waiting_runs_.end() && w->second.start.attempt() == msg.attempt()) {
    w->second.signals.push_back(msg);  // for the next run; the earlier one is being killed
    return;
  }
  Job* job = find(msg.jobid());
  if (job == nullptr || job->unreported == 0 || job->attempt != msg.attempt()) return;
  if (job->mock_timer) {
    loop_.cancel_timer(*job->mock_timer);
    finish_mock(job->id, signalled_status(msg.signal()));
    return;
  }
  if (job->alloc) {
    if (terminating(msg.signal())) finish_mock(job->id, signalled_status(msg.signal()));
    return;
  }
  signal_tasks(*job, msg.signal());
  if (terminating(msg.signal())) drop_deferred(*job, msg.signal());
  if (msg.kill_after() > 0 && !job->kill_timer) {
    uint64_t id = job->id;
    job->kill_timer = loop_.add_timer(msg.kill_after(), [this, id] {
      Job* j = find(id);
      if (j == nullptr) return;
      j->kill_timer.reset();
      signal_tasks(*j, SIGKILL);
    });
  }
}

void JobExecutor::signal_tasks(Job& job, int sig) {
  for (auto& node : job.nodes)
    for (auto& t : node.tasks)
      if (t.pid > 0 && !t.done) tasks_.signal(t.pid, sig);
}

void JobExecutor::kill_all(int sig) {
  for (auto& [id, job] : jobs_) {
    if (job.mock_timer) {
      loop_.cancel_timer(*job.mock_timer);
      job.mock_timer.reset();
    }
    signal_tasks(job, sig);
    if (terminating(sig)) drop_deferred(job, sig);
  }
}

// ------------------------------------------------------------------ bookkeeping

const std::vector<std::string>& JobExecutor::cgroup_of(Job& job) {
  return unit_cgroup(cgroups_, job.cgroup, job.id, TaskCgroups::kJobUnit, "job " + std::to_string(job.id));
}

void JobExecutor::limit_job(const Job& job, const v1::StartJob& msg) {
  JobLimits limits;
  limits.pids = config_.job_pids_max;
  for (const auto& t : msg.tasks()) {
    const NodeHardware* hw = config_.node(t.node());
    if (hw == nullptr) continue;
    limits.memory_bytes += t.memory_mb() * 1024 * 1024;
    if (!config_.cpu_bind) continue;
    if (auto cpus = cpus_of_cores(*hw, t.cores()); cpus)
      limits.cpus.insert(limits.cpus.end(), cpus->begin(), cpus->end());
  }
  std::sort(limits.cpus.begin(), limits.cpus.end());
  limits.cpus.erase(std::unique(limits.cpus.begin(), limits.cpus.end()), limits.cpus.end());
  if (!limits.any()) return;
  // A job that cannot be held to its limits still runs (as without cgroups), and says why here.
  if (auto st = cgroups_->limit_job(job.id, limits); !st)
    spdlog::warn("job {}: runs without its limits: {}", job.id, st.message());
}

void JobExecutor::forget(uint64_t jobid) {
  exits_.erase(jobid);
  Job* job = find(jobid);
  if (job == nullptr || job->unreported != 0) return;
  if (!job->script_dir.empty()) {
    ::unlink((job->script_dir + "/script").c_str());
    ::rmdir(job->script_dir.c_str());
  }
  jobs_.erase(jobid);
}

void JobExecutor::fill_register(v1::Register& reg) const {
  for (const auto& [id, job] : jobs_) {
    if (job.unreported == 0) continue;
    auto* r = reg.add_running();
    r->set_jobid(id);
    r->set_attempt(job.attempt);
    for (const auto& node : job.nodes)
      if (!node.reported) r->add_nodes(node.name);
  }
  for (const auto& [id, list] : exits_)
    for (const auto& e : list) *reg.add_exited() = e;
}

}  // namespace corral::node
