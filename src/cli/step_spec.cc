#include "cli/step_spec.h"

#include <filesystem>
#include <utility>

#include <fmt/format.h>

#include "cli/mpi_detect.h"

namespace corral::cli {

namespace {

// The first job-only option given, as its flag name; "" if none.
std::string job_only_option(const JobOptions& o) {
  const std::pair<const std::string*, const char*> options[] = {
      {&o.mem, "--mem"},
      {&o.time, "-t/--time"},
      {&o.exclude, "-x/--exclude"},
      {&o.switches, "--switches"},
      {&o.partition, "-p/--partition"},
      {&o.dependency, "-d/--dependency"},
      {&o.begin, "--begin"},
      {&o.urgency, "--urgency"},
      {&o.cc, "--cc"},
      {&o.test_run_duration, "--test-run-duration"},
  };
  for (const auto& [value, name] : options)
    if (!value->empty()) return name;
  if (o.exclusive) return "--exclusive";
  if (!o.setopt.empty()) return "--setopt";
  return "";
}

std::string default_name(const std::vector<std::string>& argv) {
  if (argv.empty()) return "";
  return std::filesystem::path(argv.front()).filename().string();
}

}  // namespace

Result<corral::v1::StepSpec> build_step_spec(uint64_t jobid, const JobOptions& opts, const StepFlags& flags,
                                             const std::vector<std::string>& argv, const JobContext& ctx) {
  if (argv.empty()) return invalid("missing COMMAND (e.g. corral run -n4 hostname)");
  if (const std::string bad = job_only_option(opts); !bad.empty())
    return invalid(
        fmt::format("{} is a job option, but inside job {} corral run starts a step (steps take -N -n -c "
                    "--gpus-per-task -w -J -i -o -e -D --export; submit a new job with corral submit)",
                    bad, jobid));
  if (opts.nodelist.find('{') != std::string::npos)
    return invalid(
        fmt::format("-w/--nodelist: '{}': topology functions select nodes for jobs, "
                    "not steps; name the job's nodes",
                    opts.nodelist));
  auto parsed = to_job_request(opts, ctx);
  if (!parsed) return parsed.error();
  const job::JobRequest& req = parsed->request;
  corral::v1::StepSpec spec;
  spec.set_jobid(jobid);
  for (const auto& word : argv) spec.add_argv(word);
  set_step_env(spec, req.environment);
  spec.set_cwd(req.cwd);
  spec.set_nnodes(req.nnodes);
  spec.set_ntasks(req.ntasks);
  spec.set_cores_per_task(req.cores_per_task);
  spec.set_gpus_per_task(req.gpus_per_task);
  spec.set_nodelist(req.requested_nodes);
  spec.set_overlap(flags.overlap);
  spec.set_immediate(flags.immediate);
  spec.set_kill_on_bad_exit(flags.kill_on_bad_exit);
  spec.set_name(req.name.empty() ? default_name(argv) : req.name);
  spec.set_input(req.input);
  spec.set_output(req.output);
  spec.set_error(req.error);
  spec.set_stdin_open(req.input.empty());
  for (const auto& [name, value] : req.rlimits) (*spec.mutable_rlimits())[name] = value;
  spec.set_mpi(req.mpi.empty() ? mpi_for_program(argv.front(), ctx) : req.mpi);
  return spec;
}

void set_step_env(corral::v1::StepSpec& spec, const std::map<std::string, std::string>& env) {
  auto& out = *spec.mutable_env();
  out.Reserve(static_cast<int>(env.size()));
  for (const auto& [k, v] : env) {
    std::string& kv = *out.Add();
    kv.reserve(k.size() + 1 + v.size());
    kv.append(k).append(1, '=').append(v);
  }
}

}  // namespace corral::cli
