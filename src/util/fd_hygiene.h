// Descriptor hygiene shared by the daemons: a descriptor limit as high as the system
// allows, and no descriptor of a daemon leaking into the processes it starts.
#pragma once

#include <cstddef>

namespace corral {

// Raises the soft RLIMIT_NOFILE to the hard limit; returns the soft limit now in force.
size_t raise_fd_limit();

// Marks every descriptor from `first` up close-on-exec (close_range), so whatever a
// library opened without O_CLOEXEC (a log file's FILE*) never reaches a task.
void cloexec_from(int first);

}  // namespace corral
