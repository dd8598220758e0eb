// corral-steps-bench: the step API measured from a client, against a running job's step
// manager. bench/steps/run starts the cluster and the jobs and calls this once per mode;
// it prints one JSON object.
//
//   sequential  --count N              single-task /bin/true steps one after the other
//                                      through one StepClient connection (steps/s);
//               --floor-blocks K       in K blocks, each after as many bare spawns (the
//                                      floor, measured alongside: interleaved_floor_...)
//   corral-run  --count N              the same with one `corral run` process per step
//   concurrent  --count N --threads T  T threads each running steps back to back (steps/s)
//                                      with several --jobid: every job at once, rates per job
//   wide        --count N --nodes K --tasks M   one K-node M-task step of /bin/true at a
//                                      time: request to all exits (ms)
//   floor       --count N --threads T --tasks M   what this machine can do without corral:
//                                      /bin/true spawned and reaped by this process one at a
//                                      time, from T threads, M at once (ms), and `corral
//                                      --version` started one at a time (no --uri needed);
//                                      as root with cgroup v2, also the agent's own spawn
//                                      (node/exec/spawn_child.h) into a step-like cgroup one
//                                      at a time: the floor with containment, the agent's
//                                      bookkeeping and protocol taken out
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/client/client.h"
#include "cli/client/step_client.h"
#include "node/exec/spawn_actions.h"
#include "util/unique_fd.h"
#include "util/write_all.h"

extern char** environ;

namespace {

using corral::cli::StepClient;
namespace pb = corral::v1;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string uri;
  std::vector<uint64_t> jobids;
  std::string mode = "sequential";
  unsigned count = 1000;
  unsigned threads = 32;
  unsigned nodes = 16;
  unsigned tasks = 256;
  std::string corral = "corral";
  unsigned floor_blocks = 0;
};

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The bench's own environment, as a client sends it (KEY=VALUE).
std::vector<std::string> environment() {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e)
    if (std::strchr(*e, '=') != nullptr) env.emplace_back(*e);
  return env;
}

pb::StepSpec true_step(uint64_t jobid, unsigned nodes, unsigned tasks) {
  static const auto env = environment();
  pb::StepSpec spec;
  spec.set_jobid(jobid);
  spec.add_argv("/bin/true");
  for (const auto& kv : env) spec.add_env(kv);
  spec.set_cwd("/");
  spec.set_nnodes(nodes);
  spec.set_ntasks(tasks);
  spec.set_name("true");
  return spec;
}

// Runs one step to its end; true if it completed with status 0.
bool run_one(StepClient& client, const pb::StepSpec& spec, std::string* error) {
  auto stream = client.run(spec);
  if (!stream) {
    if (error) *error = stream.message();
    return false;
  }
  pb::StepServerMessage msg;
  bool ok = false;
  while ((*stream)->read(msg)) {
    if (msg.has_exit()) {  // the call ends with it: the connection serves the next step
      ok = msg.exit().waitstatus() == 0 && msg.exit().state() == "COMPLETED";
      if (!ok && error) *error = msg.exit().error().empty() ? msg.exit().state() : msg.exit().error();
    }
  }
  auto st = (*stream)->finish();
  if (!st.ok() && error) *error = st.message();
  return ok && st.ok();
}

// Waits (up to a minute) for the job to run and its step manager to be known.
std::string stepmgr_of(corral::cli::Client& client, uint64_t jobid) {
  const auto t0 = Clock::now();
  for (;;) {
    pb::GetJobRequest req;
    req.set_jobid(jobid);
    auto info = client.get_job(req);
    if (!info) throw std::runtime_error(info.message());
    if (!info->stepmgr().empty()) return info->stepmgr();
    if (info->state() == "INACTIVE" || seconds_since(t0) > 60)
      throw std::runtime_error(fmt::format("job {} has no step manager (state {})", jobid, info->state()));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

struct Tally {
  std::atomic<unsigned> failed{0};
  std::string first_error;
  std::mutex mu;
  void fail(const std::string& e) {
    ++failed;
    std::lock_guard lock(mu);
    if (first_error.empty()) first_error = e;
  }
};

// One /bin/true, spawned and reaped; false if it could not be.
bool spawn_true(char* const* argv) {
  pid_t pid = 0;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv, environ) != 0) return false;
  int status = 0;
  return waitpid(pid, &status, 0) == pid && status == 0;
}

// With --floor-blocks K, the steps run in K blocks, each after as many /bin/true spawned
// and reaped by this process: the floor measured in the same minutes as the steps. On a
// machine whose speed drifts (a shared or virtual host) a ratio of two rates taken
// minutes apart drifts with it; alternating blocks cancel that.
nlohmann::json sequential(const Options& o, const std::string& mgr) {
  StepClient client(mgr, o.jobids[0]);
  const auto spec = true_step(o.jobids[0], 1, 1);
  std::string prog = "/bin/true";
  char* true_argv[] = {prog.data(), nullptr};
  Tally tally;
  const unsigned blocks = std::max(1u, o.floor_blocks);
  double secs = 0, floor_secs = 0;
  unsigned floor_spawns = 0;
  for (unsigned b = 0; b < blocks; ++b) {
    const unsigned n = o.count / blocks + (b < o.count % blocks ? 1 : 0);
    if (o.floor_blocks > 0) {
      const auto f0 = Clock::now();
      for (unsigned i = 0; i < n; ++i) floor_spawns += spawn_true(true_argv) ? 1 : 0;
      floor_secs += seconds_since(f0);
    }
    const auto t0 = Clock::now();
    for (unsigned i = 0; i < n; ++i) {
      std::string err;
      if (!run_one(client, spec, &err)) tally.fail(err);
    }
    secs += seconds_since(t0);
  }
  nlohmann::json out = {{"steps", o.count},
                        {"failed", tally.failed.load()},
                        {"seconds", secs},
                        {"steps_per_second", o.count / secs},
                        {"first_error", tally.first_error}};
  if (o.floor_blocks > 0) out["interleaved_floor_spawns_per_second"] = floor_spawns / floor_secs;
  return out;
}

nlohmann::json corral_run(const Options& o, const std::string& mgr) {
  std::vector<std::string> env_text;
  for (const auto& kv : environment())
    if (!kv.starts_with("CORRAL_JOBID=") && !kv.starts_with("CORRAL_STEPMGR=")) env_text.push_back(kv);
  env_text.push_back(fmt::format("CORRAL_JOBID={}", o.jobids[0]));
  env_text.push_back("CORRAL_STEPMGR=" + mgr);
  std::vector<char*> envp;
  for (auto& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string prog = o.corral, run = "run", cmd = "/bin/true";
  char* argv[] = {prog.data(), run.data(), cmd.data(), nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  unsigned failed = 0;
  const auto t0 = Clock::now();
  for (unsigned i = 0; i < o.count; ++i) {
    pid_t pid = 0;
    if (posix_spawnp(&pid, prog.c_str(), &actions, nullptr, argv, envp.data()) != 0) {
      ++failed;
      continue;
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (status != 0) ++failed;
  }
  const double secs = seconds_since(t0);
  posix_spawn_file_actions_destroy(&actions);
  return {{"steps", o.count}, {"failed", failed}, {"seconds", secs}, {"steps_per_second", o.count / secs}};
}

// Every job at once, `threads` workers per job sharing one connection per job.
nlohmann::json concurrent(const Options& o, const std::vector<std::string>& mgrs) {
  struct Job {
    std::unique_ptr<StepClient> client;
    Tally tally;
    std::atomic<unsigned> next{0};
    double seconds = 0;
  };
  std::vector<std::unique_ptr<Job>> jobs;
  for (size_t j = 0; j < mgrs.size(); ++j) {
    jobs.push_back(std::make_unique<Job>());
    jobs.back()->client = std::make_unique<StepClient>(mgrs[j], o.jobids[j]);
  }
  const auto t0 = Clock::now();
  std::vector<std::thread> per_job;
  for (size_t j = 0; j < jobs.size(); ++j) {
    per_job.emplace_back([&, j] {
      Job& job = *jobs[j];
      const auto spec = true_step(o.jobids[j], 1, 1);
      const auto start = Clock::now();
      std::vector<std::thread> ts;
      for (unsigned t = 0; t < o.threads; ++t)
        ts.emplace_back([&] {
          while (job.next++ < o.count) {
            std::string err;
            if (!run_one(*job.client, spec, &err)) job.tally.fail(err);
          }
        });
      for (auto& t : ts) t.join();
      job.seconds = seconds_since(start);
    });
  }
  for (auto& t : per_job) t.join();
  const double secs = seconds_since(t0);
  nlohmann::json per = nlohmann::json::array();
  unsigned failed = 0;
  double min_rate = 1e18;
  for (size_t j = 0; j < jobs.size(); ++j) {
    const double rate = o.count / jobs[j]->seconds;
    min_rate = std::min(min_rate, rate);
    failed += jobs[j]->tally.failed;
    per.push_back({{"jobid", o.jobids[j]},
                   {"seconds", jobs[j]->seconds},
                   {"steps_per_second", rate},
                   {"failed", jobs[j]->tally.failed.load()},
                   {"first_error", jobs[j]->tally.first_error}});
  }
  return {{"steps", o.count * jobs.size()},
          {"jobs", jobs.size()},
          {"threads_per_job", o.threads},
          {"failed", failed},
          {"seconds", secs},
          {"steps_per_second", o.count * jobs.size() / secs},
          {"min_job_steps_per_second", min_rate},
          {"per_job", per}};
}

nlohmann::json wide(const Options& o, const std::string& mgr) {
  StepClient client(mgr, o.jobids[0]);
  const auto spec = true_step(o.jobids[0], o.nodes, o.tasks);
  std::vector<double> ms;
  Tally tally;
  for (unsigned i = 0; i < o.count; ++i) {
    const auto t0 = Clock::now();
    std::string err;
    if (!run_one(client, spec, &err)) tally.fail(err);
    ms.push_back(seconds_since(t0) * 1000);
  }
  std::sort(ms.begin(), ms.end());
  return {{"steps", o.count},
          {"nodes", o.nodes},
          {"tasks", o.tasks},
          {"failed", tally.failed.load()},
          {"first_error", tally.first_error},
          {"median_ms", ms.empty() ? 0 : ms[ms.size() / 2]},
          {"min_ms", ms.empty() ? 0 : ms.front()},
          {"max_ms", ms.empty() ? 0 : ms.back()},
          {"samples_ms", ms}};
}

double spawns_per_second(unsigned count, unsigned threads, char* const* argv) {
  std::atomic<unsigned> next{0};
  const auto t0 = Clock::now();
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < threads; ++t)
    ts.emplace_back([&] {
      while (next++ < count) (void)spawn_true(argv);
    });
  for (auto& t : ts) t.join();
  return count / seconds_since(t0);
}

double median_wide_spawn_ms(unsigned tasks, char* const* argv) {
  std::vector<double> ms;
  for (int i = 0; i < 10; ++i) {
    const auto t0 = Clock::now();
    std::vector<pid_t> pids(tasks);
    for (auto& pid : pids) posix_spawn(&pid, argv[0], nullptr, nullptr, argv, environ);
    for (pid_t pid : pids) waitpid(pid, nullptr, 0);
    ms.push_back(seconds_since(t0) * 1000);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Writes `text` to a cgroup control file; false if it cannot.
bool write_control(const std::string& path, const std::string& text) {
  const corral::UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  return fd.valid() && corral::write_all(fd.get(), text);
}

// Sequential spawns the way the agent spawns a task (corral::node::spawn_child: clone3
// into the cgroup, signals reset, its own process group), into a cgroup laid out as a
// step's (ROOT/job/slot, ROOT handing the limit controllers down as the agent's does);
// nullopt unless root on a host with cgroup v2.
std::optional<double> contained_spawns_per_second(unsigned count, char* const* argv) {
  const std::string v2 =
      ::access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/unified";
  if (::geteuid() != 0 || ::access((v2 + "/cgroup.controllers").c_str(), F_OK) != 0) return std::nullopt;
  const std::string root = v2 + "/corral-steps-floor-" + std::to_string(::getpid());
  const std::string job = root + "/job", slot = job + "/slot";
  if (::mkdir(root.c_str(), 0755) != 0) return std::nullopt;
  for (const char* c : {"+memory", "+pids", "+cpuset"}) (void)write_control(root + "/cgroup.subtree_control", c);
  std::optional<double> rate;
  if (::mkdir(job.c_str(), 0755) == 0 && ::mkdir(slot.c_str(), 0755) == 0) {
    const corral::node::SpawnActions none;
    const corral::node::ChildSetup setup{{slot}, {}, {}, std::nullopt};
    unsigned done = 0;
    const auto t0 = Clock::now();
    for (; done < count; ++done) {
      pid_t pid = -1;
      if (corral::node::spawn_child(pid, argv[0], argv, environ, none, false, setup).err != 0) break;
      int status = 0;
      if (::waitpid(pid, &status, 0) != pid || status != 0) break;
    }
    if (done == count) rate = count / seconds_since(t0);
  }
  for (const auto& d : {slot, job, root}) ::rmdir(d.c_str());
  return rate;
}

// The same work as the step modes with corral taken out: the ceiling on this machine.
nlohmann::json machine_floor(const Options& o) {
  std::string prog = "/bin/true";
  char* true_argv[] = {prog.data(), nullptr};
  std::string corral = o.corral, version = "--version";
  char* corral_argv[] = {corral.data(), version.data(), nullptr};
  const unsigned starts = std::max(1u, o.count / 10);
  const auto t0 = Clock::now();
  for (unsigned i = 0; i < starts; ++i) {
    pid_t pid = 0;
    posix_spawn_file_actions_t quiet;
    posix_spawn_file_actions_init(&quiet);
    posix_spawn_file_actions_addopen(&quiet, 1, "/dev/null", O_WRONLY, 0);
    if (posix_spawnp(&pid, corral.c_str(), &quiet, nullptr, corral_argv, environ) == 0) waitpid(pid, nullptr, 0);
    posix_spawn_file_actions_destroy(&quiet);
  }
  const double client_starts = starts / seconds_since(t0);
  nlohmann::json out = {{"sequential_spawns_per_second", spawns_per_second(o.count, 1, true_argv)},
                        {"concurrent_spawns_per_second", spawns_per_second(o.count * 2, o.threads, true_argv)},
                        {"wide_spawn_median_ms", median_wide_spawn_ms(o.tasks, true_argv)},
                        {"tasks", o.tasks},
                        {"client_starts_per_second", client_starts}};
  if (auto contained = contained_spawns_per_second(o.count, true_argv)) out["contained_spawns_per_second"] = *contained;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"corral-steps-bench: step launch rates through a job's step manager"};
  app.add_option("--uri", o.uri, "Controller address");
  app.add_option("--jobid", o.jobids, "Job(s) to run steps in");
  app.add_option("--mode", o.mode)->check(CLI::IsMember({"sequential", "corral-run", "concurrent", "wide", "floor"}));
  app.add_option("--count", o.count, "Steps (per job)");
  app.add_option("--threads", o.threads, "Concurrent callers per job (concurrent)");
  app.add_option("--nodes", o.nodes, "Nodes of the wide step");
  app.add_option("--tasks", o.tasks, "Tasks of the wide step");
  app.add_option("--corral", o.corral, "The corral program (corral-run)");
  app.add_option("--floor-blocks", o.floor_blocks,
                 "sequential: run the steps in this many blocks, each after as many bare spawns of /bin/true "
                 "(the floor, measured alongside)");
  CLI11_PARSE(app, argc, argv);
  if (o.mode == "floor") {
    auto out = machine_floor(o);
    out["mode"] = o.mode;
    fmt::print("{}\n", out.dump());
    return 0;
  }
  if (o.uri.empty() || o.jobids.empty()) {
    fmt::print(stderr, "corral-steps-bench: --uri and --jobid are needed for --mode {}\n", o.mode);
    return 2;
  }
  try {
    corral::cli::Client controller(o.uri);
    std::vector<std::string> mgrs;
    for (uint64_t id : o.jobids) mgrs.push_back(stepmgr_of(controller, id));
    nlohmann::json out;
    if (o.mode == "sequential")
      out = sequential(o, mgrs[0]);
    else if (o.mode == "corral-run")
      out = corral_run(o, mgrs[0]);
    else if (o.mode == "concurrent")
      out = concurrent(o, mgrs);
    else
      out = wide(o, mgrs[0]);
    out["mode"] = o.mode;
    fmt::print("{}\n", out.dump());
  } catch (const std::exception& e) {
    fmt::print(stderr, "corral-steps-bench: {}\n", e.what());
    return 1;
  }
  return 0;
}
