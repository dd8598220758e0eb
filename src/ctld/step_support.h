// What the controller keeps for the step managers of active jobs: the cluster key their
// step credentials derive from (wrapped per agent connection), each job's step manager
// address, MPI port share and step cpu time, and the pool of [steps] mpi-ports the shares
// come from. Guarded by the controller's lock, like the rest of its state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "ctld/config.h"
#include "job/port_range.h"
#include "util/result.h"

namespace corral::ctld {

// One job's part. The start and finish events carry it, so a restarted controller
// rebuilds it by replaying them.
struct JobSteps {
  std::string stepmgr;     // StepService address of the step manager (start event)
  std::string mpi_ports;   // the job's share of [steps] mpi-ports; "" = none (start event)
  double cpu_seconds = 0;  // sum of the node exits' cpu_seconds (finish event "cpu")
};

class StepSupport {
 public:
  explicit StepSupport(const StepsConfig& cfg) : cfg_(cfg) {}

  // Reads controller.key-file, creating it with a new key when missing.
  Status load_key(const std::string& key_file);
  // The job's step-credential key wrapped for one agent connection; empty without a
  // cluster key or session key (the error is logged).
  std::string wrapped_job_key(uint64_t jobid, const std::string& session_key, const std::string& agent_id) const;

  JobSteps& of(uint64_t jobid) { return jobs_[jobid]; }
  const JobSteps* find(uint64_t jobid) const;
  void erase(uint64_t jobid) { jobs_.erase(jobid); }

  // A share of the MPI ports for a starting job; empty ports without a pool, and with a
  // warning for the job's eventlog when the pool is used up (the job runs without).
  struct Share {
    std::string ports, warning;
  };
  Share take_share();
  // Gives the job's share back (at `free`); while replaying (no pool yet) only forgets it.
  void release_share(uint64_t jobid);
  // After replay: the configured range minus the shares of jobs not yet freed.
  void rebuild_pool();

 private:
  const StepsConfig& cfg_;
  std::string cluster_key_;
  std::unordered_map<uint64_t, JobSteps> jobs_;
  std::optional<job::PortPool> pool_;  // none without [steps] mpi-ports
};

}  // namespace corral::ctld
