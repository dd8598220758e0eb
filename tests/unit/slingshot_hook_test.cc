// The cray-slingshot controller hook against a fake HookContext that records what the
// hook asks of the controller.
#include "fabric/slingshot/slingshot_hook.h"

#include <sys/wait.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace corral::fabric::slingshot {
namespace {

using hook::JobView;
using hook::PerilogOutcome;
using nlohmann::json;

struct Run {
  uint64_t jobid;
  std::string kind, command;
  double timeout;
  std::vector<std::string> nodes;
  std::map<std::string, std::string> env;
};

class FakeContext final : public hook::HookContext {
 public:
  double now() const override { return 1000; }
  const JobView* find_job(uint64_t id) const override {
    auto it = jobs.find(id);
    return it == jobs.end() ? nullptr : it->second;
  }
  std::optional<std::string> inactive_result(uint64_t) const override { return std::nullopt; }
  void post_event(uint64_t id, std::string name, std::string ctx) override { events.push_back({id, name, ctx}); }
  void raise_exception(uint64_t id, std::string type, int sev, std::string note) override {
    exceptions.push_back({id, type + "/" + std::to_string(sev), note});
  }
  void add_dependency(uint64_t, std::string) override {}
  void remove_dependency(uint64_t, std::string) override {}
  void prolog_start(uint64_t id, std::string d) override { actions.push_back(fmt(id, "prolog-start", d)); }
  void prolog_finish(uint64_t id, std::string d, int st) override {
    actions.push_back(fmt(id, "prolog-finish", d + "=" + std::to_string(st)));
  }
  void epilog_start(uint64_t id, std::string d) override { actions.push_back(fmt(id, "epilog-start", d)); }
  void epilog_finish(uint64_t id, std::string d, int) override { actions.push_back(fmt(id, "epilog-finish", d)); }
  void job_note(uint64_t id, std::string text) override { notes.push_back(fmt(id, "note", text)); }
  void set_task_env(uint64_t id, std::string k, std::string v) override { env[id][k] = v; }
  Status rewrite_jobspec(uint64_t, const std::string&) override { return {}; }
  void run_on_nodes(uint64_t id, const std::string& kind, const std::string& command, double timeout,
                    const std::vector<std::string>& nodes, const std::map<std::string, std::string>& e) override {
    runs.push_back({id, kind, command, timeout, nodes, e});
  }
  void drain_node(const std::string& node, const std::string& reason) override { drained[node] = reason; }
  bool node_drained(const std::string& node) const override { return drained.count(node) > 0; }
  bool node_exists(const std::string& node) const override { return node != "nosuchnode"; }
  void at(double, std::function<void()>) override {}
  void after_durable(std::function<void()> fn) override { fn(); }
  void save_state(std::string_view, const std::string& k, const std::string& v) override { state[k] = v; }
  void erase_state(std::string_view, const std::string& k) override { state.erase(k); }

  static std::string fmt(uint64_t id, const std::string& a, const std::string& b) {
    return std::to_string(id) + " " + a + " " + b;
  }
  struct Ev {
    uint64_t id;
    std::string name, context;
  };
  std::map<uint64_t, const JobView*> jobs;
  std::vector<Ev> events, exceptions;
  std::vector<std::string> actions, notes;
  std::map<uint64_t, std::map<std::string, std::string>> env;
  std::vector<Run> runs;
  std::map<std::string, std::string> drained;
  std::map<std::string, std::string> state;
};

std::shared_ptr<const job::Jobspec> spec_with(std::vector<std::pair<std::string, std::string>> opts) {
  job::JobRequest req;
  req.command = {"a.out"};
  req.options = std::move(opts);
  auto s = job::build_jobspec(req);
  EXPECT_TRUE(s.ok()) << s.message();
  return std::make_shared<const job::Jobspec>(std::move(*s));
}

// A job on nodes n1.. with the given cores each.
std::unique_ptr<JobView> make_job(uint64_t id, std::vector<unsigned> cores,
                                  std::vector<std::pair<std::string, std::string>> opts = {}) {
  auto job = std::make_unique<JobView>();
  job->id = id;
  job->userid = 1000 + static_cast<uint32_t>(id);
  job->spec = spec_with(std::move(opts));
  job::ResourceSet R;
  for (size_t i = 0; i < cores.size(); ++i) {
    job::RNode n;
    n.rank = static_cast<uint32_t>(i);
    n.name = "n" + std::to_string(i + 1);
    n.cores = IdSet::range(0, cores[i] - 1);
    R.nodes.push_back(n);
  }
  job->R = R;
  return job;
}

PerilogOutcome outcome(const std::string& node, const std::string& kind, int exit_code, std::string output = "",
                       bool timed_out = false) {
  return {node, kind, exit_code << 8, timed_out, std::move(output)};
}

class SlingshotHookTest : public ::testing::Test {
 protected:
  void SetUp() override { hook = make_hook(cfg); }
  static std::unique_ptr<SlingshotHook> make_hook(SlingshotConfig c) {
    c.command = "/opt/corral-slingshot";
    auto h = SlingshotHook::create(c);
    EXPECT_TRUE(h.ok()) << h.message();
    return std::move(*h);
  }
  void event(const JobView& job, const std::string& name) { hook->on_event(ctx, job, job::make_event(name)); }
  JobView& add(std::unique_ptr<JobView> job) {
    ctx.jobs[job->id] = job.get();
    owned.push_back(std::move(job));
    return *owned.back();
  }
  json pool() { return json::parse(*hook->query(ctx, {"pool", "{}", 0, false})); }

  static SlingshotConfig small_pool() {
    SlingshotConfig c;
    c.vni_pool = "1024-1027";
    return c;
  }

  SlingshotConfig cfg = small_pool();
  FakeContext ctx;
  std::unique_ptr<SlingshotHook> hook;
  std::vector<std::unique_ptr<JobView>> owned;
};

TEST_F(SlingshotHookTest, ValidateOptions) {
  EXPECT_TRUE(hook->validate(ctx, *spec_with({}), 0).ok());
  EXPECT_TRUE(hook->validate(ctx, *spec_with({{"cray-slingshot", "off"}}), 0).ok());
  EXPECT_TRUE(hook->validate(ctx, *spec_with({{"cray-slingshot.vnicount", "4"}}), 0).ok());
  auto five = hook->validate(ctx, *spec_with({{"cray-slingshot.vnicount", "5"}}), 0);
  ASSERT_FALSE(five.ok());
  EXPECT_EQ(five.message(), "--setopt cray-slingshot.vnicount=5: at most 4 VNIs fit one CXI service");
  auto word = hook->validate(ctx, *spec_with({{"cray-slingshot.vnicount", "two"}}), 0);
  ASSERT_FALSE(word.ok());
  EXPECT_NE(word.message().find("integer from 0 to 4"), std::string::npos);
  auto bad = hook->validate(ctx, *spec_with({{"cray-slingshot", "maybe"}}), 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("expected on or off"), std::string::npos);
}

TEST_F(SlingshotHookTest, AllocReservesPostsAndRunsProlog) {
  JobView& job = add(make_job(1, {4, 4, 8}));
  event(job, "alloc");
  ASSERT_EQ(ctx.events.size(), 1u);
  EXPECT_EQ(ctx.events[0].name, "cray-slingshot");
  EXPECT_EQ(ctx.events[0].context, R"({"reservation":{"vnis":[1024]}})");
  EXPECT_EQ(ctx.env[1]["SLINGSHOT_VNIS"], "1024");
  EXPECT_EQ(ctx.actions, std::vector<std::string>{"1 prolog-start cray-slingshot"});
  ASSERT_EQ(ctx.runs.size(), 2u);  // one per distinct core count
  EXPECT_EQ(ctx.runs[0].kind, "slingshot-prolog");
  EXPECT_EQ(ctx.runs[0].command, "/opt/corral-slingshot prolog");
  EXPECT_EQ(ctx.runs[0].nodes, (std::vector<std::string>{"n1", "n2"}));
  EXPECT_EQ(ctx.runs[0].env["CORRAL_SLINGSHOT_NCORES"], "4");
  EXPECT_EQ(ctx.runs[0].env["CORRAL_SLINGSHOT_UID"], "1001");
  EXPECT_EQ(ctx.runs[0].env["CORRAL_SLINGSHOT_VNIS"], "1024");
  EXPECT_EQ(ctx.runs[1].nodes, std::vector<std::string>{"n3"});
  EXPECT_EQ(ctx.runs[1].env["CORRAL_SLINGSHOT_NCORES"], "8");

  hook->on_perilog(ctx, job, outcome("n1", "slingshot-prolog", 0));
  hook->on_perilog(ctx, job, outcome("n2", "slingshot-prolog", 0, "warning: cxi0: les: asked 64, given 16\n"));
  EXPECT_EQ(ctx.actions.size(), 1u);
  hook->on_perilog(ctx, job, outcome("n3", "slingshot-prolog", 0));
  EXPECT_EQ(ctx.actions.back(), "1 prolog-finish cray-slingshot=0");
  ASSERT_EQ(ctx.events.size(), 2u);
  EXPECT_EQ(ctx.events[1].name, "warning");
  auto w = json::parse(ctx.events[1].context);
  EXPECT_EQ(w["source"], "cray-slingshot");
  EXPECT_EQ(w["node"], "n2");
  EXPECT_EQ(w["message"], "cxi0: les: asked 64, given 16");
  EXPECT_EQ(ctx.notes, std::vector<std::string>{"1 note corral: cray-slingshot: n2: cxi0: les: asked 64, given 16"});
  EXPECT_TRUE(ctx.exceptions.empty());
}

TEST_F(SlingshotHookTest, PrologFailureIsFatal) {
  JobView& job = add(make_job(1, {4, 4}));
  event(job, "alloc");
  hook->on_perilog(ctx, job, outcome("n1", "slingshot-prolog", 0));
  hook->on_perilog(ctx, job, outcome("n2", "slingshot-prolog", 1, "error: cxi0: no such NIC\n"));
  ASSERT_EQ(ctx.exceptions.size(), 1u);
  EXPECT_EQ(ctx.exceptions[0].name, "cray-slingshot/0");
  EXPECT_EQ(ctx.exceptions[0].context, "CXI service allocation failed on n2: cxi0: no such NIC (exit 1)");
  EXPECT_EQ(ctx.actions.back(), "1 prolog-finish cray-slingshot=1");
}

TEST_F(SlingshotHookTest, OffAndZeroClearTheEnvironment) {
  JobView& off = add(make_job(1, {4}, {{"cray-slingshot", "off"}}));
  JobView& zero = add(make_job(2, {4}, {{"cray-slingshot.vnicount", "0"}}));
  event(off, "alloc");
  event(zero, "alloc");
  EXPECT_EQ(ctx.env[1].at("SLINGSHOT_VNIS"), "");
  EXPECT_EQ(ctx.env[2].at("SLINGSHOT_VNIS"), "");
  EXPECT_TRUE(ctx.runs.empty());
  EXPECT_TRUE(ctx.events.empty());
  EXPECT_EQ(pool()["free"], 4);
}

TEST_F(SlingshotHookTest, ExhaustionIsFatalOrAWarning) {
  JobView& four = add(make_job(1, {4}, {{"cray-slingshot.vnicount", "4"}}));
  JobView& more = add(make_job(2, {4}));
  event(four, "alloc");
  EXPECT_EQ(ctx.env[1]["SLINGSHOT_VNIS"], "1024,1025,1026,1027");
  event(more, "alloc");
  ASSERT_EQ(ctx.exceptions.size(), 1u);
  EXPECT_EQ(ctx.exceptions[0].name, "cray-slingshot/0");
  EXPECT_EQ(ctx.exceptions[0].context,
            "VNI reservation failed: asked for 1 VNI, 0 of 4 free (4 reserved, 0 waiting for "
            "cleanup)");

  SlingshotConfig lax = cfg;
  lax.vni_reserve_fatal = false;
  auto h = make_hook(lax);
  FakeContext c2;
  c2.jobs[1] = &four;
  c2.jobs[2] = &more;
  h->on_event(c2, four, job::make_event("alloc"));
  h->on_event(c2, more, job::make_event("alloc"));
  EXPECT_TRUE(c2.exceptions.empty());
  EXPECT_EQ(c2.events.back().name, "warning");
  EXPECT_EQ(c2.env[2].at("SLINGSHOT_VNIS"), "");
  EXPECT_EQ(c2.notes.size(), 1u);
}

TEST_F(SlingshotHookTest, ReleaseQuarantinesUntilEpilogConfirms) {
  JobView& job = add(make_job(1, {4, 4}));
  event(job, "alloc");
  ctx.runs.clear();
  event(job, "release");
  ASSERT_EQ(ctx.runs.size(), 1u);
  EXPECT_EQ(ctx.runs[0].kind, "slingshot-epilog");
  EXPECT_EQ(ctx.runs[0].command, "/opt/corral-slingshot epilog --retry-for 10");
  EXPECT_EQ(ctx.runs[0].nodes, (std::vector<std::string>{"n1", "n2"}));
  EXPECT_EQ(json::parse(ctx.state.at("job-1")), json::parse(R"({"vnis":[1024],"pending":["n1","n2"],"uid":1001})"));
  json p = pool();
  EXPECT_EQ(p["free"], 3);
  EXPECT_EQ(p["quarantined"][0]["nodes"], json::parse(R"(["n1","n2"])"));

  hook->on_perilog(ctx, job, outcome("n1", "slingshot-epilog", 0));
  EXPECT_EQ(json::parse(ctx.state.at("job-1"))["pending"], json::parse(R"(["n2"])"));
  ctx.jobs.clear();  // the epilog does not hold the job: it may be gone already
  hook->on_perilog_inactive(ctx, 1, outcome("n2", "slingshot-epilog", 0));
  EXPECT_EQ(ctx.state.count("job-1"), 0u);
  EXPECT_EQ(pool()["free"], 4);
}

TEST_F(SlingshotHookTest, BusyServiceGoesToHousekeepingThenDrains) {
  JobView& job = add(make_job(1, {4}));
  event(job, "alloc");
  event(job, "release");
  ctx.runs.clear();
  hook->on_perilog(ctx, job, outcome("n1", "slingshot-epilog", 3, "busy: cxi0 service 5 (VNIs 1024)\n"));
  ASSERT_EQ(ctx.runs.size(), 1u);
  EXPECT_EQ(ctx.runs[0].kind, "slingshot-housekeeping");
  EXPECT_EQ(ctx.runs[0].command, "/opt/corral-slingshot epilog --retry-for 300");
  EXPECT_EQ(ctx.runs[0].timeout, 330);
  EXPECT_EQ(ctx.runs[0].nodes, std::vector<std::string>{"n1"});
  EXPECT_EQ(ctx.runs[0].env["CORRAL_SLINGSHOT_VNIS"], "1024");
  EXPECT_EQ(ctx.events.back().name, "warning");

  hook->on_perilog_inactive(ctx, 1, outcome("n1", "slingshot-housekeeping", 3, "busy: cxi0 service 5 (VNIs 1024)\n"));
  EXPECT_EQ(ctx.drained["n1"], "cray-slingshot: CXI service 5 on cxi0 (VNIs 1024) still busy after 300s");
  EXPECT_EQ(pool()["quarantined"].size(), 1u);

  // An admin resumes the node: its quarantine is over.
  hook->on_node_resume(ctx, "n1");
  EXPECT_TRUE(pool()["quarantined"].empty());
  EXPECT_EQ(ctx.state.count("job-1"), 0u);
}

TEST_F(SlingshotHookTest, ReleasedBeforeItStartedStillReleases) {
  JobView& job = add(make_job(1, {4}));
  event(job, "alloc");
  hook->on_perilog(ctx, job, outcome("n1", "slingshot-prolog", 1, "error: cxi0: refused\n"));
  event(job, "release");  // the job never started
  EXPECT_EQ(ctx.runs.back().kind, "slingshot-epilog");
  EXPECT_EQ(pool()["reserved"].size(), 0u);
  EXPECT_EQ(pool()["quarantined"].size(), 1u);
}

TEST_F(SlingshotHookTest, RestartRebuildsThePool) {
  JobView& running = add(make_job(1, {4}));
  event(running, "alloc");
  JobView& done = add(make_job(2, {4, 4}));
  event(done, "alloc");
  event(done, "release");
  hook->on_perilog(ctx, done, outcome("n1", "slingshot-epilog", 0));
  // Record the posted reservations in the jobs' eventlogs, as the controller would.
  for (const auto& e : ctx.events) {
    if (e.name != "cray-slingshot") continue;
    auto& j = *owned[e.id - 1];
    j.events.push_back(job::make_event(e.name, e.context));
    j.status.started = true;
  }

  auto fresh = make_hook(cfg);
  FakeContext c2;
  fresh->on_load(c2, {ctx.state.begin(), ctx.state.end()});
  ASSERT_EQ(c2.runs.size(), 1u);  // lost housekeeping outcome: asked again
  EXPECT_EQ(c2.runs[0].kind, "slingshot-housekeeping");
  EXPECT_EQ(c2.runs[0].nodes, std::vector<std::string>{"n2"});
  fresh->on_restart(c2, running);
  json p = json::parse(*fresh->query(c2, {"pool", "{}", 0, false}));
  EXPECT_EQ(p["reserved"], json::parse(R"([{"jobid":1,"vnis":[1024]}])"));
  EXPECT_EQ(p["quarantined"], json::parse(R"([{"jobid":2,"vnis":[1025],"nodes":["n2"]}])"));
  EXPECT_EQ(p["free"], 2);
  JobView& next = add(make_job(3, {4}));
  fresh->on_event(c2, next, job::make_event("alloc"));
  EXPECT_EQ(c2.env[3]["SLINGSHOT_VNIS"], "1026");
}

TEST_F(SlingshotHookTest, RestartReleasesACleanupWhoseQuarantineWasNotSaved) {
  JobView& job = add(make_job(1, {4}));
  event(job, "alloc");
  job.events.push_back(job::make_event("cray-slingshot", ctx.events[0].context));
  job.status.released = true;  // the crash came between the release event and its save
  auto fresh = make_hook(cfg);
  FakeContext c2;
  fresh->on_load(c2, {});
  fresh->on_restart(c2, job);
  ASSERT_EQ(c2.runs.size(), 1u);
  EXPECT_EQ(c2.runs[0].kind, "slingshot-epilog");
  EXPECT_EQ(c2.state.count("job-1"), 1u);
}

TEST_F(SlingshotHookTest, RestartRerunsAnUnfinishedProlog) {
  JobView& job = add(make_job(1, {4}));
  event(job, "alloc");
  job.events.push_back(job::make_event("cray-slingshot", ctx.events[0].context));
  job.status.prolog_actions.insert("cray-slingshot");
  auto fresh = make_hook(cfg);
  FakeContext c2;
  fresh->on_restart(c2, job);
  EXPECT_EQ(c2.env[1]["SLINGSHOT_VNIS"], "1024");
  ASSERT_EQ(c2.runs.size(), 1u);
  EXPECT_EQ(c2.runs[0].kind, "slingshot-prolog");
  fresh->on_perilog(c2, job, outcome("n1", "slingshot-prolog", 0));
  EXPECT_EQ(c2.actions.back(), "1 prolog-finish cray-slingshot=0");
}

TEST_F(SlingshotHookTest, CleanIsForAdminsAndConfirmsTheNode) {
  auto denied = hook->query(ctx, {"clean", R"({"nodes":["n1"]})", 1234, false});
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.error().code, Errc::permission_denied);
  JobView& job = add(make_job(1, {4}));
  event(job, "alloc");
  event(job, "release");
  ctx.runs.clear();
  auto r = hook->query(ctx, {"clean", R"({"nodes":["n1"]})", 0, true});
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(json::parse(*r), json::parse(R"({"started":["n1"]})"));
  ASSERT_EQ(ctx.runs.size(), 1u);
  EXPECT_EQ(ctx.runs[0].jobid, 0u);
  EXPECT_EQ(ctx.runs[0].kind, "slingshot-clean");
  EXPECT_EQ(ctx.runs[0].command, "/opt/corral-slingshot clean --vnis 1024-1027 --retry-for 10");
  hook->on_perilog_inactive(ctx, 0, outcome("n1", "slingshot-clean", 0));
  EXPECT_TRUE(pool()["quarantined"].empty());
  EXPECT_FALSE(hook->query(ctx, {"clean", "{}", 0, true}).ok());
  EXPECT_FALSE(hook->query(ctx, {"frobnicate", "{}", 0, true}).ok());
  ctx.runs.clear();
  auto unknown = hook->query(ctx, {"clean", R"({"nodes":["n1","nosuchnode"]})", 0, true});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, Errc::not_found);
  EXPECT_NE(unknown.message().find("nosuchnode"), std::string::npos) << unknown.message();
  EXPECT_TRUE(ctx.runs.empty());  // nothing started for a request with a bad node
}

}  // namespace
}  // namespace corral::fabric::slingshot
