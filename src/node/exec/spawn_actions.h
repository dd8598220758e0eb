// What a new process does between fork and exec, recorded once and carried out either by
// posix_spawn or, when the process must also join a cgroup or be bound to CPUs before it
// runs any code of its own (which posix_spawn cannot do), by spawn_child.
#pragma once

#include <sys/types.h>

#include <sched.h>

#include <optional>
#include <string>
#include <vector>

#include "job/rlimit.h"

namespace corral::node {

struct SpawnActions {
  enum class Kind { dup2, open, chdir };
  struct Action {
    Kind kind;
    int fd = -1;      // dup2: the source; open: unused
    int target = -1;  // dup2, open: the descriptor number in the child
    std::string path;
    int flags = 0;
  };
  std::vector<Action> list;

  // Onto the same number: clears close-on-exec in the child (the descriptor is inherited).
  void dup2(int fd, int target) { list.push_back({Kind::dup2, fd, target, {}, 0}); }
  void open(int target, std::string path, int flags) {
    list.push_back({Kind::open, -1, target, std::move(path), flags});
  }
  void chdir(std::string dir) { list.push_back({Kind::chdir, -1, -1, std::move(dir), 0}); }
};

// What the child does before its file actions, besides what posix_spawn would.
struct ChildSetup {
  std::vector<std::string> cgroups;      // the cgroup directories it moves itself into
  std::vector<int> cpus;                 // non-empty: the only CPUs it (and what it starts) may run on
  std::vector<job::TaskRlimit> rlimits;  // soft limits, capped at the hard ones
  std::optional<int> nice;               // its scheduling priority; unset: the spawning thread's
  int cgroup_fd = -1;                    // cgroups[0] open (O_PATH); -1: opened for the spawn
  bool any() const { return !cgroups.empty() || !cpus.empty() || !rlimits.empty() || nice.has_value(); }
};

struct SpawnFailure {
  enum class Stage { exec, cgroup, cpus, rlimits, action };
  int err = 0;  // errno; 0: started
  Stage stage = Stage::exec;
  size_t cgroup = 0;  // Stage::cgroup: which of ChildSetup::cgroups
  size_t action = 0;  // Stage::action: which of SpawnActions::list
};

// Starts `path` with the actions, in a process group of its own (or a session of its own
// when `new_session`), with the signal mask empty and every signal at its default — as
// posix_spawn does — after `setup`, so nothing the program starts can be outside its
// cgroup or off its CPUs.
SpawnFailure spawn_child(pid_t& pid, const std::string& path, char* const argv[], char* const envp[],
                         const SpawnActions& actions, bool new_session, const ChildSetup& setup);

}  // namespace corral::node
