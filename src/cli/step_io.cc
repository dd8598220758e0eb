#include "cli/step_io.h"

#include <fmt/format.h>

#include "cli/job_format.h"
#include "job/step_id.h"

namespace corral::cli {

std::string LineLabeler::label(uint32_t rank, bool is_stderr, std::string_view data, bool eof) {
  std::string& held = partial_[{rank, is_stderr}];
  const std::string prefix = fmt::format("{}: ", rank);
  std::string text;
  while (!data.empty()) {
    const size_t nl = data.find('\n');
    if (nl == std::string_view::npos) {
      held.append(data);
      break;
    }
    text += prefix;
    text += held;
    text.append(data.substr(0, nl + 1));
    held.clear();
    data.remove_prefix(nl + 1);
  }
  if (eof && !held.empty()) {
    text += prefix + held + '\n';
    held.clear();
  }
  return text;
}

std::pair<std::string, std::string> LineLabeler::flush() {
  std::pair<std::string, std::string> out;
  for (auto& [key, held] : partial_) {
    if (held.empty()) continue;
    std::string& dst = key.second ? out.second : out.first;
    dst += fmt::format("{}: {}\n", key.first, held);
    held.clear();
  }
  return out;
}

int step_exit_code(const corral::v1::StepExit& exit) {
  const bool ran = exit.waitstatus() >= 0 && exit.tasks_size() > 0;
  const int code = exit.waitstatus() >= 0 ? shell_exit_code(exit.waitstatus()) : 1;
  if (code != 0) return code;
  if (!ran && exit.state() != "COMPLETED") return 1;
  if (!exit.error().empty() && exit.state() != "COMPLETED") return 1;
  return 0;
}

std::string step_label(uint64_t jobid, uint32_t stepid) { return fmt::format("{}.{}", jobid, job::step_name(stepid)); }

}  // namespace corral::cli
