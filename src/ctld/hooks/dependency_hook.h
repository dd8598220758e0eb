// Built-in hook: job dependencies (RFC 26: after, afterany, afterok, afternotok,
// begin-time; singleton). Holds a job in DEPEND with dependency-add until the
// condition is met, or raises a `dependency` exception when it never can be.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "ctld/hook_names.h"
#include "job/dependency.h"

namespace corral::ctld {

class DependencyHook final : public JobHook {
 public:
  std::string_view name() const override { return "dependency"; }
  Status validate(HookContext& ctx, const job::Jobspec& spec, uint32_t userid) override;
  void on_event(HookContext& ctx, const JobView& job, const job::Event& ev) override;
  void on_restart(HookContext& ctx, const JobView& job) override;

 private:
  struct Waiter {
    uint64_t jobid;
    job::Dependency dep;
  };
  void arm(HookContext& ctx, uint64_t jobid, const job::Dependency& dep, bool add);
  void target_changed(HookContext& ctx, uint64_t target, const JobView* rec, const std::string& event);
  void resolve(HookContext& ctx, const Waiter& w, bool satisfied, const std::string& why);

  std::map<uint64_t, std::vector<Waiter>> waiting_;  // target job -> dependents
};

std::unique_ptr<JobHook> make_dependency_hook();

}  // namespace corral::ctld
