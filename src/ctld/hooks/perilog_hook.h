// Built-in hook: the site's job prolog and epilog, run as root on every node of the job.
// The prolog holds the job's start (prolog-start/finish "job-prolog"); a failure or a
// timeout drains the node and raises a fatal `prolog` exception. The epilog holds the
// job's release after its tasks end; a failure drains the node and raises a non-fatal
// `epilog` exception.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "ctld/hook_names.h"

namespace corral::ctld {

struct PerilogConfig {
  std::string prolog, epilog;
  double prolog_timeout = 300, epilog_timeout = 300;
};

class PerilogHook final : public JobHook {
 public:
  explicit PerilogHook(PerilogConfig cfg) : cfg_(std::move(cfg)) {}
  std::string_view name() const override { return "perilog"; }
  void on_event(HookContext& ctx, const JobView& job, const job::Event& ev) override;
  void on_restart(HookContext& ctx, const JobView& job) override;
  void on_perilog(HookContext& ctx, const JobView& job, const PerilogOutcome& o) override;

 private:
  struct Run {
    std::set<std::string> pending;
    std::vector<std::string> failures;
  };
  void launch(HookContext& ctx, const JobView& job, const std::string& kind, bool post_start);

  PerilogConfig cfg_;
  std::map<std::pair<uint64_t, std::string>, Run> runs_;
};

}  // namespace corral::ctld
