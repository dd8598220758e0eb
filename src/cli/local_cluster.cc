#include "cli/local_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "cli/client/client.h"
#include "cli/progress.h"
#include "job/hmac_key.h"
#include "util/units.h"

namespace corral::cli {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string errno_text() { return std::strerror(errno); }

// The child's side of spawn(): only async-signal-safe calls until exec.
[[noreturn]] void exec_daemon(pid_t parent, int log_fd, int null_fd, char* const argv[]) {
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != parent) ::_exit(1);  // the parent died before prctl
  ::setpgid(0, 0);                        // a terminal's Ctrl-C is for `corral start` only
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::dup2(null_fd, 0);
  ::dup2(log_fd, 1);
  ::dup2(log_fd, 2);
  ::execv(argv[0], argv);
  const char msg[] = "corral start: cannot execute the daemon\n";
  (void)!::write(2, msg, sizeof msg - 1);
  ::_exit(127);
}

}  // namespace

std::vector<std::string> split_nodes(unsigned nodes, unsigned agents) {
  std::vector<std::string> out;
  if (agents == 0) return out;
  unsigned first = 0;
  for (unsigned i = 0; i < agents; ++i) {
    const unsigned count = nodes / agents + (i < nodes % agents ? 1 : 0);
    if (count == 0) continue;
    const unsigned last = first + count - 1;
    out.push_back(count == 1 ? fmt::format("node{}", first) : fmt::format("node[{}-{}]", first, last));
    first = last + 1;
  }
  return out;
}

std::string rabbit_spec(unsigned nodes, unsigned per_rabbit) {
  std::string out;
  per_rabbit = std::max(1u, per_rabbit);
  for (unsigned first = 0, r = 0; first < nodes; first += per_rabbit, ++r) {
    unsigned last = std::min(nodes, first + per_rabbit) - 1;
    out += fmt::format("{}rabbit{}=", out.empty() ? "" : ";", r) +
           (first == last ? fmt::format("node{}", first) : fmt::format("node[{}-{}]", first, last));
  }
  return out;
}

std::string libexec_dir() {
  if (const char* env = std::getenv("CORRAL_LIBEXEC_DIR"); env && *env) return env;
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : self.parent_path().string();
}

std::string log_tail(const std::string& path, size_t lines) {
  std::ifstream in(path);
  if (!in) return fmt::format("    ({} is missing)\n", path);
  std::deque<std::string> tail;
  for (std::string line; std::getline(in, line);) {
    tail.push_back(std::move(line));
    if (tail.size() > lines) tail.pop_front();
  }
  std::string out = fmt::format("  last lines of {}:\n", path);
  for (const auto& l : tail) out += "    " + l + "\n";
  if (tail.empty()) out += "    (empty)\n";
  return out;
}

LocalCluster::LocalCluster(ClusterConfig cfg) : cfg_(std::move(cfg)) {
  if (cfg_.agents == 0) cfg_.agents = std::min(cfg_.nodes, 4u);
  cfg_.agents = std::min(cfg_.agents, cfg_.nodes);
}

LocalCluster::~LocalCluster() { teardown(); }

Status LocalCluster::make_dir() {
  if (!cfg_.dir.empty()) {
    std::error_code ec;
    fs::create_directories(cfg_.dir, ec);
    if (ec) return io_error(fmt::format("cannot create {}: {}", cfg_.dir, ec.message()));
    dir_ = fs::absolute(cfg_.dir).lexically_normal().string();
  } else {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = fmt::format("{}/corral-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (::mkdtemp(tmpl.data()) == nullptr)
      return io_error(fmt::format("cannot make a directory like {}: {}", tmpl, errno_text()));
    dir_ = tmpl;
    remove_dir_ = true;
    ::chmod(dir_.c_str(), 0755);  // other users' clients may reach the socket
  }
  if (dir_.size() + sizeof("/corrald.sock") > 108)
    return invalid(
        fmt::format("the socket path {}/corrald.sock is too long for a Unix socket; "
                    "use --dir with a shorter path",
                    dir_));
  return {};
}

// corrald signs step credentials with (keys derived from) it and the agents check them,
// so both must hold it before either starts. A kept --dir keeps its key.
Status LocalCluster::make_key_file() {
  if (::access(key_file().c_str(), F_OK) == 0) return job::load_key_file(key_file()).status();
  auto key = job::generate_key();
  if (!key) return key.error();
  return job::write_key_file(key_file(), *key);
}

Status LocalCluster::spawn(const std::string& name, const std::string& log, std::vector<std::string> args) {
  if (::access(args[0].c_str(), X_OK) != 0)
    return not_found(
        fmt::format("cannot run {}: {} (set CORRAL_LIBEXEC_DIR to the directory "
                    "of corrald and corral-node)",
                    args[0], errno_text()));
  int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (log_fd < 0 || null_fd < 0) {
    if (log_fd >= 0) ::close(log_fd);
    if (null_fd >= 0) ::close(null_fd);
    return io_error(fmt::format("cannot open {}: {}", log, errno_text()));
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) exec_daemon(parent, log_fd, null_fd, argv.data());
  ::close(log_fd);
  ::close(null_fd);
  if (pid < 0) return io_error(fmt::format("cannot start {}: {}", name, errno_text()));
  daemons_.push_back({name, log, pid});
  return {};
}

Status LocalCluster::launch() {
  if (auto st = make_dir(); !st) return st;
  if (auto st = make_key_file(); !st) return st;
  const std::string bin = libexec_dir();
  // An absolute path is never a TOML value, so --set takes it as a plain string.
  std::vector<std::string> ctld{bin + "/corrald",      "--socket",      dir_ + "/corrald.sock",
                                "--state-dir",         dir_ + "/state", "--log-file",
                                dir_ + "/corrald.log", "--set",         "controller.key-file=" + key_file()};
  if (!cfg_.config_file.empty()) {
    ctld.push_back("--config");
    ctld.push_back(fs::absolute(cfg_.config_file).string());
  }
  if (cfg_.dws)
    if (auto st = launch_dws(ctld); !st) return st;
  if (!cfg_.ib_sysfs.empty()) {
    ctld.push_back("--set");
    ctld.push_back("infiniband.enabled=true");
  }
  for (const auto& s : cfg_.sets) {
    ctld.push_back("--set");
    ctld.push_back(s);
  }
  if (auto st = spawn("corrald", dir_ + "/corrald.log", ctld); !st) return st;
  const auto parts = split_nodes(cfg_.nodes, cfg_.agents);
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string log = fmt::format("{}/agent-{}.log", dir_, i);
    std::vector<std::string> agent{bin + "/corral-node",
                                   "--controller",
                                   uri(),
                                   "--nodes",
                                   parts[i],
                                   "--cores",
                                   std::to_string(cfg_.cores),
                                   "--gpus",
                                   std::to_string(cfg_.gpus),
                                   "--memory",
                                   cfg_.memory,
                                   "--state-dir",
                                   fmt::format("{}/agent-{}", dir_, i),
                                   "--log-file",
                                   log,
                                   "--key-file",
                                   key_file()};
    if (!cfg_.ib_sysfs.empty()) agent.insert(agent.end(), {"--ib-sysfs", fs::absolute(cfg_.ib_sysfs).string()});
    if (auto st = spawn(fmt::format("corral-node {}", parts[i]), log, agent); !st) return st;
  }
  return {};
}

// The emulated API server first (corrald reads its kubeconfig at start), then the nodes'
// mount daemon; corrald's dws hook is turned on with --set.
Status LocalCluster::launch_dws(std::vector<std::string>& ctld) {
  const std::string data = cfg_.dws_data, dws = dir_ + "/dws", bin = libexec_dir();
  if (data.empty() || !fs::is_directory(data + "/crd") || !fs::is_regular_file(data + "/nnf-ruleset.yaml"))
    return invalid(
        fmt::format("--dws needs the DWS CRDs and NNF ruleset: --dws-data DIR (or CORRAL_DWS_DATA) naming "
                    "a directory with crd/ and nnf-ruleset.yaml{}",
                    data.empty() ? "" : " ('" + data + "' has not)"));
  std::error_code ec;
  fs::create_directories(dws + "/mnt", ec);
  if (ec) return io_error(fmt::format("cannot make {}: {}", dws, ec.message()));
  fs::permissions(dws + "/mnt", fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec, ec);
  auto token = job::generate_key();
  if (!token) return token.error();
  if (auto st = job::write_key_file(dws + "/token", *token); !st) return st;
  const std::string log = dir_ + "/dws-emu.log";
  std::vector<std::string> emu{bin + "/corral-dws-emu",
                               "--crd-dir",
                               data + "/crd",
                               "--ruleset",
                               data + "/nnf-ruleset.yaml",
                               "--state-dir",
                               dws,
                               "--token-file",
                               dws + "/token",
                               "--kubeconfig-out",
                               kubeconfig(),
                               "--rabbits",
                               rabbit_spec(cfg_.nodes, cfg_.nodes_per_rabbit),
                               "--mount-root",
                               dws + "/mnt"};
  if (auto st = spawn("corral-dws-emu", log, emu); !st) return st;
  const auto start = Clock::now();
  while (!fs::exists(kubeconfig())) {
    if (since(start) > 20) return Error{Errc::unavailable, "corral-dws-emu did not start:\n" + log_tail(log)};
    if (std::string died = check_daemons(); !died.empty()) return Error{Errc::unavailable, died};
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::vector<std::string> mountd{bin + "/corral-dws-clientmountd", "--kubeconfig", kubeconfig(), "--nodes",
                                  cfg_.nodes == 1 ? "node0" : fmt::format("node[0-{}]", cfg_.nodes - 1)};
  if (auto st = spawn("corral-dws-clientmountd", dir_ + "/dws-clientmountd.log", mountd); !st) return st;
  ctld.insert(ctld.end(), {"--set", "rabbit.enabled=true", "--set", "rabbit.kubeconfig=" + kubeconfig()});
  return {};
}

std::string LocalCluster::describe_exit(const Daemon& d, int status) const {
  std::string how = WIFSIGNALED(status) ? fmt::format("was killed by signal {}", WTERMSIG(status))
                                        : fmt::format("exited with status {}", WEXITSTATUS(status));
  return fmt::format("{} {}\n{}", d.name, how, log_tail(d.log));
}

std::string LocalCluster::check_daemons() {
  for (Daemon& d : daemons_) {
    if (d.pid <= 0) continue;
    int status = 0;
    if (::waitpid(d.pid, &status, WNOHANG) == d.pid) {
      d.pid = -1;
      return describe_exit(d, status);
    }
  }
  return "";
}

Status LocalCluster::wait_until_up(double timeout_seconds) {
  Client client(uri());
  ProgressLine progress;
  const auto begin = Clock::now();
  unsigned up = 0;
  std::string last_error = "no answer yet";
  while (since(begin) < timeout_seconds) {
    if (std::string died = check_daemons(); !died.empty()) {
      progress.clear();
      return Error{Errc::unavailable, "the local cluster failed to start: " + died};
    }
    if (auto reply = client.ping(1.0)) {
      up = reply->nodes_up();
      if (up >= cfg_.nodes) {
        progress.clear();
        return {};
      }
    } else {
      last_error = reply.message();
    }
    if (since(begin) > 2.0)
      progress.show(
          fmt::format("corral: starting a local cluster: {}/{} nodes up {:.0f}s", up, cfg_.nodes, since(begin)));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  progress.clear();
  std::string logs;
  for (const Daemon& d : daemons_) logs += log_tail(d.log);
  return Error{Errc::unavailable, fmt::format("the local cluster did not come up within {:.0f}s ({} of {} nodes up; "
                                              "last ping: {})\n{}",
                                              timeout_seconds, up, cfg_.nodes, last_error, logs)};
}

void LocalCluster::teardown() {
  if (torn_down_) return;
  torn_down_ = true;
  if (!daemons_.empty() && daemons_.front().pid > 0) {
    Client client(uri());
    (void)client.shutdown(2.0);  // a clean stop persists state; failure is fine here
  }
  for (const Daemon& d : daemons_)
    if (d.pid > 0) ::kill(d.pid, SIGTERM);
  const auto begin = Clock::now();
  for (;;) {
    bool running = false;
    for (Daemon& d : daemons_) {
      if (d.pid > 0 && ::waitpid(d.pid, nullptr, WNOHANG) == d.pid) d.pid = -1;
      running = running || d.pid > 0;
    }
    if (!running) break;
    if (since(begin) > 5.0) {
      for (Daemon& d : daemons_) {
        if (d.pid <= 0) continue;
        ::kill(d.pid, SIGKILL);
        ::waitpid(d.pid, nullptr, 0);
        d.pid = -1;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (remove_dir_) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

}  // namespace corral::cli
