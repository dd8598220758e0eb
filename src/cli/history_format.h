// `corral history` (like sacct): the times users type to select jobs, and the rows of
// finished jobs with their steps under them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "client.pb.h"
#include "util/result.h"

namespace corral::cli {

// "now", "now-1h", "now-30min", "now+2d", "YYYY-MM-DD[THH:MM[:SS]]", "HH:MM[:SS]" (the
// latest such time not in the future), epoch seconds ("1700000000" or "@1700000000").
// Errors name the option and the value.
Result<double> parse_history_time(std::string_view option, std::string_view text, double now);

// CPU time as sacct's TotalCPU: "MM:SS.mmm" below an hour, "HH:MM:SS", "D-HH:MM:SS".
std::string format_cpu_time(double seconds);

// The rows of the table: JOBID NAME USER STATE ELAPSED EXIT NODES NODELIST CPUTIME, one
// per job followed by one per step ("42.0", "42.batch").
std::vector<std::vector<std::string>> history_rows(const corral::v1::HistoryReply& reply, double now);

}  // namespace corral::cli
