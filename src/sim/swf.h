// Workload traces in the Standard Workload Format (SWF) of the Parallel Workloads Archive:
// `;` header comments, then one job per line with 18 whitespace-separated numeric fields,
// -1 meaning unknown.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace corral::sim {

// One job of a trace, with the fallbacks for unknown fields already applied.
struct SwfJob {
  uint64_t id = 0;       // field 1, the job number
  double submit = 0;     // field 2, seconds from the start of the trace
  double run = 0;        // field 4, seconds (what the job runs for in the simulation)
  unsigned procs = 0;    // field 8 (requested processors), else field 5 (allocated)
  double requested = 0;  // field 9 (requested time), else the run time
  unsigned line = 0;     // where it was read, for messages
};

struct SwfTrace {
  std::vector<SwfJob> jobs;         // in file order
  size_t skipped = 0;               // lines with run time < 0 or no processors known
  std::vector<std::string> header;  // the `;` comment lines, without the `;`
};

// Parses the text of a trace; `file` names it in error messages ("FILE:LINE: problem").
// `limit` > 0 keeps only the first `limit` jobs.
Result<SwfTrace> parse_swf(std::string_view text, const std::string& file, size_t limit = 0);
Result<SwfTrace> load_swf(const std::string& path, size_t limit = 0);

}  // namespace corral::sim
