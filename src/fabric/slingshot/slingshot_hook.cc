#include "fabric/slingshot/slingshot_hook.h"

#include <sys/wait.h>

#include <cstdlib>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "hook/perilog_text.h"

namespace corral::fabric::slingshot {

namespace {

using hook::HookContext;
using hook::JobView;
using hook::PerilogOutcome;
using nlohmann::json;

constexpr const char* kAction = "cray-slingshot";  // prolog action and exception type
constexpr const char* kProlog = "slingshot-prolog";
constexpr const char* kEpilog = "slingshot-epilog";
constexpr const char* kHousekeeping = "slingshot-housekeeping";
constexpr const char* kClean = "slingshot-clean";
constexpr double kRunSlack = 30;  // beyond --retry-for before the runner kills the command
constexpr int kExitBusy = 3;

std::string vni_list(const std::vector<uint16_t>& vnis) {
  std::string s;
  for (uint16_t v : vnis) s += (s.empty() ? "" : ",") + std::to_string(v);
  return s;
}

std::string state_key(uint64_t jobid) { return "job-" + std::to_string(jobid); }

using hook::last_line;
using hook::line_after;
using hook::output_lines;
using hook::succeeded;

std::vector<std::string> node_names(const JobView& job) {
  std::vector<std::string> nodes;
  if (job.R)
    for (const auto& n : job.R->nodes) nodes.push_back(n.name);
  return nodes;
}

// The job's reservation from its eventlog (the last cray-slingshot event), with its time.
std::optional<std::pair<std::vector<uint16_t>, double>> reservation_event(const JobView& job) {
  std::optional<std::pair<std::vector<uint16_t>, double>> found;
  for (const auto& ev : job.events) {
    if (ev.name != kAction) continue;
    auto ctx = json::parse(ev.context, nullptr, false);
    if (!ctx.is_object() || !ctx.contains("reservation")) continue;
    const json& vnis = ctx["reservation"].value("vnis", json::array());
    std::vector<uint16_t> out;
    for (const auto& v : vnis)
      if (v.is_number_unsigned() && v.get<uint64_t>() <= 65535) out.push_back(v.get<uint16_t>());
    found = std::make_pair(std::move(out), ev.timestamp);
  }
  return found;
}

// "busy: cxi0 service 5 (VNIs 1024)" -> "CXI service 5 on cxi0 (VNIs 1024)".
std::string busy_service(const std::string& output) {
  std::string busy = line_after(output, "busy: ");
  if (busy.empty()) return "";
  auto sp = busy.find(' ');
  std::string nic = busy.substr(0, sp);
  std::string rest = sp == std::string::npos ? "" : busy.substr(sp + 1);
  if (rest.starts_with("service ")) rest = rest.substr(8);
  auto id_end = rest.find(' ');
  std::string id = rest.substr(0, id_end);
  std::string tail = id_end == std::string::npos ? "" : rest.substr(id_end);
  return fmt::format("CXI service {} on {}{}", id, nic, tail);
}

}  // namespace

Result<std::unique_ptr<SlingshotHook>> SlingshotHook::create(SlingshotConfig cfg) {
  auto pool = make_vni_pool(cfg.vni_pool);
  if (!pool) return pool.error();
  if (cfg.vnis_per_job > kMaxVnisPerService)
    return invalid(fmt::format("slingshot.vnis-per-job: at most {} (got {})", kMaxVnisPerService, cfg.vnis_per_job));
  return std::unique_ptr<SlingshotHook>(new SlingshotHook(std::move(cfg), std::move(*pool)));
}

Result<std::unique_ptr<hook::JobHook>> make_slingshot_hook(const hook::Settings& settings,
                                                           const hook::HookSetup& setup) {
  auto cfg = parse_slingshot_settings(settings);
  if (!cfg) return cfg.error();
  if (!cfg->enabled) return std::unique_ptr<hook::JobHook>();
  if (cfg->command.empty()) cfg->command = setup.beside("corral-slingshot");
  auto hook = SlingshotHook::create(std::move(*cfg));
  if (!hook) return hook.error();
  return std::unique_ptr<hook::JobHook>(std::move(*hook));
}

// ------------------------------------------------------------------ submit

namespace {

// How many VNIs the job asks for: the options override the site default.
Result<unsigned> requested_vnis(const job::Jobspec& spec, unsigned site_default) {
  unsigned count = site_default;
  if (const json* opt = spec.option("cray-slingshot")) {
    if (opt->is_string()) {
      const auto& s = opt->get_ref<const std::string&>();
      if (s == "off") return 0u;
      if (s != "on")
        return invalid(fmt::format("--setopt cray-slingshot={}: expected on or off (or cray-slingshot.vnicount=N)", s));
    } else if (opt->is_boolean()) {
      if (!opt->get<bool>()) return 0u;
    } else if (!opt->is_object()) {
      return invalid(fmt::format("--setopt cray-slingshot={}: expected on or off", opt->dump()));
    }
  }
  if (const json* n = spec.option("cray-slingshot.vnicount")) {
    if (!n->is_number_integer())
      return invalid(fmt::format("--setopt cray-slingshot.vnicount={}: expected an integer from 0 to {}",
                                 n->is_string() ? n->get<std::string>() : n->dump(), kMaxVnisPerService));
    int64_t v = n->get<int64_t>();
    if (v < 0)
      return invalid(
          fmt::format("--setopt cray-slingshot.vnicount={}: expected an integer from 0 to {}", v, kMaxVnisPerService));
    if (v > static_cast<int64_t>(kMaxVnisPerService))
      return invalid(fmt::format("--setopt cray-slingshot.vnicount={}: at most {} VNIs fit one CXI service", v,
                                 kMaxVnisPerService));
    count = static_cast<unsigned>(v);
  }
  return count;
}

}  // namespace

Status SlingshotHook::validate(HookContext&, const job::Jobspec& spec, uint32_t) {
  return requested_vnis(spec, cfg_.vnis_per_job).status();
}

// ------------------------------------------------------------------ RUN

void SlingshotHook::on_event(HookContext& ctx, const JobView& job, const job::Event& ev) {
  if (ev.name == "alloc")
    on_alloc(ctx, job);
  else if (ev.name == "release")
    on_release(ctx, job);
}

void SlingshotHook::on_alloc(HookContext& ctx, const JobView& job) {
  auto count = requested_vnis(*job.spec, cfg_.vnis_per_job);
  if (!count || *count == 0 || !job.R) {
    // No reservation: the nodes clear SLINGSHOT_* so applications use the default service.
    ctx.set_task_env(job.id, "SLINGSHOT_VNIS", "");
    return;
  }
  auto vnis = pool_.reserve(job.id, *count);
  if (!vnis) {
    if (cfg_.vni_reserve_fatal) {
      ctx.raise_exception(job.id, kAction, 0, "VNI reservation failed: " + vnis.message());
    } else {
      warn(ctx, job.id, "", vnis.message() + "; the job runs without VNIs", true);
      ctx.set_task_env(job.id, "SLINGSHOT_VNIS", "");
    }
    return;
  }
  ctx.post_event(job.id, kAction, json{{"reservation", {{"vnis", *vnis}}}}.dump());
  ctx.set_task_env(job.id, "SLINGSHOT_VNIS", vni_list(*vnis));
  ctx.prolog_start(job.id, kAction);
  start_prolog(ctx, job, *vnis);
}

// One run per distinct core count, so each node learns the cores the job holds there.
void SlingshotHook::start_prolog(HookContext& ctx, const JobView& job, const std::vector<uint16_t>& vnis) {
  std::map<size_t, std::vector<std::string>> by_cores;
  for (const auto& n : job.R->nodes) by_cores[n.cores.count()].push_back(n.name);
  PrologRun& run = prologs_[job.id];
  run = PrologRun{};
  for (const auto& [ncores, nodes] : by_cores) run.pending.insert(nodes.begin(), nodes.end());
  for (const auto& [ncores, nodes] : by_cores) {
    std::map<std::string, std::string> env{
        {"CORRAL_SLINGSHOT_VNIS", vni_list(vnis)},
        {"CORRAL_SLINGSHOT_UID", std::to_string(job.userid)},
        {"CORRAL_SLINGSHOT_NCORES", std::to_string(ncores)},
    };
    ctx.run_on_nodes(job.id, kProlog, cfg_.command + " prolog", cfg_.prolog_timeout, nodes, env);
  }
}

void SlingshotHook::warn(HookContext& ctx, uint64_t jobid, const std::string& node, const std::string& message,
                         bool note) {
  if (!ctx.find_job(jobid)) {  // an inactive job's eventlog is closed: the log keeps it
    spdlog::warn("cray-slingshot: job {}{}: {}", jobid, node.empty() ? "" : " on " + node, message);
    return;
  }
  json c{{"source", kAction}, {"message", message}};
  if (!node.empty()) c["node"] = node;
  ctx.post_event(jobid, "warning", c.dump());
  if (note) ctx.job_note(jobid, fmt::format("corral: cray-slingshot: {}{}", node.empty() ? "" : node + ": ", message));
}

void SlingshotHook::prolog_result(HookContext& ctx, const JobView& job, const PerilogOutcome& o) {
  auto it = prologs_.find(job.id);
  if (it == prologs_.end() || !it->second.pending.erase(o.node)) return;
  PrologRun& run = it->second;
  for (const auto& l : output_lines(o.output))
    if (l.starts_with("warning: ")) warn(ctx, job.id, o.node, l.substr(9), true);
  if (!succeeded(o))
    run.failures.push_back(
        fmt::format("CXI service allocation failed on {}: {}", o.node, hook::failure_reason(o, cfg_.prolog_timeout)));
  if (!run.pending.empty()) return;
  std::vector<std::string> failures = std::move(run.failures);
  prologs_.erase(it);
  hook::finish_prolog(ctx, job.id, kAction, failures);
}

// ------------------------------------------------------------------ CLEANUP

void SlingshotHook::on_release(HookContext& ctx, const JobView& job) {
  const auto* held = pool_.reservation(job.id);
  if (!held) return;
  std::vector<uint16_t> vnis = *held;
  std::vector<std::string> nodes = node_names(job);
  uids_[job.id] = job.userid;
  pool_.release(job.id, nodes);
  save_quarantine(ctx, job.id);
  std::map<std::string, std::string> env{
      {"CORRAL_SLINGSHOT_VNIS", vni_list(vnis)},
      {"CORRAL_SLINGSHOT_UID", std::to_string(job.userid)},
  };
  // The epilog does not hold the job: busy services are retried by housekeeping.
  ctx.run_on_nodes(job.id, kEpilog, fmt::format("{} epilog --retry-for {}", cfg_.command, cfg_.epilog_retry),
                   cfg_.epilog_retry + kRunSlack, nodes, env);
}

void SlingshotHook::run_housekeeping(HookContext& ctx, uint64_t jobid, const std::vector<std::string>& nodes) {
  const auto* q = pool_.quarantine(jobid);
  if (!q || nodes.empty()) return;
  auto uid = uids_.find(jobid);
  std::map<std::string, std::string> env{{"CORRAL_SLINGSHOT_VNIS", vni_list(q->ids)}};
  if (uid != uids_.end()) env["CORRAL_SLINGSHOT_UID"] = std::to_string(uid->second);
  ctx.run_on_nodes(jobid, kHousekeeping,
                   fmt::format("{} epilog --retry-for {}", cfg_.command, cfg_.housekeeping_timeout),
                   cfg_.housekeeping_timeout + kRunSlack, nodes, env);
}

void SlingshotHook::cleanup_result(HookContext& ctx, uint64_t jobid, const PerilogOutcome& o) {
  if (o.kind == kClean) {
    if (succeeded(o)) confirmed_node(ctx, o.node);
    return;
  }
  const auto* q = pool_.quarantine(jobid);
  if (!q || !q->nodes.count(o.node)) return;
  if (succeeded(o)) {
    confirmed(ctx, jobid, o.node);
    return;
  }
  if (o.kind == kEpilog) {
    std::string busy = busy_service(o.output);
    std::string what =
        busy.empty() ? hook::describe_outcome(o, cfg_.epilog_retry) + ": " + last_line(o.output) : busy + " still busy";
    bool is_busy = !o.timed_out && WIFEXITED(o.waitstatus) && WEXITSTATUS(o.waitstatus) == kExitBusy;
    warn(ctx, jobid, o.node,
         fmt::format("epilog: {}{}; housekeeping retries for {}s", what,
                     is_busy ? "" : " (" + hook::describe_outcome(o, cfg_.epilog_retry) + ")",
                     cfg_.housekeeping_timeout),
         false);
    run_housekeeping(ctx, jobid, {o.node});
    return;
  }
  if (o.kind != kHousekeeping) return;
  std::string busy = busy_service(o.output);
  std::string vnis = vni_list(q->ids);
  std::string reason = busy.empty()
                           ? fmt::format("cray-slingshot: CXI services of job {} (VNIs {}) not destroyed: {}{}", jobid,
                                         vnis, hook::describe_outcome(o, cfg_.housekeeping_timeout + kRunSlack),
                                         last_line(o.output).empty() ? "" : ": " + last_line(o.output))
                           : fmt::format("cray-slingshot: {} still busy after {}s", busy, cfg_.housekeeping_timeout);
  // The VNIs stay quarantined until an admin cleans or resumes the node.
  ctx.drain_node(o.node, reason);
}

void SlingshotHook::confirmed(HookContext& ctx, uint64_t jobid, const std::string& node) {
  pool_.confirm(jobid, node);
  save_quarantine(ctx, jobid);
}

void SlingshotHook::confirmed_node(HookContext& ctx, const std::string& node) {
  for (uint64_t jobid : pool_.confirm_node(node)) save_quarantine(ctx, jobid);
}

void SlingshotHook::save_quarantine(HookContext& ctx, uint64_t jobid) {
  const auto* q = pool_.quarantine(jobid);
  if (!q) {
    ctx.erase_state(name(), state_key(jobid));
    uids_.erase(jobid);
    return;
  }
  json v{{"vnis", q->ids}, {"pending", q->nodes}};
  if (auto uid = uids_.find(jobid); uid != uids_.end()) v["uid"] = uid->second;
  ctx.save_state(name(), state_key(jobid), v.dump());
}

void SlingshotHook::on_perilog(HookContext& ctx, const JobView& job, const PerilogOutcome& o) {
  if (o.kind == kProlog)
    prolog_result(ctx, job, o);
  else if (o.kind.starts_with("slingshot-"))
    cleanup_result(ctx, job.id, o);
}

void SlingshotHook::on_perilog_inactive(HookContext& ctx, uint64_t jobid, const PerilogOutcome& o) {
  if (o.kind != kProlog && o.kind.starts_with("slingshot-")) cleanup_result(ctx, jobid, o);
}

void SlingshotHook::on_node_resume(HookContext& ctx, const std::string& node) { confirmed_node(ctx, node); }

// ------------------------------------------------------------------ restart

void SlingshotHook::on_load(HookContext& ctx, const hook::SavedState& saved) {
  for (const auto& [key, value] : saved) {
    if (!key.starts_with("job-")) continue;
    uint64_t jobid = std::strtoull(key.c_str() + 4, nullptr, 10);
    auto v = json::parse(value, nullptr, false);
    if (jobid == 0 || !v.is_object()) continue;
    std::vector<uint16_t> vnis;
    for (const auto& x : v.value("vnis", json::array()))
      if (x.is_number_unsigned() && x.get<uint64_t>() <= 65535) vnis.push_back(x.get<uint16_t>());
    std::set<std::string> nodes;
    for (const auto& x : v.value("pending", json::array()))
      if (x.is_string()) nodes.insert(x.get<std::string>());
    if (v.contains("uid") && v["uid"].is_number_unsigned()) uids_[jobid] = v["uid"].get<uint32_t>();
    if (!pool_.restore_quarantine(jobid, vnis, nodes).ok()) continue;
    restored_.insert(jobid);
    // The restart lost the outcomes of epilogs and housekeeping still running: ask again.
    run_housekeeping(ctx, jobid, {nodes.begin(), nodes.end()});
  }
}

void SlingshotHook::on_restart(HookContext& ctx, const JobView& job) {
  auto found = reservation_event(job);
  if (!found || found->first.empty()) {
    if (job.R && !job.status.started) ctx.set_task_env(job.id, "SLINGSHOT_VNIS", "");
    return;
  }
  const auto& [vnis, when] = *found;
  if (job.status.released) {
    // Released before the crash: its quarantine was saved with the release, unless the
    // crash came first. Then release again (the epilog is idempotent).
    if (restored_.count(job.id)) return;
    if (auto st = pool_.restore(job.id, vnis, when); !st.ok()) return;
    on_release(ctx, job);
    return;
  }
  if (auto st = pool_.restore(job.id, vnis, when); !st.ok()) {
    ctx.raise_exception(job.id, kAction, 1, "VNI reservation not restored: " + st.message());
    return;
  }
  ctx.set_task_env(job.id, "SLINGSHOT_VNIS", vni_list(vnis));
  // A prolog still running lost its outcome: run it again (it is idempotent).
  if (job.status.prolog_actions.count(kAction) && job.R) start_prolog(ctx, job, vnis);
}

// ------------------------------------------------------------------ queries

Result<std::string> SlingshotHook::query(HookContext& ctx, const hook::HookQuery& q) {
  if (q.what == "pool") return query_pool();
  if (q.what == "clean") return query_clean(ctx, q);
  return not_found(fmt::format("cray-slingshot answers 'pool' and 'clean', not '{}'", q.what));
}

Result<std::string> SlingshotHook::query_pool() const {
  json reserved = json::array(), quarantined = json::array();
  for (const auto& r : pool_.reservations()) reserved.push_back({{"jobid", r.jobid}, {"vnis", r.ids}});
  for (const auto& qr : pool_.quarantines())
    quarantined.push_back({{"jobid", qr.jobid}, {"vnis", qr.ids}, {"nodes", qr.nodes}});
  json j{{"pool", pool_.pool().encode()},          {"size", pool_.size()}, {"free", pool_.free_count()},
         {"free_vnis", pool_.free_set().encode()}, {"reserved", reserved}, {"quarantined", quarantined}};
  return j.dump();
}

Result<std::string> SlingshotHook::query_clean(HookContext& ctx, const hook::HookQuery& q) {
  if (!q.admin)
    return denied(
        fmt::format("permission denied: only root or the cluster's owner may clean "
                    "nodes (you are uid {})",
                    q.uid));
  auto args = json::parse(q.args_json, nullptr, false);
  std::vector<std::string> nodes;
  if (args.is_object() && args.contains("nodes") && args["nodes"].is_array())
    for (const auto& n : args["nodes"])
      if (n.is_string() && !n.get<std::string>().empty()) nodes.push_back(n.get<std::string>());
  if (nodes.empty()) return invalid("clean: no nodes given (args: {\"nodes\":[\"n1\", ...]})");
  for (const auto& n : nodes)
    if (!ctx.node_exists(n)) return not_found("clean: no such node: " + n);
  ctx.run_on_nodes(
      0, kClean,
      fmt::format("{} clean --vnis {} --retry-for {}", cfg_.command, pool_.pool().encode(), cfg_.epilog_retry),
      cfg_.epilog_retry + kRunSlack, nodes, {});
  return json{{"started", nodes}}.dump();
}

}  // namespace corral::fabric::slingshot
