#include "node/exec/task_cgroups.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <fstream>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

namespace corral::node {

namespace {

constexpr long kCgroup2Magic = 0x63677270;  // CGROUP2_SUPER_MAGIC
constexpr double kDrainInterval = 0.05;
constexpr int kDrainTries = 200;                       // 10 s: then it is left for the next start of the agent
constexpr std::string_view kAgentSubgroup = "/agent";  // systemd's DelegateSubgroup= of our unit
constexpr size_t kMaxFreeSlots = 32;                   // per job: emptied step cgroups kept for reuse

std::string errno_text(int err) { return std::strerror(err); }

bool is_cgroup2(const std::string& dir) {
  struct statfs fs {};
  return ::statfs(dir.c_str(), &fs) == 0 && static_cast<long>(fs.f_type) == kCgroup2Magic;
}

// The cgroup v2 mount point and this process's cgroup in it: where "auto" puts ROOT. Under
// systemd with `DelegateSubgroup=agent` (packaging/systemd/corral-node.service) the agent
// lives in the delegated cgroup's "agent" subgroup, and ROOT goes beside it: a cgroup
// that holds a process cannot hand controllers to its children.
std::optional<std::string> own_cgroup2_dir() {
  std::ifstream mounts("/proc/self/mounts");
  std::string dev, dir, type, rest, mount;
  while (mounts >> dev >> dir >> type && std::getline(mounts, rest)) {
    if (type == "cgroup2") {
      mount = dir;
      break;
    }
  }
  if (mount.empty()) return std::nullopt;
  std::ifstream self("/proc/self/cgroup");
  for (std::string line; std::getline(self, line);) {
    if (line.rfind("0::", 0) != 0) continue;
    std::string own = line.size() > 4 ? line.substr(3) : "";
    if (own.ends_with(kAgentSubgroup)) own.resize(own.size() - kAgentSubgroup.size());
    return mount + own;
  }
  return mount;
}

// Agent ids are hostlists ("node[0-3]"): keep what a directory name may safely carry.
std::string dir_name(const std::string& agent_id, const std::string& state_dir) {
  std::string out = "corral-";
  for (char c : agent_id) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') ? c : '_';
  uint32_t h = 2166136261u;  // FNV-1a of the state directory: one ROOT per agent instance
  for (unsigned char c : state_dir) h = (h ^ c) * 16777619u;
  return out + fmt::format("-{:08x}", h);
}

std::vector<std::string> subdirs(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (struct dirent* e = ::readdir(d)) {
    if (e->d_type == DT_DIR && e->d_name[0] != '.') out.push_back(dir + "/" + e->d_name);
  }
  ::closedir(d);
  return out;
}

std::vector<pid_t> procs(const std::string& dir) {
  std::vector<pid_t> out;
  std::ifstream in(dir + "/cgroup.procs");
  for (long pid = 0; in >> pid;) out.push_back(static_cast<pid_t>(pid));
  return out;
}

bool write_file(const std::string& path, const std::string& text, int* err) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    *err = errno;
    return false;
  }
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  *err = ok ? 0 : errno;
  ::close(fd);
  return ok;
}

// Kills every process in cgroup `dir` (cgroup.kill, or one by one where the kernel has
// none). Returns how many processes it found there.
size_t kill_cgroup(const std::string& dir) {
  const std::vector<pid_t> pids = procs(dir);
  if (pids.empty()) return 0;
  int err = 0;
  if (!write_file(dir + "/cgroup.kill", "1", &err)) {
    // Kernels before 5.14 have no cgroup.kill: one by one (a fork meanwhile is caught
    // by the next round, as release() retries until the cgroup is empty).
    for (pid_t pid : pids) ::kill(pid, SIGKILL);
  }
  return pids.size();
}

// The file that says whether cgroup `dir` of `tree` holds processes: v2's cgroup.events,
// v1's cgroup.procs (which lists them).
UniqueFd open_population(const CgroupTree& tree, const std::string& dir) {
  const std::string file = dir + (tree.v2 ? "/cgroup.events" : "/cgroup.procs");
  return UniqueFd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
}

// Read from its start every time: the kernel writes the file anew for each read at 0.
bool reads_empty(const CgroupTree& tree, int fd) {
  if (fd < 0) return false;
  char buf[256];
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  if (n < 0) return false;
  if (!tree.v2) return n == 0;
  buf[n] = '\0';
  return std::strstr(buf, "populated 0") != nullptr;
}

// rmdir of a cgroup: fails with EBUSY while processes (or child cgroups) remain.
bool remove_dir(const std::string& dir) { return ::rmdir(dir.c_str()) == 0 || errno == ENOENT; }

// Kills and removes `dir` and every cgroup below it; false if something is still busy.
bool kill_tree(const std::string& dir, size_t& found) {
  bool all = true;
  for (const auto& sub : subdirs(dir)) all = kill_tree(sub, found) && all;
  found += kill_cgroup(dir);
  return remove_dir(dir) && all;
}

}  // namespace

Result<std::unique_ptr<TaskCgroups>> TaskCgroups::open(EventLoop& loop, const std::string& setting,
                                                       const std::string& agent_id, const std::string& state_dir,
                                                       std::string* why_off) {
  auto off = [&](std::string why) -> Result<std::unique_ptr<TaskCgroups>> {
    if (why_off != nullptr) *why_off = std::move(why);
    return std::unique_ptr<TaskCgroups>();
  };
  if (setting.empty() || setting == "none") return off("turned off (--cgroups none)");
  char real[PATH_MAX];
  const std::string where = ::realpath(state_dir.c_str(), real) != nullptr ? std::string(real) : state_dir;
  const std::string name = dir_name(agent_id, where);
  std::string missing;
  auto v2 = open_v2(setting, name, missing);
  if (!v2) return setting == "auto" ? off(v2.message()) : Result<std::unique_ptr<TaskCgroups>>(v2.error());
  std::vector<CgroupTree> trees;
  if (*v2) trees.push_back(std::move(**v2));
  add_v1_trees(trees, name, missing);
  if (trees.empty()) return off("no cgroup hierarchy is mounted and writable");
  std::string lacking = missing_limits(trees, missing);
  return std::unique_ptr<TaskCgroups>(new TaskCgroups(loop, std::move(trees), std::move(lacking)));
}

Result<std::optional<CgroupTree>> TaskCgroups::open_v2(const std::string& setting, const std::string& name,
                                                       std::string& missing) {
  const std::string base = setting == "auto" ? own_cgroup2_dir().value_or("") : setting;
  if (base.empty()) return std::optional<CgroupTree>();
  if (!is_cgroup2(base)) {
    if (setting == "auto") return std::optional<CgroupTree>();
    return invalid(fmt::format("--cgroups: {} is not in a cgroup v2 hierarchy", base));
  }
  std::string root = base + (base.back() == '/' ? "" : "/") + name;
  if (::mkdir(root.c_str(), 0755) != 0 && errno != EEXIST)
    return io_error(fmt::format("--cgroups: cannot create {}: {}", root, errno_text(errno)));
  auto enabled = enable_v2_controllers(base, root, &missing);
  return std::optional<CgroupTree>(CgroupTree{std::move(root), true, std::move(enabled)});
}

void TaskCgroups::add_v1_trees(std::vector<CgroupTree>& trees, const std::string& name, std::string& missing) {
  auto note = [&missing](const std::string& what) { missing += (missing.empty() ? "" : "; ") + what; };
  const std::vector<std::string> have = trees.empty() ? std::vector<std::string>{} : trees.front().controllers;
  for (const auto& v1 : v1_bases(have)) {
    CgroupTree tree{v1.dir + "/" + name, false, {v1.controller}};
    if (::mkdir(tree.root.c_str(), 0755) != 0 && errno != EEXIST) {
      note(fmt::format("{} (cannot create {}: {})", v1.controller, tree.root, errno_text(errno)));
      continue;
    }
    if (auto st = init_cgroup_dir(tree, tree.root); !st) {
      note(fmt::format("{} ({})", v1.controller, st.message()));
      ::rmdir(tree.root.c_str());
      continue;
    }
    trees.push_back(std::move(tree));
  }
}

// "" when every limit controller has a tree; else which are missing and `why`.
std::string TaskCgroups::missing_limits(const std::vector<CgroupTree>& trees, const std::string& why) {
  std::string still;
  for (const auto& c : limit_controllers()) {
    const bool found = std::any_of(trees.begin(), trees.end(), [&c](const CgroupTree& t) { return t.has(c); });
    if (!found) still += fmt::format("{}{}", still.empty() ? "" : ", ", c);
  }
  if (still.empty()) return {};
  return fmt::format("no {} limits: {}", still, why.empty() ? "no hierarchy has them" : why);
}

TaskCgroups::TaskCgroups(EventLoop& loop, std::vector<CgroupTree> trees, std::string missing)
    : loop_(loop), trees_(std::move(trees)), missing_(std::move(missing)) {}

TaskCgroups::~TaskCgroups() {
  if (timer_) loop_.cancel_timer(*timer_);
  // Shutdown: the agent already signalled its tasks; give the kernel a moment to let
  // them go, so that no empty cgroup stays behind.
  for (const auto& tree : trees_) {
    size_t found = 0;
    for (int i = 0; i < 50 && !kill_tree(tree.root, found); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string TaskCgroups::describe() const {
  std::string out;
  for (const auto& t : trees_)
    out += fmt::format("{}{} (cgroup v{}{}{})", out.empty() ? "" : ", ", t.root, t.v2 ? 2 : 1,
                       t.controllers.empty() ? "" : ": ", fmt::join(t.controllers, " "));
  return out;
}

std::string TaskCgroups::job_path(const CgroupTree& tree, uint64_t jobid) {
  return fmt::format("{}/job_{}", tree.root, jobid);
}

Status TaskCgroups::make_dir(const CgroupTree& tree, const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0) {
    struct stat st {};
    // (A v1 hierarchy has control files of its own in every cgroup: never take one for a unit.)
    if (errno == EEXIST && ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return {};
    return io_error(fmt::format("cannot create cgroup {}: {}", dir, errno_text(errno)));
  }
  return init_cgroup_dir(tree, dir);
}

void TaskCgroups::open_job(uint64_t jobid) { free_slots_.try_emplace(jobid); }

bool TaskCgroups::holds(uint64_t jobid, const CgroupTree& tree) const {
  if (&tree == &trees_.front()) return true;
  auto it = limited_in_.find(jobid);
  return it != limited_in_.end() && (it->second >> (&tree - trees_.data()) & 1) != 0;
}

Result<std::vector<std::string>> TaskCgroups::create(uint64_t jobid, const std::string& unit) {
  bool reused = false;
  const std::string dir = take_dir(jobid, unit, reused);
  std::vector<std::string> out;
  for (const auto& tree : trees_) {
    if (!holds(jobid, tree)) continue;
    const std::string job_dir = job_path(tree, jobid);
    std::string path = job_dir + "/" + dir;
    if (reused) {  // a free slot of the job: both directories are there
      out.push_back(std::move(path));
      continue;
    }
    for (const auto& d : {job_dir, path})
      if (auto st = make_dir(tree, d); !st) return st.error();
    out.push_back(path);
  }
  return out;
}

Status TaskCgroups::limit_job(uint64_t jobid, const JobLimits& limits) {
  uint32_t& in = limited_in_[jobid];
  for (const auto& tree : trees_) {
    if (&tree != &trees_.front()) {
      if (!enforces(tree, limits)) continue;
      in |= 1u << (&tree - trees_.data());
    }
    const std::string dir = job_path(tree, jobid);
    if (auto st = make_dir(tree, dir); !st) return st;
    if (auto st = write_limits(tree, dir, limits); !st) return st;
  }
  return {};
}

uint64_t TaskCgroups::oom_kills(uint64_t jobid) const {
  auto released = oom_released_.find(jobid);
  uint64_t n = released == oom_released_.end() ? 0 : released->second;
  for (const auto& tree : trees_) {
    if (!holds(jobid, tree)) continue;
    bool hierarchical = false;
    const std::string dir = job_path(tree, jobid);
    n += node::oom_kills(tree, dir, &hierarchical);
    if (!hierarchical)
      for (const auto& unit : subdirs(dir)) n += node::oom_kills(tree, unit);
  }
  return n;
}

std::string TaskCgroups::take_dir(uint64_t jobid, const std::string& unit, bool& reused) {
  reused = false;
  if (unit == kJobUnit) return unit;
  std::string slot;
  if (auto it = free_slots_.find(jobid); it != free_slots_.end() && !it->second.empty()) {
    slot = std::move(it->second.back());
    it->second.pop_back();
    reused = true;
  } else {
    slot = fmt::format("step_slot_{}", ++next_slot_);
  }
  slot_of_unit_[{jobid, unit}] = slot;
  return slot;
}

std::shared_ptr<const UniqueFd> TaskCgroups::entry(uint64_t jobid, const std::string& unit) {
  const CgroupTree& first = trees_.front();
  auto slot = slot_of_unit_.find({jobid, unit});
  if (!first.v2 || slot == slot_of_unit_.end()) return nullptr;
  std::shared_ptr<const UniqueFd>& fd = slot_entry_[{jobid, slot->second}];
  if (!fd) {
    const std::string dir = job_path(first, jobid) + "/" + slot->second;
    if (UniqueFd opened(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)); opened.valid())
      fd = std::make_shared<const UniqueFd>(std::move(opened));
  }
  return fd;
}

bool TaskCgroups::keep_free(uint64_t jobid, const std::string& dir) {
  auto it = free_slots_.find(jobid);
  if (dir == kJobUnit || it == free_slots_.end() || it->second.size() >= kMaxFreeSlots) return false;
  const CgroupTree& first = trees_.front();
  // Opened the first time the slot is emptied, kept while the slot is: a job's sequential
  // steps reuse one slot, and look into it with one read each.
  UniqueFd& population = slot_population_[{jobid, dir}];
  if (!population.valid()) population = open_population(first, job_path(first, jobid) + "/" + dir);
  if (!reads_empty(first, population.get())) return false;
  // (v1 OOM kills counted in the slot stay there, counted by oom_kills(), until it goes.)
  it->second.push_back(dir);
  return true;
}

void TaskCgroups::drop_free_slots(uint64_t jobid) {
  auto it = free_slots_.find(jobid);
  if (it == free_slots_.end()) return;
  for (const auto& slot : it->second) {
    slot_population_.erase({jobid, slot});
    slot_entry_.erase({jobid, slot});
    for (const auto& tree : trees_)
      if (const std::string path = job_path(tree, jobid) + "/" + slot; holds(jobid, tree) && !remove_dir(path)) {
        draining_.emplace(path, 0);  // (no task can join a free slot: only as a safeguard)
        if (!timer_) timer_ = loop_.add_timer(kDrainInterval, [this] { drain(); });
      }
  }
  free_slots_.erase(it);
}

void TaskCgroups::release(uint64_t jobid, const std::string& unit) {
  std::string dir = unit;
  if (auto slot = slot_of_unit_.find({jobid, unit}); slot != slot_of_unit_.end()) {
    dir = std::move(slot->second);
    slot_of_unit_.erase(slot);
  }
  if (keep_free(jobid, dir)) return;
  slot_population_.erase({jobid, dir});
  slot_entry_.erase({jobid, dir});
  if (unit == kJobUnit) drop_free_slots(jobid);
  for (const auto& tree : trees_) {
    if (!holds(jobid, tree)) continue;
    const std::string path = job_path(tree, jobid) + "/" + dir;
    if (!tree.v2)  // v1 keeps the count in the unit, which goes now (v2 counts it in the job too)
      if (const uint64_t kills = node::oom_kills(tree, path); kills > 0) oom_released_[jobid] += kills;
    // Usually every task is gone and the cgroup goes at once; EBUSY means something is left.
    if (!remove_dir(path)) {
      if (size_t n = kill_cgroup(path); n > 0 && &tree == &trees_.front())
        spdlog::info("job {}: killed {} process(es) left in {} after its tasks ended", jobid, n, unit);
      draining_.emplace(path, 0);
      if (!timer_) timer_ = loop_.add_timer(kDrainInterval, [this] { drain(); });
      continue;
    }
    remove_dir(job_path(tree, jobid));  // EBUSY while other units remain
  }
  if (unit == kJobUnit) {
    oom_released_.erase(jobid);
    limited_in_.erase(jobid);
  }
}

bool TaskCgroups::draining(uint64_t jobid) const {
  for (const auto& tree : trees_) {
    const std::string dir = job_path(tree, jobid);
    auto it = draining_.lower_bound(dir);
    if (it != draining_.end() && (it->first == dir || it->first.rfind(dir + "/", 0) == 0)) return true;
  }
  return false;
}

void TaskCgroups::drain() {
  timer_.reset();
  for (auto it = draining_.begin(); it != draining_.end();) {
    const std::string& dir = it->first;
    kill_cgroup(dir);
    if (remove_dir(dir)) {
      // A unit gone: its job's directory too once it is the last.
      if (std::string parent = dir.substr(0, dir.rfind('/'));
          parent.substr(parent.rfind('/') + 1).rfind("job_", 0) == 0)
        remove_dir(parent);
    } else if (++it->second < kDrainTries) {
      ++it;
      continue;
    } else {
      spdlog::warn("cannot remove cgroup {} ({}): left for the next start of this agent", dir, errno_text(errno));
    }
    it = draining_.erase(it);
  }
  if (!draining_.empty()) timer_ = loop_.add_timer(kDrainInterval, [this] { drain(); });
}

size_t TaskCgroups::clear_leftovers() {
  size_t found = 0, elsewhere = 0;  // the same processes are in every hierarchy: count them once
  for (const auto& tree : trees_) {
    for (const auto& job : subdirs(tree.root)) {
      if (kill_tree(job, &tree == &trees_.front() ? found : elsewhere)) continue;
      for (const auto& unit : subdirs(job)) draining_.emplace(unit, 0);
      if (subdirs(job).empty()) draining_.emplace(job, 0);
    }
  }
  if (!draining_.empty() && !timer_) timer_ = loop_.add_timer(kDrainInterval, [this] { drain(); });
  return found;
}

const std::vector<std::string>& unit_cgroup(TaskCgroups* cgroups, std::optional<std::vector<std::string>>& slot,
                                            uint64_t jobid, const std::string& unit, const std::string& who) {
  if (slot) return *slot;
  slot.emplace();
  if (cgroups == nullptr) return *slot;
  if (auto dir = cgroups->create(jobid, unit); dir)
    slot = std::move(*dir);
  else
    spdlog::warn("{}: tasks run uncontained: {}", who, dir.message());
  return *slot;
}

}  // namespace corral::node
