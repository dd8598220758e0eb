#include "node/orphans.h"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string_view>

#include <spdlog/spdlog.h>

namespace corral::node {

namespace {

// A task forking while we look gets another pass; a few are enough in practice.
constexpr int kMaxPasses = 5;

bool is_pid(const char* name) {
  if (*name == '\0') return false;
  for (const char* c = name; *c != '\0'; ++c)
    if (!std::isdigit(static_cast<unsigned char>(*c))) return false;
  return true;
}

// Whether /proc/PID/environ names a task of ours; an unreadable one does not.
bool is_our_task(const std::string& pid, const std::string& uri_entry, const std::set<std::string>& nodes) {
  std::ifstream in("/proc/" + pid + "/environ", std::ios::binary);
  if (!in) return false;
  std::string env(std::istreambuf_iterator<char>(in), {});
  bool uri = false;
  std::string node;
  size_t start = 0;
  while (start < env.size()) {
    size_t end = env.find('\0', start);
    if (end == std::string::npos) end = env.size();
    std::string_view entry(env.data() + start, end - start);
    if (entry == uri_entry)
      uri = true;
    else if (entry.rfind("CORRAL_NODENAME=", 0) == 0)
      node = entry.substr(16);
    start = end + 1;
  }
  return uri && nodes.count(node) != 0;
}

// The network namespace a process is in ("net:[4026531992]"); empty if unreadable.
std::string net_namespace(const std::string& pid) {
  std::error_code ec;
  auto ns = std::filesystem::read_symlink("/proc/" + pid + "/ns/net", ec);
  return ec ? std::string() : ns.string();
}

size_t kill_pass(const std::string& uri_entry, const std::set<std::string>& nodes, std::set<pid_t>& killed_before) {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir("/proc"), ::closedir);
  if (!dir) return 0;
  const pid_t self = ::getpid();
  // Another network namespace is another host (a container, or a test's host) whose
  // agent may use the same controller and node names: its tasks are not ours.
  const std::string own_net = net_namespace("self");
  size_t killed = 0;
  while (const dirent* d = ::readdir(dir.get())) {
    if (!is_pid(d->d_name)) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(d->d_name));
    if (pid == self || !is_our_task(d->d_name, uri_entry, nodes)) continue;
    if (net_namespace(d->d_name) != own_net) continue;
    // A process killed in an earlier pass may not have exited yet: no second count.
    if (::kill(pid, SIGKILL) == 0 && killed_before.insert(pid).second) {
      spdlog::warn("killed pid {}, a task left behind by an earlier run of this agent", pid);
      ++killed;
    }
  }
  return killed;
}

}  // namespace

size_t kill_orphaned_tasks(const std::string& controller_uri, const std::set<std::string>& nodes) {
  const std::string uri_entry = "CORRAL_URI=" + controller_uri;
  std::set<pid_t> killed;
  for (int pass = 0; pass < kMaxPasses; ++pass)
    if (kill_pass(uri_entry, nodes, killed) == 0) break;
  return killed.size();
}

}  // namespace corral::node
