#include "node/steps/step_alloc.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "util/hostlist.h"

namespace corral::node {
namespace {

Error unavailable(std::string msg) { return {Errc::unavailable, std::move(msg)}; }

std::string plural(size_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// n ids from `all`: those not in `busy` first (lowest first), then, when `overlap`
// allows it, busy ones. The caller has checked that enough exist.
IdSet pick(const IdSet& all, const IdSet& busy, size_t n, bool overlap) {
  IdSet out;
  for (uint32_t id : all.minus(busy).to_vector()) {
    if (out.count() == n) return out;
    out.insert(id);
  }
  if (!overlap) return out;
  for (uint32_t id : all.intersect(busy).to_vector()) {
    if (out.count() == n) return out;
    out.insert(id);
  }
  return out;
}

// "with 8 cores each" or "with 4 to 8 cores".
std::string range_text(size_t lo, size_t hi, const std::string& what) {
  if (lo == hi) return std::to_string(lo) + " " + what + " each";
  return std::to_string(lo) + " to " + std::to_string(hi) + " " + what;
}

std::string request_text(const StepRequest& req) {
  std::string s =
      "the step asks for " + plural(req.ntasks, "task", "tasks") + " of " + plural(req.cores_per_task, "core", "cores");
  if (req.gpus_per_task > 0) s += " and " + plural(req.gpus_per_task, "GPU", "GPUs");
  s += " each";
  if (req.nnodes > 0) s += " on " + plural(req.nnodes, "node", "nodes");
  if (!req.nodelist.empty()) s += " including " + req.nodelist;
  return s;
}

// Tasks per node (parallel to `cap`, each node's task capacity) for the fewest nodes in
// job order, or nothing if the step does not fit.
std::optional<std::vector<uint32_t>> fewest_nodes(const std::vector<uint32_t>& cap, const std::vector<bool>& required,
                                                  uint32_t ntasks) {
  const size_t n = cap.size();
  std::vector<uint32_t> tasks(n, 0);
  // Fewest nodes: the required ones, then more in job order until the tasks fit.
  std::vector<bool> sel = required;
  uint64_t room = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!sel[i]) continue;
    if (cap[i] == 0) return std::nullopt;
    room += cap[i];
  }
  for (size_t i = 0; i < n && room < ntasks; ++i) {
    if (sel[i] || cap[i] == 0) continue;
    sel[i] = true;
    room += cap[i];
  }
  if (room < ntasks) return std::nullopt;
  // Block layout: every chosen node gets one task, the rest fill nodes in job order.
  uint32_t left = ntasks;
  for (size_t i = 0; i < n; ++i)
    if (sel[i]) tasks[i] = 1, --left;
  for (size_t i = 0; i < n && left > 0; ++i) {
    if (!sel[i]) continue;
    uint32_t more = std::min(cap[i] - 1, left);
    tasks[i] += more;
    left -= more;
  }
  return tasks;
}

// Tasks per node on exactly `nnodes` nodes, or nothing if the step does not fit.
std::optional<std::vector<uint32_t>> exact_nodes(const std::vector<uint32_t>& cap, const std::vector<bool>& required,
                                                 uint32_t ntasks, uint32_t nnodes) {
  const size_t n = cap.size();
  std::vector<uint32_t> tasks(n, 0);
  // Exactly N nodes, `base` tasks each and one more on the first `extra` of them.
  // A node able to hold base+1 is "big"; we must pick at least `extra` big ones.
  const uint32_t base = ntasks / nnodes;
  uint32_t extra = ntasks % nnodes;
  std::vector<bool> sel = required;
  int64_t need_big = extra;
  int64_t slots = nnodes;
  for (size_t i = 0; i < n; ++i) {
    if (!sel[i]) continue;
    if (cap[i] < base) return std::nullopt;
    if (cap[i] > base) --need_big;
    --slots;
  }
  for (size_t i = 0; i < n && slots > 0; ++i) {
    if (sel[i]) continue;
    if (cap[i] > base) {
      sel[i] = true, --need_big, --slots;
    } else if (cap[i] == base && slots > std::max<int64_t>(need_big, 0)) {
      sel[i] = true, --slots;
    }
  }
  if (slots > 0 || need_big > 0) return std::nullopt;
  for (size_t i = 0; i < n; ++i) {
    if (!sel[i]) continue;
    tasks[i] = base;
    if (extra > 0 && cap[i] > base) ++tasks[i], --extra;
  }
  return tasks;
}

}  // namespace

uint32_t StepShare::ntasks() const {
  uint32_t n = 0;
  for (const auto& node : nodes) n += node.ntasks;
  return n;
}

StepAllocator::StepAllocator(uint64_t job_id, std::vector<JobNode> nodes)
    : job_id_(job_id), nodes_(std::move(nodes)), busy_(nodes_.size()) {
  for (size_t i = 0; i < nodes_.size(); ++i) index_[nodes_[i].name] = i;
}

Result<StepAllocator> StepAllocator::create(uint64_t job_id, std::vector<JobNode> nodes) {
  const std::string job = "job " + std::to_string(job_id);
  if (nodes.empty()) return invalid(job + " has no nodes to run steps on");
  std::map<std::string, int> seen;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto& n = nodes[i];
    if (n.name.empty()) return invalid(job + ": node " + std::to_string(i) + " has no name");
    if (seen[n.name]++ > 0) return invalid(job + " lists node " + n.name + " twice");
    if (n.cores.empty()) return invalid("node " + n.name + " of " + job + " has no cores");
  }
  return StepAllocator(job_id, std::move(nodes));
}

std::string StepAllocator::node_names() const {
  std::vector<std::string> names;
  for (const auto& n : nodes_) names.push_back(n.name);
  return Hostlist(std::move(names)).encode();
}

std::string StepAllocator::describe_job() const {
  size_t cmin = SIZE_MAX, cmax = 0, gmin = SIZE_MAX, gmax = 0;
  for (const auto& n : nodes_) {
    cmin = std::min(cmin, n.cores.count());
    cmax = std::max(cmax, n.cores.count());
    gmin = std::min(gmin, n.gpus.count());
    gmax = std::max(gmax, n.gpus.count());
  }
  std::string s = "job " + std::to_string(job_id_) + " has " + plural(nodes_.size(), "node", "nodes") + " (" +
                  node_names() + ") with " + range_text(cmin, cmax, "cores");
  if (gmax > 0) s += " and " + range_text(gmin, gmax, "GPUs");
  return s;
}

uint32_t StepAllocator::capacity(size_t node, const StepRequest& req, const Usage* busy) const {
  const JobNode& n = nodes_[node];
  const bool all = req.overlap || busy == nullptr;
  size_t cores = n.cores.count() - (all ? 0 : n.cores.count_common(busy->cores));
  size_t gpus = n.gpus.count() - (all ? 0 : n.gpus.count_common(busy->gpus));
  size_t cap = cores / req.cores_per_task;
  if (req.gpus_per_task > 0) cap = std::min(cap, gpus / req.gpus_per_task);
  return static_cast<uint32_t>(std::min<size_t>(cap, UINT32_MAX));
}

// The job's nodes a -w list names (true at their positions); an error for bad text or a
// node outside the job.
Result<std::vector<bool>> StepAllocator::required_nodes(const std::string& nodelist) const {
  std::vector<bool> required(nodes_.size(), false);
  if (nodelist.empty()) return required;
  auto hl = Hostlist::parse(nodelist);
  if (!hl) return invalid("the step's node list (-w) is not valid: " + hl.message());
  const Hostlist names = hl->uniq();
  for (const auto& host : names.hosts()) {
    auto it = index_.find(host);
    if (it == index_.end())
      return invalid("the step asks for node " + host + ", which is not in job " + std::to_string(job_id_) + " (" +
                     node_names() + ")");
    required[it->second] = true;
  }
  return required;
}

Result<std::vector<bool>> StepAllocator::validate(const StepRequest& req) const {
  const std::string job = "job " + std::to_string(job_id_);
  if (req.ntasks == 0) return invalid("the step asks for 0 tasks; it needs at least one");
  if (req.cores_per_task == 0) return invalid("the step asks for 0 cores per task; it needs at least one");
  if (req.nnodes > nodes_.size())
    return invalid("the step asks for " + plural(req.nnodes, "node", "nodes") + "; " + job + " has " +
                   std::to_string(nodes_.size()));
  if (req.nnodes > req.ntasks)
    return invalid("the step asks for " + plural(req.ntasks, "task", "tasks") + " on " +
                   plural(req.nnodes, "node", "nodes") + "; every node needs at least one task");
  auto req_nodes = required_nodes(req.nodelist);
  if (!req_nodes) return req_nodes.error();
  std::vector<bool> required = std::move(*req_nodes);
  const size_t nrequired = std::count(required.begin(), required.end(), true);
  if (req.nnodes > 0 && nrequired > req.nnodes)
    return invalid("the step names " + plural(nrequired, "node", "nodes") + " with -w but asks for " +
                   plural(req.nnodes, "node", "nodes") + " with -N");
  if (nrequired > req.ntasks)
    return invalid("the step names " + plural(nrequired, "node", "nodes") + " with -w but asks for " +
                   plural(req.ntasks, "task", "tasks") + "; every node needs at least one task");
  if (!lay_out(req, required, nullptr)) return invalid(request_text(req) + "; " + describe_job());
  return required;
}

std::optional<std::vector<uint32_t>> StepAllocator::lay_out(const StepRequest& req, const std::vector<bool>& required,
                                                            const std::vector<Usage>* busy) const {
  std::vector<uint32_t> cap(nodes_.size());
  for (size_t i = 0; i < cap.size(); ++i) cap[i] = capacity(i, req, busy == nullptr ? nullptr : &(*busy)[i]);
  return req.nnodes == 0 ? fewest_nodes(cap, required, req.ntasks) : exact_nodes(cap, required, req.ntasks, req.nnodes);
}

// Lays the step out on the nodes given `busy`; unavailable when it does not fit.
Result<StepShare> StepAllocator::place(const StepRequest& req, const std::vector<bool>& required,
                                       const std::vector<Usage>& busy) const {
  const size_t n = nodes_.size();
  auto laid = lay_out(req, required, &busy);
  if (!laid)
    return unavailable(request_text(req) + "; not enough of job " + std::to_string(job_id_) +
                       "'s cores or GPUs are free now");
  const std::vector<uint32_t>& tasks = *laid;
  StepShare share;
  for (size_t i = 0; i < n; ++i) {
    if (tasks[i] == 0) continue;
    NodeShare ns{nodes_[i].name, tasks[i], {}, {}};
    ns.cores = pick(nodes_[i].cores, busy[i].cores, size_t{tasks[i]} * req.cores_per_task, req.overlap);
    ns.gpus = pick(nodes_[i].gpus, busy[i].gpus, size_t{tasks[i]} * req.gpus_per_task, req.overlap);
    share.nodes.push_back(std::move(ns));
  }
  return share;
}

bool StepAllocator::known(StepId id) const {
  if (running_.count(id)) return true;
  return std::any_of(queue_.begin(), queue_.end(), [id](const Waiting& w) { return w.id == id; });
}

Result<StepShare> StepAllocator::try_place(StepId id, const StepRequest& req) {
  auto required = validate(req);
  if (!required) return required.error();
  auto share = place(req, *required, busy_);
  if (share) commit(id, *share, req.overlap);
  return share;
}

void StepAllocator::commit(StepId id, const StepShare& share, bool overlap) {
  running_[id] = Running{share, overlap};
  if (overlap) return;
  for (const auto& ns : share.nodes) {
    Usage& u = busy_[index_.at(ns.name)];
    u.cores = u.cores.union_with(ns.cores);
    u.gpus = u.gpus.union_with(ns.gpus);
  }
}

Result<StepShare> StepAllocator::allocate(StepId id, const StepRequest& req) {
  if (known(id))
    return Error{Errc::already_exists,
                 "step " + std::to_string(id) + " of job " + std::to_string(job_id_) + " already exists"};
  if (!req.overlap && !queue_.empty()) {
    auto required = validate(req);
    if (!required) return required.error();
    return unavailable("the step waits behind " + plural(queue_.size(), "step", "steps") + " queued earlier in job " +
                       std::to_string(job_id_));
  }
  return try_place(id, req);
}

void StepAllocator::release(StepId id) {
  auto it = running_.find(id);
  if (it == running_.end()) {
    std::erase_if(queue_, [id](const Waiting& w) { return w.id == id; });
    return;
  }
  if (!it->second.overlap) {
    for (const auto& ns : it->second.share.nodes) {
      Usage& u = busy_[index_.at(ns.name)];
      u.cores = u.cores.minus(ns.cores);
      u.gpus = u.gpus.minus(ns.gpus);
    }
  }
  running_.erase(it);
}

Status StepAllocator::enqueue(StepId id, StepRequest req) {
  if (known(id))
    return Error{Errc::already_exists,
                 "step " + std::to_string(id) + " of job " + std::to_string(job_id_) + " already exists"};
  auto required = validate(req);
  if (!required) return required.error();
  queue_.push_back(Waiting{id, std::move(req)});
  return {};
}

std::vector<ReadyStep> StepAllocator::ready() {
  std::vector<ReadyStep> out;
  while (!queue_.empty()) {
    const Waiting& w = queue_.front();
    auto share = try_place(w.id, w.req);
    if (!share) break;
    out.push_back(ReadyStep{w.id, std::move(*share)});
    queue_.pop_front();
  }
  return out;
}

}  // namespace corral::node
