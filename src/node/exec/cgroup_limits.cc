#include "node/exec/cgroup_limits.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "node/exec/cpu_binding.h"

namespace corral::node {

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> words(const std::string& text, char sep = ' ') {
  std::vector<std::string> out;
  std::string w;
  for (char c : text) {
    if (c == sep || c == '\n' || c == ' ') {
      if (!w.empty()) out.push_back(std::move(w));
      w.clear();
    } else {
      w += c;
    }
  }
  if (!w.empty()) out.push_back(std::move(w));
  return out;
}

bool contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

// 0 or errno.
int write_text(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int err = ok ? 0 : errno;
  ::close(fd);
  return err;
}

Status write_limit(const std::string& dir, const std::string& file, const std::string& value, bool optional = false) {
  const int err = write_text(dir + "/" + file, value);
  if (err == 0 || (optional && err == ENOENT)) return {};
  return io_error(fmt::format("cannot set {} to {} in {}: {}", file, value, dir, std::strerror(err)));
}

// The "key N" line of a flat-keyed cgroup file (memory.events, memory.oom_control).
uint64_t keyed_value(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string k;
  uint64_t v = 0;
  while (in >> k >> v)
    if (k == key) return v;
  return 0;
}

}  // namespace

bool CgroupTree::has(const std::string& controller) const { return contains(controllers, controller); }

const std::vector<std::string>& limit_controllers() {
  static const std::vector<std::string> kControllers{"memory", "pids", "cpuset"};
  return kControllers;
}

std::vector<std::string> enable_v2_controllers(const std::string& base, const std::string& root, std::string* missing) {
  auto available = [&] { return words(read_text(root + "/cgroup.controllers")); };
  std::vector<std::string> have = available();
  std::vector<std::string> why;
  for (const auto& c : limit_controllers()) {
    if (contains(have, c)) continue;
    // The parent may have the controller without handing it down yet (a systemd unit
    // with Delegate=yes whose processes live in a subgroup): ask for it.
    const int err = write_text(base + "/cgroup.subtree_control", "+" + c);
    if (err != 0) why.push_back(fmt::format("{} ({} does not delegate it: {})", c, base, std::strerror(err)));
  }
  have = available();
  std::vector<std::string> enabled;
  for (const auto& c : limit_controllers()) {
    if (!contains(have, c)) continue;
    if (int err = write_text(root + "/cgroup.subtree_control", "+" + c); err != 0) {
      why.push_back(fmt::format("{} (cannot enable it in {}: {})", c, root, std::strerror(err)));
      continue;
    }
    enabled.push_back(c);
  }
  if (missing != nullptr) *missing = fmt::format("{}", fmt::join(why, "; "));
  return enabled;
}

std::vector<V1Base> v1_bases(const std::vector<std::string>& have) {
  std::map<std::string, std::string> mounts;  // controller -> v1 mount point
  {
    std::ifstream in("/proc/self/mounts");
    std::string dev, dir, type, opts, rest;
    while (in >> dev >> dir >> type >> opts && std::getline(in, rest)) {
      if (type != "cgroup") continue;
      for (const auto& o : words(opts, ','))
        if (contains(limit_controllers(), o)) mounts.emplace(o, dir);
    }
  }
  std::vector<V1Base> out;
  std::ifstream self("/proc/self/cgroup");
  for (std::string line; std::getline(self, line);) {
    // "4:memory:/some/path"; v2's line is "0::/path" and names no controller.
    const auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string path = line.substr(b + 1);
    for (const auto& c : words(line.substr(a + 1, b - a - 1), ',')) {
      auto m = mounts.find(c);
      if (m == mounts.end() || contains(have, c)) continue;
      out.push_back({c, path == "/" ? m->second : m->second + path});
    }
  }
  return out;
}

Status init_cgroup_dir(const CgroupTree& tree, const std::string& dir) {
  if (tree.v2 || !tree.has("cpuset")) return {};
  const std::string parent = dir.substr(0, dir.rfind('/'));
  for (const char* file : {"cpuset.cpus", "cpuset.mems"}) {
    const auto value = words(read_text(parent + "/" + file));
    if (auto st = write_limit(dir, file, value.empty() ? "" : value.front()); !st) return st;
  }
  return {};
}

bool enforces(const CgroupTree& tree, const JobLimits& limits) {
  return (limits.memory_bytes != 0 && tree.has("memory")) || (limits.pids != 0 && tree.has("pids")) ||
         (!limits.cpus.empty() && tree.has("cpuset"));
}

Status write_limits(const CgroupTree& tree, const std::string& dir, const JobLimits& limits) {
  if (limits.memory_bytes != 0 && tree.has("memory")) {
    const std::string bytes = std::to_string(limits.memory_bytes);
    if (tree.v2) {
      if (auto st = write_limit(dir, "memory.max", bytes); !st) return st;
      if (auto st = write_limit(dir, "memory.swap.max", "0", true); !st) return st;
    } else {
      // memory+swap may never be below memory alone: memory first.
      if (auto st = write_limit(dir, "memory.limit_in_bytes", bytes); !st) return st;
      if (auto st = write_limit(dir, "memory.memsw.limit_in_bytes", bytes, true); !st) return st;
    }
  }
  if (limits.pids != 0 && tree.has("pids"))
    if (auto st = write_limit(dir, "pids.max", std::to_string(limits.pids)); !st) return st;
  if (!limits.cpus.empty() && tree.has("cpuset"))
    if (auto st = write_limit(dir, "cpuset.cpus", cpu_list_text(limits.cpus)); !st) return st;
  return {};
}

uint64_t oom_kills(const CgroupTree& tree, const std::string& dir, bool* hierarchical) {
  if (hierarchical != nullptr) *hierarchical = tree.v2;
  if (!tree.has("memory")) return 0;
  return keyed_value(dir + (tree.v2 ? "/memory.events" : "/memory.oom_control"), "oom_kill");
}

}  // namespace corral::node
