// Job dependencies (Flux RFC 26) and Slurm's --dependency syntax.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace corral::job {

struct Dependency {
  std::string scheme;       // after, afterok, afternotok, afterany, begin-time, singleton
  uint64_t jobid = 0;       // for after*
  double time = 0;          // for begin-time (epoch seconds)
  std::string uri() const;  // "afterok:12", "begin-time:1700000000.0"
};

// RFC 26 URIs ("afterok:12", "afterany:12") or Slurm's "afterok:12:13,afterany:14"
// (',' = all of). "?" (Slurm's any-of) is refused with a clear message.
Result<std::vector<Dependency>> parse_dependencies(std::string_view text);
Result<Dependency> parse_dependency_uri(std::string_view uri);

}  // namespace corral::job
