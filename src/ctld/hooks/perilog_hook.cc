#include "ctld/hooks/perilog_hook.h"

#include <sys/wait.h>

#include <fmt/format.h>

namespace corral::ctld {

namespace {

const char* kProlog = "job-prolog";
const char* kEpilog = "job-epilog";

std::string describe_status(const PerilogOutcome& o, double timeout) {
  if (o.timed_out) return fmt::format("timed out after {}s", timeout);
  if (WIFEXITED(o.waitstatus)) return fmt::format("exit {}", WEXITSTATUS(o.waitstatus));
  if (WIFSIGNALED(o.waitstatus)) return fmt::format("killed by signal {}", WTERMSIG(o.waitstatus));
  return fmt::format("wait status {}", o.waitstatus);
}

std::string last_line(const std::string& out) {
  auto end = out.find_last_not_of("\n ");
  if (end == std::string::npos) return "";
  auto start = out.rfind('\n', end);
  return out.substr(start == std::string::npos ? 0 : start + 1, end + 1 - (start + 1));
}

}  // namespace

void PerilogHook::launch(HookContext& ctx, const JobView& job, const std::string& kind, bool post_start) {
  const bool prolog = kind == "prolog";
  const std::string& cmd = prolog ? cfg_.prolog : cfg_.epilog;
  if (cmd.empty() || !job.R) return;
  std::vector<std::string> nodes;
  for (const auto& n : job.R->nodes) nodes.push_back(n.name);
  Run& run = runs_[{job.id, kind}];
  run.pending.insert(nodes.begin(), nodes.end());
  run.failures.clear();
  if (post_start) {
    if (prolog)
      ctx.prolog_start(job.id, kProlog);
    else
      ctx.epilog_start(job.id, kEpilog);
  }
  std::map<std::string, std::string> env{
      {"CORRAL_JOB_USERID", std::to_string(job.userid)},
      {"CORRAL_JOB_NODELIST", job.R->nodelist()},
      {"CORRAL_JOB_NAME", job.spec->name},
  };
  ctx.run_on_nodes(job.id, kind, cmd, prolog ? cfg_.prolog_timeout : cfg_.epilog_timeout, nodes, env);
}

void PerilogHook::on_event(HookContext& ctx, const JobView& job, const job::Event& ev) {
  if (ev.name == "alloc")
    launch(ctx, job, "prolog", true);
  else if (ev.name == "release")
    launch(ctx, job, "epilog", true);
}

// A restart lost the running scripts' outcomes: run them again.
void PerilogHook::on_restart(HookContext& ctx, const JobView& job) {
  if (job.status.prolog_actions.count(kProlog)) launch(ctx, job, "prolog", false);
  if (job.status.epilog_actions.count(kEpilog)) launch(ctx, job, "epilog", false);
}

void PerilogHook::on_perilog(HookContext& ctx, const JobView& job, const PerilogOutcome& o) {
  auto it = runs_.find({job.id, o.kind});
  if (it == runs_.end() || !it->second.pending.erase(o.node)) return;
  const bool prolog = o.kind == "prolog";
  Run& run = it->second;
  if (o.waitstatus != 0 || o.timed_out) {
    std::string what = describe_status(o, prolog ? cfg_.prolog_timeout : cfg_.epilog_timeout);
    std::string line = last_line(o.output);
    run.failures.push_back(fmt::format("{} on {}{}", what, o.node, line.empty() ? "" : ": " + line));
    ctx.drain_node(o.node, fmt::format("{} failed for job {} ({})", o.kind, job.id, what));
  }
  if (!run.pending.empty()) return;
  std::vector<std::string> failures = std::move(run.failures);
  runs_.erase(it);
  std::string summary;
  for (const auto& f : failures) summary += (summary.empty() ? "" : "; ") + f;
  if (prolog) {
    // The exception goes first so the job can never start between the two events.
    if (!failures.empty()) ctx.raise_exception(job.id, "prolog", 0, "prolog failed: " + summary);
    ctx.prolog_finish(job.id, kProlog, failures.empty() ? 0 : 1);
  } else {
    // The exception goes first too: epilog-finish may free the job and retire it at once,
    // and an event posted after that would be dropped.
    if (!failures.empty()) ctx.raise_exception(job.id, "epilog", 1, "epilog failed: " + summary);
    ctx.epilog_finish(job.id, kEpilog, failures.empty() ? 0 : 1);
  }
}

}  // namespace corral::ctld
