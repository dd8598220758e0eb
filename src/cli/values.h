// Parsers for the values users type on the command line. Each error message names the
// option and repeats the value, e.g. "-N/--nodes: expected a positive integer, got 'abc'".
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace corral::cli {

Result<unsigned> parse_positive(std::string_view option, std::string_view text);
Result<unsigned> parse_non_negative(std::string_view option, std::string_view text);
Result<unsigned> parse_in_range(std::string_view option, std::string_view text, unsigned lo, unsigned hi);
Result<uint64_t> parse_jobid(std::string_view text);  // "12" (also Slurm's "12.batch" is refused)

// "TERM", "SIGTERM", "term", "15". Signal 0 is refused (it would mean "cancel").
Result<int> parse_signal(std::string_view option, std::string_view text);
// A user name or a numeric uid.
Result<uint32_t> parse_user(std::string_view option, std::string_view text);

// --begin: "now", "now+60" (seconds), "now+1hour", "now+30m", "HH:MM[:SS]" (the next
// such time), "YYYY-MM-DD[THH:MM[:SS]]", "@EPOCH", "midnight", "noon", "teatime",
// "today", "tomorrow". Local time. Returns epoch seconds.
Result<double> parse_begin_time(std::string_view text, double now);

// --export: "ALL" (default), "NONE", or "[ALL,]VAR,VAR=value,...". Without ALL only the
// listed variables are passed. `env` is the caller's environment.
Result<std::map<std::string, std::string>> parse_export(std::string_view text,
                                                        const std::map<std::string, std::string>& env);

// A job result as typed ("failed", "cancelled") in the controller's spelling ("FAILED",
// "CANCELED"), for --state filters; unknown names come back upper-cased.
std::string result_name(std::string typed);

// Splits "a,b,,c" into {"a","b","c"}.
std::vector<std::string> split_list(std::string_view text, char sep = ',');
bool is_valid_env_name(std::string_view name);

}  // namespace corral::cli
