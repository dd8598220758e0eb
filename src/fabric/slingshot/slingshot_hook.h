// The cray-slingshot controller hook (docs/admin.md, "Slingshot"): reserves a job's VNIs
// when it is allocated, has `corral-slingshot prolog` create its CXI services before it
// starts, and at CLEANUP destroys them (epilog, then housekeeping on nodes where they are
// still busy). A released VNI stays quarantined until every node of the job confirmed its
// services are gone; a node that cannot is drained and keeps the VNIs out of the pool
// until an admin cleans or resumes it. The pool is rebuilt after a restart from the
// jobs' `cray-slingshot` events and the quarantines saved with save_state.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fabric/slingshot/slingshot_config.h"
#include "fabric/slingshot/vni_pool.h"
#include "hook/hook.h"
#include "hook/settings.h"

namespace corral::fabric::slingshot {

// The controller half from its [slingshot] section: nullptr when `enabled` is false.
// corral-slingshot beside corrald unless `command` says otherwise.
Result<std::unique_ptr<hook::JobHook>> make_slingshot_hook(const hook::Settings& settings,
                                                           const hook::HookSetup& setup);

class SlingshotHook final : public hook::JobHook {
 public:
  // `cfg.command` must be set (corrald resolves the default). Fails on a bad vni-pool.
  static Result<std::unique_ptr<SlingshotHook>> create(SlingshotConfig cfg);

  std::string_view name() const override { return "cray-slingshot"; }
  Status validate(hook::HookContext&, const job::Jobspec& spec, uint32_t userid) override;
  void on_event(hook::HookContext& ctx, const hook::JobView& job, const job::Event& ev) override;
  void on_restart(hook::HookContext& ctx, const hook::JobView& job) override;
  void on_perilog(hook::HookContext& ctx, const hook::JobView& job, const hook::PerilogOutcome& o) override;
  void on_perilog_inactive(hook::HookContext& ctx, uint64_t jobid, const hook::PerilogOutcome& o) override;
  void on_load(hook::HookContext& ctx, const hook::SavedState& saved) override;
  void on_node_resume(hook::HookContext& ctx, const std::string& node) override;
  Result<std::string> query(hook::HookContext& ctx, const hook::HookQuery& q) override;

  const VniPool& pool() const { return pool_; }

 private:
  SlingshotHook(SlingshotConfig cfg, VniPool pool) : cfg_(std::move(cfg)), pool_(std::move(pool)) {}

  void on_alloc(hook::HookContext& ctx, const hook::JobView& job);
  void start_prolog(hook::HookContext& ctx, const hook::JobView& job, const std::vector<uint16_t>& vnis);
  void on_release(hook::HookContext& ctx, const hook::JobView& job);
  void prolog_result(hook::HookContext& ctx, const hook::JobView& job, const hook::PerilogOutcome& o);
  // Epilog / housekeeping / clean results: the same whether the job is still active.
  void cleanup_result(hook::HookContext& ctx, uint64_t jobid, const hook::PerilogOutcome& o);
  void run_housekeeping(hook::HookContext& ctx, uint64_t jobid, const std::vector<std::string>& nodes);
  void confirmed(hook::HookContext& ctx, uint64_t jobid, const std::string& node);
  void confirmed_node(hook::HookContext& ctx, const std::string& node);
  void save_quarantine(hook::HookContext& ctx, uint64_t jobid);
  void warn(hook::HookContext& ctx, uint64_t jobid, const std::string& node, const std::string& message, bool note);

  Result<std::string> query_pool() const;
  Result<std::string> query_clean(hook::HookContext& ctx, const hook::HookQuery& q);

  struct PrologRun {
    std::set<std::string> pending;
    std::vector<std::string> failures;
  };

  SlingshotConfig cfg_;
  VniPool pool_;
  std::map<uint64_t, PrologRun> prologs_;
  std::set<uint64_t> restored_;        // jobs whose quarantine came from saved state
  std::map<uint64_t, uint32_t> uids_;  // owners of quarantined jobs (for housekeeping)
};

}  // namespace corral::fabric::slingshot
