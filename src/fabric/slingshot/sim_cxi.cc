#include "fabric/slingshot/sim_cxi.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fabric/slingshot/cxi_resources.h"

namespace corral::fabric::slingshot {

namespace {

using nlohmann::json;
constexpr int kStateVersion = 1;
constexpr size_t kMaxVnis = 4;
constexpr size_t kMaxMembers = 2;

struct SvcState {
  Service svc;
  std::optional<double> first_destroy;  // when destroy was first attempted (busy fault)
};

struct NicState {
  std::string name;
  uint32_t next_id = 1;  // ids are never reused within a state file
  std::vector<SvcState> services;
};

struct NodeState {
  std::vector<NicState> nics;
};

std::string nic_name(uint32_t i) { return "cxi" + std::to_string(i); }

// ---- the state file ----------------------------------------------------------------

json limits_to_json(const Limits& l) {
  json j = json::object();
  for (size_t i = 0; i < kNumRsrc; ++i)
    j[rsrc_name(static_cast<Rsrc>(i))] = {{"reserved", l[i].reserved}, {"max", l[i].max}};
  return j;
}

json svc_to_json(const SvcState& s) {
  const ServiceDesc& d = s.svc.desc;
  json j = {{"id", s.svc.id}, {"system", d.system}, {"members", d.member_uids},
            {"vnis", d.vnis}, {"tcs", d.tcs},       {"limited", d.limited}};
  if (d.limited) j["limits"] = limits_to_json(d.limits);
  if (s.first_destroy) j["destroy_first_attempt"] = *s.first_destroy;
  return j;
}

json state_to_json(const NodeState& st, const std::string& node) {
  json nics = json::array();
  for (const auto& n : st.nics) {
    json svcs = json::array();
    for (const auto& s : n.services) svcs.push_back(svc_to_json(s));
    nics.push_back({{"name", n.name}, {"next_id", n.next_id}, {"services", svcs}});
  }
  return {{"version", kStateVersion}, {"node", node}, {"nics", nics}};
}

// Throws json exceptions on a malformed file; the caller turns them into a message.
SvcState svc_from_json(const json& j) {
  SvcState s;
  s.svc.id = j.at("id").get<uint32_t>();
  ServiceDesc& d = s.svc.desc;
  d.system = j.at("system").get<bool>();
  d.member_uids = j.at("members").get<std::vector<uint32_t>>();
  d.vnis = j.at("vnis").get<std::vector<uint16_t>>();
  d.tcs = j.at("tcs").get<uint32_t>();
  d.limited = j.at("limited").get<bool>();
  if (d.limited) {
    const json& l = j.at("limits");
    for (size_t i = 0; i < kNumRsrc; ++i) {
      const json& r = l.at(rsrc_name(static_cast<Rsrc>(i)));
      d.limits[i] = {r.at("reserved").get<uint32_t>(), r.at("max").get<uint32_t>()};
    }
  }
  if (j.contains("destroy_first_attempt")) s.first_destroy = j.at("destroy_first_attempt").get<double>();
  return s;
}

NodeState state_from_json(const json& j) {
  if (j.at("version").get<int>() != kStateVersion)
    throw std::runtime_error("unsupported version " + j.at("version").dump());
  NodeState st;
  for (const auto& n : j.at("nics")) {
    NicState nic;
    nic.name = n.at("name").get<std::string>();
    nic.next_id = n.at("next_id").get<uint32_t>();
    for (const auto& s : n.at("services")) nic.services.push_back(svc_from_json(s));
    st.nics.push_back(std::move(nic));
  }
  return st;
}

// A missing file is a node seen for the first time: an empty state.
Result<NodeState> read_state(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return NodeState{};
    return invalid(fmt::format("simulated NIC state '{}': cannot be read: {}", path, std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return state_from_json(json::parse(text.str()));
  } catch (const std::exception& e) {
    return invalid(
        fmt::format("simulated NIC state '{}' is malformed ({}); fix or remove it "
                    "(removing forgets the node's services)",
                    path, e.what()));
  }
}

// Write a temporary file and rename it over the state: readers see the old or the new.
Status write_state(const std::string& path, const NodeState& st, const std::string& node) {
  const std::string tmp = path + ".tmp";
  const std::string text = state_to_json(st, node).dump(1) + "\n";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return io_error(fmt::format("simulated NIC state '{}': {}", tmp, std::strerror(errno)));
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ok = ::fsync(fd) == 0 && ok;
  ok = ::close(fd) == 0 && ok;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return io_error(fmt::format("simulated NIC state '{}': cannot write: {}", path, why));
  }
  return {};
}

// Held for one whole operation: other processes wait for it.
class FileLock {
 public:
  // `shared`: a reader (any user may check a service, as the real driver lets any process
  // try); it never creates the lock file, and a node without one has nothing to lock yet.
  static Result<FileLock> acquire(const std::string& path, bool shared = false) {
    int fd = shared ? ::open(path.c_str(), O_RDONLY | O_CLOEXEC)
                    : ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0 && shared && errno == ENOENT) return FileLock(-1);
    if (fd < 0) return io_error(fmt::format("simulated NIC lock '{}': {}", path, std::strerror(errno)));
    FileLock lock(fd);
    while (::flock(fd, shared ? LOCK_SH : LOCK_EX) != 0)
      if (errno != EINTR) return io_error(fmt::format("simulated NIC lock '{}': {}", path, std::strerror(errno)));
    return lock;
  }
  FileLock(FileLock&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  FileLock& operator=(FileLock&&) = delete;
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the flock
  }

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_;
};

// ---- the node's NICs -----------------------------------------------------------------

bool listed_on(const SimSystemService& s, const std::string& nic) {
  return s.nics.empty() || std::find(s.nics.begin(), s.nics.end(), nic) != s.nics.end();
}

// NICs the configuration gives the node and the state does not have yet are made now,
// with their system services first (ids 1, 2, ...). Returns whether anything was added.
bool ensure_nics(NodeState& st, const SimConfig& cfg) {
  bool added = false;
  for (uint32_t i = 0; i < cfg.nics; ++i) {
    const std::string name = nic_name(i);
    auto it = std::find_if(st.nics.begin(), st.nics.end(), [&](const NicState& n) { return n.name == name; });
    if (it != st.nics.end()) continue;
    NicState nic{name, 1, {}};
    for (const auto& s : cfg.system_services)
      if (listed_on(s, name)) nic.services.push_back({Service{nic.next_id++, s.desc}, std::nullopt});
    st.nics.push_back(std::move(nic));
    added = true;
  }
  return added;
}

const SimFault* find_fault(const SimConfig& cfg, FaultKind kind, const std::string& node, const std::string& nic) {
  for (const auto& f : cfg.faults)
    if (f.kind == kind && f.applies(node, nic)) return &f;
  return nullptr;
}

// The NIC when the node has it (configured, in the state and not removed by a fault).
Result<NicState*> find_nic(NodeState& st, const SimConfig& cfg, const std::string& node, const std::string& nic) {
  const std::string absent = fmt::format("NIC {} is not present on node {}", nic, node);
  auto it = std::find_if(st.nics.begin(), st.nics.end(), [&](const NicState& n) { return n.name == nic; });
  if (it == st.nics.end()) return not_found(absent);
  bool configured = false;
  for (uint32_t i = 0; i < cfg.nics; ++i) configured = configured || nic_name(i) == nic;
  if (!configured || find_fault(cfg, FaultKind::missing_nic, node, nic)) return not_found(absent);
  return &*it;
}

Nic to_nic(const NicState& n, const SimConfig& cfg) {
  Nic out{n.name, cfg.capacity, {}};
  for (const auto& s : n.services) out.services.push_back(s.svc);
  return out;
}

// ---- what the driver refuses ---------------------------------------------------------

Status check_desc(const ServiceDesc& d, const std::string& nic) {
  if (d.vnis.size() > kMaxVnis)
    return invalid(fmt::format("{}: a CXI service allows at most {} VNIs ({} asked)", nic, kMaxVnis, d.vnis.size()));
  if (d.member_uids.size() > kMaxMembers)
    return invalid(
        fmt::format("{}: a CXI service allows at most {} members ({} asked)", nic, kMaxMembers, d.member_uids.size()));
  if (!d.limited) return {};
  const Limit& tle = d.limits[static_cast<size_t>(Rsrc::TLE)];
  if (tle.reserved != tle.max)
    return invalid(fmt::format("{}: tles reserved ({}) must equal tles max ({})", nic, tle.reserved, tle.max));
  if (tle.reserved != 0 && tle.reserved < kMinTles)
    return invalid(
        fmt::format("{}: tles reserved {} is below the driver's minimum of {}", nic, tle.reserved, kMinTles));
  for (size_t i = 0; i < kNumRsrc; ++i)
    if (d.limits[i].reserved > d.limits[i].max)
      return invalid(fmt::format("{}: {} reserved {} is above its max {}", nic, rsrc_name(static_cast<Rsrc>(i)),
                                 d.limits[i].reserved, d.limits[i].max));
  return {};
}

Status check_fits(const ServiceDesc& d, const Nic& nic) {
  if (!d.limited) return {};
  const Limits left = available_limits(nic);
  for (size_t i = 0; i < kNumRsrc; ++i) {
    const char* name = rsrc_name(static_cast<Rsrc>(i));
    if (d.limits[i].max > nic.capacity[i].max)
      return Error{Errc::unavailable, fmt::format("{}: {} max {} is above the NIC's {}", nic.name, name,
                                                  d.limits[i].max, nic.capacity[i].max)};
    if (d.limits[i].reserved > left[i].max)
      return Error{Errc::unavailable, fmt::format("{}: not enough {}: {} reserved asked, {} left", nic.name, name,
                                                  d.limits[i].reserved, left[i].max)};
  }
  return {};
}

double wall_clock() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

bool valid_node_name(const std::string& n) {
  return !n.empty() && n != "." && n != ".." && n.find('/') == std::string::npos;
}

}  // namespace

// ---- SimCxiDevice ------------------------------------------------------------------------

SimCxiDevice::SimCxiDevice(Key, std::string state_dir, std::string node, SimConfig config, Clock clock)
    : node_(std::move(node)),
      state_file_(state_dir + "/" + node_ + ".json"),
      lock_file_(state_dir + "/" + node_ + ".lock"),
      config_(std::move(config)),
      clock_(clock ? std::move(clock) : Clock(wall_clock)) {}

Result<std::unique_ptr<SimCxiDevice>> SimCxiDevice::create(std::string state_dir, std::string node, SimConfig config,
                                                           Clock clock) {
  if (!valid_node_name(node)) return invalid("simulated NIC: node name '" + node + "' cannot name a state file");
  std::error_code ec;
  std::filesystem::create_directories(state_dir, ec);
  if (ec || !std::filesystem::is_directory(state_dir))
    return io_error(
        fmt::format("simulated NIC state directory '{}': {}", state_dir, ec ? ec.message() : "not a directory"));
  return std::make_unique<SimCxiDevice>(Key{}, std::move(state_dir), std::move(node), std::move(config),
                                        std::move(clock));
}

namespace {

// Runs `op(state, dirty)` under the node's lock on the current state, saving it when
// `op` set `dirty` (even when `op` failed: a busy destroy records its first attempt).
// `read_only` operations take a shared lock and never write.
template <class Op>
auto transact(const std::string& lock_file, const std::string& state_file, const std::string& node,
              const SimConfig& cfg, Op&& op, bool read_only = false)
    -> decltype(op(std::declval<NodeState&>(), std::declval<bool&>())) {
  auto lock = FileLock::acquire(lock_file, read_only);
  if (!lock) return lock.error();
  auto st = read_state(state_file);
  if (!st) return st.error();
  bool dirty = ensure_nics(*st, cfg);
  auto result = op(*st, dirty);
  if (dirty && !read_only)
    if (auto w = write_state(state_file, *st, node); !w) return w.error();
  return result;
}

}  // namespace

Result<std::vector<Nic>> SimCxiDevice::list() {
  return transact(lock_file_, state_file_, node_, config_, [&](NodeState& st, bool&) -> Result<std::vector<Nic>> {
    std::vector<Nic> out;
    for (const auto& n : st.nics)
      if (find_nic(st, config_, node_, n.name)) out.push_back(to_nic(n, config_));
    return out;
  });
}

Result<uint32_t> SimCxiDevice::alloc_service(const std::string& nic, const ServiceDesc& desc) {
  return transact(lock_file_, state_file_, node_, config_, [&](NodeState& st, bool& dirty) -> Result<uint32_t> {
    auto n = find_nic(st, config_, node_, nic);
    if (!n) return n.error();
    if (const auto* f = find_fault(config_, FaultKind::alloc_fail, node_, nic))
      return io_error(fmt::format("{}: cannot allocate a CXI service: {}", nic, f->message));
    if (auto s = check_desc(desc, nic); !s) return s.error();
    if (auto s = check_fits(desc, to_nic(**n, config_)); !s) return s.error();
    const uint32_t id = (*n)->next_id++;
    (*n)->services.push_back({Service{id, desc}, std::nullopt});
    dirty = true;
    return id;
  });
}

Status SimCxiDevice::destroy_service(const std::string& nic, uint32_t svc_id) {
  auto r = transact(lock_file_, state_file_, node_, config_, [&](NodeState& st, bool& dirty) -> Result<bool> {
    auto n = find_nic(st, config_, node_, nic);
    if (!n) return n.error();
    auto& svcs = (*n)->services;
    auto it = std::find_if(svcs.begin(), svcs.end(), [&](const SvcState& s) { return s.svc.id == svc_id; });
    if (it == svcs.end()) return not_found(fmt::format("{}: no service {}", nic, svc_id));
    if (it->svc.desc.system)
      return denied(fmt::format("{}: service {} is a system service; corral does not destroy it", nic, svc_id));
    if (const auto* f = find_fault(config_, FaultKind::busy, node_, nic)) {
      const double now = clock_();
      if (!it->first_destroy) {
        it->first_destroy = now;
        dirty = true;
      }
      if (now - *it->first_destroy < f->seconds)
        return Error{Errc::unavailable, fmt::format("{}: service {} is busy", nic, svc_id)};
    }
    svcs.erase(it);
    dirty = true;
    return true;
  });
  return r.status();
}

Status SimCxiDevice::use(const std::string& nic, uint32_t svc_id, uint16_t vni, uint32_t tc, uint32_t uid) {
  auto r = transact(
      lock_file_, state_file_, node_, config_,
      [&](NodeState& st, bool&) -> Result<bool> {
        auto n = find_nic(st, config_, node_, nic);
        if (!n) return n.error();
        const auto& svcs = (*n)->services;
        auto it = std::find_if(svcs.begin(), svcs.end(), [&](const SvcState& s) { return s.svc.id == svc_id; });
        if (it == svcs.end()) return not_found(fmt::format("no service {} on {}", svc_id, nic));
        const ServiceDesc& d = it->svc.desc;
        const auto& m = d.member_uids;
        if (!m.empty() && std::find(m.begin(), m.end(), uid) == m.end())
          return denied(fmt::format("permission denied: uid {} is not a member of service {} on {}", uid, svc_id, nic));
        if (!d.vnis.empty() && std::find(d.vnis.begin(), d.vnis.end(), vni) == d.vnis.end())
          return denied(fmt::format("permission denied: VNI {} is not allowed by service {} on {}", vni, svc_id, nic));
        if (d.tcs != 0 && (d.tcs & tc) == 0)
          return denied(fmt::format("permission denied: traffic class {} is not allowed by service {} on {}",
                                    tc_name(tc), svc_id, nic));
        return true;
      },
      /*read_only=*/true);
  return r.status();
}

}  // namespace corral::fabric::slingshot
