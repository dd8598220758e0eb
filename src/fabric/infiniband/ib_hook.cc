#include "fabric/infiniband/ib_hook.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "fabric/infiniband/ib_capabilities.h"
#include "fabric/infiniband/ib_node_ops.h"
#include "fabric/infiniband/ib_select.h"
#include "fabric/infiniband/ib_sysfs.h"
#include "hook/perilog_text.h"

namespace corral::fabric::infiniband {

using hook::HookContext;
using hook::JobView;
using hook::PerilogOutcome;
using nlohmann::json;

namespace {

constexpr const char* kAction = "infiniband";
constexpr const char* kProlog = "ib-prolog";
constexpr const char* kEpilog = "ib-epilog";
constexpr double kEpilogTimeout = 120;

std::string property(const std::string& fabric, const std::string& model, unsigned instance) {
  return fmt::format("ib:{}/{}/{}", fabric, model, instance);
}

std::string state_key(uint64_t jobid) { return "job-" + std::to_string(jobid); }

std::vector<std::string> node_names(const JobView& job) {
  std::vector<std::string> out;
  if (job.R)
    for (const auto& n : job.R->nodes) out.push_back(n.name);
  return out;
}

unsigned vf_interfaces(const std::vector<IbRequest>& reqs) {
  unsigned n = 0;
  for (const auto& r : reqs) n += r.virtual_function ? 1 : 0;
  return n;
}

}  // namespace

Result<std::unique_ptr<IbHook>> IbHook::create(IbConfig cfg) {
  auto fabrics = Fabrics::create(cfg.fabrics, cfg.default_fabric);
  if (!fabrics) return fabrics.error();
  auto sm = make_subnet_manager(cfg);
  if (!sm) return sm.error();
  std::optional<QuarantinePool> pool;
  if (!cfg.pkey_pool.empty()) {
    auto set = pkey_range_idset(cfg.pkey_pool);
    if (!set) return set.error();
    auto p = QuarantinePool::create(*set, "infiniband.pkey-pool", "partition key", 0x7ffe);
    if (!p) return p.error();
    pool = std::move(*p);
  }
  std::unique_ptr<IbHook> hook(new IbHook(std::move(cfg), std::move(*fabrics), std::move(pool), std::move(*sm)));
  for (const auto& p : hook->cfg_.partitions) hook->named_[p.name] = p.pkey;
  return hook;
}

Result<std::unique_ptr<hook::JobHook>> make_ib_hook(const hook::Settings& settings, const hook::HookSetup& setup) {
  auto cfg = parse_ib_settings(settings);
  if (!cfg) return cfg.error();
  if (!cfg->enabled) return std::unique_ptr<hook::JobHook>();
  if (cfg->command.empty()) cfg->command = setup.beside("corral-infiniband");
  auto hook = IbHook::create(std::move(*cfg));
  if (!hook) return hook.error();
  return std::unique_ptr<hook::JobHook>(std::move(*hook));
}

// ------------------------------------------------------------------ nodes and submit

void IbHook::node_properties(HookContext&, const std::string& node, const std::map<std::string, std::string>& hardware,
                             std::vector<std::string>& out) {
  auto it = hardware.find(std::string(name()));
  if (it == hardware.end()) {
    set_devices(node, {});
    return;
  }
  auto list = json::parse(it->second, nullptr, false);
  std::vector<IbDevice> devices;
  if (list.is_array() && list.size() <= kMaxIbDevices) {
    for (const auto& j : list) {
      auto d = device_from_json(j);
      if (!d) {
        spdlog::warn("infiniband: node {} reported a device the controller cannot read: {}", node, d.message());
        continue;
      }
      // The fabric is the site's mapping of the port's subnet prefix, not the node's say.
      d->fabric = d->ports.empty() ? fabrics_.default_name() : fabrics_.of_prefix(d->ports.front().subnet_prefix);
      devices.push_back(std::move(*d));
    }
  }
  sort_by_slot(devices);
  std::map<std::pair<std::string, std::string>, unsigned> seen;  // (fabric, model) -> instances so far
  for (const auto& d : devices) {
    unsigned instance = seen[{d.fabric, d.model}]++;
    if (d.active()) out.push_back(property(d.fabric, d.model, instance));
  }
  set_devices(node, std::move(devices));
}

void IbHook::set_devices(const std::string& node, std::vector<IbDevice> devices) {
  if (auto old = kind_of_.find(node); old != kind_of_.end()) {
    auto members = nodes_of_kind_.find(old->second);
    members->second.erase(node);
    if (members->second.empty()) nodes_of_kind_.erase(members);
    kind_of_.erase(old);
  }
  if (devices.empty()) {
    devices_.erase(node);
    return;
  }
  std::string kind = to_json(capabilities_of(devices)).dump();
  nodes_of_kind_[kind].insert(node);
  kind_of_[node] = std::move(kind);
  devices_[node] = std::move(devices);
}

Result<std::vector<IbRequest>> IbHook::requests_of(const job::Jobspec& spec) const {
  std::vector<IbRequest> reqs;
  if (!spec.document) return reqs;
  const auto& sys = (*spec.document)["attributes"]["system"];
  if (!sys.contains("infiniband")) return reqs;
  auto parsed = requests_from_json(sys["infiniband"]);
  if (!parsed) return parsed.error();
  reqs = std::move(*parsed);
  for (auto& r : reqs)
    if (r.fabric.empty()) r.fabric = fabrics_.default_name();
  return reqs;
}

bool IbHook::partition_known(const std::string& p) const {
  return p.empty() || p == "default" || (p == "job" && pkeys_) || named_.contains(p);
}

Status IbHook::validate(HookContext&, const job::Jobspec& spec, uint32_t) {
  auto reqs = requests_of(spec);
  if (!reqs || reqs->empty()) return reqs.status();
  for (size_t i = 0; i < reqs->size(); ++i) {
    const IbRequest& r = (*reqs)[i];
    if (r.partition == "job" && !pkeys_)
      return invalid("--ib partition=job: this site has no infiniband.pkey-pool for per-job partitions");
    if (!partition_known(r.partition)) {
      std::string names = "default";
      if (pkeys_) names += ", job";
      for (const auto& [n, k] : named_) names += ", " + n;
      return invalid(fmt::format("--ib: unknown partition '{}' (known: {})", r.partition, names));
    }
    if (r.virtual_function && cfg_.guid_count == 0)
      return invalid("--ib vf: this site has no infiniband.guid-pool to give virtual functions their GUIDs");
  }
  if (devices_.empty()) return invalid("--ib: no node has reported Infiniband devices");
  // One node of each kind: enough to tell whether any node can ever run it.
  std::string first_error;
  SelectContext ctx{&fabrics_, [this](const std::string& p) { return partition_known(p); }, ""};
  for (const auto& [kind, nodes] : nodes_of_kind_) {
    ctx.node = *nodes.begin();
    auto chosen = select_devices(devices_.at(ctx.node), *reqs, ctx);
    if (chosen) return {};
    if (first_error.empty()) first_error = chosen.message();
  }
  return invalid(
      fmt::format("--ib: no node can give this ({} kinds of node tried; e.g. {})", nodes_of_kind_.size(), first_error));
}

Status IbHook::required_properties(const job::Jobspec& spec, std::vector<std::string>& out) const {
  auto reqs = requests_of(spec);
  if (!reqs) return reqs.status();
  for (const auto& r : *reqs) out.push_back(property(r.fabric, r.device, r.instance));
  return {};
}

// ------------------------------------------------------------------ RUN

void IbHook::on_event(HookContext& ctx, const JobView& job, const job::Event& ev) {
  if (ev.name == "alloc")
    on_alloc(ctx, job);
  else if (ev.name == "release")
    on_release(ctx, job);
}

bool IbHook::take_guids(uint64_t jobid, uint64_t count) {
  std::map<uint64_t, uint64_t> used;  // offset -> count
  for (const auto& [id, h] : held_)
    if (h.guid_count > 0) used[h.guid_offset] = h.guid_count;
  uint64_t at = 0;
  for (const auto& [off, n] : used) {
    if (off >= at + count) break;
    at = std::max(at, off + n);
  }
  if (at + count > cfg_.guid_count) return false;
  held_[jobid].guid_offset = at;
  held_[jobid].guid_count = count;
  return true;
}

void IbHook::on_alloc(HookContext& ctx, const JobView& job) {
  auto reqs = requests_of(*job.spec);
  if (!reqs || reqs->empty() || !job.R) return;
  json ev = json::object();
  bool wants_job_key = false;
  for (const auto& r : *reqs) wants_job_key = wants_job_key || r.partition == "job";
  if (wants_job_key) {
    auto key = pkeys_->reserve(job.id, 1);
    if (!key) {
      ctx.raise_exception(job.id, kAction, 0, "partition key reservation failed: " + key.message());
      return;
    }
    ev["pkey"] = key->front();
  }
  const uint64_t per_node = vf_interfaces(*reqs);
  Held& held = held_[job.id];
  if (per_node > 0) {
    if (!take_guids(job.id, per_node * job.R->nodes.size())) {
      if (pkeys_) pkeys_->release(job.id, {});
      held_.erase(job.id);
      ctx.raise_exception(job.id, kAction, 0,
                          fmt::format("virtual function GUIDs: {} needed, the pool (infiniband.guid-pool) has no run "
                                      "that long free",
                                      per_node * job.R->nodes.size()));
      return;
    }
    ev["guid_offset"] = held.guid_offset;
    ev["guid_count"] = held.guid_count;
  }
  ctx.post_event(job.id, kAction, ev.dump());
  ctx.set_task_env(job.id, "CORRAL_IB_INTERFACES", std::to_string(reqs->size()));
  ctx.prolog_start(job.id, kAction);
  start_prolog(ctx, job, *reqs);
}

// One run per node: each learns its own VF GUIDs.
void IbHook::start_prolog(HookContext& ctx, const JobView& job, const std::vector<IbRequest>& reqs) {
  const Held& held = held_[job.id];
  PrologRun& run = prologs_[job.id];
  run = PrologRun{};
  json fabrics = json::array();
  for (const auto& f : cfg_.fabrics) fabrics.push_back({{"name", f.name}, {"subnet_prefix", f.subnet_prefix}});
  const auto* job_keys = pkeys_ ? pkeys_->reservation(job.id) : nullptr;
  const std::vector<std::string> nodes = node_names(job);
  run.pending.insert(nodes.begin(), nodes.end());
  const uint64_t per_node = vf_interfaces(reqs);
  for (size_t n = 0; n < nodes.size(); ++n) {
    const std::string& node = nodes[n];
    NodeJob nj{job.id, job.userid, reqs, {}, {}};
    uint64_t next = held.guid_count > 0 ? cfg_.guid_first + held.guid_offset + n * per_node : 0;
    for (const auto& r : reqs) {
      uint16_t key = 0;
      if (r.partition == "job" && job_keys && !job_keys->empty()) key = job_keys->front();
      if (auto it = named_.find(r.partition); it != named_.end()) key = it->second;
      nj.pkeys.push_back(key);
      nj.vf_guids.push_back(r.virtual_function && next ? next++ : 0);
    }
    std::map<std::string, std::string> env{{"CORRAL_IB_JOB", to_json(nj).dump()},
                                           {"CORRAL_IB_FABRICS", fabrics.dump()},
                                           {"CORRAL_IB_DEFAULT_FABRIC", fabrics_.default_name()}};
    ctx.run_on_nodes(job.id, kProlog, cfg_.command + " prolog", cfg_.prolog_timeout, {node}, env);
  }
}

void IbHook::prolog_result(HookContext& ctx, const JobView& job, const PerilogOutcome& o) {
  auto it = prologs_.find(job.id);
  if (it == prologs_.end() || !it->second.pending.erase(o.node)) return;
  PrologRun& run = it->second;
  if (!hook::succeeded(o))
    run.failures.push_back(
        fmt::format("Infiniband setup failed on {}: {}", o.node, hook::failure_reason(o, cfg_.prolog_timeout)));
  else if (sm_)
    members_from_output(o.output, run.members);
  if (!run.pending.empty()) return;
  std::vector<std::string> failures = std::move(run.failures);
  Members members = std::move(run.members);
  prologs_.erase(it);
  if (failures.empty() && !members.empty()) {
    join_members(ctx, job, std::move(members));
    return;
  }
  hook::finish_prolog(ctx, job.id, kAction, failures);
}

// ------------------------------------------------------------------ CLEANUP

void IbHook::on_release(HookContext& ctx, const JobView& job) {
  auto it = held_.find(job.id);
  if (it == held_.end() || it->second.released) return;
  std::vector<std::string> nodes = node_names(job);
  it->second.released = true;
  it->second.pending = {nodes.begin(), nodes.end()};
  const bool leaving = sm_ && !it->second.members.empty();
  if (leaving) it->second.pending.insert(kSubnetManager);
  std::vector<std::string> waiters = nodes;
  if (leaving) waiters.push_back(kSubnetManager);
  if (pkeys_) pkeys_->release(job.id, waiters);
  save_held(ctx, job.id);
  if (leaving) leave_members(ctx, job.id);
  if (nodes.empty()) {
    if (!leaving) confirm(ctx, job.id, "");
    return;
  }
  ctx.run_on_nodes(job.id, kEpilog, fmt::format("{} epilog --job {}", cfg_.command, job.id), kEpilogTimeout, nodes, {});
}

void IbHook::epilog_result(HookContext& ctx, uint64_t jobid, const PerilogOutcome& o) {
  if (hook::succeeded(o)) {
    confirm(ctx, jobid, o.node);
    return;
  }
  std::string why = hook::line_after(o.output, "error: ");
  if (why.empty()) why = hook::describe_outcome(o, kEpilogTimeout);
  // Its VFs may still carry the job's GUIDs and key: nothing reuses them until an admin
  // resumes the node.
  ctx.drain_node(o.node, fmt::format("infiniband: undoing job {} failed: {}", jobid, why));
}

void IbHook::confirm(HookContext& ctx, uint64_t jobid, const std::string& node) {
  auto it = held_.find(jobid);
  if (it == held_.end()) return;
  it->second.pending.erase(node);
  if (pkeys_ && !node.empty()) pkeys_->confirm(jobid, node);
  if (it->second.pending.empty()) held_.erase(it);
  save_held(ctx, jobid);
}

void IbHook::save_held(HookContext& ctx, uint64_t jobid) {
  auto it = held_.find(jobid);
  const auto* q = pkeys_ ? pkeys_->quarantine(jobid) : nullptr;
  if (it == held_.end() || !it->second.released) {
    ctx.erase_state(name(), state_key(jobid));
    return;
  }
  json v{{"guid_offset", it->second.guid_offset},
         {"guid_count", it->second.guid_count},
         {"pending", it->second.pending},
         {"members", members_json(it->second.members)}};
  if (q) v["pkeys"] = q->ids;
  ctx.save_state(name(), state_key(jobid), v.dump());
}

void IbHook::on_perilog(HookContext& ctx, const JobView& job, const PerilogOutcome& o) {
  if (o.kind == kProlog)
    prolog_result(ctx, job, o);
  else if (o.kind == kEpilog)
    epilog_result(ctx, job.id, o);
}

void IbHook::on_perilog_inactive(HookContext& ctx, uint64_t jobid, const PerilogOutcome& o) {
  if (o.kind == kEpilog) epilog_result(ctx, jobid, o);
}

void IbHook::on_node_resume(HookContext& ctx, const std::string& node) {
  std::vector<uint64_t> jobs;
  for (const auto& [id, h] : held_)
    if (h.released && h.pending.contains(node)) jobs.push_back(id);
  for (uint64_t id : jobs) confirm(ctx, id, node);
}

// ------------------------------------------------------------------ restart

void IbHook::on_load(HookContext& ctx, const hook::SavedState& saved) {
  for (const auto& [key, value] : saved) {
    if (!key.starts_with("job-")) continue;
    const uint64_t jobid = std::strtoull(key.c_str() + 4, nullptr, 10);
    auto v = json::parse(value, nullptr, false);
    if (jobid == 0 || !v.is_object()) continue;
    Held h;
    h.released = true;
    h.guid_offset = v.value("guid_offset", uint64_t{0});
    h.guid_count = v.value("guid_count", uint64_t{0});
    for (const auto& n : v.value("pending", json::array()))
      if (n.is_string()) h.pending.insert(n.get<std::string>());
    h.members = members_of_json(v.value("members", json::object()));
    std::vector<uint16_t> keys;
    for (const auto& k : v.value("pkeys", json::array()))
      if (k.is_number_unsigned() && k.get<uint64_t>() <= 0x7fff) keys.push_back(k.get<uint16_t>());
    if (pkeys_ && !keys.empty()) (void)pkeys_->restore_quarantine(jobid, keys, h.pending);
    if (h.pending.empty()) continue;
    const bool leaving = h.pending.contains(kSubnetManager);
    std::vector<std::string> nodes;
    for (const auto& n : h.pending)
      if (n != kSubnetManager) nodes.push_back(n);
    held_[jobid] = std::move(h);
    if (leaving) leave_members(ctx, jobid);
    // Epilogs still running lost their outcomes: ask again (the epilog is idempotent).
    if (!nodes.empty())
      ctx.run_on_nodes(jobid, kEpilog, fmt::format("{} epilog --job {}", cfg_.command, jobid), kEpilogTimeout, nodes,
                       {});
  }
}

void IbHook::on_restart(HookContext& ctx, const JobView& job) {
  const json* found = nullptr;
  json ev;
  Members members;
  for (const auto& e : job.events)
    if (e.name == kAction) {
      ev = json::parse(e.context, nullptr, false);
      found = &ev;
    } else if (e.name == kJoinEvent) {
      auto j = json::parse(e.context, nullptr, false);
      if (j.is_object()) members = members_of_json(j.value("members", json::object()));
    }
  if (!found || !ev.is_object() || held_.contains(job.id)) return;
  auto reqs = requests_of(*job.spec);
  if (!reqs || reqs->empty()) return;
  Held& h = held_[job.id];
  h.members = std::move(members);
  h.guid_offset = ev.value("guid_offset", uint64_t{0});
  h.guid_count = ev.value("guid_count", uint64_t{0});
  if (ev.contains("pkey") && pkeys_) {
    if (auto st = pkeys_->restore(job.id, {ev["pkey"].get<uint16_t>()}); !st.ok())
      ctx.raise_exception(job.id, kAction, 1, "partition key not restored: " + st.message());
  }
  if (job.status.released) {
    on_release(ctx, job);
    return;
  }
  ctx.set_task_env(job.id, "CORRAL_IB_INTERFACES", std::to_string(reqs->size()));
  if (job.status.prolog_actions.count(kAction)) start_prolog(ctx, job, *reqs);
}

// ------------------------------------------------------------------ show and queries

void IbHook::describe_job(const JobView& job, std::map<std::string, std::string>& out) const {
  auto reqs = requests_of(*job.spec);
  if (!reqs || reqs->empty()) return;
  std::string line = fmt::format("{} interface{}", reqs->size(), reqs->size() == 1 ? "" : "s");
  if (const auto* keys = pkeys_ ? pkeys_->reservation(job.id) : nullptr; keys && !keys->empty())
    line += fmt::format(", partition key {:#06x}", keys->front());
  out["Infiniband"] = line;
}

Result<std::string> IbHook::query(HookContext&, const hook::HookQuery& q) {
  if (q.what == "classes") return query_classes();
  if (q.what == "pool") return query_pool();
  if (q.what == "capabilities") return query_capabilities();
  return not_found(fmt::format("infiniband answers 'classes', 'pool' and 'capabilities', not '{}'", q.what));
}

std::map<std::string, std::vector<IbCapability>> IbHook::capabilities_by_node() const {
  std::map<std::string, std::vector<IbCapability>> by_node;
  for (const auto& [node, devs] : devices_) by_node[node] = capabilities_of(devs);
  return by_node;
}

Result<std::string> IbHook::query_classes() const {
  const auto by_node = capabilities_by_node();
  json classes = json::array();
  for (const auto& c : node_classes(by_node))
    classes.push_back({{"capabilities", to_json(c.hardware)}, {"nodes", c.nodes}, {"degraded", c.degraded}});
  json nodes = json::object();
  for (const auto& [node, caps] : by_node) nodes[node] = to_json(caps);
  return json{{"classes", classes}, {"nodes", nodes}, {"fabrics", fabrics_.names()}}.dump();
}

namespace {

// "2x MT28908 Family [ConnectX-6] on IbFabric1 (instance 1 down)"
std::string summary_of(const std::vector<IbCapability>& caps) {
  std::string out;
  for (const auto& c : caps) {
    out += fmt::format("{}{}x {} on {}", out.empty() ? "" : ", ", c.count, c.name, c.fabric);
    if (!c.inactive.empty()) out += fmt::format(" ({} inactive)", c.inactive.size());
  }
  return out;
}

}  // namespace

Result<std::string> IbHook::query_capabilities() const {
  const auto by_node = capabilities_by_node();
  json nodes = json::object();
  const auto classes = node_classes(by_node);
  for (size_t i = 0; i < classes.size(); ++i)
    for (const auto& node : classes[i].nodes) {
      json n{{"class", fmt::format("ib-{}", i + 1)},
             {"summary", summary_of(by_node.at(node))},
             {"capabilities", to_json(by_node.at(node))}};
      if (auto d = classes[i].degraded.find(node); d != classes[i].degraded.end()) n["differs"] = d->second;
      nodes[node] = std::move(n);
    }
  return json{{"nodes", nodes}}.dump();
}

Result<std::string> IbHook::query_pool() const {
  json reserved = json::array(), quarantined = json::array();
  json j{{"partitions", json::object()}, {"guid_pool_size", cfg_.guid_count}};
  for (const auto& [n, k] : named_) j["partitions"][n] = fmt::format("{:#06x}", k);
  if (pkeys_) {
    for (const auto& r : pkeys_->reservations()) reserved.push_back({{"jobid", r.jobid}, {"pkeys", r.ids}});
    for (const auto& qr : pkeys_->quarantines())
      quarantined.push_back({{"jobid", qr.jobid}, {"pkeys", qr.ids}, {"nodes", qr.nodes}});
    j["pkey_pool"] = cfg_.pkey_pool;
    j["free"] = pkeys_->free_count();
  }
  uint64_t guids = 0;
  for (const auto& [id, h] : held_) guids += h.guid_count;
  j["reserved"] = reserved;
  j["quarantined"] = quarantined;
  j["guids_held"] = guids;
  j["subnet_manager"] = sm_ ? sm_->describe() : "none";
  if (!sm_error_.empty()) j["subnet_manager_error"] = sm_error_;
  return j.dump();
}

}  // namespace corral::fabric::infiniband
