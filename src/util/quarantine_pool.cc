#include "util/quarantine_pool.h"

#include <algorithm>

#include <fmt/format.h>

namespace corral {

Result<QuarantinePool> QuarantinePool::create(std::string_view idset, std::string_view what, std::string unit,
                                              uint32_t max_id) {
  max_id = std::min<uint32_t>(max_id, 65535);
  auto set = IdSet::parse(idset);
  if (!set) return invalid(fmt::format("{}: '{}': {}", what, idset, set.message()));
  if (set->empty()) return invalid(fmt::format("{}: the pool is empty", what));
  if (*set->last() > max_id)
    return invalid(fmt::format("{}: '{}': ids go up to {} (found {})", what, idset, max_id, *set->last()));
  return QuarantinePool(std::move(*set), std::move(unit));
}

size_t QuarantinePool::free_count() const { return pool_.count() - reserved_count() - quarantined_count(); }

size_t QuarantinePool::reserved_count() const {
  size_t n = 0;
  for (const auto& [id, ids] : reserved_)
    for (uint16_t v : ids) n += pool_.contains(v) ? 1 : 0;
  return n;
}

size_t QuarantinePool::quarantined_count() const {
  size_t n = 0;
  for (const auto& [id, q] : quarantined_)
    for (uint16_t v : q.ids) n += pool_.contains(v) ? 1 : 0;
  return n;
}

IdSet QuarantinePool::free_set() const {
  IdSet busy_set;
  for (const auto& [id, job] : owner_) busy_set.insert(id);
  return pool_.minus(busy_set);
}

// Takes the first `count` idle ids at or after the cursor, then wraps to the start.
std::vector<uint16_t> QuarantinePool::take_free(unsigned count) {
  std::vector<uint16_t> out;
  auto scan = [&](uint32_t lo, uint32_t hi) {
    for (const auto& [first, last] : pool_.ranges()) {
      for (uint32_t v = std::max(first, lo); v <= std::min(last, hi); ++v) {
        if (out.size() == count) return;
        if (!busy(v)) out.push_back(static_cast<uint16_t>(v));
      }
    }
  };
  scan(cursor_, 65535);
  if (cursor_ > 0) scan(0, cursor_ - 1);
  return out;
}

Result<std::vector<uint16_t>> QuarantinePool::reserve(uint64_t jobid, unsigned count) {
  if (reserved_.count(jobid) || quarantined_.count(jobid))
    return Error{Errc::already_exists, fmt::format("job {} already holds ids", jobid)};
  if (count == 0) return std::vector<uint16_t>{};
  const size_t nfree = free_count();
  if (nfree < count)
    return Error{Errc::unavailable, fmt::format("asked for {} {}{}, {} of {} free ({} reserved, {} waiting for "
                                                "cleanup)",
                                                count, unit_, count == 1 ? "" : "s", nfree, size(), reserved_count(),
                                                quarantined_count())};
  std::vector<uint16_t> ids = take_free(count);
  for (uint16_t v : ids) owner_[v] = jobid;
  cursor_ = static_cast<uint32_t>(ids.back()) + 1;
  reserved_[jobid] = ids;
  return ids;
}

Status QuarantinePool::claim(uint64_t jobid, const std::vector<uint16_t>& ids, double when) {
  if (reserved_.count(jobid) || quarantined_.count(jobid))
    return Error{Errc::already_exists, fmt::format("job {} already holds ids", jobid)};
  for (uint16_t v : ids) {
    auto it = owner_.find(v);
    if (it != owner_.end())
      return Error{Errc::already_exists,
                   fmt::format("{} {} of job {} is already held by job {}", unit_, v, jobid, it->second)};
  }
  for (uint16_t v : ids) owner_[v] = jobid;
  if (!ids.empty() && when >= restored_when_) {
    restored_when_ = when;
    cursor_ = static_cast<uint32_t>(ids.back()) + 1;
  }
  return {};
}

Status QuarantinePool::restore(uint64_t jobid, const std::vector<uint16_t>& ids, double when) {
  if (auto st = claim(jobid, ids, when); !st.ok()) return st;
  reserved_[jobid] = ids;
  return {};
}

Status QuarantinePool::restore_quarantine(uint64_t jobid, const std::vector<uint16_t>& ids,
                                          const std::set<std::string>& nodes, double when) {
  if (nodes.empty()) return {};
  if (auto st = claim(jobid, ids, when); !st.ok()) return st;
  quarantined_[jobid] = Quarantine{jobid, ids, nodes};
  return {};
}

std::vector<uint16_t> QuarantinePool::release(uint64_t jobid, const std::vector<std::string>& nodes) {
  auto it = reserved_.find(jobid);
  if (it == reserved_.end()) return {};
  std::vector<uint16_t> ids = std::move(it->second);
  reserved_.erase(it);
  if (nodes.empty()) {
    for (uint16_t v : ids) owner_.erase(v);
  } else {
    quarantined_[jobid] = Quarantine{jobid, ids, {nodes.begin(), nodes.end()}};
  }
  return ids;
}

bool QuarantinePool::confirm(uint64_t jobid, const std::string& node) {
  auto it = quarantined_.find(jobid);
  if (it == quarantined_.end() || !it->second.nodes.erase(node) || !it->second.nodes.empty()) return false;
  for (uint16_t v : it->second.ids) owner_.erase(v);
  quarantined_.erase(it);
  return true;
}

std::vector<uint64_t> QuarantinePool::confirm_node(const std::string& node) {
  std::vector<uint64_t> jobs;
  for (const auto& [id, q] : quarantined_)
    if (q.nodes.count(node)) jobs.push_back(id);
  for (uint64_t id : jobs) confirm(id, node);
  return jobs;
}

std::vector<QuarantinePool::Reservation> QuarantinePool::reservations() const {
  std::vector<Reservation> out;
  for (const auto& [id, ids] : reserved_) out.push_back({id, ids});
  return out;
}

std::vector<QuarantinePool::Quarantine> QuarantinePool::quarantines() const {
  std::vector<Quarantine> out;
  for (const auto& [id, q] : quarantined_) out.push_back(q);
  return out;
}

const std::vector<uint16_t>* QuarantinePool::reservation(uint64_t jobid) const {
  auto it = reserved_.find(jobid);
  return it == reserved_.end() ? nullptr : &it->second;
}

const QuarantinePool::Quarantine* QuarantinePool::quarantine(uint64_t jobid) const {
  auto it = quarantined_.find(jobid);
  return it == quarantined_.end() ? nullptr : &it->second;
}

}  // namespace corral
