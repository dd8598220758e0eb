// The Slurm-style job options shared by `submit`, `run` and `batch` (and by `#CORRAL`
// directive lines): declared once on a CLI::App, kept as the text the user typed, then
// validated and turned into a corral::job::JobRequest in one pure step.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "job/jobspec.h"
#include "util/result.h"

namespace CLI {
class App;
}

namespace corral::cli {

// As typed; an empty string means "not given".
struct JobOptions {
  std::string nodes, ntasks, cpus_per_task, gpus_per_task, mem, time;
  std::string job_name, output, error, input;
  std::string nodelist, exclude, partition, switches;
  std::string dependency, begin, export_env, chdir, urgency, cc, test_run_duration;
  bool exclusive = false;
  bool requeue = false, no_requeue = false;  // --requeue / --no-requeue; neither: the site's default
  std::vector<std::string> setopt;
  std::vector<std::string> dw;    // --dw and a batch script's #DW lines, in order
  std::vector<std::string> ib;    // --ib: Infiniband interfaces (checked by the controller)
  std::string mpi;                // --mpi: how the tasks find each other (job/mpi_kind.h)
  std::string propagate = "ALL";  // --propagate: resource limits passed to the tasks
};

void add_job_options(CLI::App& app, JobOptions& opts);

// Options given in `over` replace those in `base`; --setopt lists are concatenated
// (a later key wins), --exclusive is or-ed and --requeue/--no-requeue in `over` win.
JobOptions merge_job_options(const JobOptions& base, const JobOptions& over);

// Parses words as the job options alone (a `#CORRAL` line). Errors are CLI11's message
// or "unexpected argument 'x'".
Result<JobOptions> parse_job_option_words(const std::vector<std::string>& words);

// What the options are resolved against; current_context() reads the process's.
struct JobContext {
  std::string cwd;
  std::map<std::string, std::string> env;
  double now = 0;
  std::map<std::string, int64_t> rlimits;  // this process's soft limits by name, -1 = unlimited
};
JobContext current_context();

struct ParsedJob {
  job::JobRequest request;  // command / batch script are left for the caller
  std::optional<unsigned> urgency;
  std::string cc;  // RFC 22 idset, validated
};

// Validates every option; the first error names the option and the value.
Result<ParsedJob> to_job_request(const JobOptions& opts, const JobContext& ctx);

}  // namespace corral::cli
