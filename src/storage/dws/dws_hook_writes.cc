// The dws hook's writes to the API server (dws_hook.h). Each runs on a writer thread, off
// the controller's lock; what the hook must learn from an answer comes back through the
// HookRunner. The watch, not these answers, moves the state machine.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "storage/dws/allocation_sets.h"
#include "storage/dws/dws_hook.h"
#include "storage/dws/json_fields.h"

namespace corral::storage::dws {

using hook::HookContext;
using nlohmann::json;

namespace {

constexpr const char* kGroup = "dataworkflowservices.github.io";
constexpr const char* kFinalizer = "corral.dev/workflow";

}  // namespace

std::string DwsHook::collection(const std::string& plural, const std::string& ns) const {
  if (ns.empty()) return fmt::format("/apis/{}/{}/{}", kGroup, cfg_.api_version, plural);
  return fmt::format("/apis/{}/{}/namespaces/{}/{}", kGroup, cfg_.api_version, ns, plural);
}

std::string DwsHook::workflow_path(const std::string& name) const {
  return collection("workflows", cfg_.ns) + "/" + name;
}

void DwsHook::back(std::function<void(HookContext&)> fn) {
  if (runner_ && !writers_->stopping()) runner_->run(std::move(fn));
}

void DwsHook::send(HookContext& ctx, const std::string& key, KubeWriters::Op op) {
  ctx.after_durable([w = writers_.get(), key, op = std::move(op)]() mutable { w->post(key, std::move(op)); });
}

void DwsHook::post_create(HookContext& ctx, const Flow& f) {
  json wf = {{"apiVersion", fmt::format("{}/{}", kGroup, cfg_.api_version)},
             {"kind", "Workflow"},
             {"metadata",
              {{"name", f.name},
               {"namespace", cfg_.ns},
               {"finalizers", json::array({kFinalizer})},
               {"labels", {{"corral.dev/job", std::to_string(f.jobid)}}}}},
             {"spec",
              {{"desiredState", "Proposal"},
               {"dwDirectives", f.directives},
               {"jobID", std::to_string(f.jobid)},
               {"userID", f.uid},
               {"groupID", f.gid},
               {"wlmID", "corral"},
               {"forceReady", false}}}};
  const std::string coll = collection("workflows", cfg_.ns), path = workflow_path(f.name);
  const uint64_t id = f.jobid;
  const uint32_t uid = f.uid;
  send(ctx, f.name, [this, wf, coll, path, id, uid](KubeWriters::Writer& w) -> KubeWriters::Task {
    auto r = co_await w.create(coll, wf);
    if (r && r->ok()) co_return;
    std::string why;
    if (r && r->http == 409) {
      // Ours from before a restart (the same job and user) is adopted; anything else is not.
      auto old = co_await w.get(path);
      if (old && old->ok() && old->body["spec"].value("jobID", json()).dump() == json(std::to_string(id)).dump() &&
          old->body["spec"].value("userID", 0u) == uid)
        co_return;
      why = fmt::format(
          "a workflow named {} already exists and is not this job's; an administrator must "
          "remove it (corral dws teardown or kubectl delete)",
          wf["metadata"]["name"].get<std::string>());
    } else {
      why = r ? reply_error(*r, "create workflow").message : r.message();
    }
    back([this, id, why](HookContext& hc) {
      Flow* g = flow_of(id);
      if (!g) return;
      g->create_failed = true;
      fail(hc, *g, "dws", "DWS refused the job's storage: " + why);
    });
  });
}

void DwsHook::ask(HookContext& ctx, Flow& f, const std::string& state) {
  f.desired = state;
  f.asked = ctx.now();
  ++f.generation;
  if (state == "Setup") arm_timer(ctx, f, cfg_.setup_timeout, "setup");
  if (state == "PreRun") arm_timer(ctx, f, cfg_.prerun_timeout, "prerun");
  if (state == "PostRun") {
    arm_timer(ctx, f, cfg_.postrun_timeout, "postrun");
    arm_timer(ctx, f, cfg_.teardown_after, "teardown-after");
  }
  const std::string path = workflow_path(f.name);
  const uint64_t id = f.jobid;
  send(ctx, f.name, [this, path, id, state](KubeWriters::Writer& w) -> KubeWriters::Task {
    json patch = {{"spec", {{"desiredState", state}}}};
    auto r = co_await w.merge_patch(path, patch);
    if (r && r->ok()) co_return;
    if (r && r->http == 404) co_return;  // gone: the watch tells the hook
    std::string why = r ? reply_error(*r, "move workflow to " + state).message : r.message();
    back([this, id, state, why](HookContext& hc) {
      Flow* g = flow_of(id);
      if (!g) return;
      spdlog::warn("job {}: {}", id, why);
      if (state != "Teardown") fail(hc, *g, "dws", why);
    });
  });
}

// Setup: Servers from the breakdowns and the rabbits of the job's nodes, Computes from its
// nodes, then desiredState.
void DwsHook::post_setup(HookContext& ctx, Flow& f) {
  f.setup_sent = true;
  std::map<std::string, unsigned> per;
  std::vector<std::string> unserved;
  for (const auto& n : f.nodes) {
    auto it = rabbit_of_.find(n);
    if (it == rabbit_of_.end())
      unserved.push_back(n);
    else
      ++per[it->second];
  }
  if (!unserved.empty()) {
    fail(ctx, f, "dws",
         fmt::format("no rabbit serves node {} of the job, so it cannot mount the job's storage", unserved[0]));
    return;
  }
  std::vector<std::pair<std::string, unsigned>> per_rabbit(per.begin(), per.end());
  json refs = f.breakdowns.is_array() ? f.breakdowns : json::array();
  json computes = f.computes.is_object() ? f.computes : json::object();
  const unsigned nodes = static_cast<unsigned>(f.nodes.size());
  const uint64_t min_bytes = uint64_t{cfg_.min_allocation_gib} << 30;
  json data = json::array();
  for (const auto& n : f.nodes) data.push_back({{"name", n}});
  const uint64_t id = f.jobid;
  const std::string path = workflow_path(f.name);
  f.desired = "Setup";
  f.asked = ctx.now();
  ++f.generation;
  arm_timer(ctx, f, cfg_.setup_timeout, "setup");
  send(ctx, f.name, [this, refs, computes, data, per_rabbit, nodes, min_bytes, id, path](KubeWriters::Writer& w) -> KubeWriters::Task {
    auto failed = [&](const std::string& why) {
      back([this, id, why](HookContext& hc) {
        if (Flow* g = flow_of(id)) fail(hc, *g, "dws", "DWS Setup: " + why);
      });
    };
    for (const auto& ref : refs) {
      const std::string ns = ref.value("namespace", cfg_.ns), name = ref.value("name", "");
      auto dbd = co_await w.get(collection("directivebreakdowns", ns) + "/" + name);
      if (!dbd || !dbd->ok()) co_return failed(dbd ? reply_error(*dbd, "get breakdown " + name).message : dbd.message());
      const json& st = obj_at(dbd->body, "status");
      if (!st.contains("storage")) continue;  // persistentdw and friends have none
      auto sets = allocation_sets(arr_at(st["storage"], "allocationSets"), per_rabbit, nodes, min_bytes);
      if (!sets) co_return failed(sets.message());
      const json& sref = obj_at(st["storage"], "reference");
      const std::string spath =
          collection("servers", sref.value("namespace", ns)) + "/" + sref.value("name", std::string());
      json patch = {{"spec", {{"allocationSets", *sets}}}};
      auto r = co_await w.merge_patch(spath, patch);
      if (!r || !r->ok()) co_return failed(r ? reply_error(*r, "fill servers").message : r.message());
    }
    if (computes.contains("name")) {
      const std::string cpath =
          collection("computes", computes.value("namespace", cfg_.ns)) + "/" + computes.value("name", std::string());
      const json patch = {{"data", data}};
      auto r = co_await w.merge_patch(cpath, patch);
      if (!r || !r->ok()) co_return failed(r ? reply_error(*r, "fill computes").message : r.message());
    }
    const json to_setup = {{"spec", {{"desiredState", "Setup"}}}};
    auto r = co_await w.merge_patch(path, to_setup);
    if (!r || (!r->ok() && r->http != 404))
      co_return failed(r ? reply_error(*r, "move workflow to Setup").message : r.message());
  });
}

// Teardown is done: the object is deleted, then its finalizer goes (in this order, so a
// crash in between leaves it marked for deletion with the finalizer, which the next start
// finds and finishes; the other order could leave an object nobody recognises). 404
// counts as done. `seen` (the object as the watch last showed it) says where the
// finalizer is, for a JSON patch that tests and removes it; when the object changed, it is
// read and patched again.
void DwsHook::post_delete(HookContext& ctx, const std::string& name, uint64_t jobid, const json& seen) {
  const std::string path = workflow_path(name);
  json ops;
  const json& fins = arr_at(obj_at(seen, "metadata"), "finalizers");
  for (size_t i = 0; i < fins.size(); ++i)
    if (fins[i] == kFinalizer) {
      std::string at = fmt::format("/metadata/finalizers/{}", i);
      ops = json::array({{{"op", "test"}, {"path", at}, {"value", kFinalizer}}, {{"op", "remove"}, {"path", at}}});
    }
  send(ctx, name, [this, path, name, jobid, ops](KubeWriters::Writer& w) -> KubeWriters::Task {
    auto del = co_await w.remove(path);
    bool done = del && del->http == 404;
    if (!done && !ops.is_null()) {
      auto r = co_await w.json_patch(path, ops);
      done = r && (r->ok() || r->http == 404);
    }
    for (int attempt = 0; !done && attempt < 5; ++attempt) {
      auto cur = co_await w.get(path);
      if (!cur || !cur->ok()) break;  // gone (404), or unreachable while stopping
      json keep = json::array();
      for (const auto& x : arr_at(obj_at(cur->body, "metadata"), "finalizers"))
        if (x != kFinalizer) keep.push_back(x);
      json patch = {
          {"metadata",
           {{"finalizers", keep}, {"resourceVersion", str_at(obj_at(cur->body, "metadata"), "resourceVersion")}}}};
      auto r = co_await w.merge_patch(path, patch);
      done = r && r->http != 409;
    }
    back([this, name, jobid](HookContext& hc) {
      orphans_.erase(name);
      Flow* f = flow_of(jobid);
      if (f && f->name == name && !hc.find_job(jobid)) flows_.erase(jobid);
    });
  });
}

// The epilog timed out: drain nodes whose mounts are still there, disable rabbits that
// still hold an allocation of the workflow, and go to Teardown without waiting.
void DwsHook::post_abort(HookContext& ctx, Flow& f) {
  const std::string sel = query_escape("dataworkflowservices.github.io/workflow.name=" + f.name);
  const std::string mounts = collection("clientmounts", "") + "?labelSelector=" + sel;
  const std::string servers = collection("servers", cfg_.ns) + "?labelSelector=" + sel;
  const std::string path = workflow_path(f.name), name = f.name;
  const uint64_t id = f.jobid;
  f.desired = "Teardown";
  send(ctx, f.name, [this, mounts, servers, path, name, id](KubeWriters::Writer& w) -> KubeWriters::Task {
    std::set<std::string> nodes, rabbits;  // what is still held, seen before Teardown frees it
    if (auto r = co_await w.get(mounts); r && r->ok())
      for (const auto& m : r->body["items"]) {
        bool unmounted = true;
        for (const auto& x : arr_at(obj_at(m, "status"), "mounts"))
          unmounted = unmounted && x.value("state", "") == "unmounted";
        if (!unmounted || !m.contains("status")) nodes.insert(str_at(obj_at(m, "metadata"), "namespace"));
      }
    if (auto r = co_await w.get(servers); r && r->ok())
      for (const auto& s : r->body["items"])
        for (const auto& set : arr_at(obj_at(s, "status"), "allocationSets"))
          for (const auto& [rabbit, a] : obj_at(set, "storage").items())
            if (a.value("allocationSize", uint64_t{0}) > 0) rabbits.insert(rabbit);
    const json to_teardown = {{"spec", {{"desiredState", "Teardown"}}}};
    (void)co_await w.merge_patch(path, to_teardown);
    for (const auto& r : rabbits) {
      json patch = {{"metadata",
                     {{"annotations",
                       {{"disable_reason",
                         fmt::format("workflow {} timed out with an active allocation on this rabbit", name)}}}}},
                    {"spec", {{"state", "Disabled"}}}};
      (void)co_await w.merge_patch(collection("storages", "default") + "/" + r, patch);
    }
    spdlog::info("job {}: DWS abort: {} node(s) still mounted, {} rabbit(s) still allocated", id, nodes.size(),
                 rabbits.size());
    back([id, nodes, rabbits](HookContext& hc) {
      for (const auto& n : nodes)
        hc.drain_node(n, fmt::format("rabbit storage of job {} still mounted after the DWS epilog timed out", id));
      if (!rabbits.empty())
        spdlog::warn("job {}: rabbits disabled with an allocation left: {}", id, fmt::join(rabbits, ","));
    });
  });
}

}  // namespace corral::storage::dws
