// The step manager's logic with a fake launch tree: placement, FIFO waiting, the
// requests it launches (signed credential, ranks, environment), relays, fences, ends,
// cancellation, job end and accounting records.
#include "node/steps/step_manager.h"
#include "agent.pb.h"
#include "common.pb.h"
#include "steps.grpc.pb.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <deque>
#include <filesystem>
#include <functional>
#include <future>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "cli/client/step_client.h"
#include "job/eventlog.h"
#include "job/jobspec.h"
#include "job/key_wrap.h"
#include "job/step_cred.h"
#include "job/step_id.h"
#include "loop_until.h"
#include "net/peer_listener.h"
#include "net/step_frames.h"
#include "node/agent.h"
#include "node/steps/step_service.h"
#include "node/steps/step_socket.h"

namespace corral::node {
namespace {

// The value of `name` in a KEY=VALUE list; "(unset)" when it has none.
std::string env_value(const google::protobuf::RepeatedPtrField<std::string>& env, const std::string& name) {
  for (const auto& kv : env)
    if (kv.starts_with(name + "=")) return kv.substr(name.size() + 1);
  return "(unset)";
}

const std::string kClusterKey = "0123456789abcdef0123456789abcdef";
// The agent's connection key in the register ack: StartJob.step_key comes wrapped in it.
const std::string kSessionKey(32, 's');
std::string wrapped_step_key(uint64_t jobid) {
  return *job::wrap_key(kSessionKey, job::derive_job_key(kClusterKey, jobid));
}
constexpr uint32_t kOwner = 1000;

struct FakeLauncher final : StepLauncher {
  struct Launch {
    v1::LaunchTasksRequest req;
    Up up;
    Done done;
    std::vector<v1::LaunchDown> downs;
  };
  std::deque<Launch> launches;       // id = position + 1
  std::vector<job::StepCred> creds;  // what the step manager passed beside each request

  LaunchId launch(v1::LaunchTasksRequest req, Up up, Done done, const job::StepCred& made_here) override {
    creds.push_back(made_here);
    launches.push_back({std::move(req), std::move(up), std::move(done), {}});
    return launches.size();
  }
  void deliver(LaunchId id, const v1::LaunchDown& down) override { launches.at(id - 1).downs.push_back(down); }

  std::vector<int> signals(size_t i) const {
    std::vector<int> out;
    for (const auto& d : launches.at(i).downs)
      if (d.signal() != 0) out.push_back(d.signal());
    return out;
  }
};

struct FakeClient {
  std::vector<v1::StepServerMessage> got;
  std::optional<Error> failed;

  StepClientSink sink() {
    return {[this](v1::StepServerMessage&& m) { got.push_back(std::move(m)); }, [this](const Error& e) { failed = e; }};
  }
  const v1::StepExit* exit() const {
    for (const auto& m : got)
      if (m.has_exit()) return &m.exit();
    return nullptr;
  }
  const v1::StepCreated* created() const {
    for (const auto& m : got)
      if (m.has_created()) return &m.created();
    return nullptr;
  }
  std::string waiting() const {
    for (const auto& m : got)
      if (!m.waiting().empty()) return m.waiting();
    return {};
  }
  std::string output() const {
    std::string s;
    for (const auto& m : got)
      for (const auto& o : m.output()) s += o.data();
    return s;
  }
};

v1::StepSpec spec(uint64_t jobid, uint32_t ntasks, std::vector<std::string> argv = {"hostname"}) {
  v1::StepSpec s;
  s.set_jobid(jobid);
  s.set_ntasks(ntasks);
  for (auto& a : argv) s.add_argv(a);
  s.add_env("PATH=/usr/bin:/bin");
  return s;
}

class StepManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loop = EventLoop::create();
    ASSERT_TRUE(loop);
    loop_ = std::move(*loop);
    StepManagerConfig c;
    c.self_uri = "unix:/tmp/self.sock";
    c.kill_grace = 0.05;
    c.early_open_wait = 0.05;
    c.created_linger = 0;  // `created` at once, so tests can look at it before any exit
    mgr_ =
        std::make_unique<StepManager>(*loop_, launcher_, c, [this](const v1::StepInfo& i) { records_.push_back(i); });
    mgr_->set_interactive_end([this](uint64_t jobid, int ws) { interactive_ends_.emplace_back(jobid, ws); });
  }

  // Job `id` of kOwner on n1..n<nodes>, each with `cores` cores, agents a1..a<nodes>.
  // (`agent`: every node's agent instead.)
  v1::StartJob job(uint64_t id, int nodes, int cores, job::JobRequest jr = {}, const std::string& agent = "") {
    v1::StartJob s;
    s.set_jobid(id);
    s.set_userid(kOwner);
    s.set_groupid(100);
    if (jr.command.empty() && jr.batch_script.empty()) jr.command = {"true"};
    jr.cwd = "/";
    auto js = job::build_jobspec(jr);
    EXPECT_TRUE(js) << js.message();
    s.set_jobspec(job::jobspec_to_string(*js));
    s.set_step_key(job::derive_job_key(kClusterKey, id));
    s.set_stepmgr("unix:/tmp/self.sock");
    s.set_alloc(jr.alloc);
    s.set_mpi_port_share("12000-12009");
    s.set_mpi_ports_per_step(4);
    s.set_fanout_width(8);
    (*s.mutable_extra_env())["SLINGSHOT_VNIS"] = "1024";
    for (int i = 1; i <= nodes; ++i) {
      auto* n = s.add_job_nodes();
      n->set_name("n" + std::to_string(i));
      n->set_cores("0-" + std::to_string(cores - 1));
      n->set_agent(agent.empty() ? "unix:/tmp/a" + std::to_string(i) + ".sock" : agent);
      (*n->mutable_env())["CORRAL_TOPOLOGY_ADDR"] = "s" + std::to_string(i);
    }
    mgr_->add_job(s);
    return s;
  }

  // Every rank of launch `i` reports `ws` (one LaunchUp).
  void exit_all(size_t i, int ws = 0, double cpu = 0.5) {
    v1::LaunchUp up;
    for (uint32_t r = 0; r < launcher_.launches.at(i).req.total_tasks(); ++r) {
      auto* e = up.add_exits();
      e->set_rank(r);
      e->set_waitstatus(ws);
      e->set_cpu_seconds(cpu);
    }
    launcher_.launches.at(i).up(std::move(up));
  }
  void exit_rank(size_t i, uint32_t rank, int ws) {
    v1::LaunchUp up;
    auto* e = up.add_exits();
    e->set_rank(rank);
    e->set_waitstatus(ws);
    launcher_.launches.at(i).up(std::move(up));
  }
  // Runs what was posted to the loop (and due timers) for `seconds`.
  void run_loop(double seconds = 0) {
    loop_->add_timer(seconds, [this] { loop_->stop(); });
    loop_->run();
  }

  std::unique_ptr<EventLoop> loop_;
  FakeLauncher launcher_;
  std::unique_ptr<StepManager> mgr_;
  std::vector<v1::StepInfo> records_;
  std::vector<std::pair<uint64_t, int>> interactive_ends_;
};

// `corral run` inside a step sends the outer step's CORRAL_STEPID, CORRAL_STEPMGR and
// CORRAL_MPI_PORTS: the step's own replace them, once each; names that only begin alike stay.
TEST_F(StepManagerTest, AStepsOwnVariablesReplaceTheInheritedOnes) {
  job(7, 2, 4);
  FakeClient c;
  auto s = spec(7, 1, {"/bin/true"});
  for (const char* kv : {"CORRAL_STEPID=9", "CORRAL_STEPMGR=unix:/old.sock", "CORRAL_MPI_PORTS=1-2", "CORRAL_STEPIDS=a",
                         "CORRAL_STEPMGR_X=b", "XCORRAL_STEPID=c"})
    s.add_env(kv);
  mgr_->open(1, kOwner, s, c.sink());
  ASSERT_EQ(launcher_.launches.size(), 1u);
  const auto& env = launcher_.launches[0].req.env();
  auto count = [&](std::string_view prefix) {
    return std::count_if(env.begin(), env.end(), [&](const std::string& kv) { return kv.starts_with(prefix); });
  };
  EXPECT_EQ(count("CORRAL_STEPID="), 1);
  EXPECT_EQ(env_value(env, "CORRAL_STEPID"), "0");
  EXPECT_EQ(count("CORRAL_STEPMGR="), 1);
  EXPECT_EQ(env_value(env, "CORRAL_STEPMGR"), "unix:/tmp/self.sock");
  EXPECT_EQ(count("CORRAL_MPI_PORTS="), 1);
  EXPECT_EQ(env_value(env, "CORRAL_MPI_PORTS"), "12000-12003");
  for (const char* kv : {"CORRAL_STEPIDS=a", "CORRAL_STEPMGR_X=b", "XCORRAL_STEPID=c"}) EXPECT_EQ(count(kv), 1) << kv;
}

TEST_F(StepManagerTest, PlacesAStepAndLaunchesASignedRequest) {
  job(7, 2, 4);
  FakeClient c;
  auto s = spec(7, 6, {"/bin/echo", "hi"});
  s.set_cwd("/tmp");
  mgr_->open(1, kOwner, s, c.sink());
  ASSERT_FALSE(c.failed);
  ASSERT_NE(c.created(), nullptr);
  EXPECT_EQ(c.created()->stepid(), 0u);
  EXPECT_EQ(c.created()->nodelist(), "n[1-2]");
  EXPECT_EQ(c.created()->ntasks(), 6u);
  EXPECT_EQ(c.created()->mpi_ports(), "12000-12003");
  ASSERT_EQ(launcher_.launches.size(), 1u);
  const auto& req = launcher_.launches[0].req;
  EXPECT_EQ(req.jobid(), 7u);
  EXPECT_EQ(req.stepid(), 0u);
  EXPECT_EQ(req.argv_size(), 2);
  EXPECT_EQ(req.cwd(), "/tmp");
  EXPECT_EQ(req.total_tasks(), 6u);
  EXPECT_EQ(req.total_nodes(), 2u);
  EXPECT_EQ(req.step_nodelist(), "n[1-2]");
  EXPECT_EQ(req.kvsname(), "corral_7_0");
  EXPECT_EQ(req.fanout_width(), 8u);
  EXPECT_EQ(req.gid(), 100u);
  EXPECT_FALSE(req.pmi_mapping().empty());
  ASSERT_EQ(req.nodes_size(), 2);
  // Block layout: n1 is filled first.
  EXPECT_EQ(req.nodes(0).name(), "n1");
  EXPECT_EQ(req.nodes(0).first_rank(), 0u);
  EXPECT_EQ(req.nodes(0).ntasks(), 4u);
  EXPECT_EQ(req.nodes(0).agent(), "unix:/tmp/a1.sock");
  EXPECT_EQ(req.nodes(0).env().at("CORRAL_TOPOLOGY_ADDR"), "s1");
  EXPECT_EQ(req.nodes(1).first_rank(), 4u);
  EXPECT_EQ(req.nodes(1).ntasks(), 2u);
  EXPECT_EQ(req.nodes(1).node_index(), 1u);
  EXPECT_EQ(env_value(req.env(), "PATH"), "/usr/bin:/bin");
  EXPECT_EQ(env_value(req.env(), "CORRAL_STEPID"), "0");
  EXPECT_EQ(env_value(req.env(), "CORRAL_MPI_PORTS"), "12000-12003");
  EXPECT_EQ(env_value(req.env(), "CORRAL_STEPMGR"), "unix:/tmp/self.sock");
  EXPECT_EQ(req.extra_env().at("SLINGSHOT_VNIS"), "1024");

  job::VerifyPolicy policy;
  policy.now = static_cast<double>(::time(nullptr));
  policy.uid = kOwner;
  policy.node = "n2";
  policy.jobid = 7;
  policy.stepid = 0;
  auto cred = job::verify_step_cred_with_cluster_key(req.cred(), kClusterKey, policy);
  ASSERT_TRUE(cred) << cred.message();
  EXPECT_EQ(cred->nodes, "n[1-2]");
  EXPECT_EQ(cred->gid, 100u);
  EXPECT_EQ(cred->cores_on("n2").count(), 2u);
  EXPECT_LE(cred->expires - cred->issued, 60.0);

  // Output is relayed; the step ends when every rank exited.
  v1::LaunchUp up;
  auto* o = up.add_output();
  o->set_jobid(7);
  o->set_data("hi\n");
  launcher_.launches[0].up(std::move(up));
  EXPECT_EQ(c.output(), "hi\n");
  exit_all(0, 0, 0.25);
  ASSERT_NE(c.exit(), nullptr);
  EXPECT_EQ(c.exit()->state(), "COMPLETED");
  EXPECT_EQ(c.exit()->waitstatus(), 0);
  EXPECT_EQ(c.exit()->tasks_size(), 6);

  ASSERT_EQ(records_.size(), 1u);
  const auto& r = records_[0];
  EXPECT_EQ(r.jobid(), 7u);
  EXPECT_EQ(r.step(), "0");
  EXPECT_EQ(r.userid(), kOwner);
  EXPECT_EQ(r.name(), "echo");
  EXPECT_EQ(r.command(), "/bin/echo hi");
  EXPECT_EQ(r.state(), "COMPLETED");
  EXPECT_EQ(r.nodelist(), "n[1-2]");
  EXPECT_EQ(r.nnodes(), 2u);
  EXPECT_EQ(r.ntasks(), 6u);
  EXPECT_EQ(r.ncores(), 6u);
  EXPECT_EQ(r.waitstatus(), 0);
  EXPECT_DOUBLE_EQ(r.cpu_seconds(), 1.5);
  EXPECT_GT(r.t_submit(), 0);
  EXPECT_GE(r.t_start(), r.t_submit());
  EXPECT_GE(r.t_end(), r.t_start());
}

// A step on the step manager's own agent only is launched in process with its credential
// beside it, unsigned; one that reaches another agent is signed, and the credential beside
// it is the one signed.
TEST_F(StepManagerTest, OnlyStepsThatLeaveThisAgentAreSigned) {
  job(8, 2, 4, {}, "unix:/tmp/self.sock");
  FakeClient c;
  mgr_->open(1, kOwner, spec(8, 2, {"/bin/true"}), c.sink());
  ASSERT_EQ(launcher_.launches.size(), 1u);
  EXPECT_TRUE(launcher_.launches[0].req.cred().empty());
  const job::StepCred& here = launcher_.creds[0];
  EXPECT_EQ(here.jobid, 8u);
  EXPECT_EQ(here.uid, kOwner);
  EXPECT_EQ(here.nodes, "n1");  // two tasks fit on the first node
  EXPECT_EQ(here.cores_on("n1").encode(), "0-1");

  job(9, 2, 4);  // agents a1, a2: not this one
  FakeClient d;
  mgr_->open(2, kOwner, spec(9, 2, {"/bin/true"}), d.sink());
  ASSERT_EQ(launcher_.launches.size(), 2u);
  const auto& req = launcher_.launches[1].req;
  ASSERT_FALSE(req.cred().empty());
  job::VerifyPolicy policy;
  policy.now = job::now();
  policy.uid = kOwner;
  auto signed_cred = job::verify_step_cred(req.cred(), job::derive_job_key(kClusterKey, 9), policy);
  ASSERT_TRUE(signed_cred) << signed_cred.message();
  EXPECT_EQ(signed_cred->nonce, launcher_.creds[1].nonce);
  EXPECT_EQ(signed_cred->launch_digest, launcher_.creds[1].launch_digest);
  EXPECT_EQ(signed_cred->nodes, launcher_.creds[1].nodes);
}

TEST_F(StepManagerTest, WaitingStepsStartInOrder) {
  job(7, 1, 4);
  FakeClient a, b, c;
  mgr_->open(1, kOwner, spec(7, 4), a.sink());
  mgr_->open(2, kOwner, spec(7, 2), b.sink());
  mgr_->open(3, kOwner, spec(7, 1), c.sink());
  ASSERT_EQ(launcher_.launches.size(), 1u);
  EXPECT_FALSE(b.waiting().empty());
  EXPECT_FALSE(c.waiting().empty());  // FIFO: it would fit the free cores... none are free
  EXPECT_EQ(b.created(), nullptr);
  exit_all(0);
  ASSERT_EQ(launcher_.launches.size(), 3u);
  EXPECT_EQ(launcher_.launches[1].req.stepid(), 1u);
  EXPECT_EQ(launcher_.launches[2].req.stepid(), 2u);
  ASSERT_NE(b.created(), nullptr);
  EXPECT_EQ(b.created()->stepid(), 1u);
  // Ports of the first step came back to the share.
  EXPECT_EQ(b.created()->mpi_ports(), "12000-12003");
}

TEST_F(StepManagerTest, SmallStepDoesNotOvertakeAWaitingOne) {
  job(7, 1, 4);
  FakeClient a, b, c;
  mgr_->open(1, kOwner, spec(7, 2), a.sink());
  mgr_->open(2, kOwner, spec(7, 4), b.sink());
  mgr_->open(3, kOwner, spec(7, 1), c.sink());
  EXPECT_EQ(launcher_.launches.size(), 1u);
  EXPECT_FALSE(c.waiting().empty());
}

TEST_F(StepManagerTest, ImmediateFailsInsteadOfWaiting) {
  job(7, 1, 4);
  FakeClient a, b, c;
  mgr_->open(1, kOwner, spec(7, 4), a.sink());
  auto s = spec(7, 1);
  s.set_immediate(true);
  mgr_->open(2, kOwner, s, b.sink());
  ASSERT_NE(b.exit(), nullptr);
  EXPECT_EQ(b.exit()->state(), "FAILED");
  EXPECT_NE(b.exit()->error().find("--immediate"), std::string::npos);
  EXPECT_NE(b.exit()->waitstatus(), 0);
  // No step number was used up.
  exit_all(0);
  mgr_->open(3, kOwner, spec(7, 1), c.sink());
  ASSERT_NE(c.created(), nullptr);
  EXPECT_EQ(c.created()->stepid(), 1u);
}

TEST_F(StepManagerTest, OverlapStepRunsBesideOthers) {
  job(7, 1, 4);
  FakeClient a, b;
  mgr_->open(1, kOwner, spec(7, 4), a.sink());
  auto s = spec(7, 2);
  s.set_overlap(true);
  mgr_->open(2, kOwner, s, b.sink());
  ASSERT_NE(b.created(), nullptr);
  EXPECT_EQ(launcher_.launches.size(), 2u);
}

TEST_F(StepManagerTest, InteractiveStepEndsAnAllocJob) {
  job::JobRequest jr;
  jr.alloc = true;
  job(9, 2, 4, jr);
  FakeClient a, b, c;
  mgr_->open(1, kOwner, spec(9, 8), a.sink());  // every core is taken
  auto s = spec(9, 0, {"/bin/bash"});
  s.set_interactive(true);
  s.set_pty(true);
  mgr_->open(2, kOwner, s, b.sink());
  ASSERT_NE(b.created(), nullptr) << b.waiting();
  EXPECT_EQ(b.created()->stepid(), job::kInteractiveStep);
  EXPECT_EQ(b.created()->nodelist(), "n1");
  EXPECT_EQ(b.created()->ntasks(), 1u);
  const auto& req = launcher_.launches.at(1).req;
  EXPECT_TRUE(req.pty());
  EXPECT_EQ(env_value(req.env(), "CORRAL_STEPID"), "interactive");
  // Only one at a time.
  mgr_->open(3, kOwner, s, c.sink());
  ASSERT_NE(c.exit(), nullptr);
  EXPECT_NE(c.exit()->error().find("already has an interactive step"), std::string::npos);

  exit_all(1, 3 << 8);
  ASSERT_NE(b.exit(), nullptr);
  EXPECT_EQ(b.exit()->waitstatus(), 3 << 8);
  run_loop();
  ASSERT_EQ(interactive_ends_.size(), 1u);
  EXPECT_EQ(interactive_ends_[0], std::make_pair(uint64_t{9}, 3 << 8));
  EXPECT_EQ(records_.back().step(), "interactive");
}

TEST_F(StepManagerTest, CreatedTravelsWithAShortStepsExitAndAloneForALongOne) {
  StepManagerConfig c;
  c.created_linger = 0.05;
  StepManager mgr(*loop_, launcher_, c, [](const v1::StepInfo&) {});
  auto sj = job(7, 1, 4);
  mgr.add_job(sj);
  FakeClient quick, slow;
  mgr.open(1, kOwner, spec(7, 1), quick.sink());
  EXPECT_TRUE(quick.got.empty());  // held back
  v1::LaunchUp up;
  auto* e = up.add_exits();
  e->set_rank(0);
  launcher_.launches.back().up(std::move(up));
  ASSERT_EQ(quick.got.size(), 1u);  // one message: created and exit
  EXPECT_TRUE(quick.got[0].has_created());
  EXPECT_TRUE(quick.got[0].has_exit());
  EXPECT_EQ(quick.got[0].created().stepid(), 0u);

  mgr.open(2, kOwner, spec(7, 1), slow.sink());
  EXPECT_TRUE(slow.got.empty());
  run_loop(0.1);
  ASSERT_EQ(slow.got.size(), 1u);  // the linger ran out: created alone
  EXPECT_TRUE(slow.got[0].has_created());
  EXPECT_FALSE(slow.got[0].has_exit());
}

// corrald names the step manager as it sends StartJob: a client may ask first.
TEST_F(StepManagerTest, ARequestBeforeTheJobArrivesWaitsForIt) {
  FakeClient first, second, gone;
  mgr_->open(1, kOwner, spec(8, 1, {"/bin/echo", "first"}), first.sink());
  mgr_->open(2, kOwner, spec(8, 1, {"/bin/echo", "second"}), second.sink());
  mgr_->open(3, kOwner, spec(8, 1), gone.sink());
  mgr_->client_gone(3);
  EXPECT_TRUE(launcher_.launches.empty());
  job(8, 1, 1);
  ASSERT_EQ(launcher_.launches.size(), 1u);  // one core: the second waits, in arrival order
  EXPECT_EQ(launcher_.launches[0].req.argv(1), "first");
  EXPECT_FALSE(first.failed);
  EXPECT_FALSE(second.waiting().empty());
  run_loop(0.1);  // past the wait: nothing parked is failed any more
  EXPECT_FALSE(first.failed || second.failed || gone.failed);
  EXPECT_TRUE(gone.got.empty());
}

TEST_F(StepManagerTest, RefusesBadRequests) {
  job(7, 1, 4);
  FakeClient none, unknown, other, big, empty;
  mgr_->open(1, kOwner, spec(0, 1), none.sink());
  ASSERT_TRUE(none.failed);
  EXPECT_EQ(none.failed->code, Errc::invalid_argument);

  mgr_->open(2, kOwner, spec(8, 1), unknown.sink());
  EXPECT_FALSE(unknown.failed);  // the job may still be on its way from the controller
  run_loop(0.1);
  ASSERT_TRUE(unknown.failed);
  EXPECT_EQ(unknown.failed->code, Errc::not_found);
  EXPECT_NE(unknown.failed->message.find("job 8 has no step manager here"), std::string::npos);

  mgr_->open(3, kOwner + 1, spec(7, 1), other.sink());
  ASSERT_TRUE(other.failed);
  EXPECT_EQ(other.failed->code, Errc::permission_denied);
  EXPECT_NE(other.failed->message.find("job 7 belongs to user"), std::string::npos);

  mgr_->open(4, kOwner, spec(7, 100), big.sink());
  ASSERT_NE(big.exit(), nullptr);
  EXPECT_EQ(big.exit()->state(), "FAILED");
  EXPECT_FALSE(big.exit()->error().empty());

  mgr_->open(5, kOwner, spec(7, 1, {}), empty.sink());
  ASSERT_NE(empty.exit(), nullptr);
  EXPECT_EQ(launcher_.launches.size(), 0u);
  EXPECT_TRUE(records_.empty());

  FakeClient limit;  // a hand-written request with a limit corral does not know
  auto odd = spec(7, 1);
  (*odd.mutable_rlimits())["nofile"] = 64;
  (*odd.mutable_rlimits())["bogus"] = 1;
  mgr_->open(7, kOwner, odd, limit.sink());
  ASSERT_NE(limit.exit(), nullptr);
  EXPECT_NE(limit.exit()->error().find("bogus=1 is not one corral knows"), std::string::npos) << limit.exit()->error();
  EXPECT_EQ(launcher_.launches.size(), 0u);

  // Hand-written environments: every entry NAME=VALUE, none with a NUL (execve would end
  // the list there).
  int id = 10;
  const std::string huge = "BIG=" + std::string(128 << 10, 'x');  // longer than execve takes
  for (const std::string& bad : {std::string("NOEQUALS"), std::string("=value"), std::string("A=b\0c", 5), huge}) {
    FakeClient c;
    auto s = spec(7, 1);
    s.add_env(bad);
    mgr_->open(id++, kOwner, s, c.sink());
    ASSERT_NE(c.exit(), nullptr) << bad;
    EXPECT_NE(c.exit()->error().find("environment"), std::string::npos) << c.exit()->error();
  }
  FakeClient many;  // each entry within bounds, all of them over what a program can be given
  auto s = spec(7, 1);
  for (int i = 0; i < 60; ++i) s.add_env("V" + std::to_string(i) + "=" + std::string(110 << 10, 'y'));
  mgr_->open(id++, kOwner, s, many.sink());
  ASSERT_NE(many.exit(), nullptr);
  EXPECT_NE(many.exit()->error().find("the environment is over 6 MiB"), std::string::npos) << many.exit()->error();
  EXPECT_EQ(launcher_.launches.size(), 0u);

  FakeClient root;
  mgr_->open(6, 0, spec(7, 1), root.sink());
  EXPECT_NE(root.created(), nullptr);
}

TEST_F(StepManagerTest, RecordsAreKeptUntilStored) {
  job(7, 1, 4);
  FakeClient a, b;
  mgr_->open(1, kOwner, spec(7, 1), a.sink());
  mgr_->open(2, kOwner, spec(7, 1), b.sink());
  exit_all(0);
  exit_all(1, 1 << 8);
  ASSERT_EQ(records_.size(), 2u);
  EXPECT_EQ(records_[1].state(), "FAILED");
  EXPECT_EQ(records_[1].waitstatus(), 1 << 8);
  v1::Register reg;
  mgr_->fill_register(reg);
  EXPECT_EQ(reg.steps_size(), 2);
  v1::StepRef ref;
  ref.set_jobid(7);
  ref.set_step("0");
  mgr_->stored(ref);
  v1::Register reg2;
  mgr_->fill_register(reg2);
  ASSERT_EQ(reg2.steps_size(), 1);
  EXPECT_EQ(reg2.steps(0).step(), "1");
  // Still listed after the end.
  auto list = mgr_->list(kOwner, 7);
  ASSERT_TRUE(list);
  EXPECT_EQ(list->steps_size(), 2);
}

TEST_F(StepManagerTest, CancelRunningStepEscalates) {
  job(7, 1, 4);
  FakeClient a;
  mgr_->open(1, kOwner, spec(7, 2), a.sink());
  v1::CancelStep c;
  c.set_jobid(7);
  c.set_step("0");
  c.set_userid(kOwner);
  mgr_->cancel(c);
  EXPECT_EQ(launcher_.signals(0), std::vector<int>{SIGTERM});
  run_loop(0.2);
  EXPECT_EQ(launcher_.signals(0), (std::vector<int>{SIGTERM, SIGKILL}));
  exit_all(0, SIGKILL);
  ASSERT_NE(a.exit(), nullptr);
  EXPECT_EQ(a.exit()->state(), "CANCELED");
  EXPECT_EQ(records_.back().state(), "CANCELED");
}

TEST_F(StepManagerTest, CancelPendingStepEndsAtOnce) {
  job(7, 1, 4);
  FakeClient a, b;
  mgr_->open(1, kOwner, spec(7, 4), a.sink());
  mgr_->open(2, kOwner, spec(7, 4), b.sink());
  v1::CancelStep c;
  c.set_jobid(7);
  c.set_step("1");
  mgr_->cancel(c);
  ASSERT_NE(b.exit(), nullptr);
  EXPECT_EQ(b.exit()->state(), "CANCELED");
  exit_all(0);
  EXPECT_EQ(launcher_.launches.size(), 1u);  // nothing left to start
  c.set_step("5");
  mgr_->cancel(c);  // unknown: only logged
}

TEST_F(StepManagerTest, KillOnBadExit) {
  job(7, 1, 4);
  FakeClient a;
  auto s = spec(7, 3);
  s.set_kill_on_bad_exit(true);
  mgr_->open(1, kOwner, s, a.sink());
  exit_rank(0, 1, 2 << 8);
  EXPECT_EQ(launcher_.signals(0), std::vector<int>{SIGKILL});
  exit_rank(0, 0, SIGKILL);
  exit_rank(0, 2, SIGKILL);
  ASSERT_NE(a.exit(), nullptr);
  EXPECT_EQ(a.exit()->state(), "FAILED");
  EXPECT_NE(a.exit()->error().find("kill-on-bad-exit"), std::string::npos);
  EXPECT_EQ(a.exit()->waitstatus(), 2 << 8);
}

TEST_F(StepManagerTest, FenceIsAnsweredOnceEveryNodeContributed) {
  job(7, 3, 2);
  FakeClient a;
  mgr_->open(1, kOwner, spec(7, 6), a.sink());
  auto fence = [&](uint32_t nodes, const std::string& k) {
    v1::LaunchUp up;
    up.mutable_fence()->set_seq(0);
    up.mutable_fence()->set_nodes(nodes);
    (*up.mutable_fence()->mutable_kvs())[k] = "v" + k;
    launcher_.launches[0].up(std::move(up));
  };
  fence(2, "a");
  EXPECT_TRUE(launcher_.launches[0].downs.empty());
  fence(1, "b");
  ASSERT_EQ(launcher_.launches[0].downs.size(), 1u);
  const auto& f = launcher_.launches[0].downs[0].fence();
  EXPECT_EQ(f.seq(), 0u);
  EXPECT_EQ(f.kvs().size(), 2u);
  EXPECT_EQ(f.kvs().at("b"), "vb");
}

TEST_F(StepManagerTest, ClientMessagesReachTheTree) {
  job(7, 1, 4);
  FakeClient a;
  mgr_->open(1, kOwner, spec(7, 1), a.sink());
  v1::StepClientMessage m;
  m.set_stdin("data");
  m.set_stdin_eof(true);
  mgr_->client_message(1, std::move(m));
  v1::StepClientMessage s;
  s.set_signal(SIGINT);
  mgr_->client_message(1, std::move(s));
  const auto& downs = launcher_.launches[0].downs;
  ASSERT_EQ(downs.size(), 2u);
  EXPECT_EQ(downs[0].stdin(), "data");
  EXPECT_TRUE(downs[0].stdin_eof());
  EXPECT_EQ(downs[1].signal(), SIGINT);
}

TEST_F(StepManagerTest, StartErrorsBecomeStderrLinesAndKillTheOtherRanks) {
  job(7, 2, 2);
  FakeClient a;
  mgr_->open(1, kOwner, spec(7, 4), a.sink());
  v1::LaunchUp up;
  auto* e = up.add_errors();
  e->set_node("n2");
  e->set_message("bad credential");
  for (uint32_t r = 2; r < 4; ++r) {
    auto* x = up.add_exits();
    x->set_rank(r);
    x->set_waitstatus(1 << 8);
  }
  EXPECT_TRUE(launcher_.signals(0).empty());
  launcher_.launches[0].up(std::move(up));
  EXPECT_EQ(a.output(), "corral: node n2: bad credential\n");
  EXPECT_EQ(a.got.back().output(0).rank(), 2u);
  // Ranks 0 and 1 would wait for ranks 2 and 3 forever.
  EXPECT_EQ(launcher_.signals(0), std::vector<int>{SIGKILL});
  exit_all(0);
  ASSERT_NE(a.exit(), nullptr);
  EXPECT_EQ(a.exit()->state(), "FAILED");
  EXPECT_NE(a.exit()->error().find("n2: bad credential"), std::string::npos);
}

TEST_F(StepManagerTest, ClientGoneKillsOrDropsTheStep) {
  job(7, 1, 4);
  FakeClient a, b;
  mgr_->open(1, kOwner, spec(7, 4), a.sink());
  mgr_->open(2, kOwner, spec(7, 4), b.sink());
  mgr_->client_gone(2);
  EXPECT_EQ(b.exit(), nullptr);  // nobody to tell
  EXPECT_EQ(records_.back().state(), "CANCELED");
  mgr_->client_gone(1);
  EXPECT_EQ(launcher_.signals(0), std::vector<int>{SIGKILL});
  exit_all(0, SIGKILL);
  EXPECT_EQ(a.exit(), nullptr);
  EXPECT_EQ(records_.back().step(), "0");
  EXPECT_EQ(launcher_.launches.size(), 1u);
}

TEST_F(StepManagerTest, JobEndKillsStepsAndFailsPendingOnes) {
  job::JobRequest jr;
  jr.batch_script = "#!/bin/sh\ncorral run hostname\n";
  job(7, 1, 4, jr);
  FakeClient a, b;
  mgr_->open(1, kOwner, spec(7, 4), a.sink());
  mgr_->open(2, kOwner, spec(7, 1), b.sink());
  auto list = mgr_->list(kOwner, 7);
  ASSERT_TRUE(list);
  ASSERT_EQ(list->steps_size(), 3);
  EXPECT_EQ(list->steps(0).step(), "batch");
  EXPECT_EQ(list->steps(0).state(), "RUNNING");
  EXPECT_EQ(list->steps(1).state(), "RUNNING");
  EXPECT_EQ(list->steps(2).state(), "PENDING");
  EXPECT_FALSE(mgr_->list(kOwner + 1, 7));
  auto all = mgr_->list(kOwner, 0);
  ASSERT_TRUE(all);
  EXPECT_EQ(all->steps_size(), 3);
  EXPECT_EQ(mgr_->list(kOwner + 1, 0)->steps_size(), 0);

  mgr_->job_tasks_ended(7, 0, 2.0);
  ASSERT_NE(b.exit(), nullptr);
  EXPECT_EQ(b.exit()->state(), "FAILED");
  EXPECT_NE(b.exit()->error().find("the job ended"), std::string::npos);
  EXPECT_EQ(launcher_.signals(0), std::vector<int>{SIGKILL});
  EXPECT_TRUE(mgr_->manages(7));  // until its running step ended
  exit_all(0, SIGKILL);
  EXPECT_FALSE(mgr_->manages(7));
  bool batch = false;
  for (const auto& r : records_)
    if (r.step() == "batch") {
      batch = true;
      EXPECT_EQ(r.state(), "COMPLETED");
      EXPECT_DOUBLE_EQ(r.cpu_seconds(), 2.0);
    }
  EXPECT_TRUE(batch);
}

TEST_F(StepManagerTest, SignalJobReachesRunningSteps) {
  job(7, 1, 4);
  FakeClient a;
  mgr_->open(1, kOwner, spec(7, 1), a.sink());
  mgr_->signal_job(7, SIGUSR1, 0);
  EXPECT_EQ(launcher_.signals(0), std::vector<int>{SIGUSR1});
}

TEST_F(StepManagerTest, ForgetEndsEverythingAtOnce) {
  job(7, 1, 4);
  FakeClient a;
  mgr_->open(1, kOwner, spec(7, 2), a.sink());
  mgr_->forget_job(7);
  EXPECT_FALSE(mgr_->manages(7));
  ASSERT_NE(a.exit(), nullptr);
  EXPECT_EQ(a.exit()->state(), "FAILED");
  exit_all(0);  // late reports of the tree are ignored
}

TEST_F(StepManagerTest, LaunchThatFailsInsideLaunchEndsTheStep) {
  // A launcher that reports every rank failed before launch() returns.
  struct Failing final : StepLauncher {
    LaunchId launch(v1::LaunchTasksRequest req, Up up, Done done, const job::StepCred&) override {
      v1::LaunchUp u;
      auto* e = u.add_errors();
      e->set_node(req.nodes(0).name());
      e->set_message("this agent has no cluster key (--key-file)");
      for (uint32_t r = 0; r < req.total_tasks(); ++r) {
        auto* x = u.add_exits();
        x->set_rank(r);
        x->set_waitstatus(1 << 8);
      }
      up(std::move(u));
      done("");
      return 1;
    }
    void deliver(LaunchId, const v1::LaunchDown&) override { ++delivered; }
    int delivered = 0;
  } failing;
  StepManager mgr(*loop_, failing, {}, nullptr);
  auto s = job(7, 1, 4);
  mgr.add_job(s);
  FakeClient a, b;
  mgr.open(1, kOwner, spec(7, 4), a.sink());
  ASSERT_NE(a.exit(), nullptr);
  EXPECT_NE(a.exit()->error().find("no cluster key"), std::string::npos);
  mgr.open(2, kOwner, spec(7, 4), b.sink());
  ASSERT_NE(b.exit(), nullptr);
  EXPECT_EQ(b.created()->stepid(), 1u);
}

}  // namespace
}  // namespace corral::node

// ------------------------------------------------------------------ in the agent

namespace corral::node {
namespace {

namespace fs = std::filesystem;

// The agent's wiring: JobExecutor <-> StepManager <-> StepNode, without a controller.
class StepAgent : public ::testing::Test {
 protected:
  void SetUp() override {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    dir_ = fs::temp_directory_path() / ("corral-stepagent-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    auto loop = EventLoop::create();
    ASSERT_TRUE(loop);
    loop_ = std::move(*loop);
    AgentConfig c;
    c.agent_id = "n[1-2]";
    c.nodes = {{"n1", 4, 0, 1024, {}}, {"n2", 4, 0, 1024, {}}};
    c.controller_uri = "unix:/tmp/test.sock";
    c.step_uri = "unix:" + (dir_ / "step.sock").string();
    c.state_dir = dir_.string();
    c.kill_grace = 0.2;
    c.handle_termination = false;
    StepNodeConfig sc;
    sc.cluster_key = kClusterKey;
    agent_ = std::make_unique<Agent>(
        *loop_, c, [this](uint64_t, v1::AgentMessage&& m) { sent_.push_back(m); }, sc);
    ASSERT_TRUE(agent_->start());
    auto reg = agent_->begin_register(1);
    EXPECT_EQ(reg.register_().step_uri(), c.step_uri);
    v1::ControllerMessage ack;
    ack.set_register_ack(true);
    ack.set_session_key(kSessionKey);
    agent_->on_registered(1, ack);
  }
  void TearDown() override {
    agent_.reset();
    fs::remove_all(dir_);
  }

  bool run_until(const std::function<bool()>& done, double seconds = 10) {
    return test::run_loop_until(*loop_, done, seconds);
  }

  v1::StartJob start(uint64_t id, job::JobRequest jr, bool alloc = false) {
    v1::ControllerMessage m;
    auto* s = m.add_start();
    s->set_jobid(id);
    s->set_userid(::getuid());
    s->set_groupid(::getgid());
    jr.cwd = "/";
    jr.alloc = alloc;
    if (jr.environment.empty()) jr.environment = {{"PATH", "/usr/bin:/bin"}};
    auto js = job::build_jobspec(jr);
    EXPECT_TRUE(js) << js.message();
    s->set_jobspec(job::jobspec_to_string(*js));
    s->set_nodelist("n1");
    s->set_total_nodes(1);
    s->set_total_tasks(1);
    s->set_alloc(alloc);
    s->set_stepmgr(agent_->config().step_uri);
    s->set_step_key(wrapped_step_key(id));
    auto* t = s->add_tasks();
    t->set_node("n1");
    t->set_ntasks(1);
    t->set_cores("0-3");
    for (const char* n : {"n1", "n2"}) {
      auto* jn = s->add_job_nodes();
      jn->set_name(n);
      jn->set_cores("0-3");
      jn->set_agent(agent_->config().step_uri);
    }
    agent_->handle(m);
    return *s;
  }
  std::vector<v1::JobNodeExit> exits(uint64_t id) const {
    std::vector<v1::JobNodeExit> out;
    for (const auto& m : sent_)
      for (const auto& e : m.exited())
        if (e.jobid() == id) out.push_back(e);
    return out;
  }
  std::string job_output(uint64_t id) const {
    std::string s;
    for (const auto& m : sent_)
      for (const auto& o : m.output())
        if (o.jobid() == id && !o.stderr()) s += o.data();
    return s;
  }
  std::vector<v1::StepInfo> step_records() const {
    std::vector<v1::StepInfo> out;
    for (const auto& m : sent_)
      for (const auto& s : m.steps()) out.push_back(s);
    return out;
  }

  fs::path dir_;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<Agent> agent_;
  std::vector<v1::AgentMessage> sent_;
};

TEST_F(StepAgent, JobTasksSeeTheirStepManagerAndReportCpuTime) {
  job::JobRequest jr;
  jr.command = {"/bin/sh", "-c", "echo $CORRAL_STEPMGR; i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done"};
  start(1, jr);
  ASSERT_TRUE(run_until([&] { return !exits(1).empty(); }));
  EXPECT_EQ(job_output(1), agent_->config().step_uri + "\n");
  auto e = exits(1).at(0);
  EXPECT_EQ(e.waitstatus(), 0);
  EXPECT_GT(e.cpu_seconds(), 0.01);
  EXPECT_DOUBLE_EQ(e.tasks(0).cpu_seconds(), e.cpu_seconds());
  // Its step manager went with it.
  EXPECT_FALSE(agent_->steps().manages(1));
}

TEST_F(StepAgent, AllocJobRunsNothingAndEndsWhenSignaled) {
  start(2, {}, true);
  EXPECT_TRUE(agent_->steps().manages(2));
  EXPECT_FALSE(run_until([&] { return !exits(2).empty(); }, 0.1));
  v1::ControllerMessage m;
  auto* s = m.add_signal();
  s->set_jobid(2);
  s->set_signal(SIGTERM);
  agent_->handle(m);
  ASSERT_TRUE(run_until([&] { return !exits(2).empty(); }));
  EXPECT_EQ(exits(2)[0].waitstatus(), SIGTERM);
  EXPECT_FALSE(agent_->steps().manages(2));
}

TEST_F(StepAgent, AllocJobEndsWithItsInteractiveStep) {
  start(3, {}, true);
  FakeClient c;
  v1::StepSpec s;
  s.set_jobid(3);
  s.add_argv("/bin/sh");
  s.add_argv("-c");
  s.add_argv("echo interactive; exit 4");
  s.add_env("PATH=/usr/bin:/bin");
  s.set_interactive(true);
  agent_->steps().open(1, ::getuid(), s, c.sink());
  ASSERT_TRUE(run_until([&] { return !exits(3).empty(); })) << c.output();
  EXPECT_EQ(exits(3)[0].waitstatus(), 4 << 8);
  ASSERT_NE(c.exit(), nullptr);
  EXPECT_EQ(c.exit()->waitstatus(), 4 << 8) << c.exit()->error();
  EXPECT_EQ(c.output(), "interactive\n");
  auto records = step_records();
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records.back().step(), "interactive");
  EXPECT_EQ(records.back().state(), "FAILED");
  // Unacknowledged records go with the next register.
  auto reg = agent_->begin_register(2);
  EXPECT_EQ(reg.register_().steps_size(), 1);
}

TEST_F(StepAgent, StepRunsOnTwoNodesOfTheAgent) {
  job::JobRequest jr;
  jr.command = {"sleep", "30"};
  start(4, jr);
  FakeClient c;
  v1::StepSpec s;
  s.set_jobid(4);
  s.set_nnodes(2);
  s.set_ntasks(4);
  s.add_argv("/bin/sh");
  s.add_argv("-c");
  s.add_argv("echo rank=$CORRAL_TASK_RANK step=$CORRAL_STEPID");
  s.add_env("PATH=/usr/bin:/bin");
  agent_->steps().open(1, ::getuid(), s, c.sink());
  ASSERT_TRUE(run_until([&] { return c.exit() != nullptr; })) << c.output();
  EXPECT_EQ(c.exit()->state(), "COMPLETED") << c.exit()->error();
  EXPECT_EQ(c.exit()->tasks_size(), 4);
  for (int r = 0; r < 4; ++r)
    EXPECT_NE(c.output().find("rank=" + std::to_string(r) + " step=0"), std::string::npos) << c.output();
  v1::ControllerMessage m;
  auto* sig = m.add_signal();
  sig->set_jobid(4);
  sig->set_signal(SIGKILL);
  agent_->handle(m);
  ASSERT_TRUE(run_until([&] { return !exits(4).empty(); }));
}

}  // namespace
}  // namespace corral::node

// ------------------------------------------------------------------ over gRPC

namespace corral::node {
namespace {

v1::StepSpec true_step(uint64_t jobid, std::vector<std::string> argv = {"/bin/true"}) {
  v1::StepSpec s;
  s.set_jobid(jobid);
  for (auto& a : argv) s.add_argv(a);
  s.add_env("PATH=/usr/bin:/bin");
  return s;
}

// The StepService on a Unix socket with the agent's loop in its own thread, as in corral-node.
class StepServiceTest : public StepAgent {
 protected:
  void SetUp() override {
    StepAgent::SetUp();
    path_ = agent_->config().step_uri.substr(5);
    auto l = net::PeerListener::open(path_, 1024);
    ASSERT_TRUE(l) << l.message();
    peers_ = std::move(*l);
    service_ =
        std::make_unique<StepService>(*loop_, agent_->steps(), agent_->step_node(), agent_->fences(), peers_.get());
    grpc::ServerBuilder b;
    b.RegisterService(service_->service());
    server_ = b.BuildAndStart();
    ASSERT_TRUE(server_);
    // As corral-node: the agent's own step protocol and gRPC on one socket.
    socket_ = std::make_unique<StepSocketServer>(*loop_, agent_->steps(), 1 << 20);
    peers_->divert(std::string(net::kStepPreface), [this](UniqueFd fd, const net::PeerCred& c) {
      loop_->post([this, fd = fd.release(), uid = c.uid] { socket_->adopt(UniqueFd(fd), uid); });
    });
    peers_->start(server_.get());
    loop_thread_ = std::thread([this] { loop_->run(); });
    stub_ =
        v1::StepService::NewStub(grpc::CreateChannel(agent_->config().step_uri, grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    peers_->stop();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    loop_->post([this] { loop_->stop(); });
    loop_thread_.join();
    socket_.reset();
    server_.reset();
    service_.reset();
    peers_.reset();
    StepAgent::TearDown();
  }
  void on_loop(std::function<void()> fn) {
    std::promise<void> done;
    loop_->post([&] {
      fn();
      done.set_value();
    });
    done.get_future().wait();
  }
  size_t socket_connections() {
    size_t n = 0;
    on_loop([&] { n = socket_->connections(); });
    return n;
  }
  // Job `jobid` of this test's user, holding its allocation with `sleep 30`.
  void start_holding(uint64_t jobid) {
    job::JobRequest jr;
    jr.command = {"sleep", "30"};
    on_loop([&] { start(jobid, jr); });
  }

  // A step through `corral`'s StepClient (the agent's own protocol), read to its end.
  struct SocketRun {
    bool opened = false;
    bool created = false;
    std::string out, state;
    Status status;
  };
  SocketRun socket_run(uint64_t jobid, std::vector<std::string> argv) {
    cli::StepClient client(agent_->config().step_uri, jobid);
    return socket_run(client, jobid, std::move(argv));
  }
  SocketRun socket_run(cli::StepClient& client, uint64_t jobid, std::vector<std::string> argv) {
    SocketRun r;
    auto stream = client.run(true_step(jobid, std::move(argv)));
    if (!stream) {
      r.status = stream.error();
      return r;
    }
    r.opened = true;
    for (v1::StepServerMessage m; (*stream)->read(m);) {
      r.created = r.created || m.has_created();
      for (const auto& o : m.output()) r.out += o.data();
      if (m.has_exit()) r.state = m.exit().state();
    }
    r.status = (*stream)->finish();
    return r;
  }

  // A connection to the agent's socket that has sent the step protocol's preface and `bytes`.
  UniqueFd raw_connect(const std::string& bytes) {
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof addr.sun_path - 1);
    EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    const std::string all = std::string(net::kStepPreface) + bytes;
    EXPECT_EQ(::send(fd.get(), all.data(), all.size(), MSG_NOSIGNAL), static_cast<ssize_t>(all.size()));
    return fd;
  }

  // Ends job `jobid`'s tasks as the controller's SIGKILL would.
  void kill_job(uint64_t jobid) {
    on_loop([&] {
      v1::ControllerMessage m;
      auto* s = m.add_signal();
      s->set_jobid(jobid);
      s->set_signal(SIGKILL);
      agent_->handle(m);
    });
  }

  struct Run {
    grpc::Status status;
    std::vector<v1::StepServerMessage> got;
    std::string output() const {
      std::string s;
      for (const auto& m : got)
        for (const auto& o : m.output()) s += o.data();
      return s;
    }
    const v1::StepExit* exit() const {
      for (const auto& m : got)
        if (m.has_exit()) return &m.exit();
      return nullptr;
    }
  };
  Run run(const v1::StepSpec& spec) {
    Run r;
    grpc::ClientContext ctx;
    auto stream = stub_->RunStep(&ctx);
    v1::StepClientMessage m;
    *m.mutable_create() = spec;
    stream->Write(m);
    v1::StepServerMessage in;
    while (stream->Read(&in)) r.got.push_back(in);
    r.status = stream->Finish();
    return r;
  }

  std::string path_;
  std::unique_ptr<net::PeerListener> peers_;
  std::unique_ptr<StepService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<StepSocketServer> socket_;
  std::thread loop_thread_;
  std::unique_ptr<v1::StepService::Stub> stub_;
};

TEST_F(StepServiceTest, RunStepListStepsAndErrors) {
  job::JobRequest jr;
  jr.command = {"sleep", "30"};
  on_loop([&] { start(5, jr); });
  auto r = run(true_step(5, {"/bin/echo", "hello"}));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  ASSERT_NE(r.exit(), nullptr);
  EXPECT_EQ(r.exit()->state(), "COMPLETED") << r.exit()->error();
  EXPECT_EQ(r.output(), "hello\n");
  EXPECT_TRUE(r.got.front().has_created());

  // A request that reaches the agent before the job's StartJob waits for it.
  auto early = std::async(std::launch::async, [&] { return run(true_step(6, {"/bin/echo", "early"})); });
  size_t parked = 0;
  for (int i = 0; i < 500 && parked == 0; ++i) {
    on_loop([&] { parked = agent_->steps().parked_opens(); });
    if (parked == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(parked, 1u);
  on_loop([&] { start(6, jr); });
  auto r6 = early.get();
  ASSERT_TRUE(r6.status.ok()) << r6.status.error_message();
  EXPECT_EQ(r6.output(), "early\n");

  grpc::ClientContext ctx;
  v1::ListStepsRequest req;
  req.set_jobid(5);
  v1::ListStepsReply reply;
  ASSERT_TRUE(stub_->ListSteps(&ctx, req, &reply).ok());
  ASSERT_EQ(reply.steps_size(), 1);
  EXPECT_EQ(reply.steps(0).state(), "COMPLETED");
  EXPECT_EQ(reply.steps(0).command(), "/bin/echo hello");
  on_loop([&] {
    v1::ControllerMessage m;
    m.add_forget(5);
    agent_->handle(m);
    auto* s = m.add_signal();
    s->set_jobid(5);
    s->set_signal(SIGKILL);
    agent_->handle(m);
  });
}

TEST_F(StepServiceTest, ClientGoneKillsTheStep) {
  job::JobRequest jr;
  jr.command = {"sleep", "30"};
  on_loop([&] { start(7, jr); });
  {
    grpc::ClientContext ctx;
    auto stream = stub_->RunStep(&ctx);
    v1::StepClientMessage m;
    *m.mutable_create() = true_step(7, {"sleep", "30"});
    stream->Write(m);
    v1::StepServerMessage in;
    ASSERT_TRUE(stream->Read(&in));
    EXPECT_TRUE(in.has_created());
    ctx.TryCancel();
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::string state;
  while (state != "CANCELED" && std::chrono::steady_clock::now() < deadline) {
    on_loop([&] {
      auto l = agent_->steps().list(::getuid(), 7);
      if (l && l->steps_size() > 0) state = l->steps(0).state();
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(state, "CANCELED");
  kill_job(7);
}

// One user's connections to the agent's own step protocol are counted; past the limit the
// next is told why, and a closed one frees its place.
TEST_F(StepManagerTest, StepSocketConnectionsAreLimitedPerUser) {
  StepSocketServer server(*loop_, *mgr_, 1 << 20, 2);
  std::vector<UniqueFd> clients;
  auto connect = [&](uint32_t uid) {
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    server.adopt(UniqueFd(sv[0]), uid);
    clients.emplace_back(sv[1]);
    return sv[1];
  };
  connect(kOwner);
  connect(kOwner);
  connect(0);  // root is not counted
  EXPECT_EQ(server.connections(), 3u);
  const int third = connect(kOwner);
  EXPECT_EQ(server.connections(), 3u);
  char buf[256];
  const ssize_t n = ::recv(third, buf, sizeof buf, MSG_DONTWAIT);
  ASSERT_GT(n, static_cast<ssize_t>(net::kStepFrameHeader));
  net::StepFrameReader reader(1024);
  reader.feed({buf, static_cast<size_t>(n)});
  auto f = reader.next();
  ASSERT_TRUE(f && *f);
  auto st = net::parse_step_status((*f)->payload);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->code, 8);
  EXPECT_EQ(st->message,
            "too many step connections from uid " + std::to_string(kOwner) + " on this agent (at most 2 at once)");
  clients.front().reset();  // gone: its place is free once the loop sees it
  ASSERT_TRUE(test::run_loop_until(*loop_, [&] { return server.connections() == 2; }));
  connect(kOwner);
  EXPECT_EQ(server.connections(), 3u);
}

// A client's calls one after another go over one connection; one that sent more than
// `create` (stdin) is not kept, since what it sent could still be on its way.
TEST_F(StepServiceTest, OneConnectionCarriesOneCallAfterAnother) {
  start_holding(8);
  cli::StepClient client(agent_->config().step_uri, 8);
  for (const char* word : {"one", "two", "three"}) {
    auto r = socket_run(client, 8, {"/bin/echo", word});
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    EXPECT_EQ(r.out, std::string(word) + "\n");
    EXPECT_EQ(socket_connections(), 1u);  // kept, idle, for the next
  }
  {
    auto with_stdin = client.run(true_step(8, {"cat"}));
    ASSERT_TRUE(with_stdin) << with_stdin.message();
    v1::StepClientMessage data;
    data.set_stdin("typed\n");
    data.set_stdin_eof(true);
    ASSERT_TRUE((*with_stdin)->send(data));
    for (v1::StepServerMessage m; (*with_stdin)->read(m);) {}
    EXPECT_TRUE((*with_stdin)->finish().ok());
  }  // its connection closes with it
  EXPECT_TRUE(test::wait_until([&] { return socket_connections() == 0u; }, 10));
  EXPECT_EQ(socket_run(client, 8, {"/bin/echo", "again"}).out, "again\n");  // a new connection
}

// `corral`'s StepClient over the agent's own protocol (no gRPC), beside gRPC on one socket.
TEST_F(StepServiceTest, RunStepOverTheAgentsOwnProtocol) {
  start_holding(8);
  auto hello = socket_run(8, {"/bin/echo", "hello"});
  ASSERT_TRUE(hello.opened) << hello.status.message();
  EXPECT_TRUE(hello.status.ok()) << hello.status.message();
  EXPECT_TRUE(hello.created);
  EXPECT_EQ(hello.out, "hello\n");
  EXPECT_EQ(hello.state, "COMPLETED");
  auto r = run(true_step(8, {"/bin/echo", "grpc"}));  // gRPC on the same socket
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.output(), "grpc\n");

  // A client that goes away ends its step, as over gRPC.
  cli::StepClient client(agent_->config().step_uri, 8);
  auto sleeper = client.run(true_step(8, {"sleep", "30"}));
  ASSERT_TRUE(sleeper) << sleeper.message();
  v1::StepServerMessage m;
  ASSERT_TRUE((*sleeper)->read(m));
  EXPECT_TRUE(m.has_created());
  (*sleeper)->cancel();
  std::string sleeper_state;
  ASSERT_TRUE(test::wait_until([&] {
    on_loop([&] {
      auto l = agent_->steps().list(::getuid(), 8);
      if (l)
        for (const auto& s : l->steps())
          if (s.command() == "sleep 30") sleeper_state = s.state();
    });
    return sleeper_state == "CANCELED";
  })) << sleeper_state;
  kill_job(8);
}

// A client that stops reading while its step prints is taken for gone on both transports
// (the step ends) instead of the agent holding the output without bound.
TEST_F(StepServiceTest, AClientThatDoesNotReadItsOutputIsTakenForGone) {
  service_->set_max_unread_output(1 << 20);
  on_loop([&] { socket_->set_max_unread_output(1 << 20); });
  job::JobRequest jr;
  jr.command = {"sleep", "30"};
  on_loop([&] { start(12, jr); });
  auto state_of = [&](const std::string& command) {
    std::string state;
    on_loop([&] {
      if (auto l = agent_->steps().list(::getuid(), 12); l)
        for (const auto& s : l->steps())
          if (s.command() == command) state = s.state();
    });
    return state;
  };
  const std::vector<std::string> flood = {"/bin/sh", "-c", "head -c 200000000 /dev/zero; sleep 30"};
  // gRPC: the call is opened and never read.
  grpc::ClientContext ctx;
  auto stream = stub_->RunStep(&ctx);
  v1::StepClientMessage m;
  *m.mutable_create() = true_step(12, flood);
  ASSERT_TRUE(stream->Write(m));
  const std::string command = "/bin/sh -c head -c 200000000 /dev/zero; sleep 30";
  EXPECT_TRUE(test::wait_until([&] { return state_of(command) == "CANCELED"; }, 30)) << state_of(command);
  ctx.TryCancel();
  // The agent's own protocol: the same, by hand.
  *m.mutable_create() = true_step(12, {"/bin/sh", "-c", "head -c 200000001 /dev/zero; sleep 30"});
  std::string frame;
  net::append_step_frame(frame, net::kStepFrameMessage, m.SerializeAsString());
  UniqueFd fd = raw_connect(frame);
  const std::string second = "/bin/sh -c head -c 200000001 /dev/zero; sleep 30";
  EXPECT_TRUE(test::wait_until([&] { return state_of(second) == "CANCELED"; }, 30)) << state_of(second);
  kill_job(12);
}

// Hand-written frames: each refusal is a status frame with the reason; the agent serves on.
TEST_F(StepServiceTest, TheAgentsOwnProtocolRefusesMalformedFrames) {
  auto exchange = [&](const std::string& bytes) {
    UniqueFd fd = raw_connect(bytes);
    net::StepFrameReader reader(1 << 20);
    char buf[4096];
    for (;;) {
      auto f = reader.next();
      if (!f) return std::string("bad frame from the agent: ") + f.message();
      if (*f && (*f)->type == net::kStepFrameStatus) {
        auto st = net::parse_step_status((*f)->payload);
        return st ? std::to_string(st->code) + " " + st->message : st.message();
      }
      if (*f) continue;
      const ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
      if (n <= 0) return std::string("closed without a status");
      reader.feed({buf, static_cast<size_t>(n)});
    }
  };
  std::string unknown(1, '\x09');
  unknown += std::string("\0\0\0\0", 4);
  EXPECT_EQ(exchange(unknown), "3 step protocol: unknown frame type 9");
  EXPECT_EQ(exchange(std::string("\x01\xff\xff\xff\xff", 5)),
            "3 step protocol: a frame of 4294967295 bytes is over the limit of 1048576");
  std::string junk;
  net::append_step_frame(junk, net::kStepFrameMessage, "\xff\xff\xff");
  EXPECT_EQ(exchange(junk), "3 step protocol: a malformed message");
  v1::StepClientMessage no_create;
  no_create.set_signal(9);
  std::string first;
  net::append_step_frame(first, net::kStepFrameMessage, no_create.SerializeAsString());
  EXPECT_EQ(exchange(first), "3 the first RunStep message must carry `create`");
  v1::StepClientMessage unknown_job;
  *unknown_job.mutable_create() = true_step(404);
  std::string early;
  net::append_step_frame(early, net::kStepFrameMessage, unknown_job.SerializeAsString());
  // (job 404 never starts here: its request waits for it, as over gRPC, until the client goes)
  size_t before = 0, during = 0;
  on_loop([&] { before = socket_->connections(); });
  UniqueFd idle = raw_connect(early);
  ASSERT_TRUE(test::wait_until([&] {
    on_loop([&] { during = socket_->connections(); });
    return during == before + 1;
  }));
  idle.reset();  // gone: the connection and its parked request go
  ASSERT_TRUE(test::wait_until([&] {
    size_t parked = 1;
    on_loop([&] {
      during = socket_->connections();
      parked = agent_->steps().parked_opens();
    });
    return during == before && parked == 0;
  }));
  // A bad frame after `create` ends the running step too: nobody would read it any more.
  start_holding(10);
  v1::StepClientMessage sleeper;
  *sleeper.mutable_create() = true_step(10, {"sleep", "30"});
  std::string then_junk;
  net::append_step_frame(then_junk, net::kStepFrameMessage, sleeper.SerializeAsString());
  net::append_step_frame(then_junk, 9, "");
  EXPECT_EQ(exchange(then_junk), "3 step protocol: unknown frame type 9");
  std::string state;
  EXPECT_TRUE(test::wait_until([&] {
    on_loop([&] {
      if (auto l = agent_->steps().list(::getuid(), 10); l && l->steps_size() > 0) state = l->steps(0).state();
    });
    return state == "CANCELED";
  })) << state;
  kill_job(10);
  // The agent still serves.
  start_holding(9);
  EXPECT_EQ(socket_run(9, {"/bin/echo", "still here"}).out, "still here\n");
  kill_job(9);
}

// A job's own tasks on two nodes share PMI puts through the step manager's JobFence.
TEST_F(StepServiceTest, JobTasksExchangePmiPutsAcrossNodes) {
  const char* script =
      "fd=$PMI_FD; r=$CORRAL_TASK_RANK; o=$((1 - r))\n"
      "echo 'cmd=init pmi_version=1 pmi_subversion=1' >&$fd; read -r l <&$fd\n"
      "echo \"cmd=put kvsname=corral_9 key=k$r value=v$r\" >&$fd; read -r l <&$fd\n"
      "echo 'cmd=barrier_in' >&$fd; read -r l <&$fd\n"
      "echo \"cmd=get kvsname=corral_9 key=k$o\" >&$fd; read -r l <&$fd; echo \"$r: $l\"\n"
      "echo 'cmd=finalize' >&$fd; read -r l <&$fd\n";
  job::JobRequest jr;
  jr.command = {"/bin/bash", "-c", script};  // dash refuses descriptors above 9
  jr.cwd = "/";
  jr.environment = {{"PATH", "/usr/bin:/bin"}};
  auto js = job::build_jobspec(jr);
  ASSERT_TRUE(js) << js.message();
  v1::ControllerMessage m;
  auto* s = m.add_start();
  s->set_jobid(9);
  s->set_userid(::getuid());
  s->set_groupid(::getgid());
  s->set_jobspec(job::jobspec_to_string(*js));
  s->set_nodelist("n[1-2]");
  s->set_total_nodes(2);
  s->set_total_tasks(2);
  s->set_exec_nodes(2);
  s->set_stepmgr(agent_->config().step_uri);
  s->set_step_key(wrapped_step_key(9));
  for (uint32_t i = 0; i < 2; ++i) {
    auto* t = s->add_tasks();
    t->set_node("n" + std::to_string(i + 1));
    t->set_node_index(i);
    t->set_first_rank(i);
    t->set_ntasks(1);
    t->set_cores("0-3");
    auto* jn = s->add_job_nodes();
    jn->set_name(t->node());
    jn->set_cores("0-3");
  }
  on_loop([&] { agent_->handle(m); });
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  size_t n = 0;
  while (n < 2 && std::chrono::steady_clock::now() < deadline) {
    on_loop([&] { n = exits(9).size(); });
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::string out, err;
  on_loop([&] {
    out = job_output(9);
    for (const auto& msg : sent_)
      for (const auto& o : msg.output())
        if (o.jobid() == 9 && o.stderr()) err += o.data();
    for (const auto& e : exits(9)) err += e.error() + " ws=" + std::to_string(e.waitstatus()) + "\n";
  });
  ASSERT_EQ(n, 2u) << out << err;
  SCOPED_TRACE(err);
  EXPECT_NE(out.find("0: cmd=get_result rc=0 value=v1"), std::string::npos) << out;
  EXPECT_NE(out.find("1: cmd=get_result rc=0 value=v0"), std::string::npos) << out;
}

// Not a benchmark, but a guard against gross regressions (the target is 1000 steps/s).
TEST_F(StepServiceTest, SequentialStepsThroughOneConnection) {
  job::JobRequest jr;
  jr.command = {"sleep", "60"};
  on_loop([&] { start(8, jr); });
  const int n = 200;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    auto r = run(true_step(8));
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    ASSERT_NE(r.exit(), nullptr);
    ASSERT_EQ(r.exit()->state(), "COMPLETED") << r.exit()->error();
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%d sequential steps in %.3f s: %.0f steps/s\n", n, secs, n / secs);
  kill_job(8);
}

}  // namespace
}  // namespace corral::node
