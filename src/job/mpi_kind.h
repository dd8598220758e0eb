// How a job's or step's tasks find each other: the --mpi values (Slurm's names) and what
// each asks of the node agent. Checked wherever a value arrives (command line, jobspec,
// step request, configuration) with one list, so every layer refuses the same input.
#pragma once

#include <string>
#include <string_view>

#include "util/result.h"

namespace corral::job {

// What a node agent serves a step's tasks.
enum class MpiService {
  pmi,   // the PMI-1/PMI-2 server on PMI_FD (MPICH, Intel MPI, anything on simple PMI)
  pmix,  // a PMIx namespace of the agent's PMIx server (Open MPI, PMIx programs)
  cray_pals,  // Cray PMI's bootstrap: an apinfo file and PALS_* variables, no server
  none,       // nothing: the tasks get no PMI variables
};

// The accepted names: auto, pmix, pmi2, pmi1 (and pmi), cray-pals (and Slurm's
// cray_shasta), none. Returns the canonical name ("pmi1" for "pmi"), or an error that
// lists them. `where` names the option.
Result<std::string> check_mpi_name(std::string_view name, std::string_view where);

// A job's MPI type: its own --mpi (`own`, as the jobspec reader left it), else the site's
// [steps] mpi-default as the controller sent it, else auto (a default that does not
// check out is not trusted).
std::string job_mpi_name(const std::string& own, const std::string& site_default);

// What `name` (canonical, or empty for auto) asks of the agent. `auto` serves PMI-1 and
// PMI-2, which cost the agent nothing until a task connects; PMIx is served to the
// steps that ask for it: --mpi=pmix, the site's [steps] mpi-default, or the command's
// look at a program that needs PMIx (cli/mpi_detect.h).
MpiService mpi_service(std::string_view name);

// A PMIx namespace for `what` ("42.3": a job and step) that only those told it can
// name: "corral.42.3." and 16 random hex digits. OpenPMIx 4.2 stops serving for good
// when a client claiming a rank of a namespace is refused (another user) and that
// namespace is then deregistered, so nobody but a step's own tasks may know its name.
Result<std::string> pmix_namespace_name(const std::string& what);

// PMI_SHARED_SECRET of a cray-pals step or job: a random 64-bit number in decimal, which
// Cray PMI's ranks use to recognise each other's control connections.
Result<std::string> pals_secret();

// The jobspec's shell option for --mpi: attributes.system.shell.options.mpi.
inline constexpr char kMpiOption[] = "mpi";

}  // namespace corral::job
