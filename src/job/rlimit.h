// Resource limits a job's tasks run under: the submitting shell's soft limits (Slurm's
// PropagateResourceLimits, srun --propagate), carried in the jobspec as
// attributes.system.shell.options.rlimit = {"nofile": 1024, "core": 0, ...}, Flux's name for
// the same option. -1 means unlimited. Without it, tasks would inherit the limits of the
// agent, which runs as root with its descriptor limit raised to the hard limit.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace corral::job {

struct TaskRlimit {
  int resource = 0;   // RLIMIT_*
  int64_t value = 0;  // the soft limit; -1: unlimited
  bool operator==(const TaskRlimit&) const = default;
};

// "as", "core", "cpu", "data", "fsize", "memlock", "nofile", "nproc", "rss", "stack".
const std::vector<std::string_view>& rlimit_names();
std::optional<int> rlimit_resource(std::string_view name);

}  // namespace corral::job
