// Expansion of --output / --error / --input path patterns, Slurm style.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace corral::node {

struct PatternVars {
  uint64_t jobid = 0;
  uint32_t rank = 0;        // %t
  uint32_t node_index = 0;  // %n
  std::string node_name;    // %N
  std::string job_name;     // %x
  std::string user_name;    // %u
};

// %j job id, %t task rank, %n node index in the job, %N node name, %x job name,
// %u user name, %% a percent sign. Unknown sequences are kept as written so a path
// with a literal '%' still works.
std::string expand_output_pattern(std::string_view pattern, const PatternVars& vars);

// `path` relative to `cwd` unless absolute.
std::string resolve_path(std::string_view path, std::string_view cwd);

}  // namespace corral::node
