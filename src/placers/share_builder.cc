#include "placers/share_builder.h"

#include <algorithm>

namespace corral::topology {

unsigned task_capacity(const Request& r, const NodeState& st) {
  if (!st.usable || st.exclusive_held) return 0;
  if (r.exclusive && st.jobs > 0) return 0;
  if (st.free_memory_mb < r.mem_per_node_mb) return 0;
  unsigned cap = free_core_count(st) / cores_per_task(r);
  if (r.gpus_per_task > 0) {
    cap = std::min(cap, static_cast<unsigned>(st.free_gpus.count()) / r.gpus_per_task);
  }
  return cap;
}

IdSet lowest(const IdSet& ids, uint64_t n) {
  IdSet out;
  for (auto [lo, hi] : ids.ranges()) {
    if (n == 0) break;
    uint64_t take = std::min<uint64_t>(uint64_t{hi} - lo + 1, n);
    out.insert_range(lo, static_cast<uint32_t>(lo + take - 1));
    n -= take;
  }
  return out;
}

NodeShare make_share(const Request& r, const NodeState& st, uint32_t node, unsigned ntasks) {
  NodeShare share;
  share.node = node;
  share.ntasks = ntasks;
  if (r.exclusive) {
    // An exclusive job owns the whole node, whatever its tasks use.
    share.cores = st.free_cores;
    share.gpus = st.free_gpus;
    share.memory_mb = st.memory_mb;
  } else {
    share.cores = lowest(st.free_cores, uint64_t{ntasks} * cores_per_task(r));
    share.gpus = lowest(st.free_gpus, uint64_t{ntasks} * r.gpus_per_task);
    share.memory_mb = r.mem_per_node_mb;
  }
  return share;
}

Allocation build(const Request& r, const std::vector<NodeState>& nodes,
                 std::vector<std::pair<uint32_t, unsigned>> plan) {
  std::sort(plan.begin(), plan.end());
  Allocation alloc;
  alloc.exclusive = r.exclusive;
  alloc.shares.reserve(plan.size());
  for (auto [node, ntasks] : plan) alloc.shares.push_back(make_share(r, nodes[node], node, ntasks));
  return alloc;
}

std::optional<Allocation> build_spread(const Request& r, const std::vector<NodeState>& nodes,
                                       std::vector<uint32_t> chosen) {
  if (chosen.empty() || chosen.size() != r.nnodes) return std::nullopt;
  std::sort(chosen.begin(), chosen.end());
  const unsigned base = r.ntasks / r.nnodes, extra = r.ntasks % r.nnodes;
  if (base == 0) return std::nullopt;
  std::vector<std::pair<uint32_t, unsigned>> plan;
  plan.reserve(chosen.size());
  for (size_t i = 0; i < chosen.size(); ++i) {
    unsigned tasks = base + (i < extra ? 1 : 0);
    if (task_capacity(r, nodes[chosen[i]]) < tasks) return std::nullopt;
    plan.emplace_back(chosen[i], tasks);
  }
  return build(r, nodes, std::move(plan));
}

std::optional<std::vector<std::pair<size_t, uint64_t>>> choose_groups(const std::vector<uint64_t>& amount,
                                                                      uint64_t want) {
  std::vector<size_t> order(amount.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return amount[a] > amount[b]; });
  std::vector<std::pair<size_t, uint64_t>> out;
  uint64_t have = 0;
  size_t k = 0;
  while (k < order.size() && have + amount[order[k]] < want) {
    if (amount[order[k]] == 0) return std::nullopt;
    have += amount[order[k]];
    out.emplace_back(order[k], amount[order[k]]);
    ++k;
  }
  if (k == order.size() || want == 0) return std::nullopt;
  const uint64_t rest = want - have;
  size_t last = order[k];
  for (size_t i = k + 1; i < order.size(); ++i) {
    size_t b = order[i];
    if (amount[b] >= rest && amount[b] < amount[last]) last = b;  // ties keep the lower position
  }
  out.emplace_back(last, rest);
  return out;
}

std::vector<uint32_t> sorted_unique(std::vector<uint32_t> ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

bool in_sorted(const std::vector<uint32_t>& sorted, uint32_t id) {
  return std::binary_search(sorted.begin(), sorted.end(), id);
}

bool tighter(const Candidate& a, const Candidate& b) { return a.free != b.free ? a.free < b.free : a.node < b.node; }

bool roomier(const Candidate& a, const Candidate& b) { return a.cap != b.cap ? a.cap > b.cap : a.node < b.node; }

std::optional<Plan> pack_plan(const Request& r, const std::vector<Candidate>& must, std::vector<Candidate> others) {
  if (must.size() > r.ntasks) return std::nullopt;
  Plan plan;
  unsigned remaining = r.ntasks - static_cast<unsigned>(must.size());
  for (const Candidate& c : must) {
    unsigned more = std::min(c.cap - 1, remaining);
    plan.emplace_back(c.node, 1 + more);
    remaining -= more;
  }
  if (remaining == 0) return plan;
  std::sort(others.begin(), others.end(), roomier);
  size_t k = 0;
  uint64_t sum = 0;
  while (k < others.size() && sum < remaining) sum += others[k++].cap;
  if (sum < remaining) return std::nullopt;
  for (size_t i = 0; i + 1 < k; ++i) {
    plan.emplace_back(others[i].node, others[i].cap);
    remaining -= others[i].cap;
  }
  const Candidate* last = &others[k - 1];
  for (size_t i = k; i < others.size(); ++i) {
    if (others[i].cap >= remaining && tighter(others[i], *last)) last = &others[i];
  }
  plan.emplace_back(last->node, remaining);
  return plan;
}

}  // namespace corral::topology
