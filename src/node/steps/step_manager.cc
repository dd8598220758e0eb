#include "node/steps/step_manager.h"

#include <pwd.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "job/eventlog.h"
#include "job/jobspec.h"
#include "job/mpi_kind.h"
#include "job/rlimit.h"
#include "job/step_id.h"
#include "node/exec/wait_status.h"
#include "node/steps/step_manager_state.h"

namespace corral::node {

namespace {

std::string user_name(uint32_t uid) {
  struct passwd pw {};
  struct passwd* found = nullptr;
  char buf[4096];
  if (::getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found != nullptr) return pw.pw_name;
  return std::to_string(uid);
}

std::string describe_status(int ws) {
  if (WIFSIGNALED(ws)) return fmt::format("was killed by signal {}", WTERMSIG(ws));
  return fmt::format("exited with code {}", WEXITSTATUS(ws));
}

Result<std::vector<JobNode>> allocator_nodes(const v1::StartJob& msg) {
  std::vector<JobNode> out;
  auto add = [&](const std::string& name, const std::string& cores, const std::string& gpus) -> Status {
    auto c = IdSet::parse(cores);
    if (!c) return invalid("node " + name + ": cores '" + cores + "': " + c.message());
    auto g = IdSet::parse(gpus);
    if (!g) return invalid("node " + name + ": gpus '" + gpus + "': " + g.message());
    out.push_back(JobNode{name, std::move(*c), std::move(*g)});
    return {};
  };
  for (const auto& n : msg.job_nodes())
    if (auto st = add(n.name(), n.cores(), n.gpus()); !st) return st.error();
  if (out.empty())  // a controller that sends no job_nodes: the nodes of this StartJob
    for (const auto& t : msg.tasks())
      if (auto st = add(t.node(), t.cores(), t.gpus()); !st) return st.error();
  return out;
}

}  // namespace

std::string step_kvsname(uint64_t jobid, uint32_t stepid) { return fmt::format("corral_{}_{}", jobid, stepid); }

Error no_step_manager(uint64_t jobid) {
  return not_found(
      fmt::format("job {} has no step manager here (it is not running, or its first node is elsewhere)", jobid));
}

StepManager::StepManager(EventLoop& loop, StepLauncher& launcher, StepManagerConfig config, RecordSink records)
    : loop_(loop), launcher_(launcher), config_(std::move(config)), records_sink_(std::move(records)) {}

StepManager::~StepManager() {
  for (auto& [id, parked] : parked_) loop_.cancel_timer(parked.timer);
  for (auto& [id, job] : jobs_) {
    if (job->kill_timer) loop_.cancel_timer(*job->kill_timer);
    for (auto& [sid, step] : job->steps) {
      if (step.kill_timer) loop_.cancel_timer(*step.kill_timer);
      if (step.created_timer) loop_.cancel_timer(*step.created_timer);
    }
  }
}

StepManager::Job* StepManager::find(uint64_t jobid) {
  auto it = jobs_.find(jobid);
  return it == jobs_.end() ? nullptr : it->second.get();
}

const StepManager::Job* StepManager::find(uint64_t jobid) const {
  auto it = jobs_.find(jobid);
  return it == jobs_.end() ? nullptr : it->second.get();
}

StepManager::Step* StepManager::find_step(uint64_t jobid, uint32_t stepid) {
  Job* job = find(jobid);
  if (job == nullptr) return nullptr;
  auto it = job->steps.find(stepid);
  return it == job->steps.end() ? nullptr : &it->second;
}

StepManager::Step* StepManager::find_step(uint64_t jobid, uint32_t stepid, uint64_t serial) {
  Step* s = find_step(jobid, stepid);
  return s != nullptr && s->serial == serial ? s : nullptr;
}

Status StepManager::check_owner(const Job& job, uint32_t uid) const {
  if (uid == 0 || uid == job.uid) return {};
  return denied(fmt::format("job {} belongs to user {}", job.id, user_name(job.uid)));
}

// ------------------------------------------------------------------ jobs

void StepManager::add_job(const v1::StartJob& msg) {
  auto spec = job::parse_jobspec(msg.jobspec());
  add_job(msg, spec ? &*spec : nullptr, msg.step_key());
}

void StepManager::add_job(const v1::StartJob& msg, const job::Jobspec* spec, const std::string& step_key) {
  if (step_key.empty() || jobs_.count(msg.jobid()) != 0) return;
  auto nodes = allocator_nodes(msg);
  auto allocator = nodes ? StepAllocator::create(msg.jobid(), std::move(*nodes)) : Result<StepAllocator>(nodes.error());
  if (!allocator) {
    spdlog::warn("job {}: no step manager: {}", msg.jobid(), allocator.message());
    return;
  }
  auto job = std::make_unique<Job>();
  job->id = msg.jobid();
  job->uid = msg.userid();
  job->gid = msg.groupid();
  job->step_key = step_key;
  job->stepmgr = msg.stepmgr().empty() ? config_.self_uri : msg.stepmgr();
  job->alloc = msg.alloc();
  job->nodes.assign(msg.job_nodes().begin(), msg.job_nodes().end());
  for (size_t i = 0; i < job->nodes.size(); ++i) job->node_index.emplace(job->nodes[i].name(), i);
  job->allocator.emplace(std::move(*allocator));
  if (!msg.mpi_port_share().empty()) {
    if (auto share = job::PortRange::parse(msg.mpi_port_share()); share)
      job->ports.emplace(*share);
    else
      spdlog::warn("job {}: MPI port share ignored: {}", msg.jobid(), share.message());
  }
  job->ports_per_step = msg.mpi_ports_per_step();
  job->fanout_width = msg.fanout_width();
  job->extra_env = msg.extra_env();
  job->t_start = job::now();
  job->mpi = job::job_mpi_name("", msg.mpi_default());
  if (spec != nullptr) {
    job->mpi = job::job_mpi_name(spec->mpi, msg.mpi_default());
    job->name = spec->name;
    job->batch = !spec->batch_script.empty() && !msg.alloc();
    // A cray-pals job's own tasks use the first block of its share (the controller
    // names it to every agent: StartJob.pals_control_ports); steps get the rest.
    if (job->mpi == "cray-pals" && spec->batch_script.empty() && !msg.alloc() && job->ports && job->ports_per_step > 0)
      (void)job->ports->take(job->ports_per_step);
    for (const auto& [k, v] : spec->environment) *job->env.Add() = k + "=" + v;
  }
  spdlog::debug("job {}: step manager started ({} node(s))", msg.jobid(), job->allocator->nodes().size());
  jobs_.emplace(msg.jobid(), std::move(job));
  replay_parked(msg.jobid());
}

void StepManager::signal_job(uint64_t jobid, int sig, double kill_after) {
  Job* job = find(jobid);
  if (job == nullptr) return;
  for (auto& [id, step] : job->steps)
    if (step.state == Step::State::running && sig != 0) signal_step(step, sig);
  if (kill_after > 0 && !job->kill_timer) {
    job->kill_timer = loop_.add_timer(kill_after, [this, jobid] {
      Job* j = find(jobid);
      if (j == nullptr) return;
      j->kill_timer.reset();
      for (auto& [id, step] : j->steps)
        if (step.state == Step::State::running) signal_step(step, SIGKILL);
    });
  }
}

void StepManager::job_tasks_ended(uint64_t jobid, int waitstatus, double cpu_seconds) {
  Job* job = find(jobid);
  if (job == nullptr || job->ending) return;
  job->ending = true;
  if (job->batch) {
    job->batch_waitstatus = waitstatus;
    v1::StepInfo bi = batch_info(*job);
    bi.set_cpu_seconds(cpu_seconds);
    record(*job, std::move(bi));
  }
  end_job_steps(*job, false);
  maybe_drop(jobid);
}

void StepManager::forget_job(uint64_t jobid) {
  Job* job = find(jobid);
  if (job == nullptr) return;
  job->ending = true;
  end_job_steps(*job, true);
  maybe_drop(jobid);
}

// Pending steps fail at once; running ones are killed and end when their tree reports
// (or at once with `now`, when nobody will wait for the tree any more).
void StepManager::end_job_steps(Job& job, bool now) {
  std::vector<uint32_t> ids;
  for (auto& [id, step] : job.steps) ids.push_back(id);
  for (uint32_t id : ids) {
    auto it = job.steps.find(id);
    if (it == job.steps.end()) continue;
    Step& step = it->second;
    if (step.state == Step::State::pending) {
      step.add_error("the job ended");
      finish(job, id, "FAILED");
      continue;
    }
    if (!step.killed) {
      step.add_error("the job ended");
      signal_step(step, SIGKILL);
    }
    if (now) {
      for (uint32_t r = 0; r < step.ntasks; ++r) {
        if (step.exited[r]) continue;
        step.exits[r].set_rank(r);
        step.exits[r].set_waitstatus(signalled_status(SIGKILL));
        step.exited[r] = true;
        ++step.nexited;
      }
      finish(job, id);
    }
  }
}

void StepManager::maybe_drop(uint64_t jobid) {
  Job* job = find(jobid);
  if (job == nullptr || !job->ending || !job->steps.empty()) return;
  if (job->kill_timer) loop_.cancel_timer(*job->kill_timer);
  spdlog::debug("job {}: step manager done", jobid);
  jobs_.erase(jobid);
}

// ------------------------------------------------------------------ clients

void StepManager::fail_open(StepClientSink& sink, const std::string& error) {
  v1::StepServerMessage msg;
  auto* exit = msg.mutable_exit();
  exit->set_waitstatus(exit_status(1));
  exit->set_state("FAILED");
  exit->set_error(error);
  if (sink.send) sink.send(std::move(msg));
}

void StepManager::open(ClientId id, uint32_t uid, v1::StepSpec spec, StepClientSink sink) {
  const uint64_t jobid = spec.jobid();
  if (jobid == 0) {
    sink.fail(invalid("the step request names no job: run it inside a job (CORRAL_JOBID) or give --jobid"));
    return;
  }
  Job* job = find(jobid);
  if (job == nullptr) return park_open(id, uid, std::move(spec), std::move(sink));
  if (auto st = check_owner(*job, uid); !st) {
    sink.fail(st.error());
    return;
  }
  if (job->ending) return fail_open(sink, fmt::format("job {} is ending: no new steps start", jobid));
  if (spec.argv_size() == 0) return fail_open(sink, "the step has no command");
  for (const auto& [name, value] : spec.rlimits())
    if (!job::rlimit_resource(name) || value < -1)
      return fail_open(sink, fmt::format("the step's resource limit {}={} is not one corral knows (--propagate takes "
                                         "AS, CORE, CPU, DATA, FSIZE, MEMLOCK, NOFILE, NPROC, RSS, STACK)",
                                         name.substr(0, 64), value));
  auto req = to_request(*job, spec);
  if (!req) return fail_open(sink, req.message());
  const bool interactive = spec.interactive();
  const uint32_t stepid = interactive ? job::kInteractiveStep : job->next_step;
  if (interactive && job->steps.count(stepid) != 0)
    return fail_open(sink, fmt::format("job {} already has an interactive step", jobid));

  auto placed = job->allocator->allocate(stepid, *req);
  std::string waiting;
  if (!placed) {
    if (placed.error().code != Errc::unavailable) return fail_open(sink, placed.message());
    if (spec.immediate()) return fail_open(sink, placed.message() + " (--immediate: the step does not wait)");
    if (auto st = job->allocator->enqueue(stepid, *req); !st) return fail_open(sink, st.message());
    waiting = placed.message();
  }
  if (!interactive) ++job->next_step;

  Step& step = job->steps[stepid];
  step.id = stepid;
  step.serial = next_serial_++;
  step.client = id;
  step.sink = std::move(sink);
  step.req = *req;
  step.t_submit = job::now();
  step.command = spec.argv(0);
  for (int i = 1; i < spec.argv_size(); ++i) step.command += " " + spec.argv(i);
  if (!spec.name().empty())
    step.name = spec.name();
  else
    step.name = spec.argv(0).substr(spec.argv(0).rfind('/') + 1);
  step.spec = std::move(spec);
  clients_[id] = StepKey{jobid, stepid};
  if (placed) {
    step.share = std::move(*placed);
    launch(*job, step);
    maybe_drop(jobid);
    return;
  }
  v1::StepServerMessage msg;
  msg.set_waiting(waiting);
  send(step, std::move(msg));
}

void StepManager::client_message(ClientId id, v1::StepClientMessage&& msg) {
  auto it = clients_.find(id);
  if (it == clients_.end()) return;
  auto [jobid, stepid] = it->second;
  Job* job = find(jobid);
  Step* step = find_step(jobid, stepid);
  if (job == nullptr || step == nullptr) return;
  if (step->state == Step::State::pending && msg.signal() != 0 && terminating(msg.signal())) {
    step->cancelled = true;
    step->add_error(fmt::format("cancelled by signal {} before it started", msg.signal()));
    finish(*job, stepid, "CANCELED");
    return;
  }
  v1::LaunchDown down;
  bool any = false;
  if (!msg.stdin().empty()) {
    down.set_stdin(std::move(*msg.mutable_stdin()));
    any = true;
  }
  if (msg.stdin_eof()) down.set_stdin_eof(any = true);
  if (msg.signal() != 0) {
    down.set_signal(msg.signal());
    any = true;
  }
  if (msg.has_winsize()) {
    *down.mutable_winsize() = msg.winsize();
    any = true;
  }
  if (any) deliver(*step, std::move(down));
}

void StepManager::park_open(ClientId id, uint32_t uid, v1::StepSpec spec, StepClientSink sink) {
  const uint64_t jobid = spec.jobid();
  auto timer = loop_.add_timer(config_.early_open_wait, [this, id, jobid] {
    auto it = parked_.find(id);
    if (it == parked_.end()) return;
    StepClientSink client = std::move(it->second.sink);
    parked_.erase(it);
    client.fail(no_step_manager(jobid));
  });
  parked_.insert_or_assign(id, ParkedOpen{uid, std::move(spec), std::move(sink), timer});
}

void StepManager::replay_parked(uint64_t jobid) {
  std::vector<std::pair<ClientId, ParkedOpen>> ready;
  for (auto it = parked_.begin(); it != parked_.end();) {
    if (it->second.spec.jobid() != jobid) {
      ++it;
      continue;
    }
    loop_.cancel_timer(it->second.timer);
    ready.emplace_back(it->first, std::move(it->second));
    it = parked_.erase(it);
  }
  // Client ids grow with arrival: open in that order, as strict FIFO placement expects.
  std::sort(ready.begin(), ready.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [id, p] : ready) open(id, p.uid, std::move(p.spec), std::move(p.sink));
}

void StepManager::client_gone(ClientId id) {
  if (auto parked = parked_.find(id); parked != parked_.end()) {
    loop_.cancel_timer(parked->second.timer);
    parked_.erase(parked);
    return;
  }
  auto it = clients_.find(id);
  if (it == clients_.end()) return;
  auto [jobid, stepid] = it->second;
  clients_.erase(it);
  Job* job = find(jobid);
  Step* step = find_step(jobid, stepid);
  if (job == nullptr || step == nullptr) return;
  step->sink = {};
  step->cancelled = true;
  step->add_error("the client (corral run) went away");
  if (step->state == Step::State::pending) {
    finish(*job, stepid, "CANCELED");
    maybe_drop(jobid);
    return;
  }
  if (!step->killed) signal_step(*step, SIGKILL);
}

// ------------------------------------------------------------------ running steps

void StepManager::send(Step& step, v1::StepServerMessage&& msg) {
  if (step.created) {
    if (step.created_timer) loop_.cancel_timer(*step.created_timer);
    step.created_timer.reset();
    msg.mutable_created()->Swap(step.created->mutable_created());
    step.created.reset();
  }
  if (step.sink.send) step.sink.send(std::move(msg));
}

void StepManager::hold_created(const Job& job, Step& step, v1::StepServerMessage&& created) {
  if (config_.created_linger <= 0) return send(step, std::move(created));
  step.created = std::move(created);
  const uint64_t jobid = job.id, serial = step.serial;
  const uint32_t stepid = step.id;
  step.created_timer = loop_.add_timer(config_.created_linger, [this, jobid, stepid, serial] {
    Step* s = find_step(jobid, stepid, serial);
    if (s == nullptr || !s->created) return;
    s->created_timer.reset();
    send(*s, v1::StepServerMessage());
  });
}

void StepManager::deliver(Step& step, v1::LaunchDown&& down) {
  if (step.state == Step::State::ended) return;
  if (step.launch_id)
    launcher_.deliver(*step.launch_id, down);
  else
    step.held.push_back(std::move(down));
}

void StepManager::signal_step(Step& step, int sig) {
  if (sig == SIGKILL) {
    if (step.killed) return;
    step.killed = true;
  }
  v1::LaunchDown down;
  down.set_signal(sig);
  deliver(step, std::move(down));
}

void StepManager::on_up(uint64_t jobid, uint32_t stepid, uint64_t serial, v1::LaunchUp&& up) {
  Step* step = find_step(jobid, stepid, serial);
  if (step == nullptr || step->state != Step::State::running) return;
  Job& job = *find(jobid);
  v1::StepServerMessage msg;
  if (up.output_size() > 0) msg.mutable_output()->Swap(up.mutable_output());
  on_errors(*step, up, msg);
  if (msg.output_size() > 0) send(*step, std::move(msg));
  if (up.has_fence()) on_fence(*step, std::move(*up.mutable_fence()));
  if (up.exits_size() > 0) on_exits(job, *step, up);  // may end the step
  maybe_drop(jobid);
}

// Start failures and PMI aborts reach the user as stderr lines of the rank concerned, and
// end the step: the other ranks would otherwise wait for them forever (in a PMI barrier,
// or in MPI).
void StepManager::on_errors(Step& step, const v1::LaunchUp& up, v1::StepServerMessage& msg) {
  auto line = [&](uint32_t rank, const std::string& node, const std::string& text) {
    auto* out = msg.add_output();
    out->set_jobid(step.spec.jobid());
    out->set_rank(rank);
    out->set_stderr(true);
    out->set_node(node);
    out->set_data("corral: " + text + "\n");
  };
  for (const auto& e : up.errors()) {
    uint32_t rank = 0;
    uint32_t first = 0;
    for (const auto& n : step.share.nodes) {
      if (n.name == e.node()) rank = first;
      first += n.ntasks;
    }
    std::string text = "node " + e.node() + ": " + e.message();
    line(rank, e.node(), text);
    step.add_error(text);
  }
  for (const auto& a : up.pmi_aborts()) {
    line(0, {}, a);
    step.add_error(a);
  }
  if (up.pmi_aborts_size() > 0 || up.errors_size() > 0) signal_step(step, SIGKILL);
}

void StepManager::on_fence(Step& step, v1::PmiFence&& fence) {
  const uint32_t seq = fence.seq();
  v1::PmiFence* acc = nullptr;
  auto it = step.fences.find(seq);
  if (it == step.fences.end()) {
    acc = &step.fences.emplace(seq, std::move(fence)).first->second;
  } else {
    acc = &it->second;
    for (auto& [k, v] : *fence.mutable_kvs()) (*acc->mutable_kvs())[k] = std::move(v);
    acc->set_nodes(acc->nodes() + fence.nodes());
  }
  if (acc->nodes() < step.nnodes) return;
  v1::LaunchDown down;
  down.mutable_fence()->Swap(acc);
  step.fences.erase(seq);
  deliver(step, std::move(down));
}

void StepManager::on_exits(Job& job, Step& step, const v1::LaunchUp& up) {
  for (const auto& te : up.exits()) {
    const uint32_t r = te.rank();
    if (r >= step.ntasks || step.exited[r]) continue;
    step.exited[r] = true;
    step.exits[r] = te;
    ++step.nexited;
    step.cpu_seconds += te.cpu_seconds();
    if (te.waitstatus() != 0 && step.spec.kill_on_bad_exit() && !step.killed) {
      step.add_error(
          fmt::format("rank {} {}: the step was killed (--kill-on-bad-exit)", r, describe_status(te.waitstatus())));
      signal_step(step, SIGKILL);
    }
  }
  if (step.nexited >= step.ntasks) finish(job, step.id);
}

void StepManager::on_done(uint64_t jobid, uint32_t stepid, uint64_t serial, const std::string& error) {
  Step* step = find_step(jobid, stepid, serial);
  if (step == nullptr || step->state != Step::State::running) return;
  step->add_error(error);
  uint32_t missing = 0;
  for (uint32_t r = 0; r < step->ntasks; ++r) {
    if (step->exited[r]) continue;
    step->exited[r] = true;
    step->exits[r].set_rank(r);
    step->exits[r].set_waitstatus(exit_status(1));
    ++missing;
  }
  if (missing > 0 && error.empty()) step->add_error(fmt::format("{} rank(s) never reported an exit", missing));
  step->nexited = step->ntasks;
  finish(*find(jobid), stepid);
  maybe_drop(jobid);
}

void StepManager::cancel_running(Step& step, int sig, double grace) {
  step.cancelled = true;
  signal_step(step, sig);
  if (sig == SIGKILL || step.kill_timer) return;
  uint64_t jobid = step.spec.jobid(), serial = step.serial;
  uint32_t stepid = step.id;
  step.kill_timer = loop_.add_timer(grace, [this, jobid, stepid, serial] {
    Step* s = find_step(jobid, stepid, serial);
    if (s == nullptr) return;
    s->kill_timer.reset();
    signal_step(*s, SIGKILL);
  });
}

void StepManager::finish(Job& job, uint32_t stepid, const std::string& state) {
  auto it = job.steps.find(stepid);
  if (it == job.steps.end()) return;
  Step& step = it->second;
  const bool ran = step.state == Step::State::running;
  if (step.kill_timer) loop_.cancel_timer(*step.kill_timer);
  job.allocator->release(stepid);
  if (step.ports && job.ports) (void)job.ports->give_back(*step.ports);

  v1::StepServerMessage msg;
  auto* exit = msg.mutable_exit();
  int worst = 0;
  for (uint32_t r = 0; r < step.ntasks; ++r) {
    if (!step.exited[r]) continue;
    worst = std::max(worst, step.exits[r].waitstatus());
    *exit->add_tasks() = std::move(step.exits[r]);
  }
  if (!ran) worst = exit_status(1);
  step.state = Step::State::ended;
  step.t_end = job::now();
  step.waitstatus = worst;
  step.final_state = !state.empty() ? state : step.cancelled ? "CANCELED" : worst == 0 ? "COMPLETED" : "FAILED";
  exit->set_waitstatus(worst);
  exit->set_state(step.final_state);
  exit->set_error(step.error);
  send(step, std::move(msg));  // first: the client (waiting to start its next step) hears at once
  record(job, info(job, step));
  clients_.erase(step.client);
  const bool interactive_end = ran && job.alloc && stepid == job::kInteractiveStep;
  job.steps.erase(it);
  if (interactive_end && interactive_end_) {
    // Posted: ending the job re-enters the step manager (job_tasks_ended).
    loop_.post([cb = interactive_end_, jobid = job.id, worst] { cb(jobid, worst); });
  }
  start_ready(job);
}

// ------------------------------------------------------------------ controller

void StepManager::cancel(const v1::CancelStep& msg) {
  Job* job = find(msg.jobid());
  auto stepid = job::parse_step_name(msg.step());
  Step* step = (job != nullptr && stepid) ? find_step(msg.jobid(), *stepid) : nullptr;
  if (step == nullptr) {
    spdlog::info("cancel of step {}.{}: no such step here", msg.jobid(), msg.step());
    return;
  }
  const int sig = msg.signal();
  if (step->state == Step::State::pending) {
    if (sig != 0 && !terminating(sig)) return;
    step->cancelled = true;
    step->add_error(fmt::format("cancelled by user {} before it started", user_name(msg.userid())));
    finish(*job, *stepid, "CANCELED");
    maybe_drop(msg.jobid());
    return;
  }
  if (sig != 0) {
    signal_step(*step, sig);
    return;
  }
  step->add_error(fmt::format("cancelled by user {}", user_name(msg.userid())));
  cancel_running(*step, SIGTERM, msg.kill_grace() > 0 ? msg.kill_grace() : config_.kill_grace);
}

void StepManager::stored(const v1::StepRef& ref) { records_.erase({ref.jobid(), ref.step()}); }

void StepManager::fill_register(v1::Register& reg) const {
  for (const auto& [key, info] : records_) *reg.add_steps() = info;
}

}  // namespace corral::node
