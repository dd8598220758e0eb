// The dws hook's reads (dws_hook.h): one watch per kind, each batch of changes handled
// under the controller's lock. The first workflow list after a start is where the hook
// adopts its live jobs' workflows and tears down every other one of its own.
#include <ctime>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "storage/dws/dws_hook.h"
#include "storage/dws/json_fields.h"

namespace corral::storage::dws {

using hook::HookContext;
using hook::JobView;
using nlohmann::json;

namespace {

constexpr const char* kCreate = "dws-create";
constexpr const char* kFinalizer = "corral.dev/workflow";

bool has_our_finalizer(const json& obj) {
  for (const auto& f : arr_at(obj_at(obj, "metadata"), "finalizers"))
    if (f == kFinalizer) return true;
  return false;
}

}  // namespace

// Objects from the API server are not trusted to have the shape of their kind: one that
// breaks a reader is logged and skipped, it does not take corrald down.
template <class Fn>
void guarded(const char* what, Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    spdlog::warn("dws: a {} of an unexpected shape was skipped: {}", what, e.what());
  }
}

void DwsHook::start_watches() {
  auto trouble = [](std::string what) {
    return [what](const std::string& why) { spdlog::warn("dws: {} watch: {}", what, why); };
  };
  WatchSink wf;
  wf.on_list = [this](std::vector<json>& items) {
    runner_->run([this, items = std::move(items)](HookContext& ctx) mutable {
      guarded("workflow list", [&] { workflows_listed(ctx, items); });
    });
  };
  wf.on_events = [this](std::vector<json>& events) {
    runner_->run([this, events = std::move(events)](HookContext& ctx) {
      for (const auto& ev : events)
        guarded("workflow", [&] { workflow_changed(ctx, str_at(ev, "type"), obj_at(ev, "object")); });
    });
  };
  wf.on_trouble = trouble("workflow");
  wf.omit = {{"status", "drivers"}};  // half of each event, and nothing here reads it
  watches_.push_back(std::make_unique<KubeWatch>(kube_, collection("workflows", cfg_.ns), "", std::move(wf)));

  // Storages and rules: every change replaces what the hook knows (the list: all of it).
  auto replacing = [this, trouble](const char* what, void (DwsHook::*take)(std::vector<json>&, bool)) {
    WatchSink sink;
    sink.on_list = [this, what, take](std::vector<json>& items) {
      runner_->run([this, what, take, items = std::move(items)](HookContext&) mutable {
        guarded(what, [&] { (this->*take)(items, true); });
      });
    };
    sink.on_events = [this, what, take](std::vector<json>& events) {
      runner_->run([this, what, take, events = std::move(events)](HookContext&) mutable {
        guarded(what, [&] { (this->*take)(events, false); });
      });
    };
    sink.on_trouble = trouble(what);
    return sink;
  };
  watches_.push_back(std::make_unique<KubeWatch>(kube_, collection("storages", "default"), "",
                                                 replacing("storage", &DwsHook::storages_changed)));
  watches_.push_back(std::make_unique<KubeWatch>(kube_, collection("dwdirectiverules", ""), "",
                                                 replacing("directive rule", &DwsHook::rules_changed)));
  for (auto& w : watches_) w->start();
}

uint64_t DwsHook::jobid_of(const std::string& name) const {
  if (name.rfind(cfg_.prefix, 0) != 0 || name.size() == cfg_.prefix.size() || name.size() > cfg_.prefix.size() + 19)
    return 0;
  uint64_t id = 0;
  for (size_t i = cfg_.prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return 0;
    id = id * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  return id;
}

namespace {

// A Kubernetes MicroTime ("2026-11-25T07:05:56.737878Z") as epoch seconds; 0 if it is not one.
double micro_time(const std::string& t) {
  std::tm tm{};
  const char* rest = strptime(t.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!rest) return 0;
  double frac = 0;
  if (*rest == '.') frac = std::strtod(rest, nullptr);
  return static_cast<double>(timegm(&tm)) + frac;
}

}  // namespace

void DwsHook::take_object(Flow& f, const json& obj) {
  f.exists = true;
  const json& st = obj_at(obj, "status");
  const json& m = obj_at(obj, "metadata");
  f.meta = {{"metadata", {{"finalizers", arr_at(m, "finalizers")}, {"resourceVersion", str_at(m, "resourceVersion")}}}};
  f.state = str_at(st, "state");
  f.status = str_at(st, "status");
  f.message = str_at(st, "message");
  f.ready = bool_at(st, "ready");
  if (f.ready) f.ready_at = micro_time(str_at(st, "readyChange"));
  if (f.breakdowns.is_null() && st.contains("directiveBreakdowns")) f.breakdowns = arr_at(st, "directiveBreakdowns");
  if (f.computes.is_null() && st.contains("computes")) f.computes = obj_at(st, "computes");
  if (f.state == "PreRun" && f.ready) f.env = obj_at(st, "env");
  // After a restart the object, not the hook, knows what was last asked.
  if (f.restored || f.desired.empty()) f.desired = obj_at(obj, "spec").value("desiredState", "");
}

// Every workflow there is: adopt ours of live jobs, tear down ours of no live job, and
// settle the flows whose workflow is missing.
void DwsHook::workflows_listed(HookContext& ctx, std::vector<json>& items) {
  std::set<uint64_t> seen;
  for (const auto& obj : items) {
    const std::string name = str_at(obj_at(obj, "metadata"), "name");
    const uint64_t id = jobid_of(name);
    if (id == 0 || !has_our_finalizer(obj)) continue;
    Flow* f = flow_of(id);
    if (!f || f->name != name || !ctx.find_job(id) ||
        obj_at(obj, "spec").value("jobID", json()) != json(std::to_string(id))) {
      if (!f || !f->deleting) orphan(ctx, obj);
      continue;
    }
    seen.insert(id);
    workflow_changed(ctx, "MODIFIED", obj);
  }
  const bool first = !synced_;
  synced_ = true;
  std::vector<uint64_t> missing;
  for (auto& [id, f] : flows_)
    if (!seen.count(id) && (f.exists || (first && f.restored)) && !f.deleting) missing.push_back(id);
  for (uint64_t id : missing) {
    Flow& f = flows_.at(id);
    const JobView* job = ctx.find_job(id);
    if (!job) {
      flows_.erase(id);
      continue;
    }
    if (!f.exists && job->status.dependencies.count(kCreate)) {
      post_create(ctx, f);  // lost before it reached the API server
      continue;
    }
    f.exists = false;
    f.create_failed = true;
    if (f.epilog)
      finish_epilog(ctx, f, 0);
    else
      fail(ctx, f, "dws", fmt::format("the job's workflow {} is gone (deleted outside corral)", f.name));
  }
}

// Ours, but no live job's: to Teardown, then deleted (dws_hook_writes.cc).
void DwsHook::orphan(HookContext& ctx, const json& obj) {
  const std::string name = str_at(obj_at(obj, "metadata"), "name");
  const json& st = obj_at(obj, "status");
  const bool torn = st.value("state", "") == "Teardown" && st.value("ready", false);
  auto [it, first] = orphans_.emplace(name, false);
  if (torn) {
    if (!it->second) post_delete(ctx, name, 0, obj);
    it->second = true;
    return;
  }
  if (first && obj_at(obj, "spec").value("desiredState", "") != "Teardown") {
    spdlog::info("dws: workflow {} belongs to no live job: tearing it down", name);
    send(ctx, name, [this, name](KubeWriters::Writer& w) -> KubeWriters::Task {
      // A named value, not a braced list in the co_await: GCC 12 cannot compile the latter.
      const json patch = {{"spec", {{"desiredState", "Teardown"}}}};
      (void)co_await w.merge_patch(workflow_path(name), patch);
    });
  }
}

void DwsHook::workflow_changed(HookContext& ctx, const std::string& type, const json& obj) {
  const std::string name = str_at(obj_at(obj, "metadata"), "name");
  const uint64_t id = jobid_of(name);
  if (id == 0) return;
  Flow* f = flow_of(id);
  if (!f || f->name != name) {
    if (type != "DELETED" && has_our_finalizer(obj) && synced_ && !ctx.find_job(id)) orphan(ctx, obj);
    if (type == "DELETED") orphans_.erase(name);
    return;
  }
  if (type == "DELETED") {
    if (f->deleting) {
      if (!ctx.find_job(id)) flows_.erase(id);
      return;
    }
    f->exists = false;
    f->create_failed = true;
    if (f->epilog)
      finish_epilog(ctx, *f, 0);
    else
      fail(ctx, *f, "dws", fmt::format("the job's workflow {} was deleted outside corral", name));
    return;
  }
  if (obj_at(obj, "spec").value("jobID", json()) != json(std::to_string(id))) return;
  take_object(*f, obj);
  if (f->restored) {
    f->restored = false;
    // Where the restart left it: a step that was decided but never written is taken again.
    if (f->epilog && !f->deleting && f->desired != "PostRun" && f->desired != "DataOut" && f->desired != "Teardown") {
      if (f->ran && !f->failed && f->desired == "PreRun")
        ask(ctx, *f, "PostRun");
      else
        ask(ctx, *f, "Teardown");
    }
    const JobView* job = ctx.find_job(id);
    if (f->failed && f->desired != "Teardown" && job && !job->status.allocated) ask(ctx, *f, "Teardown");
  }
  if (obj["metadata"].contains("deletionTimestamp") && !f->deleting && f->desired != "Teardown") {
    fail(ctx, *f, "dws", fmt::format("the job's workflow {} is being deleted outside corral", name));
    if (f->epilog) to_teardown(ctx, *f);
  }
  drive(ctx, *f);
}

void DwsHook::storages_changed(std::vector<json>& objs, bool full) {
  if (full) rabbits_.clear();
  for (const auto& ev : objs) {
    const bool is_event = !full;
    const json& obj = is_event ? ev["object"] : ev;
    const std::string name = str_at(obj_at(obj, "metadata"), "name");
    if (is_event && ev.value("type", "") == "DELETED") {
      rabbits_.erase(name);
      continue;
    }
    Rabbit r;
    const json& st = obj_at(obj, "status");
    r.status = st.value("status", "");
    r.state = obj_at(obj, "spec").value("state", "Enabled");
    for (const auto& c : arr_at(obj_at(st, "access"), "computes")) r.computes.push_back(c.value("name", ""));
    rabbits_[name] = std::move(r);
  }
  rabbit_of_.clear();
  for (const auto& [name, r] : rabbits_)
    for (const auto& c : r.computes) rabbit_of_[c] = name;
}

void DwsHook::rules_changed(std::vector<json>& objs, bool full) {
  if (full) rule_objects_.clear();
  for (auto& ev : objs) {
    const bool is_event = !full;
    json& obj = is_event ? ev["object"] : ev;
    const std::string key =
        str_at(obj_at(obj, "metadata"), "namespace") + "/" + str_at(obj_at(obj, "metadata"), "name");
    if (is_event && ev.value("type", "") == "DELETED")
      rule_objects_.erase(key);
    else
      rule_objects_[key] = arr_at(obj, "spec");
  }
  json all = json::array();
  for (const auto& [k, spec] : rule_objects_)
    for (const auto& r : spec) all.push_back(r);
  auto rules = DirectiveRules::from_spec(all);
  if (!rules) {
    spdlog::warn("dws: the DWDirectiveRules cannot be read: {}", rules.message());
    return;
  }
  rules_ = std::make_shared<const DirectiveRules>(std::move(*rules));
}

}  // namespace corral::storage::dws
