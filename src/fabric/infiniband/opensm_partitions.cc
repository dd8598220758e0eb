#include "fabric/infiniband/opensm_partitions.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include <fmt/format.h>

#include "util/unique_fd.h"
#include "util/write_all.h"

extern char** environ;

namespace corral::fabric::infiniband {
namespace {

constexpr size_t kGuidsPerLine = 32;
constexpr std::string_view kMarker = "# corral: the partitions of jobs (members as corral last applied them)";
constexpr double kReloadTimeout = 30;

// OpenSM reads a partition's name up to '=': keep it to letters, digits, '_' and '-'.
std::string safe_name(const std::string& name) {
  std::string out;
  for (char c : name) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') ? c : '_';
  return out.empty() ? "corral" : out;
}

Status write_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".corral-tmp";
  ::unlink(tmp.c_str());
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (fd.get() < 0) return io_error(fmt::format("cannot create {}: {}", tmp, std::strerror(errno)));
  if (!write_all(fd.get(), text) || ::fsync(fd.get()) != 0) {
    ::unlink(tmp.c_str());
    return io_error(fmt::format("cannot write {}: {}", tmp, std::strerror(errno)));
  }
  fd.reset();
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return io_error(fmt::format("cannot replace {}: {}", path, std::strerror(errno)));
  }
  return {};
}

// Runs the site's reload command through /bin/sh, stdin from /dev/null and no other
// descriptor of corrald's beyond stdout and stderr, at most 30 s.
Status run_reload(const std::string& command) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  // None of corrald's descriptors (its database, sockets, logs) reaches the command.
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, "/bin/sh", &fa, nullptr, const_cast<char**>(argv), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return Error{Errc::unavailable, fmt::format("cannot run '{}': {}", command, std::strerror(rc))};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kReloadTimeout);
  int status = 0;
  for (;;) {
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) return Error{Errc::internal, fmt::format("waiting for '{}' failed", command)};
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return Error{Errc::unavailable, fmt::format("'{}' took longer than {:.0f}s", command, kReloadTimeout)};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
  return Error{Errc::unavailable, WIFEXITED(status)
                                      ? fmt::format("'{}' exited with {}", command, WEXITSTATUS(status))
                                      : fmt::format("'{}' was killed by signal {}", command, WTERMSIG(status))};
}

}  // namespace

std::string render_partitions(const std::string& base, const std::map<uint16_t, std::string>& names,
                              const std::map<uint16_t, std::set<std::string>>& members) {
  std::string out = "# Written by corral's infiniband hook after every change: edit infiniband.opensm-base instead.\n";
  if (base.empty())
    out += "Default=0x7fff, ipoib : ALL=full ;\n";
  else
    out += base + (base.back() == '\n' ? "" : "\n");
  out += std::string(kMarker) + "\n";
  for (const auto& [pkey, guids] : members) {
    if (guids.empty()) continue;
    auto named = names.find(pkey);
    const std::string name = named != names.end() ? safe_name(named->second) : fmt::format("corral_{:04x}", pkey);
    size_t on_line = 0;
    for (const auto& g : guids) {
      if (on_line == 0) out += fmt::format("{}=0x{:04x}, ipoib, defmember=full : ", name, pkey);
      out += fmt::format("{}0x{}", on_line ? ", " : "", g);
      if (++on_line == kGuidsPerLine) {
        out += " ;\n";
        on_line = 0;
      }
    }
    if (on_line) out += " ;\n";
  }
  return out;
}

std::map<uint16_t, std::set<std::string>> parse_corral_partitions(const std::string& text) {
  std::map<uint16_t, std::set<std::string>> out;
  const size_t at = text.find(kMarker);
  if (at == std::string::npos) return out;
  size_t pos = text.find('\n', at);
  while (pos != std::string::npos && pos + 1 < text.size()) {
    const size_t end = text.find('\n', pos + 1);
    const std::string line = text.substr(pos + 1, end == std::string::npos ? std::string::npos : end - pos - 1);
    pos = end;
    const size_t eq = line.find("=0x"), colon = line.find(':');
    if (eq == std::string::npos || colon == std::string::npos || colon < eq) continue;
    const unsigned long pkey = std::strtoul(line.c_str() + eq + 3, nullptr, 16);
    if (pkey == 0 || pkey >= kDefaultPkey) continue;
    size_t p = colon + 1;
    while ((p = line.find("0x", p)) != std::string::npos) {
      size_t q = p + 2;
      while (q < line.size() && std::isxdigit(static_cast<unsigned char>(line[q]))) ++q;
      if (q - p - 2 == 16) out[static_cast<uint16_t>(pkey)].insert(line.substr(p + 2, 16));
      p = q;
    }
  }
  return out;
}

OpenSmPartitions::OpenSmPartitions(std::string path, std::string reload, std::string base,
                                   std::map<uint16_t, std::string> names)
    : path_(std::move(path)), reload_(std::move(reload)), base_(std::move(base)), names_(std::move(names)) {
  // The file is the record of what was applied: a restarted controller picks up from it.
  std::ifstream in(path_);
  members_ = parse_corral_partitions(std::string(std::istreambuf_iterator<char>(in), {}));
}

Status OpenSmPartitions::join(uint16_t pkey, const std::vector<std::string>& guids) {
  auto& set = members_[pkey];
  const size_t before = set.size();
  set.insert(guids.begin(), guids.end());
  return set.size() == before ? Status() : write_and_reload();
}

Status OpenSmPartitions::leave(uint16_t pkey, const std::vector<std::string>& guids, bool drop) {
  auto it = members_.find(pkey);
  if (it == members_.end()) return {};
  if (drop) {
    members_.erase(it);
  } else {
    for (const auto& g : guids) it->second.erase(g);
    if (it->second.empty()) members_.erase(it);
  }
  return write_and_reload();
}

Status OpenSmPartitions::write_and_reload() {
  if (auto st = write_file(path_, render_partitions(base_, names_, members_)); !st) return st;
  if (reload_.empty()) return {};
  if (auto st = run_reload(reload_); !st) return Error{st.error().code, "OpenSM reload: " + st.message()};
  return {};
}

}  // namespace corral::fabric::infiniband
