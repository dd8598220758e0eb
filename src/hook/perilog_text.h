// Reading what a hook's node command answered (HookContext::run_on_nodes): whether it
// succeeded, its status in words, and its output's lines ("error: ...", "warning: ...").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "hook/hook.h"

namespace corral::hook {

bool succeeded(const PerilogOutcome& o);
// "exit 2", "killed by signal 9", "timed out after 60s".
std::string describe_outcome(const PerilogOutcome& o, double timeout);
// Non-empty lines, without '\r'.
std::vector<std::string> output_lines(const std::string& text);
// The first line starting with `prefix`, without it; else "".
std::string line_after(const std::string& text, std::string_view prefix);
std::string last_line(const std::string& text);
// A failed node's reason: its "error: " line (else its last line) and its status.
std::string failure_reason(const PerilogOutcome& o, double timeout);
// A hook's prolog is over on every node: the failures (if any) become one exception, then
// the prolog action finishes (the exception first, so the job can never start between).
void finish_prolog(HookContext& ctx, uint64_t jobid, const std::string& action,
                   const std::vector<std::string>& failures);

}  // namespace corral::hook
