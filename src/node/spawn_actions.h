// What a new process does between fork and exec, recorded once and carried out either by
// posix_spawn or, when the process must start inside a cgroup, by spawn_in_cgroup.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>


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
  void open(int target, std::string path, int flags) { list.push_back({Kind::open, -1, target, std::move(path), flags}); }
  void chdir(std::string dir) { list.push_back({Kind::chdir, -1, -1, std::move(dir), 0}); }
};

// Starts `path` with the actions, in a process group of its own (or a session of its own
// when `new_session`), with the signal mask empty and every signal at its default — as
// posix_spawn does — but moved into the cgroup directory `cgroup` before exec, so that
// nothing the program starts can be outside it.
struct SpawnFailure {
  int err = 0;              // errno; 0: started
  bool in_cgroup = false;   // the move into the cgroup failed (else an action or exec)
};
SpawnFailure spawn_in_cgroup(pid_t& pid, const std::string& path, char* const argv[], char* const envp[],
                             const SpawnActions& actions, bool new_session, const std::string& cgroup);

}  // namespace corral::node
