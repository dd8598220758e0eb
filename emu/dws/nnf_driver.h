// What the DWS and NNF controllers of a Rabbit system do with workflows, as one emulated
// controller: copy spec.desiredState into status, then do the state's work and mark it
// achieved. Proposal: Computes, one DirectiveBreakdown and one Servers per storage
// directive (capacities as NNF computes them). Setup: check the Servers allocations the
// workload manager wrote against the breakdowns and create each file system (a directory
// under --mount-root). DataIn/DataOut: copy_in/copy_out as the workflow's user. PreRun: a
// ClientMount per compute and directive, achieved when the computes' mount daemons
// (clientmountd) report them mounted, then status.env. PostRun: unmount. Teardown: free.
// Deletion waits until DWS's finalizer is the last one. Faults (faults.h) are applied
// before a state's work.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "crd_catalog.h"
#include "faults.h"
#include "object_store.h"

namespace corral::emu::dws {

struct DriverConfig {
  std::string mount_root;                   // file systems and their compute mount points
  uint64_t padding = 300ULL << 20;          // added to every allocation, as NNF's default profile
  std::vector<std::string> global_fs{"/"};  // where copy_in/copy_out may read and write
};

class NnfDriver {
 public:
  NnfDriver(ObjectStore& store, const CrdCatalog& catalog, FaultTable& faults, DriverConfig cfg);
  ~NnfDriver();
  NnfDriver(const NnfDriver&) = delete;
  NnfDriver& operator=(const NnfDriver&) = delete;

  // Reconciles every existing workflow, then follows changes.
  void start();
  // Reconsider a workflow soon (a fault changed, say).
  void poke_all();

 private:
  using Clock = std::chrono::steady_clock;
  enum class Work { done, wait, failed };
  struct Outcome {
    Work work = Work::done;
    std::string status;   // for failed: Error or TransientCondition
    std::string message;  // "DW Directive 0: User error: ..."
    std::string error;    // the driver's debug text
  };

  void loop();
  void enqueue(const std::string& key, Clock::time_point when);
  void reconcile(const std::string& ns, const std::string& name);
  void finish_deletion(const nlohmann::json& wf);
  void begin_state(const nlohmann::json& wf);
  Outcome run_state(const nlohmann::json& wf, const std::string& state);
  Outcome proposal(const nlohmann::json& wf);
  Outcome setup(const nlohmann::json& wf);
  Outcome copy(const nlohmann::json& wf, const std::string& command);
  Outcome prerun(const nlohmann::json& wf);
  Outcome postrun(const nlohmann::json& wf);
  Outcome teardown(const nlohmann::json& wf);
  void mark(const nlohmann::json& wf, const std::string& state, const Outcome& o);
  void ensure_object(const KindInfo& k, const std::string& ns, nlohmann::json obj);
  std::vector<ObjectPtr> mounts_of(const nlohmann::json& wf) const;
  std::string fs_path(const nlohmann::json& wf, size_t index) const;

  ObjectStore& store_;
  const CrdCatalog& catalog_;
  FaultTable& faults_;
  DriverConfig cfg_;
  const KindInfo *wf_kind_, *computes_kind_, *dbd_kind_, *servers_kind_, *mount_kind_, *storage_kind_, *psi_kind_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::multimap<Clock::time_point, std::string> queue_;
  std::set<std::string> queued_now_;                      // keys due now (dedup)
  std::map<std::string, Clock::time_point> state_began_;  // workflow -> when its state began here
  std::map<std::string, int> copies_;                     // workflow/state -> pid of its data movement
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace corral::emu::dws
