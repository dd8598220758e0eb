// The infiniband controller hook (docs/admin.md, "Infiniband"): learns each node's devices
// from its agent's report (fabrics mapped from port subnet prefixes), tells the scheduler
// which nodes offer what a job's --ib asks (node properties), refuses at submit what no
// node class can give, and for an allocated job reserves its partition key (partition=job,
// from the pool) and its virtual functions' GUIDs, has corral-infiniband configure every
// node before the job starts and undo it after. Keys and GUIDs stay quarantined until
// every node confirmed the undo; a node that cannot is drained. The reservations survive
// a restart: from the job's `infiniband` event, and for jobs gone, from save_state.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fabric/infiniband/ib_capabilities.h"
#include "fabric/infiniband/ib_config.h"
#include "fabric/infiniband/ib_device.h"
#include "fabric/infiniband/ib_hook_members.h"
#include "fabric/infiniband/ib_request.h"
#include "fabric/infiniband/subnet_manager.h"
#include "hook/hook.h"
#include "util/quarantine_pool.h"
#include "util/serial_worker.h"

namespace corral::fabric::infiniband {

Result<std::unique_ptr<hook::JobHook>> make_ib_hook(const hook::Settings& settings, const hook::HookSetup& setup);

class IbHook final : public hook::JobHook {
 public:
  static Result<std::unique_ptr<IbHook>> create(IbConfig cfg);
  ~IbHook() override;

  std::string_view name() const override { return "infiniband"; }
  void attach(hook::HookRunner& runner) override;
  void stop() override;
  Status validate(hook::HookContext&, const job::Jobspec& spec, uint32_t userid) override;
  Status required_properties(const job::Jobspec& spec, std::vector<std::string>& out) const override;
  void node_properties(hook::HookContext&, const std::string& node, const std::map<std::string, std::string>& hardware,
                       std::vector<std::string>& out) override;
  void on_event(hook::HookContext& ctx, const hook::JobView& job, const job::Event& ev) override;
  void on_restart(hook::HookContext& ctx, const hook::JobView& job) override;
  void on_perilog(hook::HookContext& ctx, const hook::JobView& job, const hook::PerilogOutcome& o) override;
  void on_perilog_inactive(hook::HookContext& ctx, uint64_t jobid, const hook::PerilogOutcome& o) override;
  void on_load(hook::HookContext& ctx, const hook::SavedState& saved) override;
  void on_node_resume(hook::HookContext& ctx, const std::string& node) override;
  void describe_job(const hook::JobView& job, std::map<std::string, std::string>& out) const override;
  Result<std::string> query(hook::HookContext& ctx, const hook::HookQuery& q) override;

 private:
  IbHook(IbConfig cfg, Fabrics fabrics, std::optional<QuarantinePool> pkeys, std::unique_ptr<SubnetManager> sm)
      : cfg_(std::move(cfg)), fabrics_(std::move(fabrics)), pkeys_(std::move(pkeys)), sm_(std::move(sm)) {}

  using Members = PkeyMembers;

  // A job's requests with the default fabric filled in; empty when it asks for none.
  Result<std::vector<IbRequest>> requests_of(const job::Jobspec& spec) const;
  bool partition_known(const std::string& name) const;
  void on_alloc(hook::HookContext& ctx, const hook::JobView& job);
  void start_prolog(hook::HookContext& ctx, const hook::JobView& job, const std::vector<IbRequest>& reqs);
  void prolog_result(hook::HookContext& ctx, const hook::JobView& job, const hook::PerilogOutcome& o);
  void on_release(hook::HookContext& ctx, const hook::JobView& job);
  void epilog_result(hook::HookContext& ctx, uint64_t jobid, const hook::PerilogOutcome& o);
  void confirm(hook::HookContext& ctx, uint64_t jobid, const std::string& node);
  void save_held(hook::HookContext& ctx, uint64_t jobid);

  // ib_hook_subnet.cc: partition membership through the subnet manager, off the lock.
  void join_members(hook::HookContext& ctx, const hook::JobView& job, Members members);
  void joined(hook::HookContext& ctx, uint64_t jobid, const Status& st);
  void leave_members(hook::HookContext& ctx, uint64_t jobid, double retry_in = 1);
  struct LeaveStep {
    uint16_t pkey = 0;
    std::vector<std::string> guids;
    bool drop = false;  // the job's own key: the partition goes whole
  };
  // What to take out of each key when `jobid` ends: a job's own key goes whole; from a
  // named one, the GUIDs no other running job still has in it.
  std::vector<LeaveStep> leave_plan(uint64_t jobid) const;
  void left(hook::HookContext& ctx, uint64_t jobid, const Status& st, double retry_in);
  void back(std::function<void(hook::HookContext&)> fn);
  // First fit in the GUID pool; false when no run of `count` is free.
  bool take_guids(uint64_t jobid, uint64_t count);
  void set_devices(const std::string& node, std::vector<IbDevice> devices);
  std::map<std::string, std::vector<IbCapability>> capabilities_by_node() const;
  Result<std::string> query_classes() const;
  Result<std::string> query_pool() const;
  Result<std::string> query_capabilities() const;

  struct Held {
    // A run of the GUID pool: the job's N-th node (in R's order) has the N-th share.
    uint64_t guid_offset = 0, guid_count = 0;
    std::set<std::string> pending;  // nodes still to confirm the undo (after release)
    bool released = false;
    Members members;  // joined through the subnet manager (after the prolog)
  };
  struct PrologRun {
    std::set<std::string> pending;
    std::vector<std::string> failures;
    Members members;  // from each node's document
  };

  IbConfig cfg_;
  Fabrics fabrics_;
  std::map<std::string, uint16_t> named_;  // partition name -> key
  std::optional<QuarantinePool> pkeys_;    // partition=job keys; none without pkey-pool
  std::unique_ptr<SubnetManager> sm_;      // none for subnet-manager = "none"
  hook::HookRunner* runner_ = nullptr;
  std::unique_ptr<SerialWorker> worker_;  // the subnet manager's calls, in order
  std::string sm_error_;                  // its last failure, for `corral ib pool`
  std::map<uint64_t, Held> held_;         // by job
  std::map<uint64_t, PrologRun> prologs_;
  std::map<std::string, std::vector<IbDevice>> devices_;  // node -> its devices (last report)
  // Nodes by their capabilities (as JSON): submit checks one node of each kind, not every node.
  std::map<std::string, std::string> kind_of_;                  // node -> its capabilities
  std::map<std::string, std::set<std::string>> nodes_of_kind_;  // capabilities -> nodes
};

}  // namespace corral::fabric::infiniband
