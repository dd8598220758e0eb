#include "nnf_driver.h"

#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include <fmt/format.h>

#include "storage/dws/directive.h"
#include "util/fd_hygiene.h"
#include "workflow_admission.h"

namespace corral::emu::dws {

using nlohmann::json;
namespace sd = storage::dws;

namespace {

constexpr const char* kFinalizer = "dataworkflowservices.github.io/workflow";
constexpr const char* kLabel = "dataworkflowservices.github.io/";
constexpr const char* kRabbitLabel = "dataworkflowservices.github.io/storage=Rabbit";
constexpr const char* kFailMount = "emu.corral.dev/fail-mount";

std::string go_duration(double secs) {
  if (secs < 1e-3) return fmt::format("{:.3f}µs", secs * 1e6);
  if (secs < 1) return fmt::format("{:.3f}ms", secs * 1e3);
  if (secs < 60) return fmt::format("{:.3f}s", secs);
  int m = static_cast<int>(secs / 60);
  return fmt::format("{}m{:.3f}s", m, secs - m * 60);
}

json owner_ref(const json& wf) {
  return {{"apiVersion", wf.value("apiVersion", "")}, {"kind", "Workflow"}, {"name", wf["metadata"].value("name", "")},
          {"uid", wf["metadata"].value("uid", "")},   {"controller", true}, {"blockOwnerDeletion", true}};
}

json workflow_labels(const json& wf) {
  const auto& m = wf["metadata"];
  std::string p = kLabel;
  return {{p + "workflow.name", m.value("name", "")}, {p + "workflow.namespace", m.value("namespace", "")},
          {p + "workflow.uid", m.value("uid", "")},   {p + "owner.kind", "Workflow"},
          {p + "owner.name", m.value("name", "")},    {p + "owner.namespace", m.value("namespace", "")},
          {p + "owner.uid", m.value("uid", "")}};
}

std::vector<std::string> directives(const json& wf) {
  std::vector<std::string> out;
  for (const auto& d : wf["spec"].value("dwDirectives", json::array())) out.push_back(d.get<std::string>());
  return out;
}

std::string name_of(const json& o) { return o["metadata"].value("name", ""); }
std::string ns_of(const json& o) { return o["metadata"].value("namespace", ""); }

std::string job_id_text(const json& wf) {
  const auto& j = wf["spec"]["jobID"];
  return j.is_string() ? j.get<std::string>() : j.dump();
}

std::vector<std::string> computes_list(const ObjectStore& store, const KindInfo& k, const json& wf) {
  std::vector<std::string> out;
  auto c = store.get(k, ns_of(wf), name_of(wf));
  if (!c) return out;
  for (const auto& e : (**c).value("data", json::array())) out.push_back(e.value("name", ""));
  return out;
}

bool storage_directive(const std::string& cmd) { return cmd == "jobdw" || cmd == "create_persistent"; }

json allocation_sets(const sd::Directive& d, uint64_t padding) {
  auto cap = sd::parse_capacity(d.arg("capacity").value_or("0"));
  uint64_t bytes = cap ? *cap : 0;
  std::string type = d.arg("type").value_or("xfs");
  json rabbit = {{"labels", json::array({kRabbitLabel})}};
  if (type != "lustre")
    return json::array({{{"label", type},
                         {"allocationStrategy", "AllocatePerCompute"},
                         {"minimumCapacity", bytes + padding},
                         {"constraints", rabbit}}});
  json mdt = rabbit, mgt = rabbit;
  mdt["colocation"] = json::array({{{"type", "exclusive"}, {"key", "lustre-mdt"}}});
  mgt["colocation"] = json::array({{{"type", "exclusive"}, {"key", "lustre-mgt"}}});
  return json::array({{{"label", "ost"},
                       {"allocationStrategy", "AllocateAcrossServers"},
                       {"minimumCapacity", bytes + padding},
                       {"constraints", rabbit}},
                      {{"label", "mdt"},
                       {"allocationStrategy", "AllocateAcrossServers"},
                       {"minimumCapacity", 5ULL << 30},
                       {"constraints", mdt}},
                      {{"label", "mgt"},
                       {"allocationStrategy", "AllocateSingleServer"},
                       {"minimumCapacity", 5ULL << 30},
                       {"constraints", mgt}}});
}

json access_for(const std::string& type) {
  if (type == "lustre") return json::array({{{"type", "network"}, {"priority", "mandatory"}}});
  if (type == "gfs2")
    return json::array(
        {{{"type", "network"}, {"priority", "mandatory"}}, {{"type", "physical"}, {"priority", "mandatory"}}});
  return json::array({{{"type", "physical"}, {"priority", "mandatory"}}});
}

// Runs `cp -r SRC DST` for each pair, as the workflow's user when we are root.
int spawn_copies(const std::vector<std::pair<std::string, std::string>>& pairs, uid_t uid, gid_t gid) {
  std::vector<std::string> args = {"/bin/sh", "-c",
                                   "set -e; while [ $# -gt 1 ]; do cp -r -- \"$1\" \"$2\"; shift 2; done", "sh"};
  for (const auto& [s, d] : pairs) {
    args.push_back(s);
    args.push_back(d);
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid != 0) return pid;
  cloexec_from(3);  // the API server's sockets and the journal stay with the emulator
  if (geteuid() == 0) {
    if (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0) _exit(126);
  }
  execv(argv[0], argv.data());
  _exit(127);
}

}  // namespace

NnfDriver::NnfDriver(ObjectStore& store, const CrdCatalog& catalog, FaultTable& faults, DriverConfig cfg)
    : store_(store), catalog_(catalog), faults_(faults), cfg_(std::move(cfg)) {
  wf_kind_ = catalog_.by_kind("Workflow");
  computes_kind_ = catalog_.by_kind("Computes");
  dbd_kind_ = catalog_.by_kind("DirectiveBreakdown");
  servers_kind_ = catalog_.by_kind("Servers");
  mount_kind_ = catalog_.by_kind("ClientMount");
  storage_kind_ = catalog_.by_kind("Storage");
  psi_kind_ = catalog_.by_kind("PersistentStorageInstance");
}

NnfDriver::~NnfDriver() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void NnfDriver::start() {
  store_.on_change([this](const StoredEvent& e) {
    if (e.kind == wf_kind_) {
      enqueue(ns_of(*e.obj) + "/" + name_of(*e.obj), Clock::now());
    } else if (e.kind == mount_kind_) {
      const auto& l = (*e.obj)["metadata"].value("labels", json::object());
      std::string p = kLabel;
      auto n = l.find(p + "workflow.name"), ns = l.find(p + "workflow.namespace");
      if (n != l.end() && ns != l.end()) enqueue(ns->get<std::string>() + "/" + n->get<std::string>(), Clock::now());
    }
  });
  poke_all();
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "nnf-driver");
    loop();
  });
}

void NnfDriver::poke_all() {
  auto page = store_.list(*wf_kind_, "", Selector{}, 0, "");
  for (const auto& wf : page.items) enqueue(ns_of(*wf) + "/" + name_of(*wf), Clock::now());
}

void NnfDriver::enqueue(const std::string& key, Clock::time_point when) {
  std::lock_guard lk(mu_);
  if (when <= Clock::now()) {
    if (!queued_now_.insert(key).second) return;
  }
  queue_.emplace(when, key);
  cv_.notify_one();
}

void NnfDriver::loop() {
  std::unique_lock lk(mu_);
  while (!stop_) {
    if (queue_.empty()) {
      cv_.wait(lk);
      continue;
    }
    auto it = queue_.begin();
    if (it->first > Clock::now()) {
      cv_.wait_until(lk, it->first);
      continue;
    }
    std::string key = it->second;
    queue_.erase(it);
    queued_now_.erase(key);
    lk.unlock();
    auto slash = key.find('/');
    try {
      reconcile(key.substr(0, slash), key.substr(slash + 1));
    } catch (const json::exception& e) {
      fmt::print(stderr, "corral-dws-emu: workflow {}: {}\n", key, e.what());
    }
    lk.lock();
  }
}

void NnfDriver::reconcile(const std::string& ns, const std::string& name) {
  std::string key = ns + "/" + name;
  auto got = store_.get(*wf_kind_, ns, name);
  if (!got) {
    state_began_.erase(key);
    return;
  }
  const json& wf = **got;
  const auto& m = wf["metadata"];
  auto fins = m.value("finalizers", json::array());
  if (m.contains("deletionTimestamp")) {
    // While the WLM's finalizer holds a deleted workflow, a Teardown it asks for still runs.
    const json& st = wf.contains("status") ? wf["status"] : json::object();
    const bool tearing = wf["spec"].value("desiredState", "") == "Teardown" &&
                         !(st.value("state", "") == "Teardown" && st.value("ready", false));
    if (fins.size() <= 1 || !tearing) return finish_deletion(wf);
  }
  if (std::find(fins.begin(), fins.end(), kFinalizer) == fins.end()) {
    (void)store_.modify(*wf_kind_, ns, name, Part::all, [](const json&, json& o) -> std::optional<ApiError> {
      o["metadata"]["finalizers"].push_back(kFinalizer);
      return std::nullopt;
    });
    return;
  }
  const json empty = json::object();
  const json& status = wf.contains("status") ? wf["status"] : empty;
  std::string desired = wf["spec"].value("desiredState", "");
  std::string state = status.value("state", "");
  if (state != desired) {
    begin_state(wf);
    return;
  }
  if (status.value("ready", false)) return;
  auto began = state_began_.emplace(key, Clock::now()).first->second;
  if (wf["spec"].value("forceReady", false)) {
    mark(wf, state, Outcome{Work::done, "Completed", "Forced Ready", ""});
    return;
  }
  auto fault = faults_.match(name, job_id_text(wf), state);
  // Teardown may be slow but never fails: only a delay applies to it.
  if (fault) {
    auto delay_end = began + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(fault->delay));
    if (Clock::now() < delay_end) return enqueue(key, delay_end);
  }
  if (fault && state != "Teardown") {
    auto delay_end = began + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(fault->delay));
    if (fault->status == "Error") {
      mark(wf, state, Outcome{Work::failed, "Error", "DW Directive 0: " + fault->message, "emulated fault"});
      return;
    }
    if (fault->status == "TransientCondition") {
      auto tc_end =
          delay_end + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(fault->duration));
      if (fault->duration <= 0 || Clock::now() < tc_end) {
        if (status.value("status", "") != "TransientCondition")
          mark(wf, state,
               Outcome{Work::failed, "TransientCondition", "DW Directive 0: " + fault->message, "emulated fault"});
        if (fault->duration > 0) enqueue(key, tc_end);
        return;
      }
    }
  }
  Outcome o = run_state(wf, state);
  if (o.work == Work::wait) return;
  mark(wf, state, o);
}

void NnfDriver::begin_state(const json& wf) {
  std::string key = ns_of(wf) + "/" + name_of(wf);
  state_began_[key] = Clock::now();
  (void)store_.modify(*wf_kind_, ns_of(wf), name_of(wf), Part::all,
                      [](const json&, json& o) -> std::optional<ApiError> {
                        auto& s = o["status"];
                        s["state"] = o["spec"]["desiredState"];
                        s["ready"] = false;
                        s["status"] = "DriverWait";
                        s["message"] = "";
                        s["desiredStateChange"] = micro_time_now();
                        o["spec"]["forceReady"] = false;
                        return std::nullopt;
                      });
}

void NnfDriver::mark(const json& wf, const std::string& state, const Outcome& o) {
  std::string key = ns_of(wf) + "/" + name_of(wf);
  double elapsed = 0;
  if (auto it = state_began_.find(key); it != state_began_.end())
    elapsed = std::chrono::duration<double>(Clock::now() - it->second).count();
  (void)store_.modify(*wf_kind_, ns_of(wf), name_of(wf), Part::all,
                      [&](const json&, json& obj) -> std::optional<ApiError> {
                        auto& s = obj["status"];
                        if (s.value("state", "") != state) return ApiError{409, "Conflict", "state moved on", {}};
                        bool done = o.work == Work::done;
                        for (auto& d : s["drivers"]) {
                          if (d.value("watchState", "") != state) continue;
                          if (done) {
                            d["completed"] = true;
                            d["status"] = "Completed";
                            d["completeTime"] = micro_time_now();
                            d.erase("error");
                            d["message"] = "";
                          } else {
                            d["status"] = o.status;
                            d["message"] = o.message;
                            d["error"] = o.error;
                          }
                        }
                        s["status"] = done ? "Completed" : o.status;
                        s["message"] = done ? (o.message == "Forced Ready" ? o.message : "") : o.message;
                        if (done) {
                          s["ready"] = true;
                          s["readyChange"] = micro_time_now();
                          s["elapsedTimeLastState"] = go_duration(elapsed);
                        }
                        return std::nullopt;
                      });
}

NnfDriver::Outcome NnfDriver::run_state(const json& wf, const std::string& state) {
  if (state == "Proposal") return proposal(wf);
  if (state == "Setup") return setup(wf);
  if (state == "DataIn") return copy(wf, "copy_in");
  if (state == "PreRun") return prerun(wf);
  if (state == "PostRun") return postrun(wf);
  if (state == "DataOut") return copy(wf, "copy_out");
  if (state == "Teardown") return teardown(wf);
  return {};
}

void NnfDriver::ensure_object(const KindInfo& k, const std::string& ns, json obj) {
  obj["apiVersion"] = k.api_version();
  obj["kind"] = k.kind;
  auto r = store_.create(k, ns, std::move(obj));
  (void)r;  // AlreadyExists: made by an earlier pass
}

std::string NnfDriver::fs_path(const json& wf, size_t index) const {
  return fmt::format("{}/{}-{}", cfg_.mount_root, wf["metadata"].value("uid", ""), index);
}

NnfDriver::Outcome NnfDriver::proposal(const json& wf) {
  auto dws = directives(wf);
  std::vector<sd::Directive> parsed;
  for (const auto& t : dws) {
    auto d = sd::parse_directive(t);
    if (!d) return {Work::failed, "Error", "DW Directive 0: User error: " + d.error().message, d.error().message};
    parsed.push_back(std::move(*d));
  }
  std::set<std::string> jobdw_names;
  size_t persistent_ops = 0;
  for (const auto& d : parsed) {
    if (d.command == "jobdw") jobdw_names.insert(d.arg("name").value_or(""));
    if (d.command == "create_persistent" || d.command == "destroy_persistent") ++persistent_ops;
  }
  if (persistent_ops > 0 && parsed.size() > 1)
    return {Work::failed, "Error",
            "DW Directive 0: User error: only a single create_persistent or destroy_persistent directive is allowed "
            "per workflow",
            "user error"};
  for (size_t i = 0; i < parsed.size(); ++i) {
    const auto& d = parsed[i];
    auto fail = [&](const std::string& msg) {
      return Outcome{Work::failed, "Error", fmt::format("DW Directive {}: User error: {}", i, msg),
                     "user error: " + msg};
    };
    if (d.command == "copy_in" || d.command == "copy_out") {
      for (const char* arg : {"source", "destination"}) {
        std::string v = d.arg(arg).value_or("");
        if (v.rfind("$DW_JOB_", 0) == 0) {
          std::string n = v.substr(8, v.find('/') == std::string::npos ? std::string::npos : v.find('/') - 8);
          std::replace(n.begin(), n.end(), '_', '-');
          if (!jobdw_names.count(n)) return fail("job storage instance '" + n + "' not found");
        } else if (v.rfind("$DW_PERSISTENT_", 0) == 0) {
          return fail("persistent storage in data movement is not supported by this emulator");
        } else {
          bool inside = std::any_of(cfg_.global_fs.begin(), cfg_.global_fs.end(),
                                    [&](const std::string& g) { return v.rfind(g, 0) == 0; });
          if (!inside || v.empty() || v[0] != '/')
            return fail("global Lustre file system containing '" + v + "' not found");
        }
      }
    }
    if (d.command == "persistentdw") {
      std::string n = d.arg("name").value_or("");
      if (!store_.get(*psi_kind_, ns_of(wf), n)) return fail("PersistentStorageInstance '" + n + "' not found");
    }
  }
  json labels = workflow_labels(wf);
  json owner = json::array({owner_ref(wf)});
  ensure_object(
      *computes_kind_, ns_of(wf),
      {{"metadata", {{"name", name_of(wf)}, {"labels", labels}, {"ownerReferences", owner}}}, {"data", json::array()}});
  json refs = json::array();
  uint32_t uid = wf["spec"].value("userID", 0u);
  for (size_t i = 0; i < parsed.size(); ++i) {
    const auto& d = parsed[i];
    if (!storage_directive(d.command) && d.command != "persistentdw") continue;
    std::string n = fmt::format("{}-{}", name_of(wf), i);
    json status = {{"ready", true}, {"requires", json::array()}};
    json server_ref = {{"kind", "Servers"}, {"name", n}, {"namespace", ns_of(wf)}};
    if (storage_directive(d.command)) {
      json sets = allocation_sets(d, cfg_.padding);
      status["storage"] = {{"lifetime", d.command == "jobdw" ? "job" : "persistent"},
                           {"reference", server_ref},
                           {"allocationSets", sets}};
      json loc = json::array();
      for (size_t s = 0; s < sets.size(); ++s) {
        json r = server_ref;
        r["fieldPath"] = fmt::format("servers.spec.allocationSets[{}]", s);
        loc.push_back({{"access", access_for(d.arg("type").value_or("xfs"))}, {"reference", r}});
      }
      status["compute"] = {{"constraints", {{"location", loc}}}};
      ensure_object(
          *servers_kind_, ns_of(wf),
          {{"metadata", {{"name", n}, {"labels", labels}, {"ownerReferences", owner}}}, {"spec", json::object()}});
    } else {
      status["compute"] = {
          {"constraints", {{"location", json::array({{{"access", access_for("xfs")}, {"reference", server_ref}}})}}}};
    }
    ensure_object(*dbd_kind_, ns_of(wf),
                  {{"metadata", {{"name", n}, {"labels", labels}, {"ownerReferences", owner}}},
                   {"spec", {{"directive", d.text}, {"userID", uid}}},
                   {"status", status}});
    refs.push_back({{"kind", "DirectiveBreakdown"}, {"name", n}, {"namespace", ns_of(wf)}});
  }
  (void)store_.modify(
      *wf_kind_, ns_of(wf), name_of(wf), Part::all, [&](const json&, json& o) -> std::optional<ApiError> {
        o["status"]["directiveBreakdowns"] = refs;
        o["status"]["computes"] = {{"kind", "Computes"}, {"name", name_of(wf)}, {"namespace", ns_of(wf)}};
        return std::nullopt;
      });
  return {};
}

NnfDriver::Outcome NnfDriver::setup(const json& wf) {
  auto dws = directives(wf);
  for (size_t i = 0; i < dws.size(); ++i) {
    auto d = sd::parse_directive(dws[i]);
    if (!d || !storage_directive(d->command)) continue;
    std::string n = fmt::format("{}-{}", name_of(wf), i);
    auto wlm = [&](const std::string& why) {
      return Outcome{Work::failed, "Error",
                     fmt::format("DW Directive {}: WLM error: storage directive requirements were not satisfied", i),
                     "wlm error: " + why};
    };
    auto dbd = store_.get(*dbd_kind_, ns_of(wf), n);
    auto srv = store_.get(*servers_kind_, ns_of(wf), n);
    if (!dbd || !srv) return wlm("breakdown or servers " + n + " missing");
    const json want = (**dbd)["status"]["storage"].value("allocationSets", json::array());
    const json have = (**srv).value("spec", json::object()).value("allocationSets", json::array());
    if (want.size() != have.size()) return wlm("Allocation request does not meet directive requirements");
    json status_sets = json::array();
    for (const auto& w : want) {
      std::string label = w.value("label", "");
      auto h = std::find_if(have.begin(), have.end(), [&](const json& x) { return x.value("label", "") == label; });
      if (h == have.end()) return wlm("allocation set " + label + " not found in Servers resource");
      uint64_t size = h->value("allocationSize", uint64_t{0});
      uint64_t total = 0;
      json storage_map = json::object();
      for (const auto& s : h->value("storage", json::array())) {
        std::string rabbit = s.value("name", "");
        auto st = store_.get(*storage_kind_, "default", rabbit);
        if (!st) return wlm("Storage '" + rabbit + "' not found");
        std::string health = (**st).value("status", json::object()).value("status", "");
        std::string enabled = (**st).value("spec", json::object()).value("state", "Enabled");
        if (health != "Ready" || enabled != "Enabled")
          return {Work::failed, "TransientCondition",
                  fmt::format("DW Directive {}: Internal error: rabbit '{}' is {}", i, rabbit,
                              enabled != "Enabled" ? std::string("Disabled") : health),
                  "internal error: rabbit not ready"};
        total += size * s.value("allocationCount", uint64_t{1});
        storage_map[rabbit] = {{"allocationSize", size}, {"ready", true}};
      }
      std::string strategy = w.value("allocationStrategy", "");
      uint64_t min = w.value("minimumCapacity", uint64_t{0});
      if (strategy == "AllocateSingleServer" &&
          (h->value("storage", json::array()).size() != 1 ||
           h->value("storage", json::array())[0].value("allocationCount", 1) != 1))
        return wlm("single server allocation needs exactly one storage with one allocation");
      if ((strategy == "AllocateAcrossServers" ? total : size) < min)
        return wlm(fmt::format("allocation set {} has {} bytes, needs {}", label,
                               strategy == "AllocateAcrossServers" ? total : size, min));
      status_sets.push_back({{"label", label}, {"storage", storage_map}});
    }
    std::error_code ec;
    std::filesystem::create_directories(fs_path(wf, i), ec);
    std::filesystem::permissions(fs_path(wf, i), std::filesystem::perms::owner_all, ec);
    (void)store_.modify(*servers_kind_, ns_of(wf), n, Part::all, [&](const json&, json& o) -> std::optional<ApiError> {
      o["status"] = {{"ready", true}, {"lastUpdate", micro_time_now()}, {"allocationSets", status_sets}};
      return std::nullopt;
    });
  }
  return {};
}

NnfDriver::Outcome NnfDriver::copy(const json& wf, const std::string& command) {
  std::string key = ns_of(wf) + "/" + name_of(wf) + "/" + command;
  if (auto it = copies_.find(key); it != copies_.end()) {
    int st = 0;
    pid_t r = waitpid(it->second, &st, WNOHANG);
    if (r == 0) {
      enqueue(ns_of(wf) + "/" + name_of(wf), Clock::now() + std::chrono::milliseconds(20));
      return {Work::wait, "", "", ""};
    }
    copies_.erase(it);
    if (r < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
      return {Work::failed, "Error", "DW Directive 0: User error: data movement failed",
              fmt::format("user error: cp ended with status {}", st)};
    return {};
  }
  auto dws = directives(wf);
  std::map<std::string, size_t> jobdw;  // name -> index
  std::vector<sd::Directive> parsed;
  for (size_t i = 0; i < dws.size(); ++i) {
    auto d = sd::parse_directive(dws[i]);
    if (!d) continue;
    if (d->command == "jobdw") jobdw[d->arg("name").value_or("")] = i;
    parsed.push_back(std::move(*d));
  }
  auto resolve = [&](std::string v) {
    if (v.rfind("$DW_JOB_", 0) != 0) return v;
    auto slash = v.find('/');
    std::string n = v.substr(8, slash == std::string::npos ? std::string::npos : slash - 8);
    std::replace(n.begin(), n.end(), '_', '-');
    std::string rest = slash == std::string::npos ? "" : v.substr(slash);
    return fs_path(wf, jobdw[n]) + rest;
  };
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const auto& d : parsed)
    if (d.command == command) {
      // A source ending in '/' copies what the directory holds (as rsync does), not the
      // directory itself.
      std::string src = resolve(d.arg("source").value_or(""));
      if (!src.empty() && src.back() == '/') src += ".";
      pairs.emplace_back(src, resolve(d.arg("destination").value_or("")));
    }
  if (pairs.empty()) return {};
  int pid = spawn_copies(pairs, wf["spec"].value("userID", 0u), wf["spec"].value("groupID", 0u));
  if (pid < 0)
    return {Work::failed, "Error", "DW Directive 0: Internal error: cannot start data movement", "fork failed"};
  copies_[key] = pid;
  enqueue(ns_of(wf) + "/" + name_of(wf), Clock::now() + std::chrono::milliseconds(20));
  return {Work::wait, "", "", ""};
}

std::vector<ObjectPtr> NnfDriver::mounts_of(const json& wf) const {
  std::vector<ObjectPtr> out;
  auto dws = directives(wf);
  for (const auto& c : computes_list(store_, *computes_kind_, wf))
    for (size_t i = 0; i < dws.size(); ++i) {
      auto m = store_.get(*mount_kind_, c, fmt::format("{}-{}-{}-computes", ns_of(wf), name_of(wf), i));
      if (m) out.push_back(*m);
    }
  return out;
}

NnfDriver::Outcome NnfDriver::prerun(const json& wf) {
  auto dws = directives(wf);
  auto computes = computes_list(store_, *computes_kind_, wf);
  json env = wf["status"].value("env", json::object());
  std::string jobs;
  std::set<std::string> typed;
  auto fault = faults_.match(name_of(wf), job_id_text(wf), "PreRun");
  bool all_ready = true;
  for (size_t i = 0; i < dws.size(); ++i) {
    auto d = sd::parse_directive(dws[i]);
    if (!d || d->command != "jobdw") continue;
    std::string path = fs_path(wf, i);
    std::string n = d->arg("name").value_or(""), type = d->arg("type").value_or("xfs");
    std::string var = n;
    std::replace(var.begin(), var.end(), '-', '_');
    env["DW_JOB_" + var] = path;
    std::string upper = type;
    std::transform(upper.begin(), upper.end(), upper.begin(), ::toupper);
    if (typed.insert(type).second) env["DW_JOB_" + upper] = path;
    jobs += (jobs.empty() ? "" : ",") + n + ":" + path;
    for (const auto& c : computes) {
      std::string mname = fmt::format("{}-{}-{}-computes", ns_of(wf), name_of(wf), i);
      auto m = store_.get(*mount_kind_, c, mname);
      if (!m) {
        json meta = {{"name", mname}, {"labels", workflow_labels(wf)}};
        if (fault && fault->mount_fail == c)
          meta["annotations"] = {{kFailMount, fault->message.empty() ? "mount failed" : fault->message}};
        json mount = {{"mountPath", path},
                      {"userID", wf["spec"].value("userID", 0u)},
                      {"groupID", wf["spec"].value("groupID", 0u)},
                      {"setPermissions", true},
                      {"options", "rw"},
                      {"type", type == "lustre" ? "lustre" : (type == "raw" ? "none" : type)},
                      {"targetType", "directory"},
                      {"compute", c},
                      {"device",
                       {{"type", "reference"},
                        {"deviceReference",
                         {{"objectReference",
                           {{"kind", "NnfNodeStorage"},
                            {"name", fmt::format("{}-{}", name_of(wf), i)},
                            {"namespace", "default"}}},
                          {"data", 0}}}}}};
        ensure_object(*mount_kind_, c,
                      {{"metadata", meta},
                       {"spec", {{"node", c}, {"desiredState", "mounted"}, {"mounts", json::array({mount})}}}});
        all_ready = false;
        continue;
      }
      const json st = (**m).value("status", json::object());
      if (st.contains("error") && st["error"].is_object()) {
        const auto& e = st["error"];
        bool fatal = e.value("severity", "Fatal") == "Fatal";
        return {Work::failed, fatal ? "Error" : "TransientCondition",
                fmt::format("DW Directive {}: {} error: {}", i, e.value("type", "Internal"),
                            e.value("userMessage", "mount failed on " + c)),
                e.value("debugMessage", "")};
      }
      if (!st.value("allReady", false)) all_ready = false;
    }
  }
  if (!all_ready) return {Work::wait, "", "", ""};
  if (!jobs.empty()) env["DW_JOBS"] = jobs;
  (void)store_.modify(*wf_kind_, ns_of(wf), name_of(wf), Part::all,
                      [&](const json&, json& o) -> std::optional<ApiError> {
                        o["status"]["env"] = env;
                        return std::nullopt;
                      });
  return {};
}

NnfDriver::Outcome NnfDriver::postrun(const json& wf) {
  bool done = true;
  for (const auto& m : mounts_of(wf)) {
    if ((*m)["spec"].value("desiredState", "") != "unmounted") {
      (void)store_.modify(*mount_kind_, ns_of(*m), name_of(*m), Part::main,
                          [](const json&, json& o) -> std::optional<ApiError> {
                            o["spec"]["desiredState"] = "unmounted";
                            return std::nullopt;
                          });
      done = false;
      continue;
    }
    const json st = m->value("status", json::object());
    bool unmounted = st.value("allReady", false);
    for (const auto& x : st.value("mounts", json::array()))
      unmounted = unmounted && x.value("state", "") == "unmounted";
    if (!unmounted) done = false;
  }
  return done ? Outcome{} : Outcome{Work::wait, "", "", ""};
}

NnfDriver::Outcome NnfDriver::teardown(const json& wf) {
  for (auto it = copies_.begin(); it != copies_.end();) {
    if (it->first.rfind(ns_of(wf) + "/" + name_of(wf) + "/", 0) == 0) {
      kill(it->second, SIGKILL);
      waitpid(it->second, nullptr, 0);
      it = copies_.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& m : mounts_of(wf)) (void)store_.remove(*mount_kind_, ns_of(*m), name_of(*m));
  auto dws = directives(wf);
  for (size_t i = 0; i < dws.size(); ++i) {
    std::error_code ec;
    std::filesystem::remove_all(fs_path(wf, i), ec);
    std::string n = fmt::format("{}-{}", name_of(wf), i);
    (void)store_.modify(*servers_kind_, ns_of(wf), n, Part::all, [](const json&, json& o) -> std::optional<ApiError> {
      if (!o.contains("status")) return ApiError{404, "NotFound", "no status", {}};
      for (auto& set : o["status"]["allocationSets"])
        for (auto& [rabbit, a] : set["storage"].items()) a["allocationSize"] = 0;
      return std::nullopt;
    });
  }
  return {};
}

void NnfDriver::finish_deletion(const json& wf) {
  auto fins = wf["metadata"].value("finalizers", json::array());
  bool ours = std::find(fins.begin(), fins.end(), kFinalizer) != fins.end();
  if (!ours || fins.size() > 1) return;  // DWS goes last
  (void)teardown(wf);
  state_began_.erase(ns_of(wf) + "/" + name_of(wf));
  (void)store_.modify(*wf_kind_, ns_of(wf), name_of(wf), Part::all,
                      [](const json&, json& o) -> std::optional<ApiError> {
                        auto& f = o["metadata"]["finalizers"];
                        f.erase(std::remove(f.begin(), f.end(), kFinalizer), f.end());
                        return std::nullopt;
                      });
}

}  // namespace corral::emu::dws
