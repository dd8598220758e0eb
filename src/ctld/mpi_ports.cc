// MPI port shares: the controller owns [steps] mpi-ports and gives each starting job a
// contiguous share for its step manager to split among steps. The share is recorded in
// the job's start event and returned at `free`, so replaying the active jobs' eventlogs
// tells which shares are out.
#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "ctld/controller.h"

namespace corral::ctld {

std::string Controller::take_mpi_share(const JobRecord& job) {
  if (!mpi_pool_) return "";
  auto share = mpi_pool_->split(cfg_.steps.mpi_ports_per_job);
  if (share) return share->encode();
  // Running without ports beats not running: only MPIs that need fixed ports suffer.
  auto why = fmt::format(
      "no MPI ports left in steps.mpi-ports {} ({} free, {} per job): the "
      "job runs without CORRAL_MPI_PORTS",
      cfg_.steps.mpi_ports, mpi_pool_->free_count(), cfg_.steps.mpi_ports_per_job);
  spdlog::warn("job {}: {}", job.id, why);
  post(job.id, job::make_event("mpi-ports", nlohmann::json{{"warning", why}}.dump()));
  return "";
}

void Controller::release_mpi_share(uint64_t jobid) {
  auto it = job_steps_.find(jobid);
  if (it == job_steps_.end() || it->second.mpi_ports.empty()) return;
  std::string share = std::exchange(it->second.mpi_ports, "");
  if (!mpi_pool_) return;  // replaying: the pool is built from what is still out
  auto range = job::PortRange::parse(share);
  Status st = range ? mpi_pool_->release(*range) : Status(range.error());
  // A share outside today's range (the configuration changed) has nowhere to go back to.
  if (!st.ok()) spdlog::warn("job {}: MPI ports {} not returned: {}", jobid, share, st.message());
}

// After replay: the configured range minus the shares of jobs not yet freed.
void Controller::rebuild_mpi_pool() {
  if (cfg_.steps.mpi_ports.empty()) return;
  auto whole = job::PortRange::parse(cfg_.steps.mpi_ports);
  if (!whole) return;  // load_config checked it
  std::vector<job::PortRange> out;
  for (const auto& [id, js] : job_steps_) {
    if (js.mpi_ports.empty()) continue;
    auto r = job::PortRange::parse(js.mpi_ports);
    if (!r) continue;
    job::PortRange clipped{std::max(r->first, whole->first), std::min(r->last, whole->last)};
    if (clipped.first <= clipped.last) out.push_back(clipped);
  }
  mpi_pool_.emplace(*whole);
  if (out.empty()) return;
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  // The pool can only split first-fit and take shares back: take everything, then return
  // the gaps between the shares still out.
  (void)mpi_pool_->split(whole->size());
  uint32_t next = whole->first;
  for (const auto& r : out) {
    if (r.first > next) (void)mpi_pool_->release({static_cast<uint16_t>(next), static_cast<uint16_t>(r.first - 1)});
    next = std::max<uint32_t>(next, uint32_t{r.last} + 1);
  }
  if (next <= whole->last) (void)mpi_pool_->release({static_cast<uint16_t>(next), whole->last});
  spdlog::info("MPI ports: {} share(s) of running jobs restored, {} of {} ports free", out.size(),
               mpi_pool_->free_count(), whole->size());
}

}  // namespace corral::ctld
