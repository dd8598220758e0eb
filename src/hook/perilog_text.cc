#include "hook/perilog_text.h"

#include <sys/wait.h>

#include <fmt/format.h>

namespace corral::hook {

bool succeeded(const PerilogOutcome& o) { return !o.timed_out && o.waitstatus == 0; }

std::string describe_outcome(const PerilogOutcome& o, double timeout) {
  if (o.timed_out) return fmt::format("timed out after {}s", timeout);
  if (WIFEXITED(o.waitstatus)) return fmt::format("exit {}", WEXITSTATUS(o.waitstatus));
  if (WIFSIGNALED(o.waitstatus)) return fmt::format("killed by signal {}", WTERMSIG(o.waitstatus));
  return fmt::format("wait status {}", o.waitstatus);
}

std::vector<std::string> output_lines(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) out.push_back(std::move(line));
    start = end + 1;
  }
  return out;
}

std::string line_after(const std::string& text, std::string_view prefix) {
  for (const auto& l : output_lines(text))
    if (l.starts_with(prefix)) return l.substr(prefix.size());
  return "";
}

std::string last_line(const std::string& text) {
  auto all = output_lines(text);
  return all.empty() ? "" : all.back();
}

std::string failure_reason(const PerilogOutcome& o, double timeout) {
  std::string why = line_after(o.output, "error: ");
  if (why.empty()) why = last_line(o.output);
  std::string status = describe_outcome(o, timeout);
  return why.empty() ? status : why + " (" + status + ")";
}

void finish_prolog(HookContext& ctx, uint64_t jobid, const std::string& action,
                   const std::vector<std::string>& failures) {
  std::string summary;
  for (const auto& f : failures) summary += (summary.empty() ? "" : "; ") + f;
  if (!failures.empty()) ctx.raise_exception(jobid, action, 0, summary);
  ctx.prolog_finish(jobid, action, failures.empty() ? 0 : 1);
}

}  // namespace corral::hook
