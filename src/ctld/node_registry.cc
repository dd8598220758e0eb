// Nodes and their agents: registration, heartbeats, up/down/drain, and delivery of
// commands to the agent that hosts a node.
#include <signal.h>

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "ctld/controller.h"
#include "job/hmac_key.h"
#include "net/resolve.h"
#include "util/hostlist.h"

namespace corral::ctld {

NodeEntry& Controller::ensure_node(const v1::NodeResources& res) {
  if (NodeEntry* n = nodes_.find(res.name())) {
    if (n->cores != res.cores() || n->gpus != res.gpus() || n->memory_mb != res.memory_mb())
      spdlog::warn(
          "node {} registered with different resources ({} cores, {} gpus, {} MiB);"
          " keeping the recorded ones until corrald restarts",
          res.name(), res.cores(), res.gpus(), res.memory_mb());
    return *n;
  }
  const uint32_t idx = sched_.add_node(sched::NodeConfig{res.name(), res.cores(), res.gpus(), res.memory_mb()});
  sched_.set_usable(idx, false);
  NodeEntry& e = nodes_.add(res, idx);
  persist_node(e);
  return e;
}

void Controller::persist_node(const NodeEntry& n) {
  store::NodeRecord r{n.name, n.cores, n.gpus, n.memory_mb, n.drained, n.reason, n.reason_time, n.reason_userid};
  store_->put_node(r);
}

void Controller::update_usable(NodeEntry& node) {
  sched_.set_usable(node.index, node.link && !node.drained && node.housekeeping.empty());
  poke_scheduler();
}

std::string Controller::node_state(const NodeEntry& n) const {
  if (!n.link) return n.drained ? "down+drained" : "down";
  if (n.drained) return n.jobs.empty() && n.housekeeping.empty() ? "drained" : "draining";
  const auto& st = sched_.node_state(n.index);
  unsigned used = n.cores - static_cast<unsigned>(st.free_cores.count());
  if (used == 0 && n.jobs.empty()) return "idle";
  if (st.exclusive_held || used >= n.cores) return "allocated";
  return "mixed";
}

// Commands for a node go to its agent once durable; while it is down they wait.
void Controller::send_to_node(const std::string& name, const v1::ControllerMessage& msg, Outbox::Urgency urgency) {
  NodeEntry* found = nodes_.find(name);
  if (found == nullptr) return;
  NodeEntry& n = *found;
  if (!n.link) {
    n.held.push_back(msg);
    return;
  }
  outbox_.push([link = n.link, msg] { link->send(msg); }, urgency);
}

void Controller::drain_node(const std::string& name, const std::string& reason) {
  NodeEntry* found = nodes_.find(name);
  if (found == nullptr) return;
  NodeEntry& n = *found;
  n.drained = true;
  n.reason = reason;
  n.reason_time = now();
  n.reason_userid = owner_uid_;
  spdlog::warn("node {} drained: {}", name, reason);
  persist_node(n);
  update_usable(n);
}

// Over TCP an agent is whoever its MUNGE credential says, from the host its munged is on:
// it may register only nodes whose names resolve to that host's address (as Slurm's
// NodeAddr), so a process on one compute host cannot take another host's nodes. Agents
// on the Unix socket are on this host, as they always were. Resolved before the lock.
Status Controller::check_node_claim(const Caller& c, const v1::Register& reg) const {
  if (c.origin.empty()) return {};
  if (reg.nodes_size() > kMaxTcpAgentNodes)
    return Error{Errc::invalid_argument, fmt::format("an agent over TCP registers at most {} nodes (it claimed {})",
                                                     kMaxTcpAgentNodes, reg.nodes_size())};
  for (const auto& n : reg.nodes()) {
    const std::vector<std::string> addrs = net::resolve_ipv4(n.name());
    if (std::find(addrs.begin(), addrs.end(), c.origin) != addrs.end()) continue;
    return Error{Errc::permission_denied,
                 fmt::format("the agent at {} may not register node '{}': {}", c.origin, n.name().substr(0, 256),
                             addrs.empty() ? "the name does not resolve"
                                           : fmt::format("it resolves to {}", fmt::join(addrs, ", ")))};
  }
  return {};
}

void Controller::update_properties(NodeEntry& node) {
  std::vector<std::string> offered;
  for (auto& h : hooks_) h->node_properties(*this, node.name, node.hardware, offered);
  bool changed = false;
  if (size_t dropped = node_props_.set(node.index, offered, &changed))
    spdlog::warn("node {}: {} properties over the limits were left out", node.name, dropped);
  if (!changed) return;
  // Queued jobs planned without this node's new properties are planned again, once per
  // scheduling pass however many nodes registered (replan_property_jobs).
  properties_changed_ = true;
  poke_scheduler();
}

void Controller::replan_property_jobs() {
  properties_changed_ = false;
  const std::vector<uint64_t> ids(property_jobs_.begin(), property_jobs_.end());
  property_jobs_.clear();
  for (uint64_t id : ids) {
    auto it = jobs_.find(id);
    if (it == jobs_.end() || !it->second->in_scheduler) continue;
    sched_.dequeue(id);
    it->second->in_scheduler = false;
    enqueue(*it->second);  // back into property_jobs_
  }
}

namespace {

// What an agent's hooks say a node has is shown to every user: kept small.
Status check_hardware(const v1::NodeResources& r) {
  if (r.hardware_size() > kMaxNodeHardwareEntries)
    return Error{Errc::invalid_argument, fmt::format("register: node '{}' reports more than {} hardware entries",
                                                     r.name(), kMaxNodeHardwareEntries)};
  for (const auto& [hook, what] : r.hardware())
    if (hook.empty() || hook.size() > 64 || what.size() > kMaxNodeHardwareText)
      return Error{Errc::invalid_argument,
                   fmt::format("register: node '{}': a hardware entry needs a hook name of 1-64 bytes and at most {} "
                               "bytes of text",
                               r.name(), kMaxNodeHardwareText)};
  return {};
}

}  // namespace

Status Controller::agent_register(const Caller& c, const v1::Register& reg, std::function<void()> cancel,
                                  std::shared_ptr<AgentLink>* out,
                                  const google::protobuf::RepeatedPtrField<v1::TaskOutput>& spooled,
                                  std::string session_key) {
  if (!is_admin(c)) {
    std::string why = fmt::format("uid {} may not register node agents (only root or uid {})", c.uid, owner_uid_);
    spdlog::warn("refused agent {}{}: {}", reg.agent_id().substr(0, 256), c.origin.empty() ? "" : " at " + c.origin,
                 why);
    return Error{Errc::permission_denied, why};
  }
  if (reg.nodes_size() == 0) return Error{Errc::invalid_argument, "register: no nodes"};
  if (auto st = check_node_claim(c, reg); !st.ok()) {
    spdlog::warn("refused agent {}: {}", reg.agent_id().substr(0, 256), st.message());
    return st;
  }
  MutexLock lk(mu_);
  for (const auto& r : reg.nodes()) {
    if (r.name().empty() || r.cores() == 0)
      return Error{Errc::invalid_argument,
                   fmt::format("register: node '{}' needs a name and at least one core", r.name())};
    if (auto st = check_hardware(r); !st.ok()) return st;
    const NodeEntry* known = nodes_.find(r.name());
    if (known != nullptr && known->link && known->link->agent_id() != reg.agent_id())
      return Error{Errc::already_exists,
                   fmt::format("node {} is already served by agent {}", r.name(), known->link->agent_id())};
  }
  if (auto old = links_.find(reg.agent_id()); old != links_.end()) old->second->close();
  std::vector<std::string> names;
  for (const auto& r : reg.nodes()) names.push_back(r.name());
  if (session_key.empty()) {
    auto fresh = job::generate_key();
    if (!fresh) return Error{Errc::internal, fresh.message()};
    session_key = std::move(*fresh);
  }
  auto link = std::make_shared<AgentLink>(reg.agent_id(), names, std::move(cancel), reg.incarnation(), session_key);
  link->touch(now());
  links_[reg.agent_id()] = link;
  v1::ControllerMessage ack;
  ack.set_register_ack(true);
  ack.set_heartbeat_interval(cfg_.heartbeat_interval);
  if (c.origin.empty()) ack.set_session_key(session_key);  // a local socket: nobody else reads it
  if (cfg_.node_job_pids_max) ack.mutable_node_settings()->set_job_pids_max(*cfg_.node_job_pids_max);
  if (cfg_.node_cpu_bind) ack.mutable_node_settings()->set_cpu_bind(*cfg_.node_cpu_bind);
  link->send(ack);
  for (const auto& r : reg.nodes()) {
    NodeEntry& n = ensure_node(r);
    n.link = link;
    n.incarnation = reg.incarnation();
    n.step_uri = reg.step_uri();
    n.hardware = {r.hardware().begin(), r.hardware().end()};
    update_properties(n);
    n.down_reason.clear();
    // A held StartJob was built before this agent was known (no incarnation, no step
    // manager address): reconcile_agent sends a fresh one instead.
    for (auto& m : n.held) {
      m.clear_start();
      if (m.ByteSizeLong() > 0) outbox_.push([link, m] { link->send(m); });
    }
    n.held.clear();
    update_usable(n);
  }
  spdlog::info("agent {} registered {} node(s)", reg.agent_id(), reg.nodes_size());
  if (!spooled.empty())
    spdlog::info("agent {} delivers {} piece(s) of task output kept while it could not reach us", reg.agent_id(),
                 spooled.size());
  for (const auto& o : spooled) take_output(*link, o);
  ack_output(*link);
  reconcile_agent(reg);
  store_steps(reg.agent_id(), reg.steps());
  drain_posts();
  outbox_.seal();
  *out = link;
  return {};
}

// After a reconnect: adopt what still runs, collect exits we missed, kill orphans,
// and declare lost the tasks the agent no longer knows.
void Controller::reconcile_agent(const v1::Register& reg) {
  std::set<std::pair<uint64_t, std::string>> known;
  for (const auto& rj : reg.running())
    for (const auto& node : rj.nodes()) {
      auto it = jobs_.find(rj.jobid());
      // A run of a requeued job before the current one ends here.
      const bool current = it != jobs_.end() && it->second->status.requeues == rj.attempt();
      if (current) {
        known.insert({rj.jobid(), node});
        adopt_step_manager(rj.jobid(), node, reg.step_uri());
      }
      if (!current || !it->second->exec_tasks.count(node)) {
        v1::ControllerMessage msg;
        auto* s = msg.add_signal();
        s->set_jobid(rj.jobid());
        s->set_signal(SIGKILL);
        s->set_attempt(rj.attempt());
        send_to_node(node, msg);
      }
    }
  for (const auto& ex : reg.exited()) {
    if (auto it = jobs_.find(ex.jobid()); it != jobs_.end() && it->second->status.requeues == ex.attempt())
      known.insert({ex.jobid(), ex.node()});
    handle_exit(ex);
  }
  std::map<uint64_t, std::set<std::string>> resend;
  for (const auto& r : reg.nodes()) {
    NodeEntry& n = nodes_.named(r.name());
    for (uint64_t id : std::vector<uint64_t>(n.jobs.begin(), n.jobs.end())) {
      auto it = jobs_.find(id);
      if (it == jobs_.end()) continue;
      JobRecord& job = *it->second;
      if (!job.exec_tasks.count(n.name) || job.exited.count(n.name) || known.count({id, n.name})) continue;
      // The same agent process never got StartJob (corrald died first), or the job
      // started while the node had no agent (a restarted corrald before the agent came
      // back: the StartJob was held): send it again.
      auto inc = job.start_incarnations.find(n.name);
      if (!reg.incarnation().empty() && inc != job.start_incarnations.end() &&
          (inc->second == reg.incarnation() || inc->second.empty())) {
        inc->second = reg.incarnation();
        adopt_step_manager(id, n.name, reg.step_uri());
        resend[id].insert(n.name);
        continue;
      }
      job.exited.insert(n.name);
      job.max_waitstatus = std::max(job.max_waitstatus, static_cast<int>(SIGKILL));
      touch(job);
      // Last: the exception is applied at once and may end and retire the job.
      if (!job.status.fatal_exception)
        raise_exception(id, "node-fail", 0, fmt::format("the tasks on {} were lost (its agent restarted)", n.name));
    }
  }
  // One StartJob per job for all of this agent's nodes, as the first one was.
  for (const auto& [id, names] : resend)
    if (auto it = jobs_.find(id); it != jobs_.end()) send_start(*it->second, names);
  resend_job_keys(reg);
  reconcile_housekeeping(reg);
}

// A new connection has a new session key: the keys of the jobs running on the agent's
// nodes go again, wrapped with it.
void Controller::resend_job_keys(const v1::Register& reg) {
  std::set<uint64_t> ids;
  std::shared_ptr<AgentLink> link;
  for (const auto& r : reg.nodes()) {
    const NodeEntry& n = nodes_.named(r.name());
    link = n.link;
    for (uint64_t id : n.jobs)
      if (auto it = jobs_.find(id); it != jobs_.end() && it->second->status.started) ids.insert(id);
  }
  if (!link || ids.empty()) return;
  v1::ControllerMessage msg;
  for (uint64_t id : ids) add_job_key(msg, id, link.get());
  if (msg.job_keys_size() > 0) outbox_.push([link, msg] { link->send(msg); });
}

// A job that started while its first node's agent was away has no step manager address
// yet: it is the address of the agent that now reports that node.
void Controller::adopt_step_manager(uint64_t jobid, const std::string& node, const std::string& uri) {
  auto it = jobs_.find(jobid);
  const JobSteps* js = steps_.find(jobid);
  if (it == jobs_.end() || js == nullptr || !js->stepmgr.empty() || uri.empty()) return;
  const JobRecord& job = *it->second;
  if (job.R && !job.R->nodes.empty() && job.R->nodes.front().name == node) steps_.of(jobid).stepmgr = uri;
}

// The agent knows which housekeeping still runs: a restarted corrald adopts it (the
// node stays out of scheduling until it reports), and what the agent no longer runs
// ends here (its result, if it finished while disconnected, follows the register).
void Controller::reconcile_housekeeping(const v1::Register& reg) {
  std::map<std::string, std::set<uint64_t>> running;
  for (const auto& p : reg.perilogs())
    if (p.kind() == "housekeeping") running[p.node()].insert(p.jobid());
  for (const auto& r : reg.nodes()) {
    NodeEntry& n = nodes_.named(r.name());
    std::set<uint64_t>& now_running = running[n.name];
    for (uint64_t id : n.housekeeping) {
      if (now_running.count(id)) continue;
      sched_.release_node(id, n.index);
      auto pit = perilogs_.find({id, "housekeeping"});
      if (pit != perilogs_.end() && pit->second.erase(n.name) && pit->second.empty()) perilogs_.erase(pit);
    }
    for (uint64_t id : now_running) perilogs_[{id, "housekeeping"}].insert(n.name);
    n.housekeeping = std::move(now_running);
    update_usable(n);
  }
}

// Counted even when nothing waited for it (corrald restarted, or the node was down
// meanwhile): a failure still drains the node.
void Controller::housekeeping_done(const v1::PerilogResult& p) {
  NodeEntry* found = nodes_.find(p.node());
  if (found == nullptr) return;
  NodeEntry& n = *found;
  if (p.waitstatus() != 0 || p.timed_out())
    drain_node(n.name,
               fmt::format("housekeeping failed after job {}{}", p.jobid(), p.timed_out() ? " (timed out)" : ""));
  sched_.release_node(p.jobid(), n.index);
  n.housekeeping.erase(p.jobid());
  update_usable(n);
}

void Controller::agent_message(AgentLink& link, const v1::AgentMessage& msg) {
  MutexLock lk(mu_);
  link.touch(now());
  for (const auto& out : msg.output()) take_output(link, out);
  if (msg.heartbeat()) ack_output(link);
  for (const auto& ex : msg.exited()) handle_exit(ex);
  store_steps(link.agent_id(), msg.steps());
  for (const auto& p : msg.perilog()) {
    auto key = std::make_pair(p.jobid(), p.kind());
    auto pit = perilogs_.find(key);
    bool pending = pit != perilogs_.end() && pit->second.erase(p.node());
    if (pending && pit->second.empty()) perilogs_.erase(pit);
    if (p.kind() == "housekeeping") {
      housekeeping_done(p);
      continue;
    }
    if (!pending) continue;
    PerilogOutcome o{p.node(), p.kind(), p.waitstatus(), p.timed_out(), p.output()};
    deliver_perilog(p.jobid(), o);
  }
  drain_posts();
  outbox_.seal();
}

void Controller::agent_disconnected(AgentLink& link) {
  MutexLock lk(mu_);
  auto it = links_.find(link.agent_id());
  if (it != links_.end() && it->second.get() == &link) links_.erase(it);
  for (const auto& name : link.nodes()) {
    NodeEntry* found = nodes_.find(name);
    if (found == nullptr) continue;
    NodeEntry& n = *found;
    if (n.link.get() != &link) continue;
    n.link.reset();
    spdlog::warn("node {} is down: agent {} disconnected", name, link.agent_id());
    node_lost(n, "agent " + link.agent_id() + " disconnected");
  }
  drain_posts();
  outbox_.seal();
}

void Controller::take_output(const AgentLink& link, const v1::TaskOutput& out) {
  if (out.seq() > 0) {
    const std::string& inc = out.incarnation().empty() ? link.incarnation() : out.incarnation();
    auto& seen = output_seen_[link.agent_id()];
    auto it = std::find_if(seen.begin(), seen.end(), [&](const auto& s) { return s.first == inc; });
    if (it == seen.end()) {
      if (seen.size() >= 2) seen.erase(seen.begin());
      seen.emplace_back(inc, 0);
      it = seen.end() - 1;
    }
    if (out.seq() <= it->second) return;  // a copy resent after a broken link
    it->second = out.seq();
  }
  auto it = jobs_.find(out.jobid());
  if (it == jobs_.end()) return;
  JobRecord& job = *it->second;
  constexpr size_t kMaxKeptOutput = 16u << 20;
  if (job.output_bytes + out.data().size() <= kMaxKeptOutput) {
    job.output.push_back({out.rank(), out.stderr(), out.eof(), out.node(), out.data()});
    job.output_bytes += out.data().size();
  }
  v1::TaskOutput plain = out;
  plain.clear_seq();
  plain.clear_incarnation();
  outbox_.push([this, plain = std::move(plain), owner = job.userid] { hub_.publish_output(plain, owner); },
               publish_urgency());
}

void Controller::ack_output(AgentLink& link) {
  auto seen = output_seen_.find(link.agent_id());
  if (seen == output_seen_.end()) return;
  for (const auto& [inc, seq] : seen->second) {
    if (inc != link.incarnation() || seq <= link.output_acked) continue;
    link.output_acked = seq;
    v1::ControllerMessage ack;
    ack.set_output_acked(seq);
    link.send(ack);  // output is not stored: nothing to wait for
  }
}

// One silent agent is a node that failed. Most of them silent at once is more likely a
// cut between this controller and the cluster (a switch, a cable): marking every node
// down would end every job, which runs on regardless. Those nodes wait for
// isolation-timeout instead, and their agents deliver what happened when they return.
void Controller::check_heartbeats() {
  double t = now();
  // Silence that began while this controller looked cut off counts from when it stopped
  // looking so: agents come back over a few seconds, and the last ones are not lost.
  // (Read at each call: ending the isolation below moves it.)
  auto silence = [&](const AgentLink& l) {
    mu_.assert_held();  // called right here
    return t - std::max(l.last_seen(), isolation_ended_);
  };
  size_t silent = 0;
  for (auto& [id, link] : links_) silent += silence(*link) > cfg_.node_timeout;
  const bool isolated = silent >= 2 && silent * 2 > links_.size();
  if (isolated != isolated_) {
    if (isolated) {
      spdlog::warn(
          "{} of {} agents silent for over {:.0f}s: this controller looks cut off from the cluster; "
          "their nodes stay up for controller.isolation-timeout ({:.0f}s)",
          silent, links_.size(), cfg_.node_timeout, cfg_.isolation_timeout);
    } else {
      spdlog::info("most agents are heard from again; the others have controller.node-timeout from now");
      isolation_ended_ = t;
    }
    isolated_ = isolated;
  }
  const double limit = isolated ? std::max(cfg_.node_timeout, cfg_.isolation_timeout) : cfg_.node_timeout;
  for (auto& [id, link] : links_)
    if (silence(*link) > limit) {
      spdlog::warn("agent {} silent for {:.1f}s: closing its stream", id, t - link->last_seen());
      link->close();
    }
  if (restart_grace_pending_ && t - start_time_ > cfg_.node_timeout) {
    restart_grace_pending_ = false;
    for (auto& n : nodes_)
      if (!n.link && !n.jobs.empty()) node_lost(n, "not responding since corrald restarted");
  }
}

Status Controller::list_nodes(const v1::ListNodesRequest& req, v1::ListNodesReply* rep) {
  rep->set_warning(store_warning());
  std::optional<Hostlist> filter;
  if (!req.hostlist().empty()) {
    auto plain = routing_.expand_nodes(req.hostlist(), default_partition(cfg_.partitions));  // switch{s1} and the like
    if (!plain) return Error{Errc::invalid_argument, "hostlist: " + plain.message()};
    auto hl = Hostlist::parse(*plain);
    if (!hl) return Error{Errc::invalid_argument, "hostlist: " + hl.message()};
    filter = std::move(*hl);
  }
  std::set<std::string> states(req.states().begin(), req.states().end());
  MutexLock lk(mu_);
  for (const auto& n : nodes_) {
    if (filter && !filter->contains(n.name)) continue;
    std::string st = node_state(n);
    if (!states.empty() && !states.count(st)) continue;
    auto* ni = rep->add_nodes();
    ni->set_name(n.name);
    ni->set_state(st);
    ni->set_reason(n.drained ? n.reason : n.link ? "" : n.down_reason);
    ni->set_reason_time(n.reason_time);
    ni->set_reason_userid(n.reason_userid);
    const auto& ss = sched_.node_state(n.index);
    ni->set_cores(n.cores);
    ni->set_cores_used(n.cores - static_cast<uint32_t>(ss.free_cores.count()));
    ni->set_gpus(n.gpus);
    ni->set_gpus_used(n.gpus - static_cast<uint32_t>(ss.free_gpus.count()));
    ni->set_memory_mb(n.memory_mb);
    ni->set_memory_used_mb(n.memory_mb - ss.free_memory_mb);
    for (const auto& p : n.partitions) ni->add_partitions(p);
    for (uint64_t j : n.jobs) ni->add_jobs(j);
    if (n.link) ni->set_agent(n.link->agent_id());
    ni->set_housekeeping(!n.housekeeping.empty());
    ni->mutable_hardware()->insert(n.hardware.begin(), n.hardware.end());
  }
  return {};
}

Status Controller::set_node_state(const Caller& c, const v1::NodeStateRequest& req, v1::NodeStateReply* rep) {
  const bool drain = req.action() == v1::NodeStateRequest::DRAIN;
  if (!is_admin(c))
    return Error{Errc::permission_denied,
                 fmt::format("only root or the instance owner may {} nodes", drain ? "drain" : "resume")};
  auto plain = routing_.expand_nodes(req.hostlist(), default_partition(cfg_.partitions));
  if (!plain) return Error{Errc::invalid_argument, "hostlist: " + plain.message()};
  auto hl = Hostlist::parse(*plain);
  if (!hl) return Error{Errc::invalid_argument, "hostlist: " + hl.message()};
  if (hl->empty()) return Error{Errc::invalid_argument, "no nodes given"};
  if (drain && req.reason().empty()) return Error{Errc::invalid_argument, "a reason is required to drain nodes"};
  MutexLock lk(mu_);
  for (const auto& h : hl->hosts())
    if (nodes_.find(h) == nullptr) return Error{Errc::not_found, fmt::format("no such node: {}", h)};
  const Hostlist targets = hl->uniq();
  for (const auto& h : targets.hosts()) {
    NodeEntry& n = nodes_.named(h);
    n.drained = drain;
    n.reason = drain ? req.reason() : "";
    n.reason_time = drain ? now() : 0;
    n.reason_userid = drain ? c.uid : 0;
    persist_node(n);
    update_usable(n);
    rep->add_nodes(h);
    spdlog::info("node {} {} by uid {}{}", h, drain ? "drained" : "resumed", c.uid, drain ? ": " + req.reason() : "");
    if (!drain)
      for (auto& hk : hooks_) hk->on_node_resume(*this, h);
  }
  drain_posts();
  outbox_.seal();
  Status st = store_->flush();
  if (!st.ok() && st.error().code == Errc::unavailable)
    return Error{Errc::unavailable, "recorded, and saved once corrald can write its state again: " + st.message()};
  if (!st.ok()) return Error{Errc::internal, st.message()};
  return {};
}

}  // namespace corral::ctld
