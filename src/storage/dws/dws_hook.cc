#include "storage/dws/dws_hook.h"

#include <regex>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "storage/dws/job_directives.h"

namespace corral::storage::dws {

using hook::HookContext;
using hook::JobView;
using job::JobState;
using nlohmann::json;

namespace {

constexpr const char* kCreate = "dws-create";  // dependency
constexpr const char* kSetup = "dws-setup";    // prolog action
constexpr const char* kEpilog = "dws-epilog";  // epilog action
constexpr size_t kMaxEnvVars = 64;
constexpr size_t kMaxEnvValue = 4096;

// The states in order: a flow never asks for one before the one it is in.
const std::vector<std::string> kStates = {"Proposal", "Setup", "DataIn", "PreRun", "PostRun", "DataOut", "Teardown"};

}  // namespace

Result<std::unique_ptr<hook::JobHook>> make_dws_hook(const hook::Settings& settings, const hook::HookSetup&) {
  auto cfg = parse_rabbit_settings(settings);
  if (!cfg) return cfg.error();
  if (!cfg->enabled) return std::unique_ptr<hook::JobHook>();
  auto kube = rabbit_kube_config(*cfg);
  if (!kube) return Error{kube.error().code, "rabbit: " + kube.message()};
  return std::unique_ptr<hook::JobHook>(
      std::make_unique<DwsHook>(std::move(*cfg), std::make_shared<const KubeConfig>(std::move(*kube))));
}

DwsHook::DwsHook(RabbitConfig cfg, std::shared_ptr<const KubeConfig> kube)
    : cfg_(std::move(cfg)), kube_(std::move(kube)) {}

DwsHook::~DwsHook() { stop(); }

void DwsHook::attach(hook::HookRunner& runner) {
  runner_ = &runner;
  writers_ = std::make_unique<KubeWriters>(kube_, cfg_.writers);
  start_watches();
}

void DwsHook::stop() {
  for (auto& w : watches_) w->stop();
  if (writers_) writers_->stop();
}

DwsHook::Flow* DwsHook::flow_of(uint64_t jobid) {
  auto it = flows_.find(jobid);
  return it == flows_.end() ? nullptr : &it->second;
}

// ------------------------------------------------------------------ submit

Status DwsHook::validate(HookContext&, const job::Jobspec& spec, uint32_t) {
  if (!spec.document) return {};
  auto dws = job_directives(*spec.document, cfg_.max_directives);
  if (!dws) return dws.error();
  for (const auto& d : *dws) {
    auto parsed = parse_directive(d);
    if (!parsed) return parsed.error();
  }
  if (rules_ && !dws->empty())
    if (auto st = rules_->validate(*dws); !st) return st;
  return {};
}

// ------------------------------------------------------------------ the job's events

void DwsHook::on_event(HookContext& ctx, const JobView& job, const job::Event& ev) {
  if (ev.name == "validate") {
    start_flow(ctx, job);
    return;
  }
  Flow* f = flow_of(job.id);
  if (!f) return;
  if (ev.name == "alloc") {
    on_alloc(ctx, job);
  } else if (ev.name == "start") {
    f->ran = true;
    if (f->prerun_ready_at > 0) prerun_to_start_.add(ev.timestamp - f->prerun_ready_at);
  } else if (ev.name == "release") {
    on_release(ctx, job);
  } else if (ev.name == "exception") {
    auto c = json::parse(ev.context, nullptr, false);
    if (c.is_object() && c.value("severity", 1) == 0) on_fatal(ctx, job);
  } else if (ev.name == "clean") {
    if (!f->deleting && !f->exists) flows_.erase(job.id);
  }
}

// The job's flow, made from its jobspec; nullptr when it asks for no storage.
DwsHook::Flow* DwsHook::new_flow(HookContext& ctx, const JobView& job) {
  auto dws = job.spec->document ? job_directives(*job.spec->document, cfg_.max_directives)
                                : Result<std::vector<std::string>>(std::vector<std::string>{});
  if (!dws || dws->empty()) return nullptr;
  Flow& f = flows_[job.id];
  f.jobid = job.id;
  f.uid = job.userid;
  f.gid = job.groupid;
  f.name = fmt::format("{}{}", cfg_.prefix, job.id);
  f.directives = std::move(*dws);
  f.asked = ctx.now();
  return &f;
}

void DwsHook::start_flow(HookContext& ctx, const JobView& job) {
  Flow* made = new_flow(ctx, job);
  if (!made) return;
  Flow& f = *made;
  f.desired = "Proposal";
  f.asked = ctx.now();
  ctx.add_dependency(job.id, kCreate);
  post_create(ctx, f);
}

void DwsHook::on_alloc(HookContext& ctx, const JobView& job) {
  Flow& f = flows_.at(job.id);
  if (f.desired == "Teardown" || f.deleting || f.create_failed) {
    // A requeued job: its workflow was torn down with its first run, and DWS does not run
    // a workflow twice. Failing it is better than a prolog that waits for ever; the
    // exception is applied before the job could start.
    ctx.raise_exception(job.id, "dws", 0,
                        "the job's rabbit storage was torn down with its previous run and cannot be made again; "
                        "submit the job again");
    return;
  }
  f.nodes.clear();
  if (job.R)
    for (const auto& n : job.R->nodes) f.nodes.push_back(n.name);
  f.prolog = true;
  ctx.prolog_start(job.id, kSetup);
  drive(ctx, f);
}

void DwsHook::on_release(HookContext& ctx, const JobView& job) {
  Flow& f = flows_.at(job.id);
  if (f.epilog || f.desired == "Teardown" || f.deleting) return;
  f.epilog = true;
  ctx.epilog_start(job.id, kEpilog);
  if (cfg_.epilog_timeout > 0) {
    uint64_t id = job.id;
    ctx.at(ctx.now() + cfg_.epilog_timeout, [this, &ctx, id] {
      Flow* g = flow_of(id);
      if (!g || !g->epilog) return;
      const std::string where = g->state.empty() ? g->desired : g->state;
      // The abort's look at what is still held goes first: the exception's own path to
      // Teardown would free it before anyone saw it.
      g->aborted = true;
      post_abort(ctx, *g);
      ctx.raise_exception(id, "dws-epilog-timeout", 0,
                          fmt::format("DWS epilog timed out after {}s in {}: nodes still mounted are drained, "
                                      "rabbits still allocated are disabled",
                                      cfg_.epilog_timeout, where));
      if (Flow* h = flow_of(id)) finish_epilog(ctx, *h, 1);
    });
  }
  if (f.ran && !f.failed && f.desired == "PreRun")
    ask(ctx, f, "PostRun");
  else
    to_teardown(ctx, f);
}

// A fatal exception: the prolog lets go, and storage goes to Teardown (now when the job
// holds no allocation; at release otherwise, once its tasks are gone).
void DwsHook::on_fatal(HookContext& ctx, const JobView& job) {
  Flow& f = flows_.at(job.id);
  f.failed = true;
  if (f.prolog) {
    f.prolog = false;
    ctx.prolog_finish(job.id, kSetup, 1);
  }
  if (f.epilog) {
    if (!f.aborted) to_teardown(ctx, f);
    return;
  }
  if (!job.status.allocated) {
    f.epilog = true;
    ctx.epilog_start(job.id, kEpilog);
    to_teardown(ctx, f);
  }
}

void DwsHook::to_teardown(HookContext& ctx, Flow& f) {
  if (f.create_failed) {  // there is no workflow to tear down
    finish_epilog(ctx, f, 0);
    return;
  }
  if (f.desired == "Teardown") return;
  ask(ctx, f, "Teardown");
}

void DwsHook::finish_epilog(HookContext& ctx, Flow& f, int status) {
  if (!f.epilog) return;
  f.epilog = false;
  ctx.epilog_finish(f.jobid, kEpilog, status);
}

void DwsHook::fail(HookContext& ctx, Flow& f, const std::string& type, const std::string& note) {
  if (f.failed || f.raised) return;
  f.raised = true;
  // on_fatal runs when the exception event is applied, and takes it from there.
  ctx.raise_exception(f.jobid, type, 0, note);
}

// ------------------------------------------------------------------ the workflow's states

// After each change the hook learns (an object update, an allocation): the next step, if
// the state asked for has completed.
void DwsHook::drive(HookContext& ctx, Flow& f) {
  if (!f.exists || f.deleting) return;
  if (f.status == "Error") {
    fail(ctx, f, "dws", fmt::format("DWS workflow error in {}: {}", f.state, f.message));
    if (f.epilog && f.desired != "Teardown") to_teardown(ctx, f);
    return;
  }
  if (f.status == "TransientCondition") {
    if (f.tc_since < 0) {
      f.tc_since = ctx.now();
      double since = f.tc_since;
      uint64_t id = f.jobid;
      ctx.at(since + cfg_.tc_timeout, [this, &ctx, id, since] { check_tc(ctx, id, since); });
    }
  } else {
    f.tc_since = -1;
  }
  if (f.state == f.desired && f.ready) completed(ctx, f);
  // Setup needs both Proposal's breakdowns and the job's nodes.
  if (f.state == "Proposal" && f.desired == "Proposal" && f.ready && f.prolog && !f.setup_sent) post_setup(ctx, f);
}

void DwsHook::completed(HookContext& ctx, Flow& f) {
  if (f.timed != f.state) {
    f.timed = f.state;
    json timing{{"state", f.state}, {"seconds", std::max(0.0, ctx.now() - f.asked)}};
    if (f.ready_at > 0) {
      timing["ready_at"] = f.ready_at;
      if (!f.restored) watch_lag_.add(ctx.now() - f.ready_at);
      if (f.state == "PreRun") f.prerun_ready_at = f.ready_at;
    }
    ctx.post_event(f.jobid, "dws-timing", timing.dump());
  }
  const JobView* job = ctx.find_job(f.jobid);
  const std::string& s = f.state;
  if (s == "Proposal") {
    if (job && job->status.dependencies.count(kCreate)) ctx.remove_dependency(f.jobid, kCreate);
  } else if (s == "Setup") {
    ask(ctx, f, "DataIn");
  } else if (s == "DataIn") {
    ask(ctx, f, "PreRun");
  } else if (s == "PreRun") {
    if (f.prolog) release_environment(ctx, f);
  } else if (s == "PostRun") {
    ask(ctx, f, "DataOut");
  } else if (s == "DataOut") {
    ask(ctx, f, "Teardown");
  } else if (s == "Teardown") {
    finish_epilog(ctx, f, 0);
    f.deleting = true;
    post_delete(ctx, f.name, f.jobid, f.meta);
  }
}

// PreRun is ready: the DW_JOB_* variables go to every task, and the job may start.
void DwsHook::release_environment(HookContext& ctx, Flow& f) {
  static const std::regex kVarName("^DW_[A-Za-z0-9_]{1,120}$");
  json vars = json::object();
  if (f.env.is_object())
    for (const auto& [k, v] : f.env.items()) {
      if (vars.size() >= kMaxEnvVars) break;
      if (!v.is_string() || !std::regex_match(k, kVarName) || v.get_ref<const std::string&>().size() > kMaxEnvValue)
        continue;
      vars[k] = v;
    }
  for (const auto& [k, v] : vars.items()) ctx.set_task_env(f.jobid, k, v.get<std::string>());
  ctx.post_event(f.jobid, "dws_environment", json{{"variables", vars}}.dump());
  f.prolog = false;
  ctx.prolog_finish(f.jobid, kSetup, 0);
}

void DwsHook::check_tc(HookContext& ctx, uint64_t jobid, double since) {
  Flow* f = flow_of(jobid);
  if (!f || f->tc_since != since || f->status != "TransientCondition" || f->deleting) return;
  fail(ctx, *f, "dws",
       fmt::format("DWS workflow in TransientCondition for more than {}s in {}: {}", cfg_.tc_timeout, f->state,
                   f->message));
  if (f->epilog && f->desired != "Teardown") to_teardown(ctx, *f);
}

void DwsHook::arm_timer(HookContext& ctx, Flow& f, double seconds, const std::string& why) {
  if (seconds <= 0) return;
  uint64_t id = f.jobid, gen = f.generation;
  ctx.at(ctx.now() + seconds, [this, &ctx, id, gen, why] { timer_fired(ctx, id, gen, why); });
}

// A [rabbit] timeout: `why` is the state it guards.
void DwsHook::timer_fired(HookContext& ctx, uint64_t jobid, uint64_t generation, const std::string& why) {
  Flow* f = flow_of(jobid);
  if (!f || f->deleting) return;
  const bool same = f->generation == generation;
  if (why == "setup" && (f->desired == "Setup" || f->desired == "DataIn") && f->prolog) {
    fail(ctx, *f, "dws-timeout", fmt::format("file system creation took longer than {}s", cfg_.setup_timeout));
  } else if (why == "prerun" && same && f->desired == "PreRun" && f->prolog) {
    fail(ctx, *f, "dws-timeout", fmt::format("timed out after {}s waiting for the mounts", cfg_.prerun_timeout));
  } else if (why == "postrun" && same && f->desired == "PostRun") {
    ctx.raise_exception(jobid, "rabbit-timeout", 0,
                        fmt::format("unmounts took longer than {}s, skipping data movement", cfg_.postrun_timeout));
    ask(ctx, *f, "Teardown");
  } else if (why == "teardown-after" && (f->desired == "PostRun" || f->desired == "DataOut")) {
    ctx.raise_exception(
        jobid, "teardown-timeout", 1,
        fmt::format("PostRun and DataOut took longer than {}s, skipping rabbit data movement", cfg_.teardown_after));
    ask(ctx, *f, "Teardown");
  }
}

// ------------------------------------------------------------------ restart

void DwsHook::on_restart(HookContext& ctx, const JobView& job) {
  Flow* made = new_flow(ctx, job);
  if (!made) return;
  Flow& f = *made;
  f.restored = true;
  if (job.R)
    for (const auto& n : job.R->nodes) f.nodes.push_back(n.name);
  f.prolog = job.status.prolog_actions.count(kSetup) > 0;
  f.epilog = job.status.epilog_actions.count(kEpilog) > 0;
  f.ran = job.status.started;
  f.failed = job.status.fatal_exception;
  for (const auto& ev : job.events) {
    if (ev.name == "dws-timing") {
      auto c = json::parse(ev.context, nullptr, false);
      if (c.is_object()) f.timed = c.value("state", "");
    }
    if (ev.name == "dws_environment" && !job.status.started) {
      auto c = json::parse(ev.context, nullptr, false);
      if (c.is_object() && c.contains("variables") && c["variables"].is_object())
        for (const auto& [k, v] : c["variables"].items())
          if (v.is_string()) ctx.set_task_env(job.id, k, v.get<std::string>());
    }
  }
  // The workflow list (dws_hook_watch.cc) says where each restored flow stands.
}

}  // namespace corral::storage::dws
