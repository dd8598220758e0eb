#include "node/steps/step_node.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <spdlog/spdlog.h>

#include "job/eventlog.h"
#include "job/mpi_kind.h"
#include "job/step_id.h"
#include "node/exec/agent_config.h"
#include "node/exec/cpu_binding.h"
#include "node/exec/output_pattern.h"
#include "node/exec/task_cgroups.h"
#include "node/exec/task_supervisor.h"
#include "node/exec/wait_status.h"
#include "node/pals/node_pals.h"
#include "node/pmi/node_pmi.h"
#include "node/pmi/pmi_server.h"
#include "node/pmix/node_pmix.h"
#include "node/steps/fanout.h"
#include "node/steps/job_keys.h"
#include "node/steps/step_child_link.h"
#include "node/steps/step_tasks.h"
#include "util/event_loop.h"

namespace corral::node {

namespace {

constexpr size_t kFlushBytes = 1 << 20;  // a LaunchUp this large goes out at once

// The PMI server of a local node hands its barriers to the launch, which merges them
// with the rest of the subtree.
class ForwardingExchange final : public PmiExchange {
 public:
  using Fn = std::function<void(PmiKvs, Done)>;
  explicit ForwardingExchange(Fn fn) : fn_(std::move(fn)) {}
  void fence(PmiKvs local_puts, Done done) override { fn_(std::move(local_puts), std::move(done)); }

 private:
  Fn fn_;
};

void append_up(v1::LaunchUp& into, v1::LaunchUp&& from) {
  for (auto& s : *from.mutable_started()) into.add_started(std::move(s));
  for (auto& e : *from.mutable_errors()) *into.add_errors() = std::move(e);
  for (auto& o : *from.mutable_output()) *into.add_output() = std::move(o);
  for (auto& x : *from.mutable_exits()) *into.add_exits() = std::move(x);
  for (auto& a : *from.mutable_pmi_aborts()) into.add_pmi_aborts(std::move(a));
}

bool is_empty(const v1::LaunchUp& up) {
  return up.started_size() == 0 && up.errors_size() == 0 && up.output_size() == 0 && up.exits_size() == 0 &&
         !up.has_fence() && up.pmi_aborts_size() == 0;
}

bool holds_rank(const v1::LaunchNode& n, uint32_t rank) {
  return n.ntasks() > 0 && n.first_rank() <= rank && rank - n.first_rank() < n.ntasks();
}

}  // namespace

struct StepNode::Impl {
  struct Task {
    uint32_t rank = 0;
    uint32_t local_rank = 0;
    pid_t pid = -1;
    bool exited = false;
    bool terminal = false;  // rank 0 of a step with a pseudo terminal
  };
  struct LocalNode {
    v1::LaunchNode info;
    std::unique_ptr<ForwardingExchange> exchange;
    std::unique_ptr<PmiServer> pmi;
    std::unique_ptr<PalsNode> pals;                // --mpi=cray-pals: the spool directory and apinfo file
    std::map<uint32_t, PmiExchange::Done> fences;  // by barrier number, waiting for the result
    uint32_t next_seq = 0;
    std::vector<Task> tasks;
    std::vector<std::vector<int>> cpus;  // by local rank: of the step's cores here (empty: unbound)
    size_t spawning = 0;                 // tasks queued to start (TaskSupervisor::spawn_later)
    std::string error;                   // the first task that could not start, for the step's errors
  };
  struct Child {
    std::vector<v1::LaunchNode> nodes;
    std::unique_ptr<StepChildLink> link;
    std::unordered_set<uint32_t> reported;
    size_t ranks = 0;
    bool closed = false;
  };
  struct FenceAcc {
    PmiKvs kvs;
    uint32_t nodes = 0;
  };
  struct Launch {
    LaunchId id = 0;
    v1::LaunchTasksRequest req;
    Up up;
    Done done;
    std::vector<std::unique_ptr<LocalNode>> locals;
    std::vector<std::unique_ptr<Child>> children;
    int rank0_local = -1;  // index into locals
    int rank0_child = -1;  // index into children
    uint32_t fence_nodes = 0;
    std::map<uint32_t, FenceAcc> fences;
    v1::LaunchUp pending;
    size_t pending_bytes = 0;
    bool flush_posted = false;
    size_t live = 0;      // local tasks whose exit is not reported yet
    size_t starting = 0;  // local nodes not started yet (start_locals)
    size_t spawning = 0;  // local tasks queued to start
    int stopped_by = 0;   // a signal that ends tasks came while some were still to start
    bool finishing = false;
    std::optional<std::vector<std::string>> cgroup;  // created with the first task (empty: none)
    std::shared_ptr<const UniqueFd> cgroup_entry;    // its first directory, open (TaskCgroups::entry)
    job::StepCred cred;  // verified once for the request (or made by this agent's step manager)
    job::MpiService mpi = job::MpiService::pmi;
    std::shared_ptr<const PalsStep> pals;  // --mpi=cray-pals: checked, its file made, once
    // --mpi=pmix: one namespace for all of this agent's nodes of the step, whose fences
    // go through the local nodes' exchanges (declared first: it outlives the namespace).
    std::unique_ptr<SharedNodesExchange> pmix_exchange;
    std::unique_ptr<PmixNamespace> pmix;
  };
  EventLoop& loop;
  TaskSupervisor& tasks;
  const AgentConfig& config;
  StepNodeConfig sc;
  TaskCgroups* cgroups = nullptr;
  const uid_t own_uid = ::getuid();  // the agent's: tasks of other users start through corral-imp
  // Account lookups read /etc/passwd (or ask NSS): once a minute per user, not per step.
  struct CachedUser {
    StepUser user;
    double looked_up = 0;
  };
  std::unordered_map<uint64_t, CachedUser> users;
  // Credentials already used on this agent, (job, nonce), forgotten once expired (in
  // arrival order, which is nearly expiry order): a captured request cannot be replayed
  // while its credential is valid.
  std::set<std::pair<uint64_t, uint64_t>> used_creds;
  std::deque<std::pair<double, std::pair<uint64_t, uint64_t>>> used_expiry;

  // The whole request's credential, checked before any of it is forwarded or expanded.
  Result<job::StepCred> admit(const v1::LaunchTasksRequest& req);
  StepCredCheck cred_check(uint64_t jobid, double now) const {
    return StepCredCheck{sc.cluster_key, sc.job_keys ? sc.job_keys->find(jobid) : nullptr, now, sc.clock_skew,
                         config.as_root};
  }
  const StepUser& user_of(uint32_t uid, uint32_t gid);
  std::unordered_map<LaunchId, std::unique_ptr<Launch>> launches;
  LaunchId next_id = 1;
  std::shared_ptr<int> alive = std::make_shared<int>(0);  // posted work checks it

  Impl(EventLoop& l, TaskSupervisor& t, const AgentConfig& c, StepNodeConfig s)
      : loop(l), tasks(t), config(c), sc(std::move(s)) {}
  ~Impl();

  Launch* find(LaunchId id) {
    auto it = launches.find(id);
    return it == launches.end() ? nullptr : it->second.get();
  }
  // Runs `fn(launch)` later on the loop, if the launch still exists then.
  void later(LaunchId id, std::function<void(Launch&)> fn) {
    std::weak_ptr<int> token = alive;
    loop.post([this, token, id, fn = std::move(fn)] {
      if (!token.lock()) return;
      if (Launch* l = find(id)) fn(*l);
    });
  }

  // ---- launch
  LaunchId launch(v1::LaunchTasksRequest req, Up up, Done done, const job::StepCred* made_here);
  void route(Launch& l);
  void start_locals(Launch& l, std::vector<int> indices, size_t next);
  void start_child(Launch& l, const std::vector<int>& node_indices);
  void refuse_node(Launch& l, const v1::LaunchNode& node, const std::string& message);
  // `last_local`: the agent's last node of the step (its environment is read for the last
  // time).
  void start_local(Launch& l, const v1::LaunchNode& node, bool last_local);
  Status start_pmi(Launch& l, LocalNode& node, size_t ni);
  Status start_pmix(Launch& l, const std::vector<const v1::LaunchNode*>& local);
  Status start_pals(Launch& l, LocalNode& node);
  std::function<void(const std::string&)> pmi_failed(LaunchId id);
  void start_task(Launch& l, LocalNode& node, size_t ni, size_t ti, std::vector<std::string> env, const StepUser& user,
                  const std::string& cwd, bool use_imp);
  void task_spawned(LaunchId id, size_t ni, size_t ti, const Result<pid_t>& pid, bool own_output, bool own_error);
  void record_spawn(Launch& l, LocalNode& node, Task& t, const Result<pid_t>& pid, bool own_output, bool own_error);
  void task_failed(Launch& l, LocalNode& node, Task& t, const Error& e, bool own_output, bool own_error);
  void local_started(Launch& l, LocalNode& node);
  std::string task_prefix(const Launch& l, const LocalNode& node) const;

  // ---- reporting
  void add_output(Launch& l, const LocalNode& node, const Task& t, bool is_err, std::string data, bool eof);
  void add_exit(Launch& l, uint32_t rank, int waitstatus, double cpu);
  void schedule_flush(Launch& l);
  void flush(Launch& l);
  void maybe_finish(Launch& l);
  const std::vector<std::string>& cgroup_of(Launch& l);
  static std::string cgroup_unit(const Launch& l);

  // ---- local tasks
  TaskSupervisor::Handlers task_handlers(LaunchId id, size_t ni, size_t ti);
  void task_exited(Launch& l, Task& t, const TaskSupervisor::Exit& exit);
  void signal_local(Launch& l, int sig);

  // ---- fences
  void local_fence(LaunchId id, size_t ni, PmiKvs puts, PmiExchange::Done done);
  void add_fence(Launch& l, uint32_t seq, PmiKvs kvs, uint32_t nodes);
  void fence_down(Launch& l, const v1::PmiFence& f);

  // ---- children
  void child_up(Launch& l, size_t ci, v1::LaunchUp&& up);
  void child_closed(Launch& l, size_t ci, const std::string& error);

  void deliver(LaunchId id, const v1::LaunchDown& down);
  void abandon(LaunchId id);
  size_t live_tasks() const;
};

StepNode::Impl::~Impl() {
  for (auto& [id, l] : launches)
    for (auto& node : l->locals)
      for (auto& t : node->tasks)
        if (t.pid > 0 && !t.exited) tasks.forget(t.pid);
}

size_t StepNode::Impl::live_tasks() const {
  size_t n = 0;
  for (const auto& [id, l] : launches) n += l->live;
  return n;
}

// ------------------------------------------------------------------ launch

StepNode::LaunchId StepNode::Impl::launch(v1::LaunchTasksRequest req, Up up, Done done,
                                          const job::StepCred* made_here) {
  LaunchId id = next_id++;
  auto owned = std::make_unique<Launch>();
  Launch& l = *owned;
  l.id = id;
  l.req = std::move(req);
  l.up = std::move(up);
  l.done = std::move(done);
  launches.emplace(id, std::move(owned));

  std::string malformed;
  if (l.req.argv().empty() || l.req.argv(0).empty())
    malformed = "the launch request has no command";
  else if (l.req.nodes().empty())
    malformed = "the launch request has no nodes";
  if (malformed.empty() && made_here != nullptr) {
    l.cred = *made_here;  // this agent's own step manager, in process: nothing to verify
  } else if (malformed.empty()) {
    auto cred = admit(l.req);
    if (!cred) {
      // Nothing is forwarded: every node of the request is refused here.
      for (const auto& n : l.req.nodes()) refuse_node(l, n, cred.message());
      later(id, [this](Launch& x) { maybe_finish(x); });
      return id;
    }
    l.cred = std::move(*cred);
  }
  l.mpi = job::mpi_service(l.req.mpi());
  if (!malformed.empty()) {
    later(id, [this, malformed](Launch& x) {
      Done d = std::move(x.done);
      launches.erase(x.id);
      d(malformed);
    });
    return id;
  }
  route(l);
  later(id, [this](Launch& x) { maybe_finish(x); });
  return id;
}

Result<job::StepCred> StepNode::Impl::admit(const v1::LaunchTasksRequest& req) {
  const double now = job::now();
  auto cred = check_request_cred(req, cred_check(req.jobid(), now));
  if (!cred) return cred.error();
  while (!used_expiry.empty() && used_expiry.front().first + sc.clock_skew < now) {
    used_creds.erase(used_expiry.front().second);
    used_expiry.pop_front();
  }
  const auto key = std::pair(cred->jobid, cred->nonce);
  if (!used_creds.insert(key).second)
    return denied("step credential was already used on this agent (a replayed launch request)");
  used_expiry.emplace_back(cred->expires, key);
  return cred;
}

// Local nodes start here; the others go to children, grouped by agent, this agent's
// group first (empty at a step manager hosting none of the step's nodes).
void StepNode::Impl::route(Launch& l) {
  const auto& nodes = l.req.nodes();
  std::vector<std::vector<int>> groups(1);
  std::vector<std::string> agents(1);
  std::vector<int> unroutable;
  for (int i = 0; i < nodes.size(); ++i) {
    const auto& n = nodes[i];
    if (n.ntasks() > 0) ++l.fence_nodes;
    if (config.hosts(n.name())) {
      groups[0].push_back(i);
      continue;
    }
    if (n.agent().empty() || n.agent() == sc.self_uri) {
      unroutable.push_back(i);
      continue;
    }
    auto it = std::find(agents.begin() + 1, agents.end(), n.agent());
    if (it == agents.end()) {
      agents.push_back(n.agent());
      groups.emplace_back();
      it = agents.end() - 1;
    }
    groups[static_cast<size_t>(it - agents.begin())].push_back(i);
  }
  uint32_t width = l.req.fanout_width() == 0 ? kDefaultFanoutWidth : std::max<uint32_t>(2, l.req.fanout_width());
  auto batches = forward_batches(groups, width);
  if (batches) {
    for (const auto& batch : *batches) {
      std::vector<int> indices;
      for (const auto& g : batch) indices.insert(indices.end(), g.begin(), g.end());
      start_child(l, indices);
    }
  }
  for (int i : unroutable)
    refuse_node(
        l, nodes[i],
        "node " + nodes[i].name() + " has no agent to launch it (" +
            (nodes[i].agent().empty() ? std::string("no agent address")
                                      : "its address " + nodes[i].agent() + " is this agent, which does not host it") +
            ")");
  if (l.mpi == job::MpiService::pmix && !groups[0].empty()) {
    std::vector<const v1::LaunchNode*> local;
    for (int i : groups[0])
      if (nodes[i].ntasks() > 0) local.push_back(&nodes[i]);
    if (auto st = local.empty() ? Status{} : start_pmix(l, local); !st) {
      for (int i : groups[0]) refuse_node(l, nodes[i], st.message());
      return;
    }
  }
  start_locals(l, std::move(groups[0]), 0);
}

// One node's tasks per turn of the loop: between two nodes the loop reads the exits of the
// tasks started so far, so on a wide step the agent's loop, which starts every task and
// reads every exit, does not leave all the exits to after the last start.
void StepNode::Impl::start_locals(Launch& l, std::vector<int> indices, size_t next) {
  if (next >= indices.size()) return;
  if (next == 0) l.starting = indices.size();
  const auto& node = l.req.nodes(indices[next]);
  if (l.stopped_by == 0)
    start_local(l, node, next + 1 == indices.size());
  else  // the step was ended while its later nodes waited for their turn
    refuse_node(l, node, "the step ended (signal " + std::to_string(l.stopped_by) + ") before its tasks started here");
  --l.starting;
  if (next + 1 < indices.size())
    later(l.id, [this, indices = std::move(indices), next](Launch& x) mutable {
      start_locals(x, std::move(indices), next + 1);
    });
  else
    maybe_finish(l);
}

void StepNode::Impl::start_child(Launch& l, const std::vector<int>& node_indices) {
  auto child = std::make_unique<Child>();
  v1::LaunchTasksRequest req = l.req;
  req.clear_nodes();
  for (int i : node_indices) {
    const auto& n = l.req.nodes(i);
    *req.add_nodes() = n;
    child->nodes.push_back(n);
    child->ranks += n.ntasks();
    if (holds_rank(n, 0)) l.rank0_child = static_cast<int>(l.children.size());
  }
  const std::string uri = child->nodes.front().agent();
  const size_t ci = l.children.size();
  const LaunchId id = l.id;
  child->link = std::make_unique<StepChildLink>(
      loop, uri, config.tls_ca, std::move(req),
      [this, id, ci](v1::LaunchUp&& up) {
        if (Launch* x = find(id)) child_up(*x, ci, std::move(up));
      },
      [this, id, ci](const std::string& error) {
        if (Launch* x = find(id)) child_closed(*x, ci, error);
      });
  l.children.push_back(std::move(child));
}

void StepNode::Impl::refuse_node(Launch& l, const v1::LaunchNode& node, const std::string& message) {
  spdlog::warn("step {}.{}: node {} refused: {}", l.req.jobid(), l.req.stepid(), node.name(), message);
  auto* e = l.pending.add_errors();
  e->set_node(node.name());
  e->set_message(message);
  for (uint32_t r = 0; r < node.ntasks(); ++r) add_exit(l, node.first_rank() + r, exit_status(1), 0);
  schedule_flush(l);
}

std::string StepNode::Impl::task_prefix(const Launch& l, const LocalNode& node) const {
  return "corral-node: " + node.info.name() + ": step " + std::to_string(l.req.jobid()) + "." +
         std::to_string(l.req.stepid()) + ": ";
}

const StepUser& StepNode::Impl::user_of(uint32_t uid, uint32_t gid) {
  constexpr double kUserCacheSeconds = 60;
  const double now = job::now();
  CachedUser& c = users[(uint64_t{uid} << 32) | gid];
  if (c.looked_up == 0 || now - c.looked_up > kUserCacheSeconds) c = {lookup_step_user(uid, gid), now};
  return c.user;
}

void StepNode::Impl::start_local(Launch& l, const v1::LaunchNode& info, bool last_local) {
  // The signature, expiry and digest were checked once for the whole request (admit).
  if (auto st = check_node_claims(l.cred, info, cred_check(l.req.jobid(), job::now())); !st)
    return refuse_node(l, info, st.message());
  const job::StepCred* cred = &l.cred;
  const StepUser& user = user_of(cred->uid, cred->gid);
  std::string cwd = step_cwd(l.req, user);
  auto env = step_node_env(l.req, info, user, cwd, config, last_local);
  if (!env) return refuse_node(l, info, env.message());

  auto node = std::make_unique<LocalNode>();
  node->info = info;
  node->cpus = task_cpus(config, info.name(), info.cores(), info.ntasks());
  const size_t ni = l.locals.size();
  LocalNode& n = *node;
  l.locals.push_back(std::move(node));
  if (info.ntasks() == 0) {
    l.pending.add_started(info.name());
    return schedule_flush(l);
  }
  if (auto st = start_pmi(l, n, ni); !st) {
    l.locals.pop_back();
    return refuse_node(l, info, st.message());
  }
  if (holds_rank(info, 0)) l.rank0_local = static_cast<int>(ni);
  const bool use_imp = config.as_root && cred->uid != own_uid;
  n.tasks.resize(info.ntasks());
  for (size_t ti = 0; ti < n.tasks.size(); ++ti) {
    const bool last = ti + 1 == n.tasks.size();
    start_task(l, n, ni, ti, last ? std::move(*env) : std::vector<std::string>(*env), user, cwd, use_imp);
  }
  if (n.spawning == 0) local_started(l, n);
}

// Every task of the node started or failed to: the step hears of the node once.
void StepNode::Impl::local_started(Launch& l, LocalNode& node) {
  if (node.error.empty()) {
    l.pending.add_started(node.info.name());
  } else {
    auto* e = l.pending.add_errors();
    e->set_node(node.info.name());
    e->set_message(node.error);
  }
  spdlog::debug("step {}.{}: started {} task(s) on {}", l.req.jobid(), l.req.stepid(), node.tasks.size(),
                node.info.name());
  schedule_flush(l);
}

std::function<void(const std::string&)> StepNode::Impl::pmi_failed(LaunchId id) {
  // An abort, or a broken connection that leaves the other ranks waiting forever: the
  // step manager kills the step.
  return [this, id](const std::string& text) {
    Launch* x = find(id);
    if (x == nullptr) return;
    x->pending.add_pmi_aborts(text);
    schedule_flush(*x);
  };
}

Status StepNode::Impl::start_pmi(Launch& l, LocalNode& node, size_t ni) {
  if (l.mpi == job::MpiService::none) return {};
  if (l.mpi == job::MpiService::cray_pals) return start_pals(l, node);
  const LaunchId id = l.id;
  node.exchange = std::make_unique<ForwardingExchange>(
      [this, id, ni](PmiKvs puts, PmiExchange::Done done) { local_fence(id, ni, std::move(puts), std::move(done)); });
  if (l.mpi == job::MpiService::pmix) return {};  // the launch's namespace serves the node
  NodePmi pmi;
  pmi.step.kvsname = l.req.kvsname().empty()
                         ? "corral_" + std::to_string(l.req.jobid()) + "_" + std::to_string(l.req.stepid())
                         : l.req.kvsname();
  pmi.step.size = static_cast<int>(std::max(l.req.total_tasks(), node.info.first_rank() + node.info.ntasks()));
  pmi.step.process_mapping = l.req.pmi_mapping();
  pmi.first_rank = node.info.first_rank();
  pmi.ntasks = node.info.ntasks();
  pmi.node = node.info.name();
  auto server = start_node_pmi(loop, *node.exchange, std::move(pmi), pmi_failed(id));
  if (!server) return server.error();
  node.pmi = std::move(*server);
  return {};
}

Status StepNode::Impl::start_pals(Launch& l, LocalNode& node) {
  if (!l.pals) {  // once for all of this agent's nodes of the step
    const auto& req = l.req;
    auto step = PalsStep::make(pals_step_info(req, std::to_string(req.jobid()) + "." + std::to_string(req.stepid()),
                                              pals_base(config.state_dir), l.cred.uid, l.cred.gid));
    if (!step) return step.error();
    l.pals = std::move(*step);
  }
  const auto& n = node.info;
  auto started = l.pals->start_node(n.node_index(), n.name(), n.first_rank(), n.ntasks());
  if (!started) return started.error();
  node.pals = std::move(*started);
  return {};
}

Status StepNode::Impl::start_pmix(Launch& l, const std::vector<const v1::LaunchNode*>& local) {
  const auto& req = l.req;
  NodePmix pmix{req.pmix_namespace(),
                {req.layout_nodes().begin(), req.layout_nodes().end()},
                {req.layout_tasks().begin(), req.layout_tasks().end()},
                {},
                l.cred.uid,
                l.cred.gid};
  // The layout must give each local node the ranks this request gives it (blocks in
  // node order).
  std::vector<uint32_t> first(pmix.tasks.size() + 1, 0);
  for (size_t i = 0; i < pmix.tasks.size(); ++i) first[i + 1] = first[i] + pmix.tasks[i];
  for (const auto* n : local) {
    const uint32_t i = n->node_index();
    if (i >= pmix.nodes.size() || pmix.nodes[i] != n->name() || pmix.tasks[i] != n->ntasks() ||
        first[i] != n->first_rank())
      return invalid("--mpi=pmix: the step's layout disagrees with node " + n->name() + "'s ranks");
    pmix.local.push_back(n->name());
  }
  const NodeHardware* hw = config.node(pmix.local.front());
  pmix.virtual_nodes = hw != nullptr && hw->core_cpus.empty();
  const LaunchId id = l.id;
  l.pmix_exchange = std::make_unique<SharedNodesExchange>([this, id]() -> Result<std::vector<PmiExchange*>> {
    Launch* x = find(id);
    if (x == nullptr) return Error{Errc::unavailable, "the step is ending"};
    std::vector<PmiExchange*> parts;
    for (auto& node : x->locals)
      if (node->exchange) parts.push_back(node->exchange.get());
    return parts;
  });
  auto ns = start_node_pmix(sc.pmix, std::move(pmix), *l.pmix_exchange, pmi_failed(id));
  if (!ns) return ns.error();
  l.pmix = std::move(*ns);
  return {};
}

void StepNode::Impl::start_task(Launch& l, LocalNode& node, size_t ni, size_t ti, std::vector<std::string> env,
                                const StepUser& user, const std::string& cwd, bool use_imp) {
  Task& t = node.tasks[ti];
  t.local_rank = static_cast<uint32_t>(ti);
  t.rank = node.info.first_rank() + t.local_rank;
  const auto& req = l.req;
  PatternVars vars{req.jobid(), t.rank, node.info.node_index(), node.info.name(), req.job_name(), user.name};
  SpawnRequest lr;
  lr.argv.assign(req.argv().begin(), req.argv().end());
  lr.cwd = cwd;

  // The task's end of its PMI connection stays open here until the task has its copy.
  std::shared_ptr<PmiTaskEnd> pmi_end;
  if (node.pmi) {
    auto end = node.pmi->take_task_end(static_cast<int>(t.rank));
    if (!end) return task_failed(l, node, t, end.error(), true, true);
    pmi_end = std::make_shared<PmiTaskEnd>(std::move(*end));
    lr.env = step_task_env(std::move(env), t.rank, t.local_rank, pmi_end->env);
    lr.inherit_fds = {pmi_end->fd.get()};
  } else if (l.pmix) {
    auto pmix_env = l.pmix->task_env(t.rank);
    if (!pmix_env) return task_failed(l, node, t, pmix_env.error(), true, true);
    lr.env = step_task_env(std::move(env), t.rank, t.local_rank, *pmix_env);
  } else if (node.pals) {
    lr.env = step_task_env(std::move(env), t.rank, t.local_rank, node.pals->task_env(t.rank));
  } else {
    lr.env = step_task_env(std::move(env), t.rank, t.local_rank, {});
  }
  if (use_imp) {
    lr.imp_path = config.imp_path;
    lr.uid = user.uid;
    lr.gid = user.gid;
  }
  auto in = TaskSupervisor::Stdin::file;
  if (t.rank == 0 && req.pty()) {
    in = TaskSupervisor::Stdin::terminal;
    t.terminal = true;
  } else {
    if (!req.output().empty()) lr.output_path = resolve_path(expand_output_pattern(req.output(), vars), cwd);
    lr.error_path = req.error().empty() ? lr.output_path : resolve_path(expand_output_pattern(req.error(), vars), cwd);
    if (!req.input().empty()) {
      lr.input_path = resolve_path(expand_output_pattern(req.input(), vars), cwd);
    } else if (t.rank == 0 && req.stdin_open()) {
      in = TaskSupervisor::Stdin::pipe;
    }
  }
  lr.cgroups = cgroup_of(l);
  lr.cgroup_entry = l.cgroup_entry;
  lr.cpus = node.cpus[ti];
  for (const auto& [name, value] : req.rlimits())  // names checked by the step manager; unknown ones skipped
    if (auto resource = job::rlimit_resource(name); resource && value >= -1) lr.rlimits.push_back({*resource, value});
  // A failed spawn's message goes to the streams the step would have captured.
  const bool own_output = lr.output_path.empty(), own_error = lr.error_path.empty();
  if (in != TaskSupervisor::Stdin::file)  // a terminal or a fed stdin: made and started now
    return record_spawn(l, node, t, tasks.spawn(lr, task_handlers(l.id, ni, ti), in), own_output, own_error);
  ++node.spawning;
  ++l.spawning;
  std::weak_ptr<int> token = alive;
  TaskSupervisor* supervisor = &tasks;  // outlives this StepNode: it calls back
  tasks.spawn_later(std::move(lr), task_handlers(l.id, ni, ti),
                    [this, token, supervisor, id = l.id, ni, ti, own_output, own_error, pmi_end](Result<pid_t> pid) {
                      if (token.lock()) return task_spawned(id, ni, ti, pid, own_output, own_error);
                      if (pid) {  // this StepNode is gone: so are the handlers' owners
                        supervisor->signal(*pid, SIGKILL);
                        supervisor->forget(*pid);
                      }
                    });
}

void StepNode::Impl::task_spawned(LaunchId id, size_t ni, size_t ti, const Result<pid_t>& pid, bool own_output,
                                  bool own_error) {
  Launch* l = find(id);
  if (l == nullptr) {  // cannot be (a launch with queued tasks is kept), but no task may be left unowned
    if (pid) tasks.signal(*pid, SIGKILL);
    return;
  }
  LocalNode& node = *l->locals[ni];
  --node.spawning;
  --l->spawning;
  record_spawn(*l, node, node.tasks[ti], pid, own_output, own_error);
  if (node.spawning == 0) {
    local_started(*l, node);
    flush(*l);  // now, at the end of the loop's turn, rather than in a turn of its own
  }
  maybe_finish(*l);
}

void StepNode::Impl::record_spawn(Launch& l, LocalNode& node, Task& t, const Result<pid_t>& pid, bool own_output,
                                  bool own_error) {
  if (!pid) return task_failed(l, node, t, pid.error(), own_output, own_error);
  t.pid = *pid;
  ++l.live;
  // The step was ended while the task waited for its turn to start.
  if (l.stopped_by != 0) tasks.signal(t.pid, l.stopped_by);
}

void StepNode::Impl::task_failed(Launch& l, LocalNode& node, Task& t, const Error& e, bool own_output, bool own_error) {
  std::string text = task_prefix(l, node) + e.message;
  spdlog::warn("{}", text);
  if (node.error.empty()) node.error = text;
  if (t.terminal) {
    add_output(l, node, t, false, text + "\n", true);  // a terminal is the only stream
  } else {
    if (own_error) add_output(l, node, t, true, text + "\n", true);
    if (own_output) add_output(l, node, t, false, {}, true);
  }
  t.exited = true;
  add_exit(l, t.rank, exit_status(spawn_failure_code(e)), 0);
}

// ------------------------------------------------------------------ reporting

void StepNode::Impl::add_output(Launch& l, const LocalNode& node, const Task& t, bool is_err, std::string data,
                                bool eof) {
  auto* o = l.pending.add_output();
  o->set_jobid(l.req.jobid());
  o->set_rank(t.rank);
  o->set_stderr(is_err);
  l.pending_bytes += data.size();
  o->set_data(std::move(data));
  o->set_eof(eof);
  o->set_node(node.info.name());
  // An end of file alone is no news: it travels with the task's exit, which follows.
  if (!o->data().empty() || !eof) schedule_flush(l);
}

void StepNode::Impl::add_exit(Launch& l, uint32_t rank, int waitstatus, double cpu) {
  auto* x = l.pending.add_exits();
  x->set_rank(rank);
  x->set_waitstatus(waitstatus);
  x->set_cpu_seconds(cpu);
  schedule_flush(l);
}

// Everything reported during one loop iteration travels in one LaunchUp.
void StepNode::Impl::schedule_flush(Launch& l) {
  if (l.pending_bytes >= kFlushBytes) return flush(l);
  if (l.flush_posted) return;
  l.flush_posted = true;
  later(l.id, [this](Launch& x) {
    x.flush_posted = false;
    flush(x);
  });
}

void StepNode::Impl::flush(Launch& l) {
  if (is_empty(l.pending)) return;
  v1::LaunchUp msg = std::move(l.pending);
  l.pending = v1::LaunchUp();
  l.pending_bytes = 0;
  if (l.up) l.up(std::move(msg));
}

void StepNode::Impl::maybe_finish(Launch& l) {
  if (l.finishing || l.live > 0 || l.starting > 0 || l.spawning > 0) return;
  for (const auto& c : l.children)
    if (!c->closed) return;
  l.finishing = true;
  // Later, so no caller up the stack still holds a reference into the launch.
  later(l.id, [this](Launch& x) {
    flush(x);
    Done d = std::move(x.done);
    // Whatever the tasks left running (daemons, double forks) ends with the step here.
    if (cgroups != nullptr && x.cgroup && !x.cgroup->empty()) cgroups->release(x.req.jobid(), cgroup_unit(x));
    launches.erase(x.id);
    if (d) d("");
  });
}

// ------------------------------------------------------------------ local tasks

// A step id can come back (the interactive step): the launch id keeps units apart.
std::string StepNode::Impl::cgroup_unit(const Launch& l) {
  return "step_" + job::step_name(l.req.stepid()) + "-" + std::to_string(l.id);
}

const std::vector<std::string>& StepNode::Impl::cgroup_of(Launch& l) {
  if (l.cgroup) return *l.cgroup;  // (the names below are for its first task only)
  const std::string unit = cgroup_unit(l);
  const auto& dirs = unit_cgroup(cgroups, l.cgroup, l.req.jobid(), unit,
                                 "step " + std::to_string(l.req.jobid()) + "." + std::to_string(l.req.stepid()));
  if (!dirs.empty()) l.cgroup_entry = cgroups->entry(l.req.jobid(), unit);
  return dirs;
}

TaskSupervisor::Handlers StepNode::Impl::task_handlers(LaunchId id, size_t ni, size_t ti) {
  TaskSupervisor::Handlers h;
  h.output = [this, id, ni, ti](bool is_err, std::string_view data, bool eof) {
    if (Launch* l = find(id)) add_output(*l, *l->locals[ni], l->locals[ni]->tasks[ti], is_err, std::string(data), eof);
  };
  h.spawn_failed = [this, id, ni, ti](std::string_view message) {
    Launch* l = find(id);
    if (l == nullptr) return;
    LocalNode& node = *l->locals[ni];
    add_output(*l, node, node.tasks[ti], true, task_prefix(*l, node) + std::string(message) + "\n", false);
  };
  h.exited = [this, id, ni, ti](const TaskSupervisor::Exit& exit) {
    if (Launch* l = find(id)) task_exited(*l, l->locals[ni]->tasks[ti], exit);
  };
  return h;
}

void StepNode::Impl::task_exited(Launch& l, Task& t, const TaskSupervisor::Exit& exit) {
  t.exited = true;
  // A rank that failed without finalizing leaves the others waiting. (A rank that exits
  // 0 is taken at its word: its client need not wait for the library to take its finalize.)
  if (l.pmix && exit.waitstatus != 0 && l.pmix->left_unfinalized(t.rank))
    pmi_failed(l.id)("rank " + std::to_string(t.rank) + ": exited without PMIx_Finalize (" +
                     describe_wait_status(exit.waitstatus) + ")");
  add_exit(l, t.rank, exit.waitstatus, exit.cpu_seconds);
  --l.live;
  maybe_finish(l);
}

void StepNode::Impl::signal_local(Launch& l, int sig) {
  // Nodes still waiting for their turn (start_locals) and tasks queued to start would miss
  // it: a signal that ends the step keeps those nodes from starting and ends those tasks
  // as they start; others reach only the tasks already running.
  if ((l.starting > 0 || l.spawning > 0) &&
      (sig == SIGKILL || sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGQUIT))
    l.stopped_by = sig;
  for (auto& node : l.locals)
    for (auto& t : node->tasks)
      if (t.pid > 0 && !t.exited) tasks.signal(t.pid, sig);
}

// ------------------------------------------------------------------ fences

void StepNode::Impl::local_fence(LaunchId id, size_t ni, PmiKvs puts, PmiExchange::Done done) {
  Launch* l = find(id);
  if (l == nullptr) return done(Error{Errc::unavailable, "the step is ending"});
  LocalNode& node = *l->locals[ni];
  uint32_t seq = node.next_seq++;
  node.fences[seq] = std::move(done);
  add_fence(*l, seq, std::move(puts), 1);
}

// Contributions of this subtree are merged until every node with tasks is in; then one
// goes up.
void StepNode::Impl::add_fence(Launch& l, uint32_t seq, PmiKvs kvs, uint32_t nodes) {
  FenceAcc& acc = l.fences[seq];
  for (auto& [k, v] : kvs) acc.kvs[k] = std::move(v);
  acc.nodes += nodes;
  if (acc.nodes < l.fence_nodes) return;
  if (l.pending.has_fence()) flush(l);
  auto* f = l.pending.mutable_fence();
  f->set_seq(seq);
  f->set_nodes(acc.nodes);
  for (auto& [k, v] : acc.kvs) (*f->mutable_kvs())[k] = std::move(v);
  l.fences.erase(seq);
  schedule_flush(l);
}

void StepNode::Impl::fence_down(Launch& l, const v1::PmiFence& f) {
  for (auto& node : l.locals) {
    auto it = node->fences.find(f.seq());
    if (it == node->fences.end()) continue;
    PmiExchange::Done done = std::move(it->second);
    node->fences.erase(it);
    if (!f.error().empty())
      done(Error{Errc::unavailable, f.error()});
    else
      done(PmiKvs(f.kvs().begin(), f.kvs().end()));
  }
}

// ------------------------------------------------------------------ children

void StepNode::Impl::child_up(Launch& l, size_t ci, v1::LaunchUp&& up) {
  Child& c = *l.children[ci];
  for (const auto& x : up.exits()) c.reported.insert(x.rank());
  if (up.has_fence()) {
    v1::PmiFence f = std::move(*up.mutable_fence());
    up.clear_fence();
    add_fence(l, f.seq(), PmiKvs(f.kvs().begin(), f.kvs().end()), f.nodes());
  }
  for (const auto& o : up.output()) l.pending_bytes += o.data().size();
  append_up(l.pending, std::move(up));
  schedule_flush(l);
  // Every rank below has exited: the child's server may now end the stream.
  if (c.reported.size() >= c.ranks) c.link->close_writes();
}

void StepNode::Impl::child_closed(Launch& l, size_t ci, const std::string& error) {
  Child& c = *l.children[ci];
  if (c.closed) return;
  c.closed = true;
  if (c.reported.size() < c.ranks) {
    std::string message = !error.empty() ? error
                                         : "the agent at " + c.link->uri() + " ended the launch before every task of " +
                                               "its nodes was reported";
    spdlog::warn("step {}.{}: {}", l.req.jobid(), l.req.stepid(), message);
    for (const auto& n : c.nodes) {
      bool missing = false;
      for (uint32_t r = 0; r < n.ntasks(); ++r) missing |= c.reported.count(n.first_rank() + r) == 0;
      if (!missing) continue;
      auto* e = l.pending.add_errors();
      e->set_node(n.name());
      e->set_message(message);
      for (uint32_t r = 0; r < n.ntasks(); ++r)
        if (c.reported.insert(n.first_rank() + r).second) add_exit(l, n.first_rank() + r, exit_status(1), 0);
    }
    schedule_flush(l);
  }
  maybe_finish(l);
}

// ------------------------------------------------------------------ from above

void StepNode::Impl::deliver(LaunchId id, const v1::LaunchDown& down) {
  Launch* lp = find(id);
  if (lp == nullptr) return;
  Launch& l = *lp;
  const bool has_stdin = !down.stdin().empty() || down.stdin_eof();
  if (has_stdin || down.has_winsize()) {
    if (l.rank0_local >= 0) {
      const Task& t = l.locals[static_cast<size_t>(l.rank0_local)]->tasks.front();
      if (t.pid > 0 && !t.exited) {
        if (has_stdin) tasks.feed(t.pid, down.stdin(), down.stdin_eof());
        if (down.has_winsize()) tasks.set_window_size(t.pid, down.winsize().rows(), down.winsize().cols());
      }
    } else if (l.rank0_child >= 0) {
      v1::LaunchDown fwd;
      fwd.set_stdin(down.stdin());
      fwd.set_stdin_eof(down.stdin_eof());
      if (down.has_winsize()) *fwd.mutable_winsize() = down.winsize();
      l.children[static_cast<size_t>(l.rank0_child)]->link->send(std::move(fwd));
    }
  }
  if (down.signal() != 0 || down.has_fence()) {
    if (down.signal() != 0) signal_local(l, down.signal());
    if (down.has_fence()) fence_down(l, down.fence());
    v1::LaunchDown fwd;
    fwd.set_signal(down.signal());
    if (down.has_fence()) *fwd.mutable_fence() = down.fence();
    for (auto& c : l.children)
      if (!c->closed) c->link->send(fwd);
  }
}

void StepNode::Impl::abandon(LaunchId id) {
  Launch* l = find(id);
  if (l == nullptr) return;
  signal_local(*l, SIGKILL);
  for (auto& c : l->children)
    if (!c->closed) c->link->cancel();
  // Barriers waiting for the rest of the step would never end.
  for (auto& node : l->locals) {
    auto fences = std::move(node->fences);
    node->fences.clear();
    for (auto& [seq, done] : fences) done(Error{Errc::unavailable, "the step's launch was abandoned"});
  }
}

// ------------------------------------------------------------------ StepNode

StepNode::StepNode(EventLoop& loop, TaskSupervisor& tasks, const AgentConfig& config, StepNodeConfig sc)
    : impl_(std::make_unique<Impl>(loop, tasks, config, std::move(sc))) {}

StepNode::~StepNode() = default;

StepNode::LaunchId StepNode::launch(v1::LaunchTasksRequest req, Up up, Done done, const job::StepCred* made_here) {
  return impl_->launch(std::move(req), std::move(up), std::move(done), made_here);
}

void StepNode::deliver(LaunchId id, const v1::LaunchDown& down) { impl_->deliver(id, down); }

void StepNode::abandon(LaunchId id) { impl_->abandon(id); }

void StepNode::signal_job(uint64_t jobid, int sig) {
  for (auto& [id, l] : impl_->launches)
    if (l->req.jobid() == jobid) impl_->signal_local(*l, sig);
}

void StepNode::kill_all(int sig) {
  for (auto& [id, l] : impl_->launches) impl_->signal_local(*l, sig);
}

void StepNode::set_cgroups(TaskCgroups* cgroups) { impl_->cgroups = cgroups; }

size_t StepNode::live_tasks() const { return impl_->live_tasks(); }

}  // namespace corral::node
