// corral start --test-size=N [-- COMMAND...]: a local test cluster, like `flux start
// --test-size`. With COMMAND, it runs with CORRAL_URI set and the cluster stops when it
// exits (corral start exits with its status); without, it stays up until interrupted.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <memory>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/job_format.h"
#include "cli/local_cluster.h"
#include "cli/values.h"
#include "util/units.h"

extern char** environ;

namespace corral::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct StartState {
  std::string test_size, agents, cores = "4", gpus = "0", memory = "16GiB";
  std::string config, dir;
  bool dws = false;
  std::string ib_sysfs;
  std::string dws_data;
  unsigned nodes_per_rabbit = 4;
  std::vector<std::string> sets;
  std::vector<std::string> command;
};

unsigned number_or_exit(const Result<unsigned>& r) {
  if (!r) usage_error("start", r.message());
  return *r;
}

ClusterConfig make_config(const StartState& st) {
  if (st.test_size.empty()) usage_error("start", "--test-size=N is required");
  ClusterConfig cfg;
  cfg.nodes = number_or_exit(parse_positive("--test-size", st.test_size));
  if (!st.agents.empty()) cfg.agents = number_or_exit(parse_positive("--agents", st.agents));
  cfg.cores = number_or_exit(parse_positive("--cores-per-node", st.cores));
  cfg.gpus = number_or_exit(parse_non_negative("--gpus-per-node", st.gpus));
  if (auto mem = parse_size(st.memory, 1024 * 1024); !mem)
    usage_error("start", fmt::format("--memory-per-node: invalid value '{}': {}", st.memory, mem.message()));
  cfg.memory = st.memory;
  for (const auto& s : st.sets)
    if (s.find('=') == std::string::npos || s.front() == '=')
      usage_error("start", fmt::format("--set: expected KEY=VALUE, got '{}'", s));
  cfg.sets = st.sets;
  cfg.config_file = st.config;
  cfg.dir = st.dir;
  cfg.dws = st.dws;
  cfg.ib_sysfs = st.ib_sysfs;
  cfg.dws_data = st.dws_data;
  if (cfg.dws_data.empty())
    if (const char* env = std::getenv("CORRAL_DWS_DATA")) cfg.dws_data = env;
  cfg.nodes_per_rabbit = st.nodes_per_rabbit;
  return cfg;
}

// SIGINT, SIGTERM and SIGCHLD are taken synchronously with sigtimedwait; blocked before
// any thread or child exists so all inherit the mask (children reset it).
class BlockedSignals {
 public:
  BlockedSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
  }
  ~BlockedSignals() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  BlockedSignals(const BlockedSignals&) = delete;
  BlockedSignals& operator=(const BlockedSignals&) = delete;

  int wait(long ms) const {
    timespec ts{ms / 1000, (ms % 1000) * 1000000};
    int sig = sigtimedwait(&set_, nullptr, &ts);
    return sig < 0 ? 0 : sig;
  }

 private:
  sigset_t set_{};
  sigset_t old_{};
};

pid_t spawn_command(const std::vector<std::string>& command, const std::string& uri, const std::string& kubeconfig) {
  // The command finds this corral first on PATH, as `flux start` does for flux.
  const char* path = std::getenv("PATH");
  std::vector<std::string> env_strings{
      "CORRAL_URI=" + uri, "PATH=" + libexec_dir() + (path && *path ? std::string(":") + path : std::string())};
  if (!kubeconfig.empty()) env_strings.push_back("KUBECONFIG=" + kubeconfig);  // kubectl sees the emulator
  for (char** e = environ; e && *e; ++e)
    if (std::strncmp(*e, "CORRAL_URI=", 11) != 0 && std::strncmp(*e, "PATH=", 5) != 0 &&
        (kubeconfig.empty() || std::strncmp(*e, "KUBECONFIG=", 11) != 0))
      env_strings.emplace_back(*e);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = command;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, dflt;
  sigemptyset(&none);
  sigemptyset(&dflt);
  sigaddset(&dflt, SIGINT);
  sigaddset(&dflt, SIGTERM);
  sigaddset(&dflt, SIGCHLD);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &dflt);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, argv[0], nullptr, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  if (rc != 0) fail("start", fmt::format("cannot run '{}': {}", command[0], std::strerror(rc)), 127);
  return pid;
}

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Waits for the command. A SIGTERM is passed on; after a SIGINT (which a terminal also
// sent the command) the command gets 2 s to exit before SIGTERM, then 5 s before SIGKILL.
int supervise(pid_t pid, LocalCluster& cluster, const BlockedSignals& signals) {
  bool warned = false;
  bool interrupted = false;
  bool termed = false;
  Clock::time_point since_signal{};
  for (;;) {
    int sig = signals.wait(200);
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return shell_exit_code(status);
    if (sig == SIGTERM || (sig == SIGINT && interrupted)) {
      ::kill(pid, SIGTERM);
      termed = true;
      since_signal = Clock::now();
    } else if (sig == SIGINT) {
      interrupted = true;
      since_signal = Clock::now();
    }
    if (interrupted && !termed && since(since_signal) > 2.0) {
      ::kill(pid, SIGTERM);
      termed = true;
      since_signal = Clock::now();
    } else if (termed && since(since_signal) > 5.0) {
      ::kill(pid, SIGKILL);
    }
    if (!warned) {
      if (std::string died = cluster.check_daemons(); !died.empty()) {
        fmt::print(stderr, "corral start: warning: {}", died);
        warned = true;
      }
    }
  }
}

int stay_up(LocalCluster& cluster, const BlockedSignals& signals) {
  fmt::print("export CORRAL_URI={}\n", cluster.uri());
  if (!cluster.kubeconfig().empty()) fmt::print("export KUBECONFIG={}\n", cluster.kubeconfig());
  std::fflush(stdout);
  fmt::print(stderr, "corral: press Ctrl-C to stop the cluster\n");
  for (;;) {
    int sig = signals.wait(500);
    if (sig == SIGINT || sig == SIGTERM) return 0;
    if (std::string died = cluster.check_daemons(); !died.empty()) {
      fmt::print(stderr, "corral start: {}", died);
      return kExitFailure;
    }
  }
}

void run_start(const Globals& g, const StartState& st) {
  ClusterConfig cfg = make_config(st);
  const std::vector<std::string>& command = g.command.empty() ? st.command : g.command;
  BlockedSignals signals;
  int code = 0;
  {
    LocalCluster cluster(cfg);
    if (auto s = cluster.launch(); !s) fail("start", s.message());
    if (auto s = cluster.wait_until_up(30); !s) fail("start", s.message());
    fmt::print(stderr, "corral: local cluster of {} nodes up at {}\n", cfg.nodes, cluster.uri());
    code = command.empty() ? stay_up(cluster, signals)
                           : supervise(spawn_command(command, cluster.uri(), cluster.kubeconfig()), cluster, signals);
  }  // tears down
  if (code != 0) throw CLI::RuntimeError(code);
}

}  // namespace

void add_start_command(CLI::App& app, Globals& g) {
  auto st = std::make_shared<StartState>();
  CLI::App* sub = app.add_subcommand("start", "Start a local test cluster, optionally just for one COMMAND");
  g.takes_command.insert("start");
  sub->add_option("--test-size", st->test_size, "Number of nodes (required)")->type_name("N");
  sub->add_option("--agents", st->agents, "Node agent processes (default: min(N, 4))")->type_name("K");
  sub->add_option("--cores-per-node", st->cores, "Cores per node (default 4)")->type_name("C");
  sub->add_option("--gpus-per-node", st->gpus, "GPUs per node (default 0)")->type_name("G");
  sub->add_option("--memory-per-node", st->memory, "Memory per node (default 16GiB)")->type_name("SIZE");
  sub->add_option("--config", st->config, "corrald configuration file")->type_name("FILE");
  sub->add_option("--set", st->sets, "Override a corrald setting, KEY=VALUE (repeatable)")->type_name("KEY=VALUE");
  sub->add_option("--dir", st->dir, "Use and keep this directory instead of a temporary one")->type_name("DIR");
  sub->add_option("--ib-sysfs", st->ib_sysfs,
                  "Infiniband: every node discovers its devices in this sysfs tree (DIR/NODE when that exists, else "
                  "DIR) and corrald's infiniband hook is on; fabrics come from --config ([[infiniband.fabric]])")
      ->type_name("DIR");
  sub->add_flag("--dws", st->dws,
                "Rabbit storage: start the DWS emulator (a Kubernetes API server) and the nodes' mount daemon, and "
                "turn on corrald's dws hook; COMMAND gets KUBECONFIG");
  sub->add_option("--dws-data", st->dws_data, "The DWS CRDs (crd/) and nnf-ruleset.yaml (default $CORRAL_DWS_DATA)")
      ->type_name("DIR");
  sub->add_option("--nodes-per-rabbit", st->nodes_per_rabbit, "With --dws: nodes one rabbit serves (default 4)")
      ->type_name("N")
      ->check(CLI::Range(1u, 1024u));
  sub->add_option("COMMAND", st->command, "Command to run against the cluster")->expected(-1);
  sub->footer(
      "corrald and corral-node agents hosting N virtual nodes run in a temporary directory.\n"
      "With COMMAND, it runs with CORRAL_URI set, the cluster stops when it exits, and\n"
      "corral start exits with its status. Without, the CORRAL_URI to use is printed and\n"
      "the cluster stays up until Ctrl-C.\n\n"
      "Example: corral start --test-size=4 -- corral run -N4 hostname\n"
      "         corral start --test-size=8 --dws -- corral run -N2 --dw '#DW jobdw type=xfs capacity=1GiB "
      "name=scratch' printenv DW_JOB_scratch");
  sub->callback([&g, st] { run_start(g, *st); });
}

}  // namespace corral::cli
