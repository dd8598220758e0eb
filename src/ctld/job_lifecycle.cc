// The RFC 21 state machine in motion: events are posted, applied, persisted and shown
// to hooks; advance() then takes each touched job one step further.
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "ctld/controller.h"
#include "ctld/job_summary.h"
#include "job/key_wrap.h"
#include "job/mpi_kind.h"
#include "job/port_range.h"
#include "job/step_cred.h"
#include "net/message_limits.h"
#include "util/hostlist.h"
#include "util/natural_sort.h"

namespace corral::ctld {

using job::JobState;
using nlohmann::json;

namespace {

// Where a node sits in the topology, for its tasks (and its steps' tasks).
void add_topology_env(const topology::Topology* topo, const std::string& node,
                      google::protobuf::Map<std::string, std::string>& env) {
  if (!topo) return;
  auto addr = topology::topology_addr(*topo, node);
  env["CORRAL_TOPOLOGY_ADDR"] = addr.addr;
  env["CORRAL_TOPOLOGY_ADDR_PATTERN"] = addr.pattern;
}

}  // namespace

void Controller::post(uint64_t jobid, job::Event ev) {
  posts_.emplace_back(jobid, std::move(ev));
  if (!draining_) drain_posts();
}

// Events posted while handling an event are queued and applied in order; jobs are
// advanced only once the queue is empty, so hooks' reactions are seen first.
void Controller::drain_posts() {
  draining_ = true;
  while (!posts_.empty() || !dirty_.empty()) {
    while (!posts_.empty()) {
      auto [id, ev] = std::move(posts_.front());
      posts_.pop_front();
      apply_posted(id, ev);
    }
    auto dirty = std::move(dirty_);
    dirty_.clear();
    for (uint64_t id : dirty) {
      auto it = jobs_.find(id);
      if (it == jobs_.end()) continue;
      it->second->dirty = false;
      advance(*it->second);
      listing_.changed(id, jobs_);
    }
  }
  draining_ = false;
}

void Controller::apply_posted(uint64_t jobid, const job::Event& ev) {
  auto it = jobs_.find(jobid);
  if (it == jobs_.end()) return;
  JobRecord& job = *it->second;
  if (auto st = job::apply_event(job.status, ev); !st.ok()) {
    spdlog::warn("job {}: event {} refused: {}", jobid, ev.name, st.message());
    return;
  }
  absorb(job, ev);
  job.events.push_back(ev);
  store_->append_event(jobid, ev);
  outbox_.push([this, jev = to_proto(jobid, ev), owner = job.userid] { hub_.publish_event(jev, owner); },
               publish_urgency());
  for (auto& h : hooks_) h->on_event(*this, job, ev);
  touch(job);
}

// Record fields that the state machine does not keep, for live events and replay alike.
void Controller::absorb(JobRecord& job, const job::Event& ev) {
  if (ev.name == "start") {
    auto ctx = json::parse(ev.context, nullptr, false);
    if (!ctx.is_object()) return;
    if (ctx.contains("incarnations") && ctx["incarnations"].is_object())
      for (const auto& [node, inc] : ctx["incarnations"].items())
        if (inc.is_string()) job.start_incarnations[node] = inc.get<std::string>();
    JobSteps& js = steps_.of(job.id);
    js.stepmgr = ctx.value("stepmgr", "");
    js.mpi_ports = ctx.value("mpi_ports", "");
    return;
  }
  if (ev.name == "finish") {
    auto ctx = json::parse(ev.context, nullptr, false);
    if (ctx.is_object() && ctx.contains("cpu") && ctx["cpu"].is_number())
      steps_.of(job.id).cpu_seconds = ctx["cpu"].get<double>();
    return;
  }
  if (ev.name == "free") {
    steps_.release_share(job.id);
    return;
  }
  if (ev.name == "requeue") {
    forget_run(job);
    return;
  }
  if (ev.name == "jobspec-update") {
    auto ctx = json::parse(ev.context, nullptr, false);
    if (!ctx.is_object() || !ctx.contains("jobspec")) return;
    if (auto spec = job::jobspec_from_document(ctx["jobspec"])) {
      job.jobspec_text = std::make_shared<const std::string>(job::jobspec_to_string(*spec));
      job.spec = std::make_shared<const job::Jobspec>(std::move(*spec));
    }
    return;
  }
  if (ev.name != "alloc") return;
  auto ctx = json::parse(ev.context, nullptr, false);
  if (!ctx.is_object() || !ctx.contains("R")) return;
  auto R = job::parse_resource_set(ctx["R"].dump());
  if (!R) {
    spdlog::error("job {}: bad R in alloc event: {}", job.id, R.message());
    return;
  }
  job.alloc.shares.clear();
  job.alloc.exclusive = job.spec->exclusive;
  const auto tasks = ctx.value("tasks", std::vector<unsigned>{});
  for (size_t i = 0; i < R->nodes.size(); ++i) {
    const auto& n = R->nodes[i];
    topology::NodeShare sh;
    auto idx = sched_.node_index(n.name);
    sh.node = idx ? *idx : n.rank;
    sh.cores = n.cores;
    sh.gpus = n.gpus;
    sh.memory_mb = n.memory_mb;
    sh.ntasks = i < tasks.size() ? tasks[i] : 0;
    job.alloc.shares.push_back(std::move(sh));
  }
  job.R = std::move(*R);
}

// The record of a requeued job's last run goes; the next run fills it again from scratch.
void Controller::forget_run(JobRecord& job) {
  job.R.reset();
  job.alloc = {};
  job.exec_tasks.clear();
  job.exited.clear();
  job.start_incarnations.clear();
  job.max_waitstatus = 0;
  job.extra_env.clear();
  job.notes.clear();
  job.kill_sent = false;
  steps_.erase(job.id);
}

void Controller::advance(JobRecord& job) {
  switch (job.state()) {
    case JobState::NEW:
      break;
    case JobState::DEPEND:
      if (job.status.dependencies.empty()) {
        post(job.id, job::make_event("depend"));
      } else {
        bool begin = std::all_of(job.status.dependencies.begin(), job.status.dependencies.end(),
                                 [](const std::string& d) { return d.starts_with("begin-time"); });
        job.reason = begin ? "BeginTime" : "Dependency";
      }
      break;
    case JobState::PRIORITY:
      job.reason.clear();
      post(job.id, job::make_event("priority", json{{"priority", job.status.urgency}}.dump()));
      break;
    case JobState::SCHED:
      job.reason = job.status.urgency == 0 ? "JobHeldUser" : "";
      if (job.in_scheduler || job.unsaved) break;
      if (!job.counts_as_running) {
        if (!user_limits_.may_run(job.userid)) {
          job.reason = "AssocMaxJobsLimit";  // Slurm's name: the user's MaxJobs
          held_by_limit_[job.userid].insert(job.id);
          break;
        }
        job.counts_as_running = true;
        user_limits_.run_added(job.userid);
        held_by_limit_[job.userid].erase(job.id);
      }
      enqueue(job);
      break;
    case JobState::RUN:
      if (!job.exec_tasks.empty() && job.exited.size() == job.exec_tasks.size() && !job.status.finished)
        post(job.id, job::make_event("finish", finish_context(job)));
      else if (job.status.prolog_actions.empty() && job.exec_tasks.empty() && !job.status.started)
        start_exec(job);
      break;
    case JobState::CLEANUP:
      advance_cleanup(job);
      break;
    case JobState::INACTIVE:
      retire(job);
      break;
  }
}

// CLEANUP: stop the tasks, then finish, release, epilog, free, clean, in that order,
// each step waiting for what holds it (exits, epilog actions).
void Controller::advance_cleanup(JobRecord& job) {
  if (job.in_scheduler) {
    sched_.dequeue(job.id);
    job.in_scheduler = false;
  }
  if (!job.status.prolog_actions.empty()) return;
  bool running = job.exited.size() < job.exec_tasks.size();
  if (running) {
    if (!job.kill_sent) kill_job(job, SIGTERM, cfg_.kill_grace);
    return;
  }
  if (!job.exec_tasks.empty() && !job.status.finished) {
    post(job.id, job::make_event("finish", finish_context(job)));
    return;
  }
  if (job.R && !job.status.released) {
    std::string ranks = IdSet::range(0, static_cast<uint32_t>(job.R->nodes.size()) - 1).encode();
    post(job.id, job::make_event("release", json{{"ranks", ranks}, {"final", true}}.dump()));
    return;
  }
  if (!job.status.epilog_actions.empty()) return;
  if (job.R && !job.status.freed) {
    post(job.id, job::make_event("free"));
    free_resources(job);
    return;
  }
  if (wants_requeue(job)) {
    requeue(job);
    return;
  }
  post(job.id, job::make_event("clean"));
}

// Only a run lost to a node failure, of a job that can run unattended (its output in files),
// that asked for it (or the site's default), within [job] max-requeue, and not canceled.
bool Controller::wants_requeue(const JobRecord& job) const {
  const job::JobStatus& s = job.status;
  if (!s.fatal_exception || s.exception_type != "node-fail" || s.canceled) return false;
  if (job.spec->alloc || job.interactive) return false;
  return job.spec->requeue.value_or(cfg_.requeue) && s.requeues < cfg_.max_requeue;
}

// The agents that reported the run's exits drop what they keep of it before any new run
// reaches them; a lost node's agent reports its old run when it returns and is told then
// (handle_exit: a run that is not the current one).
void Controller::requeue(JobRecord& job) {
  for (const auto& [node, n] : job.exec_tasks) {
    v1::ControllerMessage msg;
    msg.add_forget(job.id);
    send_to_node(node, msg);
  }
  spdlog::info("job {}: requeued after a node failure ({})", job.id, job.status.exception_note);
  post(job.id, job::make_event("requeue",
                               json{{"attempt", job.status.requeues + 1}, {"note", job.status.exception_note}}.dump()));
}

std::string Controller::finish_context(const JobRecord& job) const {
  json ctx{{"status", job.max_waitstatus}};
  if (const JobSteps* js = steps_.find(job.id); js != nullptr && js->cpu_seconds > 0) ctx["cpu"] = js->cpu_seconds;
  return ctx.dump();
}

bool Controller::first_node_only(const job::Jobspec& spec) { return !spec.batch_script.empty() || spec.alloc; }

std::map<std::string, unsigned> Controller::plan_exec(const JobRecord& job) const {
  std::map<std::string, unsigned> plan;
  if (!job.R) return plan;
  if (first_node_only(*job.spec)) {
    plan[job.R->nodes.front().name] = 1;
    return plan;
  }
  for (size_t i = 0; i < job.R->nodes.size(); ++i) {
    unsigned n = i < job.alloc.shares.size() ? job.alloc.shares[i].ntasks : 0;
    if (n > 0) plan[job.R->nodes[i].name] = n;
  }
  return plan;
}

void Controller::start_exec(JobRecord& job) {
  if (!job.R || job.status.fatal_exception || job.status.prolog_failed) return;
  job.exec_tasks = plan_exec(job);
  json incarnations = json::object();
  for (const auto& [node, n] : job.exec_tasks) incarnations[node] = nodes_.named(node).incarnation;
  // The step manager's address and the port share go into the start event, so that a
  // restarted controller still knows them (absorb reads them back).
  JobSteps& js = steps_.of(job.id);
  js.stepmgr = nodes_.named(job.R->nodes.front().name).step_uri;
  auto share = steps_.take_share();
  js.mpi_ports = std::move(share.ports);
  if (!share.warning.empty()) {
    spdlog::warn("job {}: {}", job.id, share.warning);
    post(job.id, job::make_event("mpi-ports", json{{"warning", share.warning}}.dump()));
  }
  json ctx{{"incarnations", incarnations}};
  if (!js.stepmgr.empty()) ctx["stepmgr"] = js.stepmgr;
  if (!js.mpi_ports.empty()) ctx["mpi_ports"] = js.mpi_ports;
  auto starts = build_starts(job, {});
  for (const auto& [node, msg] : starts) {
    // Too big for the agent's link: this job fails alone instead of breaking the stream
    // every other job on that agent depends on.
    if (size_t bytes = msg.ByteSizeLong(); bytes > net::kMaxAgentDownMessage) {
      job.exec_tasks.clear();
      raise_exception(job.id, "exec", 0,
                      fmt::format("cannot start the job: its start message for node {} is {} bytes, more than the "
                                  "{} a node agent accepts (make the jobspec or its environment smaller)",
                                  node, bytes, net::kMaxAgentDownMessage));
      return;
    }
  }
  send_job_keys(job, starts);
  for (const auto& [node, msg] : starts) send_to_node(node, msg);
  post(job.id, job::make_event("start", ctx.dump()));
}

std::string Controller::wrapped_job_key(uint64_t jobid, const AgentLink* link) const {
  return link == nullptr ? std::string() : steps_.wrapped_job_key(jobid, link->session_key(), link->agent_id());
}

void Controller::add_job_key(v1::ControllerMessage& msg, uint64_t jobid, const AgentLink* link) const {
  std::string key = wrapped_job_key(jobid, link);
  if (key.empty()) return;
  auto* k = msg.add_job_keys();
  k->set_jobid(jobid);
  k->set_wrapped_key(std::move(key));
}

// Every agent of the job's nodes checks the step credentials of its steps with the job's
// key: the agents that run tasks get it with their StartJob, the others on its own.
void Controller::send_job_keys(const JobRecord& job,
                               std::vector<std::pair<std::string, v1::ControllerMessage>>& starts) {
  auto link_of = [this](const std::string& node) {
    mu_.assert_held();  // called right here
    return nodes_.named(node).link.get();
  };
  std::set<const AgentLink*> covered;
  for (auto& [node, msg] : starts)
    if (const AgentLink* link = link_of(node); link != nullptr && covered.insert(link).second)
      add_job_key(msg, job.id, link);
  for (const auto& n : job.R->nodes)
    if (const AgentLink* link = link_of(n.name); link != nullptr && covered.insert(link).second) {
      starts.emplace_back(n.name, v1::ControllerMessage());
      add_job_key(starts.back().second, job.id, link);
    }
}

void Controller::send_start(const JobRecord& job, const std::set<std::string>& only) {
  for (const auto& [node, msg] : build_starts(job, only)) send_to_node(node, msg);
}

std::vector<std::pair<std::string, v1::ControllerMessage>> Controller::build_starts(
    const JobRecord& job, const std::set<std::string>& only) const {
  const std::string nodelist = job.R->nodelist();
  const topology::Topology* topo = routing_.topology_of(job.partition);
  const JobSteps* js = steps_.find(job.id);
  const std::string stepmgr = js == nullptr ? "" : js->stepmgr;
  // One StartJob per node agent, naming only that agent's nodes (an agent ignores a
  // second StartJob for a job it already runs).
  auto agent_key = [](const NodeEntry& e) {
    return e.link ? static_cast<const void*>(e.link.get()) : static_cast<const void*>(&e);
  };
  const void* manager = agent_key(nodes_.named(job.R->nodes.front().name));
  std::map<const void*, std::pair<std::string, v1::StartJob>> per_agent;
  // A job whose tasks use PMIx tells every agent where all of them run (the PMIx
  // server's maps); other jobs need only their own nodes.
  const auto service = job::mpi_service(job::job_mpi_name(job.spec->mpi, cfg_.steps.mpi_default));
  v1::StartJob layout;
  if (service == job::MpiService::pmix) {
    auto nspace = job::pmix_namespace_name(std::to_string(job.id));
    layout.set_pmix_namespace(nspace ? *nspace : "");  // none: every agent refuses the layout
  }
  if (service == job::MpiService::pmix || service == job::MpiService::cray_pals) {
    for (const auto& n : job.R->nodes)
      if (auto it = job.exec_tasks.find(n.name); it != job.exec_tasks.end()) {
        layout.add_layout_nodes(n.name);
        layout.add_layout_tasks(it->second);
      }
  }
  if (service == job::MpiService::cray_pals) add_pals_fields(job, layout);
  uint32_t rank = 0;
  for (size_t i = 0; i < job.R->nodes.size(); ++i) {
    const auto& n = job.R->nodes[i];
    auto it = job.exec_tasks.find(n.name);
    if (it == job.exec_tasks.end()) continue;
    uint32_t first_rank = rank;
    rank += it->second;
    if (!only.empty() && !only.count(n.name)) continue;
    const NodeEntry& entry = nodes_.named(n.name);
    const void* key = agent_key(entry);
    auto [slot, fresh] = per_agent.try_emplace(key);
    v1::StartJob& sj = slot->second.second;
    if (fresh) {
      slot->second.first = n.name;
      sj.set_jobid(job.id);
      sj.set_userid(job.userid);
      sj.set_groupid(job.groupid);
      sj.set_jobspec(*job.jobspec_text);
      sj.set_nodelist(nodelist);
      unsigned planned = 0;
      for (const auto& [name, count] : job.exec_tasks) planned += count;
      sj.set_total_tasks(first_node_only(*job.spec) ? job.spec->ntasks : planned);
      sj.set_total_nodes(static_cast<uint32_t>(job.R->nodes.size()));
      for (const auto& [k, v] : job.extra_env) (*sj.mutable_extra_env())[k] = v;
      for (const auto& note : job.notes) sj.add_notes(note);
      sj.set_stepmgr(stepmgr);
      sj.set_alloc(job.spec->alloc);
      sj.set_attempt(job.status.requeues);
      sj.set_exec_nodes(static_cast<uint32_t>(job.exec_tasks.size()));
      sj.set_mpi_default(cfg_.steps.mpi_default);
      *sj.mutable_layout_nodes() = layout.layout_nodes();
      *sj.mutable_layout_tasks() = layout.layout_tasks();
      sj.set_pmix_namespace(layout.pmix_namespace());
      sj.set_pals_control_ports(layout.pals_control_ports());
      sj.set_pals_secret(layout.pals_secret());
      sj.set_pals_cpus_per_task(layout.pals_cpus_per_task());
      if (key == manager) add_step_manager_fields(job, sj);
    }
    auto* t = sj.add_tasks();
    t->set_node(n.name);
    t->set_node_index(static_cast<uint32_t>(i));
    t->set_first_rank(first_rank);
    t->set_ntasks(it->second);
    t->set_cores(n.cores.encode());
    t->set_gpus(n.gpus.encode());
    t->set_memory_mb(n.memory_mb);
    add_topology_env(topo, n.name, *t->mutable_env());
  }
  std::vector<std::pair<std::string, v1::ControllerMessage>> out;
  for (auto& [key, entry] : per_agent) {
    v1::ControllerMessage msg;
    *msg.add_start() = std::move(entry.second);
    out.emplace_back(entry.first, std::move(msg));
  }
  return out;
}

// A cray-pals job's own tasks: PMI_CONTROL_PORT from the first block of the job's MPI
// port share (its step manager keeps that block from its steps), a secret of the job's
// own, the CPUs a rank has. Without ports a job on several nodes is refused by its
// agents, which say why.
void Controller::add_pals_fields(const JobRecord& job, v1::StartJob& layout) const {
  const JobSteps* js = steps_.find(job.id);
  if (js != nullptr && !js->mpi_ports.empty() && cfg_.steps.mpi_ports_per_step > 0)
    if (auto share = job::PortRange::parse(js->mpi_ports); share) {
      job::PortRange block{share->first,
                           static_cast<uint16_t>(std::min<uint32_t>(share->last, share->first + cfg_.steps.mpi_ports_per_step - 1))};
      layout.set_pals_control_ports(job::pals_control_ports(block));
    }
  auto secret = job::pals_secret();
  layout.set_pals_secret(secret ? *secret : "");
  uint32_t cpus = 0;
  for (const auto& n : job.R->nodes)
    if (auto it = job.exec_tasks.find(n.name); it != job.exec_tasks.end() && it->second > 0) {
      uint32_t each = std::max<uint32_t>(1, static_cast<uint32_t>(n.cores.count()) / it->second);
      cpus = cpus == 0 ? each : std::min(cpus, each);
    }
  layout.set_pals_cpus_per_task(std::max<uint32_t>(cpus, 1));
}

// Everything the step manager needs to launch steps anywhere in the job; resends after a
// restart build the same fields from the replayed start event and the agents' addresses.
void Controller::add_step_manager_fields(const JobRecord& job, v1::StartJob& sj) const {
  // Wrapped for the manager's agent: without a link now (held) it goes again on register.
  sj.set_step_key(wrapped_job_key(job.id, nodes_.named(job.R->nodes.front().name).link.get()));
  const topology::Topology* topo = routing_.topology_of(job.partition);
  for (const auto& n : job.R->nodes) {
    auto* jn = sj.add_job_nodes();
    jn->set_name(n.name);
    jn->set_cores(n.cores.encode());
    jn->set_gpus(n.gpus.encode());
    if (const NodeEntry* e = nodes_.find(n.name)) jn->set_agent(e->step_uri);
    add_topology_env(topo, n.name, *jn->mutable_env());
  }
  if (const JobSteps* js = steps_.find(job.id)) sj.set_mpi_port_share(js->mpi_ports);
  sj.set_mpi_ports_per_step(cfg_.steps.mpi_ports_per_step);
  sj.set_fanout_width(cfg_.steps.fanout_width);
}

void Controller::kill_job(JobRecord& job, int signal, double kill_after) {
  job.kill_sent = true;
  for (const auto& [node, n] : job.exec_tasks) {
    if (job.exited.count(node)) continue;
    v1::ControllerMessage msg;
    auto* s = msg.add_signal();
    s->set_jobid(job.id);
    s->set_signal(signal);
    s->set_kill_after(kill_after);
    s->set_attempt(job.status.requeues);
    send_to_node(node, msg);
  }
}

// Resources go back to the scheduler node by node; with housekeeping configured each node
// returns when its housekeeping finishes, and the job does not wait for it.
void Controller::free_resources(JobRecord& job) {
  if (!job.R) return;
  for (const auto& n : job.R->nodes) {
    auto idx = sched_.node_index(n.name);
    if (!idx) continue;
    NodeEntry& node = nodes_.at(*idx);
    node.jobs.erase(job.id);
    if (!cfg_.housekeeping.empty() && node.link) {
      node.housekeeping.insert(job.id);
      update_usable(node);  // no new work on the node until its housekeeping finishes
      run_on_nodes(job.id, "housekeeping", cfg_.housekeeping, cfg_.housekeeping_timeout, {n.name},
                   {{"CORRAL_JOB_USERID", std::to_string(job.userid)}});
    } else {
      sched_.release_node(job.id, *idx);
    }
  }
  poke_scheduler();
}

// A slot under limits.max-running-jobs came free: the user's oldest held job tries again.
void Controller::wake_held_by_limit(uint32_t uid) {
  auto h = held_by_limit_.find(uid);
  if (h == held_by_limit_.end() || h->second.empty()) return;
  auto it = jobs_.find(*h->second.begin());
  h->second.erase(h->second.begin());
  if (it != jobs_.end()) touch(*it->second);
}

void Controller::retire(JobRecord& job) {
  v1::JobInfo info;
  fill_info(job, &info);
  store_->finish_job(job.id, summary_to_json(info));
  {
    // Readers find it here until its summary is durable (at once, unless the disk is full).
    std::lock_guard lk(retired_mu_);
    retired_unsaved_.emplace(job.id, std::move(info));
  }
  outbox_.push(
      [this, id = job.id] {
        std::lock_guard lk(retired_mu_);
        retired_unsaved_.erase(id);
      },
      Outbox::Urgency::soon);
  if (job.interactive && !job.output.empty()) {
    recent_output_[job.id] = std::move(job.output);
    while (recent_output_.size() > 64) recent_output_.erase(recent_output_.begin());
  }
  // Tell the agents they may forget the exits, now that `finish` is stored, and every
  // agent of the job's nodes that it may drop the job's key.
  std::set<std::string> told;
  for (const auto& [node, n] : job.exec_tasks) told.insert(node);
  if (job.R)
    for (const auto& n : job.R->nodes) told.insert(n.name);
  for (const auto& node : told) {
    v1::ControllerMessage msg;
    msg.add_forget(job.id);
    send_to_node(node, msg, Outbox::Urgency::soon);  // housekeeping: nothing waits on it
  }
  steps_.release_share(job.id);  // normally back at `free` already
  steps_.erase(job.id);
  user_limits_.job_removed(job.userid);
  if (job.counts_as_running) {
    user_limits_.run_removed(job.userid);
    wake_held_by_limit(job.userid);
  }
  if (auto h = held_by_limit_.find(job.userid); h != held_by_limit_.end()) {
    h->second.erase(job.id);
    if (h->second.empty()) held_by_limit_.erase(h);
  }
  jobs_.erase(job.id);
  ++retired_since_trim_;
}

void Controller::handle_exit(const v1::JobNodeExit& ex) {
  auto it = jobs_.find(ex.jobid());
  if (it == jobs_.end()) {
    // Already finished (e.g. reported twice across a reconnect): let the agent forget it.
    v1::ControllerMessage msg;
    msg.add_forget(ex.jobid());
    send_to_node(ex.node(), msg);
    return;
  }
  JobRecord& job = *it->second;
  if (ex.attempt() != job.status.requeues) {
    // A run before a requeue, reported by a node that was cut off: the agent may drop it,
    // unless a new run of the job is already on its way there (which replaces it).
    if (!job.exec_tasks.count(ex.node())) {
      v1::ControllerMessage msg;
      msg.add_forget(ex.jobid());
      send_to_node(ex.node(), msg);
    }
    return;
  }
  if (!job.exec_tasks.count(ex.node()) || !job.exited.insert(ex.node()).second) return;
  job.max_waitstatus = std::max(job.max_waitstatus, ex.waitstatus());
  if (ex.cpu_seconds() > 0) steps_.of(job.id).cpu_seconds += ex.cpu_seconds();
  if (NodeEntry* n = nodes_.find(ex.node()); n != nullptr && !ex.node_fault() && ex.error().empty())
    n->launch_faults = 0;
  touch(job);
  if (ex.oom_kills() > 0) out_of_memory(job, ex);
  // Last: the exception is applied at once and may end and retire the job.
  if (!ex.error().empty()) launch_failed(job.id, ex);
}

// The kernel killed tasks over the job's memory limit: a non-fatal exception that says so
// (the job's other tasks go on, as the batch script may handle it); the job ends
// OUT_OF_MEMORY (job::job_result).
void Controller::out_of_memory(const JobRecord& job, const v1::JobNodeExit& ex) {
  uint64_t limit_mb = 0;
  if (job.R)
    for (const auto& n : job.R->nodes)
      if (n.name == ex.node()) limit_mb = n.memory_mb;
  raise_exception(job.id, "oom", 1,
                  fmt::format("the out-of-memory killer ended {} process(es) on {}: the job is limited to {} MiB "
                              "there (--mem)",
                              ex.oom_kills(), ex.node(), limit_mb));
}

// Tasks that could not start say so on the job, naming the node and why. While other nodes
// still run the job's tasks (which would wait for the missing ranks) it is fatal; a node
// that keeps failing to start anything is drained with the reason.
void Controller::launch_failed(uint64_t jobid, const v1::JobNodeExit& ex) {
  spdlog::info("job {}: {}", jobid, ex.error());
  if (auto it = jobs_.find(jobid); it != jobs_.end()) {
    const JobRecord& job = *it->second;
    const bool others_run = job.exited.size() < job.exec_tasks.size();
    // raise_exception applies the event at once (the job may be retired by it): the
    // record is not touched after it.
    if (!job.status.fatal_exception && job.state() != JobState::CLEANUP)
      raise_exception(jobid, "exec", others_run ? 0 : 1, ex.error());
  }
  NodeEntry* n = nodes_.find(ex.node());
  if (!ex.node_fault() || n == nullptr) return;
  NodeEntry& node = *n;
  if (++node.launch_faults >= kMaxLaunchFaults && !node.drained)
    drain_node(node.name, fmt::format("tasks of {} jobs in a row could not start: {}", node.launch_faults, ex.error()));
}

void Controller::touch(JobRecord& job) {
  if (job.dirty) return;
  job.dirty = true;
  dirty_.push_back(job.id);
}

// A node went down: its jobs lose their tasks there and get a node-fail exception.
void Controller::node_lost(NodeEntry& node, const std::string& why) {
  node.down_reason = why;
  update_usable(node);
  std::vector<uint64_t> ids(node.jobs.begin(), node.jobs.end());
  for (uint64_t id : ids) {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) continue;
    JobRecord& job = *it->second;
    if (job.exec_tasks.count(node.name) && job.exited.insert(node.name).second)
      job.max_waitstatus = std::max(job.max_waitstatus, static_cast<int>(SIGKILL));
    touch(job);
    // Last: the exception is applied at once and may end and retire the job.
    if (!job.status.fatal_exception && job.state() != JobState::CLEANUP)
      raise_exception(id, "node-fail", 0, fmt::format("node {} is down: {}", node.name, why));
  }
  // Outstanding prolog/epilog/housekeeping there will never answer.
  std::vector<std::pair<uint64_t, std::string>> lost;
  for (auto& [key, pending] : perilogs_)
    if (pending.count(node.name)) lost.push_back(key);
  for (const auto& [jobid, kind] : lost) {
    PerilogOutcome o{node.name, kind, SIGKILL, false, "node went down: " + why};
    auto key = std::make_pair(jobid, kind);
    perilogs_[key].erase(node.name);
    if (perilogs_[key].empty()) perilogs_.erase(key);
    if (kind == "housekeeping") continue;
    deliver_perilog(jobid, o);
  }
  for (uint64_t id : node.housekeeping) sched_.release_node(id, node.index);
  node.housekeeping.clear();
  drain_posts();
}

void Controller::enqueue(JobRecord& job) {
  bool restricted = false;
  auto req = make_request(*job.spec, job.id, &restricted);
  if (!req) {
    raise_exception(job.id, "alloc", 0, req.message());
    return;
  }
  if (restricted) property_jobs_.insert(job.id);
  sched::PendingJob pj;
  pj.req = std::move(*req);
  pj.urgency = job.status.urgency;
  pj.submit_order = job.id;
  pj.duration = job.spec->duration;
  if (pj.req.max_leaves > 0) {
    // --switches=COUNT@TIME: wait at most TIME (capped by the site) from submission.
    double wait =
        job.spec->switch_wait < 0 ? cfg_.max_switch_wait : std::min(job.spec->switch_wait, cfg_.max_switch_wait);
    pj.switches_until = job.status.t_submit + wait;
    if (pj.switches_until > now())
      at(pj.switches_until, [this] {
        mu_.assert_held();  // timers run in the loop, under the lock
        poke_scheduler();
      });
  }
  sched_.enqueue(pj);
  job.in_scheduler = true;
  poke_scheduler();
}

void Controller::run_schedule() {
  if (properties_changed_) replan_property_jobs();
  sched_dirty_ = false;
  auto decisions = sched_.schedule(now());
  for (auto& d : decisions) {
    auto it = jobs_.find(d.jobid);
    if (it == jobs_.end()) {
      sched_.release(d.jobid);
      continue;
    }
    JobRecord& job = *it->second;
    job.in_scheduler = false;
    job::ResourceSet R;
    R.starttime = now();
    R.expiration = job.spec->duration > 0 ? R.starttime + job.spec->duration : 0;
    std::vector<unsigned> tasks;
    for (const auto& sh : d.alloc.shares) {
      const NodeEntry& node = nodes_.at(sh.node);
      R.nodes.push_back({sh.node, node.name, sh.cores, sh.gpus, sh.memory_mb});
      tasks.push_back(sh.ntasks);
      nodes_.at(sh.node).jobs.insert(job.id);
    }
    // R lists the job's nodes in name order; its ranks are positions in that list,
    // so the nodelist reads naturally and task ranks follow node names.
    std::vector<size_t> order(R.nodes.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return natural_less(R.nodes[a].name, R.nodes[b].name); });
    job::ResourceSet sorted = R;
    std::vector<unsigned> sorted_tasks(tasks.size());
    for (size_t i = 0; i < order.size(); ++i) {
      sorted.nodes[i] = R.nodes[order[i]];
      sorted.nodes[i].rank = static_cast<uint32_t>(i);
      sorted_tasks[i] = tasks[order[i]];
    }
    R = std::move(sorted);
    tasks = std::move(sorted_tasks);
    auto ctx = json{{"tasks", tasks}};
    ctx["R"] = json::parse(job::to_json(R));
    post(job.id, job::make_event("alloc", ctx.dump()));
  }
}

}  // namespace corral::ctld
