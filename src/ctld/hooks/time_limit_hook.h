// Built-in hook: time limits. When a job's tasks have run for its duration it gets a
// fatal `timeout` exception; the core then signals the tasks (SIGTERM) and kills what
// remains after the configured grace period.
#pragma once

#include <memory>

#include "ctld/hook_names.h"

namespace corral::ctld {

class TimeLimitHook final : public JobHook {
 public:
  std::string_view name() const override { return "time-limit"; }
  void on_event(HookContext& ctx, const JobView& job, const job::Event& ev) override;
  void on_restart(HookContext& ctx, const JobView& job) override;

 private:
  void arm(HookContext& ctx, const JobView& job, double started);
};

}  // namespace corral::ctld
