// `corral dws ...` (the HookQuery RPC): the workflows the hook drives, and an admin's
// teardown of a job's storage.
#include <algorithm>

#include <fmt/format.h>

#include "storage/dws/dws_hook.h"

namespace corral::storage::dws {

using hook::HookContext;
using hook::HookQuery;
using nlohmann::json;

Result<std::string> DwsHook::query(HookContext& ctx, const HookQuery& q) {
  if (q.what == "workflows") return query_workflows(ctx, q);
  if (q.what == "teardown") return query_teardown(ctx, q);
  if (q.what == "stats") return query_stats();
  return not_found("corral dws: no query '" + q.what.substr(0, 64) + "' (workflows, teardown, stats)");
}

Result<std::string> DwsHook::query_workflows(HookContext& ctx, const HookQuery& q) const {
  json rows = json::array();
  for (const auto& [id, f] : flows_) {
    if (!q.admin && f.uid != q.uid) continue;
    rows.push_back({{"jobid", id},
                    {"name", f.name},
                    {"userid", f.uid},
                    {"desired", f.desired},
                    {"state", f.state},
                    {"ready", f.ready},
                    {"status", f.status},
                    {"message", f.message},
                    {"seconds_in_state", std::max(0.0, ctx.now() - f.asked)},
                    {"holds", f.prolog   ? "dws-setup"
                              : f.epilog ? "dws-epilog"
                                         : ""},
                    {"deleting", f.deleting}});
  }
  json orphans = json::array();
  if (q.admin)
    for (const auto& [name, deleting] : orphans_) orphans.push_back({{"name", name}, {"deleting", deleting}});
  return json{{"workflows", rows}, {"orphans", orphans}, {"synced", synced_}}.dump();
}

void DwsHook::Samples::add(double v) {
  if (values.size() < kSamples)
    values.push_back(v);
  else
    values[next] = v;
  next = (next + 1) % kSamples;
  ++count;
}

json DwsHook::Samples::summary() const {
  if (values.empty()) return {{"count", 0}};
  std::vector<double> v = values;
  std::sort(v.begin(), v.end());
  auto at = [&](double p) {
    return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))] * 1e3;
  };
  return {{"count", count},    {"sampled", v.size()}, {"p50_ms", at(0.5)},
          {"p90_ms", at(0.9)}, {"p99_ms", at(0.99)},  {"max_ms", v.back() * 1e3}};
}

void DwsHook::describe_job(const hook::JobView& job, std::map<std::string, std::string>& out) const {
  auto it = flows_.find(job.id);
  if (it == flows_.end()) return;
  const Flow& f = it->second;
  std::string state = f.state.empty() ? "creating" : f.state + (f.ready ? " ready" : "");
  if (f.desired != f.state && !f.desired.empty()) state += ", going to " + f.desired;
  if (!f.status.empty() && f.status != "Completed")
    state += " (" + f.status + (f.message.empty() ? "" : ": " + f.message) + ")";
  if (f.deleting) state = "torn down, deleting";
  out["Storage"] = fmt::format("{} [workflow {}]", state, f.name);
}

Result<std::string> DwsHook::query_stats() const {
  size_t in_flight = 0;
  for (const auto& [id, f] : flows_) in_flight += f.exists ? 1 : 0;
  return json{{"workflows", flows_.size()},        {"in_api_server", in_flight},
              {"orphans", orphans_.size()},        {"writes_pending", writers_ ? writers_->pending() : 0},
              {"watch_lag", watch_lag_.summary()}, {"prerun_to_start", prerun_to_start_.summary()}}
      .dump();
}

Result<std::string> DwsHook::query_teardown(HookContext& ctx, const HookQuery& q) {
  if (!q.admin) return denied("corral dws teardown: only root or the controller's owner may tear down storage");
  auto args = json::parse(q.args_json, nullptr, false);
  if (!args.is_object() || !args.contains("jobid") || !args["jobid"].is_number_unsigned())
    return invalid("corral dws teardown: give a job id");
  const uint64_t id = args["jobid"].get<uint64_t>();
  Flow* f = flow_of(id);
  if (!f) return not_found(fmt::format("job {} has no workflow corral drives", id));
  const std::string was = f->desired;
  if (!f->failed && ctx.find_job(id))
    ctx.raise_exception(id, "dws", 0, fmt::format("an administrator tore down the job's storage (uid {})", q.uid));
  else if (f->desired != "Teardown" && !f->deleting)
    ask(ctx, *f, "Teardown");
  return json{{"jobid", id}, {"name", f->name}, {"was", was}}.dump();
}

}  // namespace corral::storage::dws
