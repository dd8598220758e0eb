#include "cli/job_options.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/values.h"
#include "job/dependency.h"
#include "job/eventlog.h"
#include "job/mpi_kind.h"
#include "job/rlimit.h"
#include "util/hostlist.h"
#include "util/idset.h"
#include "util/units.h"

extern char** environ;

namespace corral::cli {

void add_job_options(CLI::App& app, JobOptions& o) {
  const char* g = "Job options";
  app.add_option("-N,--nodes", o.nodes, "Number of nodes")->type_name("N")->group(g);
  app.add_option("-n,--ntasks", o.ntasks, "Number of tasks (default: one per node)")->type_name("N")->group(g);
  app.add_option("-c,--cpus-per-task", o.cpus_per_task, "Cores per task (default 1)")->type_name("N")->group(g);
  app.add_option("--gpus-per-task", o.gpus_per_task, "GPUs per task (default 0)")->type_name("N")->group(g);
  app.add_option("--mem", o.mem, "Memory per node; a bare number is MiB (Slurm), or 4G, 512MiB, ...")
      ->type_name("SIZE")
      ->group(g);
  app.add_option("-t,--time", o.time,
                 "Time limit: MM, MM:SS, HH:MM:SS, D-HH[:MM[:SS]], or 30s/5m/2h; "
                 "UNLIMITED for none")
      ->type_name("TIME")
      ->group(g);
  app.add_option("-J,--job-name", o.job_name, "Job name (default: the command's name)")->type_name("NAME")->group(g);
  app.add_option("-o,--output", o.output,
                 "Write stdout (and stderr unless -e) to this file; %j = job id, %t = task "
                 "rank, %n = node index, %N = node name, %x = job name, %u = user")
      ->type_name("FILE")
      ->group(g);
  app.add_option("-e,--error", o.error, "Write stderr to this file")->type_name("FILE")->group(g);
  app.add_option("-i,--input", o.input, "Read stdin from this file (default /dev/null)")->type_name("FILE")->group(g);
  app.add_option("-w,--nodelist", o.nodelist, "Run on these nodes, e.g. node[0-3]")->type_name("HOSTLIST")->group(g);
  app.add_option("-x,--exclude", o.exclude, "Never run on these nodes")->type_name("HOSTLIST")->group(g);
  app.add_option("--switches", o.switches,
                 "At most COUNT leaf switches (or base blocks), waiting at most TIME for "
                 "them (capped by the site) before taking any placement: COUNT[@TIME]")
      ->type_name("COUNT[@TIME]")
      ->group(g);
  app.add_option("-p,--partition", o.partition, "Partition (queue) to run in")->type_name("NAME")->group(g);
  app.add_flag("--exclusive", o.exclusive, "Allocate whole nodes")->group(g);
  app.add_flag("--requeue", o.requeue,
               "When a node of the job fails, run it again (same job id, output appended) instead of "
               "ending it with a node failure; not for corral run/alloc (default: the site's [job] requeue)")
      ->group(g);
  app.add_flag("--no-requeue", o.no_requeue, "Never run this job again after a node failure")->group(g);
  app.add_option("-d,--dependency", o.dependency, "Start after other jobs: afterok:12[:13],afterany:14 or RFC 26 URIs")
      ->type_name("DEPS")
      ->group(g);
  app.add_option("--begin", o.begin,
                 "Start no earlier than: now+60 (seconds), now+1hour, HH:MM[:SS], "
                 "YYYY-MM-DD[THH:MM[:SS]], @EPOCH")
      ->type_name("TIME")
      ->group(g);
  app.add_option("--export", o.export_env, "Environment to pass: ALL (default), NONE, or [ALL,]VAR,VAR=value,...")
      ->type_name("VARS")
      ->group(g);
  app.add_option("-D,--chdir", o.chdir, "Working directory of the tasks (default: here)")->type_name("DIR")->group(g);
  app.add_option("--urgency", o.urgency, "Urgency 0-31 (default 16; above 16 needs root)")->type_name("N")->group(g);
  app.add_option("--propagate", o.propagate,
                 "Resource limits the tasks get from this shell: ALL (default), NONE, or a list of "
                 "AS,CORE,CPU,DATA,FSIZE,MEMLOCK,NOFILE,NPROC,RSS,STACK")
      ->type_name("LIMITS")
      ->expected(0, 1)
      ->default_str("ALL")
      ->group(g);
  app.add_option("--dw", o.dw,
                 "Rabbit storage for the job: a '#DW ...' directive, e.g. '#DW jobdw type=xfs capacity=10GiB "
                 "name=scratch'; repeatable (docs/user.md, \"Rabbit storage\")")
      ->type_name("'#DW ...'")
      ->take_all()
      ->allow_extra_args(false)
      ->group(g);
  app.add_option("--ib", o.ib,
                 "Infiniband interfaces for the job, by model, fabric and instance: "
                 "device=\"MT28908 Family [ConnectX-6]\",fabric=IbFabric1,instance=0[,vf=N][,partition=NAME|job]; "
                 "repeatable (docs/user.md, \"Infiniband\"; `corral ib classes` lists what nodes have)")
      ->type_name("SPEC")
      ->take_all()
      ->allow_extra_args(false)
      ->group(g);
  app.add_option("--mpi", o.mpi,
                 "How the tasks' MPI starts: auto (default: PMIx for a program linked with Open MPI or "
                 "libpmix, else PMI-1 and PMI-2 on PMI_FD, for MPICH), pmix (Open MPI and other PMIx "
                 "programs), pmi2, pmi1, cray-pals (Cray MPICH: an apinfo file and PALS_* variables), none "
                 "(docs/user.md, \"MPI\")")
      ->type_name("TYPE")
      ->group(g);
  app.add_option("--setopt", o.setopt, "Set a job shell/hook option, KEY=VALUE or KEY (= true); repeatable")
      ->type_name("KEY[=VALUE]")
      ->take_all()
      ->allow_extra_args(false)
      ->group(g);
  app.add_option("--cc", o.cc,
                 "Submit one copy per id in IDSET (e.g. 1-10); {cc} in the "
                 "command or options is replaced by the id")
      ->type_name("IDSET")
      ->group(g);
  app.add_option("--test-run-duration", o.test_run_duration,
                 "Testing the pipeline: run no process, pretend the tasks ran this long "
                 "(e.g. 1s) and exited 0")
      ->type_name("FSD")
      ->group(g);
}

JobOptions merge_job_options(const JobOptions& base, const JobOptions& over) {
  JobOptions out = base;
  auto pick = [](std::string& dst, const std::string& src) {
    if (!src.empty()) dst = src;
  };
  pick(out.nodes, over.nodes);
  pick(out.ntasks, over.ntasks);
  pick(out.cpus_per_task, over.cpus_per_task);
  pick(out.gpus_per_task, over.gpus_per_task);
  pick(out.mem, over.mem);
  pick(out.time, over.time);
  pick(out.job_name, over.job_name);
  pick(out.output, over.output);
  pick(out.error, over.error);
  pick(out.input, over.input);
  pick(out.nodelist, over.nodelist);
  pick(out.exclude, over.exclude);
  pick(out.switches, over.switches);
  pick(out.partition, over.partition);
  pick(out.dependency, over.dependency);
  pick(out.begin, over.begin);
  pick(out.export_env, over.export_env);
  pick(out.chdir, over.chdir);
  pick(out.urgency, over.urgency);
  pick(out.cc, over.cc);
  pick(out.test_run_duration, over.test_run_duration);
  pick(out.mpi, over.mpi);
  out.exclusive = base.exclusive || over.exclusive;
  if (over.requeue || over.no_requeue) {
    out.requeue = over.requeue;
    out.no_requeue = over.no_requeue;
  }
  out.setopt.insert(out.setopt.end(), over.setopt.begin(), over.setopt.end());
  out.dw.insert(out.dw.end(), over.dw.begin(), over.dw.end());
  out.ib.insert(out.ib.end(), over.ib.begin(), over.ib.end());
  return out;
}

Result<JobOptions> parse_job_option_words(const std::vector<std::string>& words) {
  JobOptions opts;
  CLI::App app;
  app.set_help_flag();
  add_job_options(app, opts);
  std::vector<std::string> reversed(words.rbegin(), words.rend());  // CLI11 wants them so
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return invalid(e.what());
  }
  return opts;
}

JobContext current_context() {
  JobContext ctx;
  for (auto name : job::rlimit_names()) {
    rlimit lim{};
    if (::getrlimit(*job::rlimit_resource(name), &lim) != 0) continue;
    ctx.rlimits[std::string(name)] = lim.rlim_cur == RLIM_INFINITY ? -1 : static_cast<int64_t>(lim.rlim_cur);
  }
  std::error_code ec;
  ctx.cwd = std::filesystem::current_path(ec).string();
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    size_t eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    ctx.env.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  ctx.now = job::now();
  return ctx;
}

namespace {

// Runs `parse` if `text` was given; stores the value or returns the error.
template <class T, class Parse>
Status parse_into(const std::string& text, T& dst, Parse parse) {
  if (text.empty()) return {};
  auto r = parse(text);
  if (!r) return r.error();
  dst = static_cast<T>(*r);
  return {};
}

Error named(std::string_view option, const std::string& text, const Error& err) {
  return invalid(fmt::format("{}: invalid value '{}': {}", option, text, err.message));
}

Status parse_counts(const JobOptions& o, job::JobRequest& req) {
  auto positive = [](const char* opt) { return [opt](const std::string& t) { return parse_positive(opt, t); }; };
  if (auto s = parse_into(o.nodes, req.nnodes, positive("-N/--nodes")); !s) return s;
  if (auto s = parse_into(o.ntasks, req.ntasks, positive("-n/--ntasks")); !s) return s;
  if (auto s = parse_into(o.cpus_per_task, req.cores_per_task, positive("-c/--cpus-per-task")); !s) return s;
  return parse_into(o.gpus_per_task, req.gpus_per_task,
                    [](const std::string& t) { return parse_non_negative("--gpus-per-task", t); });
}

// Slurm's --propagate: the submitting shell's soft limits travel with the job.
Status parse_propagate(const JobOptions& o, const JobContext& ctx, job::JobRequest& req) {
  std::string list = o.propagate.empty() ? "ALL" : o.propagate;
  for (auto& c : list) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (list == "none") return {};
  std::set<std::string> wanted;
  if (list != "all") {
    size_t start = 0;
    while (start <= list.size()) {
      size_t comma = list.find(',', start);
      std::string name = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (!job::rlimit_resource(name))
        return invalid(
            fmt::format("--propagate: unknown limit '{}' (ALL, NONE, AS, CORE, CPU, DATA, FSIZE, "
                        "MEMLOCK, NOFILE, NPROC, RSS, STACK)",
                        name));
      wanted.insert(name);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  for (const auto& [name, value] : ctx.rlimits)
    if (wanted.empty() || wanted.count(name)) req.rlimits.emplace_back(name, value);
  return {};
}

Status parse_limits(const JobOptions& o, job::JobRequest& req) {
  constexpr uint64_t kMiB = 1024 * 1024;
  if (!o.mem.empty()) {
    auto bytes = parse_size(o.mem, kMiB);
    if (!bytes) return named("--mem", o.mem, bytes.error());
    req.mem_per_node_mb = (*bytes + kMiB - 1) / kMiB;
  }
  if (!o.time.empty()) {
    auto secs = parse_time_limit(o.time);
    if (!secs) return named("-t/--time", o.time, secs.error());
    req.duration = *secs;
  }
  if (!o.test_run_duration.empty()) {
    auto secs = parse_duration(o.test_run_duration);
    if (!secs) return named("--test-run-duration", o.test_run_duration, secs.error());
    req.mock_duration = *secs;
  }
  return {};
}

// Topology hostlist functions (switch{s1}, blockwith{n3}) need the controller's topology.
bool has_functions(const std::string& expr) { return expr.find('{') != std::string::npos; }

Status parse_switches(const JobOptions& o, job::JobRequest& req) {
  if (o.switches.empty()) return {};
  const auto at = o.switches.find('@');
  const std::string count = o.switches.substr(0, at);
  auto n = parse_positive("--switches", count);
  if (!n) return n.error();
  req.switches = *n;
  if (at != std::string::npos) {
    auto secs = parse_duration(o.switches.substr(at + 1));
    if (!secs) return named("--switches", o.switches, secs.error());
    req.switch_wait = *secs;
  }
  return {};
}

Status parse_placement(const JobOptions& o, job::JobRequest& req) {
  if (auto st = parse_switches(o, req); !st) return st;
  if (has_functions(o.nodelist)) {
    req.requested_nodes = o.nodelist;  // switch{s1} and friends: expanded by the controller
  } else if (!o.nodelist.empty()) {
    auto hl = Hostlist::parse(o.nodelist);
    if (!hl) return named("-w/--nodelist", o.nodelist, hl.error());
    size_t n = hl->uniq().count();
    if (req.nnodes == 0) {
      req.nnodes = static_cast<unsigned>(n);
    } else if (req.nnodes < n) {
      return invalid(fmt::format("-w/--nodelist names {} nodes but -N/--nodes asks for {}", n, req.nnodes));
    }
    req.requested_nodes = o.nodelist;
  }
  if (has_functions(o.exclude)) {
    req.excluded_nodes = o.exclude;
  } else if (!o.exclude.empty()) {
    auto hl = Hostlist::parse(o.exclude);
    if (!hl) return named("-x/--exclude", o.exclude, hl.error());
    req.excluded_nodes = o.exclude;
  }
  req.partition = o.partition;
  req.exclusive = o.exclusive;
  if (o.requeue && o.no_requeue) return invalid("--requeue and --no-requeue contradict each other: give one");
  if (o.requeue || o.no_requeue) req.requeue = o.requeue;
  return {};
}

Status parse_scheduling(const JobOptions& o, const JobContext& ctx, job::JobRequest& req) {
  if (!o.dependency.empty()) {
    auto deps = job::parse_dependencies(o.dependency);
    if (!deps) return named("-d/--dependency", o.dependency, deps.error());
    for (const auto& d : *deps) req.dependencies.push_back(d.uri());
  }
  if (!o.begin.empty()) {
    auto when = parse_begin_time(o.begin, ctx.now);
    if (!when) return when.error();
    req.begin_time = *when;
  }
  return {};
}

Status parse_environment(const JobOptions& o, const JobContext& ctx, job::JobRequest& req) {
  auto env = parse_export(o.export_env, ctx.env);
  if (!env) return env.error();
  req.environment = std::move(*env);
  std::filesystem::path dir = o.chdir.empty() ? std::filesystem::path(ctx.cwd) : std::filesystem::path(o.chdir);
  if (dir.is_relative()) dir = std::filesystem::path(ctx.cwd) / dir;
  req.cwd = dir.lexically_normal().string();
  if (req.cwd.size() > 1 && req.cwd.back() == '/') req.cwd.pop_back();
  return {};
}

Status parse_setopts(const JobOptions& o, job::JobRequest& req) {
  for (const std::string& item : o.setopt) {
    size_t eq = item.find('=');
    std::string key = item.substr(0, eq);
    if (key.empty() || key.find_first_of(" \t") != std::string::npos || key.front() == '.' || key.back() == '.')
      return invalid(fmt::format("--setopt: '{}': expected KEY=VALUE or KEY", item));
    std::string value = eq == std::string::npos ? "true" : item.substr(eq + 1);
    req.options.emplace_back(std::move(key), std::move(value));
  }
  return {};
}

}  // namespace

Result<ParsedJob> to_job_request(const JobOptions& o, const JobContext& ctx) {
  ParsedJob out;
  job::JobRequest& req = out.request;
  for (auto step : {parse_counts(o, req), parse_limits(o, req), parse_placement(o, req), parse_scheduling(o, ctx, req),
                    parse_environment(o, ctx, req), parse_setopts(o, req), parse_propagate(o, ctx, req)})
    if (!step) return step.error();
  for (const auto& d : o.dw) {
    if (d.rfind("#DW ", 0) != 0) return invalid(fmt::format("--dw: '{}' is not a #DW directive ('#DW jobdw ...')", d));
    req.dw.push_back(d);
  }
  req.ib = o.ib;
  if (!o.mpi.empty()) {
    auto mpi = job::check_mpi_name(o.mpi, "--mpi");
    if (!mpi) return mpi.error();
    req.mpi = std::move(*mpi);
  }
  req.name = o.job_name;
  req.output = o.output;
  req.error = o.error;
  req.input = o.input;
  if (!o.urgency.empty()) {
    auto u = parse_in_range("--urgency", o.urgency, 0, 31);
    if (!u) return u.error();
    out.urgency = *u;
  }
  if (!o.cc.empty()) {
    auto ids = IdSet::parse(o.cc);
    if (!ids) return named("--cc", o.cc, ids.error());
    if (ids->empty()) return invalid("--cc: the idset is empty");
    out.cc = ids->encode();
  }
  return out;
}

}  // namespace corral::cli
