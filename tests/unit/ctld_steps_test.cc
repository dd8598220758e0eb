// The controller's side of job steps, driven without gRPC: a fake agent registers, jobs
// start, and the StartJob messages, port shares, step records and step cancels are checked,
// including across a controller restart on the same state directory.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <thread>

#include <spdlog/spdlog.h>

#include "ctld/controller.h"
#include "ctld_test_controller.h"
#include "job/hmac_key.h"
#include "job/key_wrap.h"
#include "job/step_cred.h"
#include "temp_dir.h"

namespace corral::ctld {
namespace {

using test::TempDir;

constexpr const char* kStepUri = "unix:/run/agent-a.sock";

class CtldSteps : public ::testing::Test {
 protected:
  CtldSteps() { spdlog::set_level(spdlog::level::warn); }

  Config config() const {
    Config c = test::test_config(dir_);
    c.steps.mpi_ports = "12000-12009";
    c.steps.mpi_ports_per_job = 5;
    c.steps.mpi_ports_per_step = 2;
    c.steps.fanout_width = 4;
    return c;
  }

  void start() {
    ctl_ = test::start_test_controller(dir_, config());
    ASSERT_TRUE(ctl_);
  }

  void restart() {
    link_.reset();
    ctl_.reset();
    start();
  }

  // A fake agent serving node0 and node1; `running` are jobs it says still run.
  void register_agent(const std::string& incarnation, std::vector<uint64_t> running = {}) {
    v1::Register reg;
    reg.set_agent_id("a");
    reg.set_incarnation(incarnation);
    reg.set_step_uri(kStepUri);
    for (const char* name : {"node0", "node1"}) {
      auto* n = reg.add_nodes();
      n->set_name(name);
      n->set_cores(4);
      n->set_memory_mb(1024);
    }
    for (uint64_t id : running) {
      auto* r = reg.add_running();
      r->set_jobid(id);
      r->add_nodes(node_of_[id]);
    }
    auto st = ctl_->agent_register(owner(), reg, nullptr, &link_);
    ASSERT_TRUE(st.ok()) << st.message();
  }

  static Caller owner() { return Caller{::getuid(), ::getgid()}; }

  uint64_t submit(unsigned nnodes = 1, bool alloc = false) {
    job::JobRequest req;
    req.nnodes = nnodes;
    req.command = {"sleep", "100"};
    req.alloc = alloc;
    auto spec = job::build_jobspec(req);
    EXPECT_TRUE(spec.ok()) << spec.message();
    v1::SubmitRequest sr;
    sr.add_jobspecs(job::jobspec_to_string(*spec));
    v1::SubmitReply rep;
    auto st = ctl_->submit(owner(), sr, &rep);
    EXPECT_TRUE(st.ok()) << st.message();
    return rep.jobids_size() ? rep.jobids(0) : 0;
  }

  // Reads the agent's messages until `pred` accepts one (false after a few seconds). The
  // link merges what is queued into one message, so StartJobs are kept as they pass.
  bool await(const std::function<bool(const v1::ControllerMessage&)>& pred) {
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < until) {
      v1::ControllerMessage m;
      if (!link_->next(m, 100)) return false;
      for (const auto& s : m.start()) {
        starts_[s.jobid()] = s;
        if (s.tasks_size() > 0) node_of_[s.jobid()] = s.tasks(0).node();
      }
      if (pred(m)) return true;
    }
    return false;
  }

  // The next StartJob of `jobid` (one seen already counts once).
  v1::StartJob await_start(uint64_t jobid) {
    bool ok = starts_.count(jobid) || await([&](const v1::ControllerMessage&) { return starts_.count(jobid) > 0; });
    EXPECT_TRUE(ok) << "no StartJob for job " << jobid;
    v1::StartJob got = starts_[jobid];
    starts_.erase(jobid);
    return got;
  }

  v1::JobInfo job(uint64_t id, bool with_eventlog = false) {
    v1::GetJobRequest req;
    req.set_jobid(id);
    req.set_with_eventlog(with_eventlog);
    v1::JobInfo info;
    auto st = ctl_->get_job(ctld::Caller{}, req, &info);
    EXPECT_TRUE(st.ok()) << st.message();
    return info;
  }

  bool await_state(uint64_t id, const std::string& state) {
    for (int i = 0; i < 100; ++i) {
      if (job(id).state() == state) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  // The agent reports the job's tasks (one node's) ended.
  void exit_job(uint64_t id, double cpu) {
    v1::AgentMessage m;
    auto* ex = m.add_exited();
    ex->set_jobid(id);
    ex->set_node(node_of_[id]);
    ex->set_waitstatus(0);
    ex->set_cpu_seconds(cpu);
    ctl_->agent_message(*link_, m);
  }

  TempDir dir_;
  std::unique_ptr<Controller> ctl_;
  std::shared_ptr<AgentLink> link_;
  std::map<uint64_t, std::string> node_of_;  // where each started job's tasks run
  std::map<uint64_t, v1::StartJob> starts_;  // received, not yet awaited
};

TEST_F(CtldSteps, StartJobCarriesTheStepManagerFields) {
  start();
  register_agent("i1");
  uint64_t id = submit(2);
  auto sj = await_start(id);
  auto key = job::load_key_file(dir_.str() + "/cluster.key");  // created by start()
  ASSERT_TRUE(key.ok()) << key.message();
  // Wrapped for the agent's connection: only it can use the key.
  EXPECT_NE(sj.step_key(), job::derive_job_key(*key, id));
  auto unwrapped = job::unwrap_key(link_->session_key(), sj.step_key());
  ASSERT_TRUE(unwrapped.ok()) << unwrapped.message();
  EXPECT_EQ(*unwrapped, job::derive_job_key(*key, id));
  EXPECT_EQ(sj.stepmgr(), kStepUri);
  EXPECT_FALSE(sj.alloc());
  EXPECT_EQ(sj.exec_nodes(), 2u);
  EXPECT_EQ(sj.mpi_port_share(), "12000-12004");
  EXPECT_EQ(sj.mpi_ports_per_step(), 2u);
  EXPECT_EQ(sj.fanout_width(), 4u);
  ASSERT_EQ(sj.job_nodes_size(), 2);
  EXPECT_EQ(sj.job_nodes(0).name(), "node0");
  EXPECT_EQ(sj.job_nodes(1).name(), "node1");
  EXPECT_EQ(sj.job_nodes(1).agent(), kStepUri);
  EXPECT_FALSE(sj.job_nodes(0).cores().empty());
  EXPECT_EQ(job(id).stepmgr(), kStepUri);
}

TEST_F(CtldSteps, AllocJobsRunOneTaskOnTheFirstNode) {
  start();
  register_agent("i1");
  uint64_t id = submit(2, true);
  auto sj = await_start(id);
  EXPECT_TRUE(sj.alloc());
  ASSERT_EQ(sj.tasks_size(), 1);
  EXPECT_EQ(sj.tasks(0).node(), "node0");
  EXPECT_EQ(sj.tasks(0).ntasks(), 1u);
  EXPECT_EQ(sj.exec_nodes(), 1u);
  EXPECT_EQ(sj.job_nodes_size(), 2);  // steps may still use both nodes
}

TEST_F(CtldSteps, PortSharesSurviveARestartAndComeBackWhenJobsEnd) {
  start();
  register_agent("i1");
  uint64_t a = submit(), b = submit();
  EXPECT_EQ(await_start(a).mpi_port_share(), "12000-12004");
  EXPECT_EQ(await_start(b).mpi_port_share(), "12005-12009");
  uint64_t c = submit();  // the pool is empty: runs without, with a warning
  EXPECT_EQ(await_start(c).mpi_port_share(), "");
  bool warned = false;
  const v1::JobInfo info = job(c, true);
  for (const auto& line : info.eventlog())
    warned |= line.find("mpi-ports") != std::string::npos && line.find("warning") != std::string::npos;
  EXPECT_TRUE(warned);

  restart();
  // Same agent process: it never got job b's StartJob as far as it says, so it is sent
  // again with the same step fields; a and c still run there.
  register_agent("i1", {a, c});
  auto again = await_start(b);
  EXPECT_EQ(again.mpi_port_share(), "12005-12009");
  EXPECT_EQ(again.stepmgr(), kStepUri);
  EXPECT_FALSE(again.step_key().empty());
  EXPECT_EQ(job(a).stepmgr(), kStepUri);

  uint64_t d = submit();
  EXPECT_EQ(await_start(d).mpi_port_share(), "") << "restored shares were handed out again";
  exit_job(a, 2.5);
  ASSERT_TRUE(await_state(a, "INACTIVE"));
  EXPECT_DOUBLE_EQ(job(a).cpu_seconds(), 2.5);
  uint64_t e = submit();
  EXPECT_EQ(await_start(e).mpi_port_share(), "12000-12004");
}

TEST_F(CtldSteps, StepRecordsAreStoredThenAcknowledged) {
  start();
  register_agent("i1");
  uint64_t id = submit();
  await_start(id);
  v1::AgentMessage m;
  for (const char* name : {"1", "0"}) {
    auto* s = m.add_steps();
    s->set_jobid(id);
    s->set_step(name);
    s->set_userid(::getuid());
    s->set_state("COMPLETED");
    s->set_cpu_seconds(0.5);
  }
  ctl_->agent_message(*link_, m);
  EXPECT_TRUE(await([&](const v1::ControllerMessage& msg) {
    return msg.steps_stored_size() == 2 && msg.steps_stored(0).jobid() == id;
  }));
  v1::ListStepsRequest req;
  req.set_jobid(id);
  v1::ListStepsReply rep;
  ASSERT_TRUE(ctl_->list_steps(Caller{12345, 12345}, req, &rep).ok());
  ASSERT_EQ(rep.steps_size(), 2);
  EXPECT_EQ(rep.steps(0).step(), "0");
  EXPECT_EQ(rep.steps(1).step(), "1");
  req.set_jobid(999);
  EXPECT_EQ(ctl_->list_steps(owner(), req, &rep).error().code, Errc::not_found);

  exit_job(id, 1);
  ASSERT_TRUE(await_state(id, "INACTIVE"));
  v1::HistoryRequest hr;
  v1::HistoryReply hrep;
  ASSERT_TRUE(ctl_->history(ctld::Caller{}, hr, &hrep).ok());
  ASSERT_EQ(hrep.jobs_size(), 1);
  EXPECT_EQ(hrep.jobs(0).job().id(), id);
  EXPECT_EQ(hrep.jobs(0).job().result(), "COMPLETED");
  EXPECT_EQ(hrep.jobs(0).steps_size(), 2);
  hr.add_results("bogus");
  EXPECT_EQ(ctl_->history(ctld::Caller{}, hr, &hrep).error().code, Errc::invalid_argument);
}

TEST_F(CtldSteps, CancelStepGoesToTheStepManagersAgent) {
  start();
  register_agent("i1");
  uint64_t id = submit();
  await_start(id);
  v1::CancelRequest req;
  auto* ref = req.add_steps();
  ref->set_jobid(id);
  ref->set_step("3");
  auto* missing = req.add_steps();
  missing->set_jobid(999);
  missing->set_step("0");
  req.set_signal(SIGINT);
  v1::CancelReply rep;
  ASSERT_TRUE(ctl_->cancel(owner(), req, &rep).ok());
  ASSERT_EQ(rep.results_size(), 2);
  EXPECT_TRUE(rep.results(0).ok()) << rep.results(0).error();
  EXPECT_FALSE(rep.results(1).ok());
  EXPECT_NE(rep.results(1).error().find("999"), std::string::npos);
  EXPECT_TRUE(await([&](const v1::ControllerMessage& m) {
    if (m.cancel_step_size() != 1) return false;
    const auto& cs = m.cancel_step(0);
    return cs.jobid() == id && cs.step() == "3" && cs.signal() == SIGINT && cs.userid() == ::getuid() &&
           cs.kill_grace() == 10.0;
  }));
  if (::getuid() != 0) {
    v1::CancelReply other;
    ASSERT_TRUE(ctl_->cancel(Caller{::getuid() + 1, 0}, req, &other).ok());
    EXPECT_FALSE(other.results(0).ok());
  }
  exit_job(id, 0);
  ASSERT_TRUE(await_state(id, "INACTIVE"));
  v1::CancelReply late;
  ASSERT_TRUE(ctl_->cancel(owner(), req, &late).ok());
  EXPECT_EQ(late.results(0).error(), "job " + std::to_string(id) + " is not running");
}

}  // namespace
}  // namespace corral::ctld
