#include "sched/resource_pool.h"

#include <algorithm>

namespace corral::sched {

uint32_t ResourcePool::add_node(const NodeConfig& cfg) {
  auto node = static_cast<uint32_t>(configs_.size());
  configs_.push_back(cfg);
  topology::NodeState st;
  st.cores = cfg.cores;
  st.gpus = cfg.gpus;
  st.memory_mb = cfg.memory_mb;
  if (cfg.cores > 0) st.free_cores = IdSet::range(0, cfg.cores - 1);
  if (cfg.gpus > 0) st.free_gpus = IdSet::range(0, cfg.gpus - 1);
  st.free_memory_mb = cfg.memory_mb;
  st.usable = true;
  states_.push_back(std::move(st));
  by_name_.emplace(cfg.name, node);
  index_.update(node, states_.back());
  for (topology::Placer* w : watchers_) w->node_added(node, cfg.name, states_.back());
  return node;
}

void ResourcePool::add_watcher(topology::Placer* placer) {
  watchers_.push_back(placer);
  for (uint32_t n = 0; n < states_.size(); ++n) placer->node_added(n, configs_[n].name, states_[n]);
}

void ResourcePool::changed(uint32_t node) {
  index_.update(node, states_[node]);
  for (topology::Placer* w : watchers_) w->node_changed(node, states_[node]);
}

std::optional<uint32_t> ResourcePool::find(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

void ResourcePool::set_usable(uint32_t node, bool usable) {
  topology::NodeState& st = states_.at(node);
  if (st.usable == usable) return;
  st.usable = usable;
  changed(node);
}

topology::NodeShare ResourcePool::take(const topology::NodeShare& want, bool exclusive) {
  topology::NodeState& st = states_[want.node];
  topology::NodeShare got;
  got.node = want.node;
  got.ntasks = want.ntasks;
  got.cores = want.cores.intersect(st.free_cores);
  got.gpus = want.gpus.intersect(st.free_gpus);
  got.memory_mb = std::min(want.memory_mb, st.free_memory_mb);
  st.free_cores = st.free_cores.minus(got.cores);
  st.free_gpus = st.free_gpus.minus(got.gpus);
  st.free_memory_mb -= got.memory_mb;
  ++st.jobs;
  if (exclusive) st.exclusive_held = true;
  changed(want.node);
  return got;
}

void ResourcePool::give(const topology::NodeShare& share, bool exclusive) {
  topology::NodeState& st = states_[share.node];
  st.free_cores = st.free_cores.union_with(share.cores);
  st.free_gpus = st.free_gpus.union_with(share.gpus);
  st.free_memory_mb = std::min(st.memory_mb, st.free_memory_mb + share.memory_mb);
  if (st.jobs > 0) --st.jobs;
  if (exclusive) st.exclusive_held = false;
  changed(share.node);
}

void ResourcePool::allocate(uint64_t jobid, const topology::Allocation& alloc, double end_time) {
  release(jobid);  // allocating again replaces, never doubles
  Running job;
  job.end_time = end_time;
  job.exclusive = alloc.exclusive;
  for (const topology::NodeShare& share : alloc.shares) {
    if (share.node >= states_.size()) continue;  // a node that no longer exists
    job.shares.push_back(take(share, alloc.exclusive));
  }
  std::sort(job.shares.begin(), job.shares.end(), [](const auto& a, const auto& b) { return a.node < b.node; });
  if (end_time > 0) job.end_entry = ends_.emplace(end_time, jobid);
  running_.emplace(jobid, std::move(job));
}

void ResourcePool::release_node(uint64_t jobid, uint32_t node) {
  auto it = running_.find(jobid);
  if (it == running_.end()) return;
  Running& job = it->second;
  auto share = std::find_if(job.shares.begin(), job.shares.end(), [&](const auto& s) { return s.node == node; });
  if (share == job.shares.end()) return;
  give(*share, job.exclusive);
  job.shares.erase(share);
  if (job.shares.empty()) release(jobid);
}

void ResourcePool::release(uint64_t jobid) {
  auto it = running_.find(jobid);
  if (it == running_.end()) return;
  Running& job = it->second;
  for (const auto& share : job.shares) give(share, job.exclusive);
  if (job.end_time > 0) ends_.erase(job.end_entry);
  running_.erase(it);
}

void ResourcePool::lend(const Running& job) {
  for (const auto& share : job.shares) give(share, job.exclusive);
}

void ResourcePool::unlend(const Running& job) {
  for (const auto& share : job.shares) take(share, job.exclusive);
}

}  // namespace corral::sched
