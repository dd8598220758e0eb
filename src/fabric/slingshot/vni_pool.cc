#include "fabric/slingshot/vni_pool.h"

#include <algorithm>

#include <fmt/format.h>

namespace corral::fabric::slingshot {

namespace {

constexpr uint32_t kMaxVni = 65535;

}  // namespace

Result<VniPool> VniPool::create(std::string_view idset) {
  auto set = IdSet::parse(idset);
  if (!set) return invalid(fmt::format("vni-pool: '{}': {}", idset, set.message()));
  if (set->empty()) return invalid("vni-pool: the pool is empty");
  if (*set->last() > kMaxVni)
    return invalid(fmt::format("vni-pool: '{}': VNIs go up to {} (found {})", idset, kMaxVni, *set->last()));
  if (set->contains(1) || set->contains(10))
    return invalid("vni-pool: VNIs 1 and 10 are the default service's and cannot be in the pool");
  return VniPool(std::move(*set));
}

size_t VniPool::free_count() const { return pool_.count() - reserved_count() - quarantined_count(); }

size_t VniPool::reserved_count() const {
  size_t n = 0;
  for (const auto& [id, vnis] : reserved_)
    for (uint16_t v : vnis) n += pool_.contains(v) ? 1 : 0;
  return n;
}

size_t VniPool::quarantined_count() const {
  size_t n = 0;
  for (const auto& [id, q] : quarantined_)
    for (uint16_t v : q.vnis) n += pool_.contains(v) ? 1 : 0;
  return n;
}

IdSet VniPool::free_set() const {
  IdSet busy_set;
  for (const auto& [vni, job] : owner_) busy_set.insert(vni);
  return pool_.minus(busy_set);
}

// Takes the first `count` idle VNIs at or after the cursor, then wraps to the start.
std::vector<uint16_t> VniPool::take_free(unsigned count) {
  std::vector<uint16_t> out;
  auto scan = [&](uint32_t lo, uint32_t hi) {
    for (const auto& [first, last] : pool_.ranges()) {
      for (uint32_t v = std::max(first, lo); v <= std::min(last, hi); ++v) {
        if (out.size() == count) return;
        if (!busy(v)) out.push_back(static_cast<uint16_t>(v));
      }
    }
  };
  scan(cursor_, kMaxVni);
  if (cursor_ > 0) scan(0, cursor_ - 1);
  return out;
}

Result<std::vector<uint16_t>> VniPool::reserve(uint64_t jobid, unsigned count) {
  if (reserved_.count(jobid) || quarantined_.count(jobid))
    return Error{Errc::already_exists, fmt::format("job {} already holds VNIs", jobid)};
  if (count == 0) return std::vector<uint16_t>{};
  const size_t nfree = free_count();
  if (nfree < count)
    return Error{Errc::unavailable,
                 fmt::format("asked for {} VNI{}, {} of {} free ({} reserved, {} waiting for "
                             "cleanup)",
                             count, count == 1 ? "" : "s", nfree, size(), reserved_count(), quarantined_count())};
  std::vector<uint16_t> vnis = take_free(count);
  for (uint16_t v : vnis) owner_[v] = jobid;
  cursor_ = static_cast<uint32_t>(vnis.back()) + 1;
  reserved_[jobid] = vnis;
  return vnis;
}

Status VniPool::claim(uint64_t jobid, const std::vector<uint16_t>& vnis, double when) {
  if (reserved_.count(jobid) || quarantined_.count(jobid))
    return Error{Errc::already_exists, fmt::format("job {} already holds VNIs", jobid)};
  for (uint16_t v : vnis) {
    auto it = owner_.find(v);
    if (it != owner_.end())
      return Error{Errc::already_exists,
                   fmt::format("VNI {} of job {} is already held by job {}", v, jobid, it->second)};
  }
  for (uint16_t v : vnis) owner_[v] = jobid;
  if (!vnis.empty() && when >= restored_when_) {
    restored_when_ = when;
    cursor_ = static_cast<uint32_t>(vnis.back()) + 1;
  }
  return {};
}

Status VniPool::restore(uint64_t jobid, const std::vector<uint16_t>& vnis, double when) {
  if (auto st = claim(jobid, vnis, when); !st.ok()) return st;
  reserved_[jobid] = vnis;
  return {};
}

Status VniPool::restore_quarantine(uint64_t jobid, const std::vector<uint16_t>& vnis,
                                   const std::set<std::string>& nodes, double when) {
  if (nodes.empty()) return {};
  if (auto st = claim(jobid, vnis, when); !st.ok()) return st;
  quarantined_[jobid] = Quarantine{jobid, vnis, nodes};
  return {};
}

std::vector<uint16_t> VniPool::release(uint64_t jobid, const std::vector<std::string>& nodes) {
  auto it = reserved_.find(jobid);
  if (it == reserved_.end()) return {};
  std::vector<uint16_t> vnis = std::move(it->second);
  reserved_.erase(it);
  if (nodes.empty()) {
    for (uint16_t v : vnis) owner_.erase(v);
  } else {
    quarantined_[jobid] = Quarantine{jobid, vnis, {nodes.begin(), nodes.end()}};
  }
  return vnis;
}

bool VniPool::confirm(uint64_t jobid, const std::string& node) {
  auto it = quarantined_.find(jobid);
  if (it == quarantined_.end() || !it->second.nodes.erase(node) || !it->second.nodes.empty()) return false;
  for (uint16_t v : it->second.vnis) owner_.erase(v);
  quarantined_.erase(it);
  return true;
}

std::vector<uint64_t> VniPool::confirm_node(const std::string& node) {
  std::vector<uint64_t> jobs;
  for (const auto& [id, q] : quarantined_)
    if (q.nodes.count(node)) jobs.push_back(id);
  for (uint64_t id : jobs) confirm(id, node);
  return jobs;
}

std::vector<VniPool::Reservation> VniPool::reservations() const {
  std::vector<Reservation> out;
  for (const auto& [id, vnis] : reserved_) out.push_back({id, vnis});
  return out;
}

std::vector<VniPool::Quarantine> VniPool::quarantines() const {
  std::vector<Quarantine> out;
  for (const auto& [id, q] : quarantined_) out.push_back(q);
  return out;
}

const std::vector<uint16_t>* VniPool::reservation(uint64_t jobid) const {
  auto it = reserved_.find(jobid);
  return it == reserved_.end() ? nullptr : &it->second;
}

const VniPool::Quarantine* VniPool::quarantine(uint64_t jobid) const {
  auto it = quarantined_.find(jobid);
  return it == quarantined_.end() ? nullptr : &it->second;
}

}  // namespace corral::fabric::slingshot
