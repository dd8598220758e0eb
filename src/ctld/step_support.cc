// The cluster key and per-job step data. MPI port shares: the controller owns [steps]
// mpi-ports and gives each starting job a contiguous share for its step manager to split
// among steps. The share is recorded in the job's start event and returned at `free`, so
// replaying the active jobs' eventlogs tells which shares are out.
#include "ctld/step_support.h"

#include <algorithm>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "ctld/cluster_key.h"
#include "job/key_wrap.h"
#include "job/step_cred.h"

namespace corral::ctld {

Status StepSupport::load_key(const std::string& key_file) {
  auto key = load_or_create_key_file(key_file);
  if (!key) return Error{key.error().code, "controller.key-file: " + key.message()};
  cluster_key_ = std::move(*key);
  return {};
}

std::string StepSupport::wrapped_job_key(uint64_t jobid, const std::string& session_key,
                                         const std::string& agent_id) const {
  if (cluster_key_.empty() || session_key.empty()) return {};
  auto wrapped = job::wrap_key(session_key, job::derive_job_key(cluster_key_, jobid));
  if (!wrapped) spdlog::error("job {}: cannot wrap its key for agent {}: {}", jobid, agent_id, wrapped.message());
  return wrapped ? *wrapped : std::string();
}

const JobSteps* StepSupport::find(uint64_t jobid) const {
  auto it = jobs_.find(jobid);
  return it == jobs_.end() ? nullptr : &it->second;
}

StepSupport::Share StepSupport::take_share() {
  if (!pool_) return {};
  if (auto share = pool_->split(cfg_.mpi_ports_per_job)) return {share->encode(), {}};
  // Running without ports beats not running: only MPIs that need fixed ports suffer.
  return {{},
          fmt::format("no MPI ports left in steps.mpi-ports {} ({} free, {} per job): the job runs without "
                      "CORRAL_MPI_PORTS",
                      cfg_.mpi_ports, pool_->free_count(), cfg_.mpi_ports_per_job)};
}

void StepSupport::release_share(uint64_t jobid) {
  auto it = jobs_.find(jobid);
  if (it == jobs_.end() || it->second.mpi_ports.empty()) return;
  std::string share = std::exchange(it->second.mpi_ports, "");
  if (!pool_) return;  // replaying: the pool is built from what is still out
  auto range = job::PortRange::parse(share);
  Status st = range ? pool_->release(*range) : Status(range.error());
  // A share outside today's range (the configuration changed) has nowhere to go back to.
  if (!st.ok()) spdlog::warn("job {}: MPI ports {} not returned: {}", jobid, share, st.message());
}

void StepSupport::rebuild_pool() {
  if (cfg_.mpi_ports.empty()) return;
  auto whole = job::PortRange::parse(cfg_.mpi_ports);
  if (!whole) return;  // load_config checked it
  std::vector<job::PortRange> out;
  for (const auto& [id, js] : jobs_) {
    if (js.mpi_ports.empty()) continue;
    auto r = job::PortRange::parse(js.mpi_ports);
    if (!r) continue;
    job::PortRange clipped{std::max(r->first, whole->first), std::min(r->last, whole->last)};
    if (clipped.first <= clipped.last) out.push_back(clipped);
  }
  pool_.emplace(*whole);
  if (out.empty()) return;
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  // The pool can only split first-fit and take shares back: take everything, then return
  // the gaps between the shares still out.
  (void)pool_->split(whole->size());
  uint32_t next = whole->first;
  for (const auto& r : out) {
    if (r.first > next) (void)pool_->release({static_cast<uint16_t>(next), static_cast<uint16_t>(r.first - 1)});
    next = std::max<uint32_t>(next, uint32_t{r.last} + 1);
  }
  if (next <= whole->last) (void)pool_->release({static_cast<uint16_t>(next), whole->last});
  spdlog::info("MPI ports: {} share(s) of running jobs restored, {} of {} ports free", out.size(), pool_->free_count(),
               whole->size());
}

}  // namespace corral::ctld
