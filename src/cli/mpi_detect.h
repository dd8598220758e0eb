// What `--mpi=auto` means for a program the command starts: the command, running as the
// user, looks at the program's ELF dynamic section (the libraries it needs) before it
// asks for a job or step. A program that needs OpenPMIx (libpmix.so.*) or Open MPI's
// libmpi.so.40 gets PMIx; anything else, or what cannot be read, gets nothing here and
// so the site's default (PMI-1/PMI-2 unless [steps] mpi-default says otherwise).
#pragma once

#include <string>
#include <vector>

#include "cli/job_options.h"

namespace corral::cli {

// The libraries `path` names as DT_NEEDED (64-bit little-endian ELF only); empty when
// it is not such a file or cannot be read. Reads at most a few small parts of the file.
std::vector<std::string> elf_needed_libraries(const std::string& path);

// "pmix" for a program (argv[0], looked up in PATH as a shell would) that needs PMIx,
// else "".
std::string mpi_for_program(const std::string& program, const JobContext& ctx);

}  // namespace corral::cli
