// The node side of job steps with real processes: two "agents" (a StepNode on its own
// event loop each), the second behind a LaunchTasks server on a Unix socket, the first as
// the root of the launch tree, as the step manager uses it. The test reaps children itself
// (wait4) and hands them to the TaskSupervisor's on_child_exit, as the agent does.
#include "node/steps/step_node.h"
#include "agent.pb.h"
#include "steps.grpc.pb.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "job/hmac_key.h"
#include "job/key_wrap.h"
#include "job/step_cred.h"
#include "node/exec/agent_config.h"
#include "node/exec/task_supervisor.h"
#include "node/pmi/pmi_server.h"
#include "node/steps/job_keys.h"
#include "node/steps/step_launch_rpc.h"
#include "node/steps/step_tasks.h"
#include "temp_dir.h"
#include "test_programs.h"
#include "util/event_loop.h"

extern char** environ;

namespace corral::node {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using test::run_command;
using test::test_data_dir;
using ::testing::HasSubstr;

constexpr uint64_t kJob = 42;
constexpr uint32_t kStep = 3;
const std::string kClusterKey = "0123456789abcdef0123456789abcdef";

double now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

// The launch service of one test agent: only LaunchTasks.
class LaunchService final : public v1::StepService::Service {
 public:
  LaunchService(EventLoop& loop, StepNode& node) : loop_(loop), node_(node) {}
  grpc::Status LaunchTasks(grpc::ServerContext* ctx,
                           grpc::ServerReaderWriter<v1::LaunchUp, v1::LaunchDown>* stream) override {
    return serve_launch_tasks(loop_, node_, ctx, stream);
  }

 private:
  EventLoop& loop_;
  StepNode& node_;
};

// One node agent: a loop on its own thread hosting `nodes`, optionally serving LaunchTasks.
class TestAgent {
 public:
  // `imp`: run other users' tasks through this corral-imp, as an agent started as root.
  // `keys`: the job keys a controller sent (for an agent without a cluster key).
  TestAgent(std::vector<std::string> nodes, std::string uri, std::string key, std::string imp = "",
            const JobKeys* keys = nullptr)
      : uri_(std::move(uri)) {
    config_.agent_id = "agent-" + nodes.front();
    config_.as_root = !imp.empty();
    config_.imp_path = std::move(imp);
    for (auto& n : nodes) config_.nodes.push_back(NodeHardware{n, 4, 0, 1024, {}});
    config_.controller_uri = "unix:/nonexistent/corrald.sock";
    auto l = EventLoop::create();
    EXPECT_TRUE(l.ok()) << l.message();
    loop_ = std::move(*l);
    tasks_ = std::make_unique<TaskSupervisor>(*loop_);
    node_ = std::make_unique<StepNode>(*loop_, *tasks_, config_, StepNodeConfig{std::move(key), uri_, 5.0, keys});
    thread_ = std::thread([this] { loop_->run(); });
  }
  template <class F>
  auto on_loop(F f) {
    std::promise<decltype(f())> p;
    auto fut = p.get_future();
    loop_->post([&] { p.set_value(f()); });
    return fut.get();
  }

  ~TestAgent() {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + 2s);
    on_loop([this] {
      node_->kill_all(SIGKILL);
      return 0;
    });
    loop_->post([this] { loop_->stop(); });
    thread_.join();
    node_.reset();
  }

  void serve() {
    service_ = std::make_unique<LaunchService>(*loop_, *node_);
    grpc::ServerBuilder b;
    b.AddListeningPort(uri_, grpc::InsecureServerCredentials());
    b.RegisterService(service_.get());
    server_ = b.BuildAndStart();
    ASSERT_TRUE(server_) << "cannot serve on " << uri_;
  }

  EventLoop& loop() { return *loop_; }
  StepNode& node() { return *node_; }
  TaskSupervisor& tasks() { return *tasks_; }
  const std::string& uri() const { return uri_; }

 private:
  std::string uri_;
  AgentConfig config_;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<TaskSupervisor> tasks_;
  std::unique_ptr<StepNode> node_;
  std::thread thread_;
  std::unique_ptr<LaunchService> service_;
  std::unique_ptr<grpc::Server> server_;
};

// What the root of the tree reported, gathered for the test thread.
struct Report {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::string error;
  std::map<uint32_t, std::string> out, err;
  std::map<uint32_t, int> exits;
  std::map<uint32_t, double> cpu;
  std::vector<std::string> started;
  std::vector<v1::NodeError> errors;
  std::vector<std::string> aborts;
  std::vector<v1::PmiFence> fences;

  void add(v1::LaunchUp&& up) {
    std::lock_guard lock(mu);
    for (auto& s : up.started()) started.push_back(s);
    for (auto& e : up.errors()) errors.push_back(e);
    for (auto& o : up.output()) (o.stderr() ? err : out)[o.rank()] += o.data();
    for (auto& x : up.exits()) {
      EXPECT_EQ(exits.count(x.rank()), 0u) << "rank " << x.rank() << " exited twice";
      exits[x.rank()] = x.waitstatus();
      cpu[x.rank()] = x.cpu_seconds();
    }
    for (auto& a : up.pmi_aborts()) aborts.push_back(a);
    if (up.has_fence()) fences.push_back(up.fence());
    cv.notify_all();
  }
  bool wait(const std::function<bool()>& cond, std::chrono::milliseconds timeout = 8000ms) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, timeout, cond);
  }
  bool wait_done(std::chrono::milliseconds timeout = 8000ms) {
    return wait([this] { return done; }, timeout);
  }
  void reset() {
    std::lock_guard lock(mu);
    done = false;
    error.clear();
    out.clear();
    err.clear();
    exits.clear();
    cpu.clear();
    started.clear();
    errors.clear();
    aborts.clear();
    fences.clear();
  }
};

// corral-imp next to this test binary (both land in the build's bin/).
std::string imp_path() { return (fs::read_symlink("/proc/self/exe").parent_path() / "corral-imp").string(); }

struct NodeSpec {
  std::string name;
  TestAgent* agent;
  uint32_t ntasks;
  std::string cores = "0-1";
};

class StepNodeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ::signal(SIGPIPE, SIG_IGN); }

  void SetUp() override {
    a_ = std::make_unique<TestAgent>(std::vector<std::string>{"n1"}, "unix:" + tmp_.str() + "/a.sock", kClusterKey);
    b_ = std::make_unique<TestAgent>(std::vector<std::string>{"n2"}, "unix:" + tmp_.str() + "/b.sock", kClusterKey);
    b_->serve();
    reaper_ = std::thread([this] { reap_loop(); });
  }
  void TearDown() override {
    a_.reset();
    b_.reset();
    stop_reaper_ = true;
    reaper_.join();
  }

  // SIGCHLD handling of the agents: whoever started the pid gets its exit.
  void reap_loop() {
    while (!stop_reaper_) {
      int status = 0;
      struct rusage ru {};
      pid_t pid = ::wait4(-1, &status, WNOHANG, &ru);
      if (pid <= 0) {
        std::this_thread::sleep_for(5ms);
        continue;
      }
      double cpu = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                   static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
      TestAgent* a = a_.get();
      TestAgent* b = b_.get();
      // b first: only a is given spawn threads, and a supervisor with spawns being started
      // keeps every unknown exit (it may be theirs).
      b->loop().post([a, b, pid, status, cpu] {
        if (!b->tasks().on_child_exit(pid, status, cpu))
          a->loop().post([a, pid, status, cpu] { a->tasks().on_child_exit(pid, status, cpu); });
      });
    }
  }

  job::StepCred cred() const {
    job::StepCred c;
    c.jobid = kJob;
    c.stepid = kStep;
    c.uid = cred_user_ ? *cred_user_ : ::getuid();
    c.gid = cred_user_ ? *cred_user_ : ::getgid();
    c.nodes = "n[1-2]";
    c.cores["n1"] = IdSet::range(0, 3);
    c.cores["n2"] = IdSet::range(0, 3);
    c.issued = now();
    c.expires = c.issued + 60;
    c.nonce = ++nonce_;
    c.launch_digest = digest_;
    return c;
  }
  static std::string sign(const job::StepCred& c, const std::string& cluster_key = kClusterKey) {
    return job::sign_step_cred(c, job::derive_job_key(cluster_key, c.jobid));
  }

  v1::LaunchTasksRequest request(std::vector<std::string> argv, const std::vector<NodeSpec>& nodes) {
    v1::LaunchTasksRequest r;
    r.set_jobid(kJob);
    r.set_stepid(kStep);
    for (auto& a : argv) r.add_argv(a);
    for (char** e = environ; *e; ++e)
      if (std::strchr(*e, '=') != nullptr) r.add_env(*e);
    r.set_cwd(tmp_.str());
    uint32_t rank = 0;
    std::vector<int> per_node;
    std::vector<std::string> names;
    for (size_t i = 0; i < nodes.size(); ++i) {
      auto* n = r.add_nodes();
      n->set_name(nodes[i].name);
      n->set_agent(nodes[i].agent ? nodes[i].agent->uri() : "unix:" + tmp_.str() + "/nobody.sock");
      n->set_node_index(static_cast<uint32_t>(i));
      n->set_first_rank(rank);
      n->set_ntasks(nodes[i].ntasks);
      n->set_cores(nodes[i].cores);
      rank += nodes[i].ntasks;
      per_node.push_back(static_cast<int>(nodes[i].ntasks));
      names.push_back(nodes[i].name);
    }
    r.set_total_tasks(rank);
    r.set_total_nodes(static_cast<uint32_t>(nodes.size()));
    r.set_step_nodelist(nodes.size() == 2 ? "n[1-2]" : nodes[0].name);
    r.set_pmi_mapping(pmi_block_process_mapping(per_node));
    r.set_kvsname("corral_42_3");
    r.set_stepmgr("unix:/run/corral/stepmgr.sock");
    r.set_job_name("steptest");
    digest_ = launch_digest(r);  // cred() covers this request (signed in launch() when unset)
    return r;
  }

  // The root plays step manager too: a barrier that went up (merged over every node)
  // comes back down with everyone's puts.
  StepNode::LaunchId launch(v1::LaunchTasksRequest req) {
    if (req.cred().empty()) {  // the step manager signs what the request finally runs
      digest_ = launch_digest(req);
      req.set_cred(sign(cred()));
    }
    return a_->on_loop([&] {
      id_ = a_->node().launch(
          std::move(req),
          [this](v1::LaunchUp&& up) {
            if (up.has_fence()) {
              v1::LaunchDown down;
              *down.mutable_fence() = up.fence();
              down.mutable_fence()->set_nodes(0);
              a_->loop().post([this, down] { a_->node().deliver(id_, down); });
            }
            report_.add(std::move(up));
          },
          [this](const std::string& error) {
            std::lock_guard lock(report_.mu);
            EXPECT_FALSE(report_.done) << "done called twice";
            report_.done = true;
            report_.error = error;
            report_.cv.notify_all();
          });
      return id_;
    });
  }
  // Agent a starts tasks on `n` spawn threads from now on (its supervisor's setting is
  // the loop's to change).
  void use_spawn_threads(unsigned n) {
    a_->on_loop([&] {
      a_->tasks().set_spawn_helpers(n);
      return 0;
    });
  }
  void deliver(StepNode::LaunchId id, v1::LaunchDown down) {
    a_->loop().post([this, id, down = std::move(down)] { a_->node().deliver(id, down); });
  }
  // Launches `req` on `agent` and signals it in the same turn of its loop, before any of
  // its tasks could start.
  void launch_and_signal(TestAgent& agent, v1::LaunchTasksRequest req, int sig) {
    digest_ = launch_digest(req);
    req.set_cred(sign(cred()));
    agent.on_loop([&] {
      auto id = agent.node().launch(
          std::move(req), [this](v1::LaunchUp&& up) { report_.add(std::move(up)); },
          [this](const std::string& error) {
            std::lock_guard lock(report_.mu);
            report_.done = true;
            report_.error = error;
            report_.cv.notify_all();
          });
      v1::LaunchDown down;
      down.set_signal(sig);
      agent.node().deliver(id, down);
      return 0;
    });
  }

  test::TempDir tmp_{"corral-step-node"};
  std::string digest_;                 // of the last request built or launched
  std::optional<uint32_t> cred_user_;  // the credential's uid and gid, when not ours
  mutable uint64_t nonce_ = 0;
  std::unique_ptr<TestAgent> a_, b_;
  std::thread reaper_;
  std::atomic<bool> stop_reaper_{false};
  Report report_;
  StepNode::LaunchId id_ = 0;  // loop A only
};

TEST_F(StepNodeTest, TwoAgentsRunEveryRank) {
  launch(request({"/bin/sh", "-c", "echo $CORRAL_TASK_RANK"}, {{"n1", a_.get(), 2}, {"n2", b_.get(), 2}}));
  ASSERT_TRUE(report_.wait_done());
  std::lock_guard lock(report_.mu);
  EXPECT_EQ(report_.error, "");
  EXPECT_TRUE(report_.errors.empty()) << report_.errors[0].message();
  EXPECT_THAT(report_.started, ::testing::UnorderedElementsAre("n1", "n2"));
  ASSERT_EQ(report_.exits.size(), 4u);
  for (uint32_t r = 0; r < 4; ++r) {
    EXPECT_EQ(report_.out[r], std::to_string(r) + "\n") << "rank " << r;
    EXPECT_EQ(report_.exits[r], 0) << "rank " << r;
  }
  EXPECT_EQ(a_->on_loop([&] { return a_->tasks().live(); }), 0u);
}

// With spawn threads, a node's tasks start side by side: every rank runs once with its
// own environment and PMI connection; a missing command fails each rank.
TEST_F(StepNodeTest, TasksStartSideBySideOnSpawnThreads) {
  use_spawn_threads(3);
  launch(request({"/bin/sh", "-c", "echo $CORRAL_TASK_RANK $PMI_RANK"}, {{"n1", a_.get(), 12}}));
  ASSERT_TRUE(report_.wait_done());
  {
    std::lock_guard lock(report_.mu);
    EXPECT_TRUE(report_.errors.empty()) << report_.errors[0].message();
    EXPECT_THAT(report_.started, ::testing::ElementsAre("n1"));
    ASSERT_EQ(report_.exits.size(), 12u);
    for (uint32_t r = 0; r < 12; ++r) {
      EXPECT_EQ(report_.out[r], std::to_string(r) + " " + std::to_string(r) + "\n") << "rank " << r;
      EXPECT_EQ(report_.exits[r], 0) << "rank " << r;
    }
  }
  EXPECT_EQ(a_->on_loop([&] { return a_->tasks().live(); }), 0u);
}

TEST_F(StepNodeTest, OnSpawnThreadsAMissingCommandFailsEachRank) {
  use_spawn_threads(3);
  launch(request({"/nonexistent/program"}, {{"n1", a_.get(), 4}}));
  ASSERT_TRUE(report_.wait_done());
  std::lock_guard lock(report_.mu);
  ASSERT_EQ(report_.errors.size(), 1u);
  EXPECT_THAT(report_.errors[0].message(), HasSubstr("cannot execute '/nonexistent/program'"));
  ASSERT_EQ(report_.exits.size(), 4u);
  for (uint32_t r = 0; r < 4; ++r) EXPECT_EQ(WEXITSTATUS(report_.exits[r]), 127) << "rank " << r;
  EXPECT_EQ(a_->on_loop([&] { return a_->tasks().live(); }), 0u);
}

// Tasks queued to start when a signal ends the step get it as they start.
TEST_F(StepNodeTest, QueuedTasksGetTheSignalThatEndedTheStep) {
  use_spawn_threads(2);
  // In the same turn: the tasks are queued, none started.
  launch_and_signal(*a_, request({"sleep", "30"}, {{"n1", a_.get(), 6}}), SIGTERM);
  ASSERT_TRUE(report_.wait_done(5000ms));
  std::lock_guard lock(report_.mu);
  ASSERT_EQ(report_.exits.size(), 6u);
  for (auto [rank, status] : report_.exits)
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << "rank " << rank << " status " << status;
}

TEST_F(StepNodeTest, TasksSeeTheStepEnvironment) {
  auto req = request({"/bin/sh", "-c",
                      "echo $CORRAL_JOBID $CORRAL_STEPID $CORRAL_NODEID $CORRAL_NNODES $CORRAL_NTASKS "
                      "$CORRAL_JOB_CPUS $CORRAL_NODELIST $CORRAL_STEPMGR $CORRAL_LOCAL_RANK $PMI_RANK $PMI_SIZE "
                      "$FROM_CLIENT $HOOKED ${PMI_PORT:-noport}"},
                     {{"n1", a_.get(), 1}, {"n2", b_.get(), 1, "2-3"}});
  req.add_env("FROM_CLIENT=yes");
  req.add_env("PMI_PORT=stale:1");  // an outer launcher's: must not leak in
  (*req.mutable_extra_env())["HOOKED"] = "vni";
  launch(std::move(req));
  ASSERT_TRUE(report_.wait_done());
  std::lock_guard lock(report_.mu);
  EXPECT_EQ(report_.out[0], "42 3 0 2 2 0-1 n[1-2] unix:/run/corral/stepmgr.sock 0 0 2 yes vni noport\n");
  EXPECT_EQ(report_.out[1], "42 3 1 2 2 2-3 n[1-2] unix:/run/corral/stepmgr.sock 0 1 2 yes vni noport\n");
}

// Every refusal names its check, accounts for each rank with exit code 1, starts nothing.
class StepNodeRefusalTest : public StepNodeTest {
 protected:
  void expect_refused_again(v1::LaunchTasksRequest req, const std::string& text) {
    report_.reset();
    expect_refused(std::move(req), text);
  }
  void expect_refused(v1::LaunchTasksRequest req, const std::string& text) {
    launch(std::move(req));
    ASSERT_TRUE(report_.wait_done());
    std::lock_guard lock(report_.mu);
    ASSERT_EQ(report_.errors.size(), 1u);
    EXPECT_EQ(report_.errors[0].node(), "n1");
    EXPECT_THAT(report_.errors[0].message(), HasSubstr(text));
    EXPECT_TRUE(report_.started.empty());
    EXPECT_TRUE(report_.out.empty() && report_.err.empty()) << "a task ran";
    ASSERT_EQ(report_.exits.size(), 2u);
    EXPECT_EQ(report_.exits[0], 1 << 8);
    EXPECT_EQ(report_.exits[1], 1 << 8);
  }
  // Writes a file if a task ever runs.
  v1::LaunchTasksRequest marker_request() {
    return request({"/bin/sh", "-c", "touch " + tmp_.str() + "/ran"}, {{"n1", a_.get(), 2}});
  }
  void TearDown() override {
    EXPECT_FALSE(fs::exists(tmp_.path() / "ran")) << "a refused step started a task";
    StepNodeTest::TearDown();
  }
  JobKeys keys_;
};

TEST_F(StepNodeRefusalTest, ForgedWithAnotherKey) {
  auto req = marker_request();
  req.set_cred(sign(cred(), "fedcba9876543210fedcba9876543210"));
  expect_refused(std::move(req), "signature does not match");
}

TEST_F(StepNodeRefusalTest, AlteredToken) {
  auto req = marker_request();
  req.set_cred(sign(cred()));
  std::string token = req.cred();
  auto dot = token.find('.');
  auto payload = job::base64url_decode(token.substr(0, dot));
  ASSERT_TRUE(payload.ok());
  std::string changed = *payload;
  // More nodes (in the node list and the cores), same signature.
  size_t replaced = 0;
  for (auto at = changed.find("\"n[1-2]\""); at != std::string::npos; at = changed.find("\"n[1-2]\"", at)) {
    changed.replace(at, 8, "\"n[1-9]\"");
    ++replaced;
  }
  ASSERT_GT(replaced, 0u) << changed;
  req.set_cred(job::base64url_encode(changed) + token.substr(dot));
  expect_refused(std::move(req), "signature does not match (forged or altered)");
}

TEST_F(StepNodeRefusalTest, Expired) {
  auto req = marker_request();
  auto c = cred();
  c.issued = now() - 300;
  c.expires = c.issued + 60;
  req.set_cred(sign(c));
  expect_refused(std::move(req), "step credential expired");
}

TEST_F(StepNodeRefusalTest, AnotherUser) {
  auto req = marker_request();
  auto c = cred();
  c.uid = ::getuid() + 1;
  req.set_cred(sign(c));
  expect_refused(std::move(req), "cannot start tasks as another user");
}

TEST_F(StepNodeRefusalTest, AnotherNodeSet) {
  auto req = marker_request();
  auto c = cred();
  c.nodes = "n[5-6]";
  c.cores.clear();
  c.cores["n5"] = IdSet::range(0, 3);
  c.cores["n6"] = IdSet::range(0, 3);
  req.set_cred(sign(c));
  expect_refused(std::move(req), "does not include node n1");
}

TEST_F(StepNodeRefusalTest, AnotherJob) {
  auto req = marker_request();
  auto c = cred();
  c.jobid = 43;
  req.set_cred(sign(c));
  // The key is derived from the request's job, so the signature no longer matches: the
  // payload is never even read.
  expect_refused(std::move(req), "signature does not match");
}

TEST_F(StepNodeRefusalTest, AnotherStep) {
  auto req = marker_request();
  req.set_stepid(kStep + 1);
  expect_refused(std::move(req), "not step 42.4");
}

TEST_F(StepNodeRefusalTest, CoresNotGranted) {
  auto req = request({"/bin/sh", "-c", "touch " + tmp_.str() + "/ran"}, {{"n1", a_.get(), 2, "0-7"}});
  expect_refused(std::move(req), "cores 4-7 of node n1 are not granted");
}

TEST_F(StepNodeRefusalTest, ACredentialForAnotherCommand) {
  auto req = marker_request();
  req.set_cred(sign(cred()));
  // Someone who captured the request swaps the command (or the environment, or the cwd).
  req.set_argv(0, "/bin/bash");
  expect_refused(std::move(req), "does not cover this launch");
  auto env = marker_request();
  env.set_cred(sign(cred()));
  env.add_env("LD_PRELOAD=/tmp/evil.so");
  expect_refused_again(std::move(env), "does not cover this launch");
}

TEST_F(StepNodeRefusalTest, AgentWithoutKey) {
  a_.reset();
  a_ = std::make_unique<TestAgent>(std::vector<std::string>{"n1"}, "unix:" + tmp_.str() + "/a2.sock", "");
  expect_refused(marker_request(), "this agent has no key for job");
}

// Without a cluster key, the key the controller sent for the job checks its steps: one for
// another job does not.
TEST_F(StepNodeRefusalTest, AgentWithTheJobsKeysOnly) {
  const std::string session(32, 's');
  auto keyed = [&](uint64_t jobid) {
    v1::JobKey k;
    k.set_jobid(jobid);
    k.set_wrapped_key(*job::wrap_key(session, job::derive_job_key(kClusterKey, jobid)));
    return k;
  };
  keys_.set_session_key(session);
  ASSERT_TRUE(keys_.add(keyed(cred().jobid + 1)));
  a_.reset();
  a_ = std::make_unique<TestAgent>(std::vector<std::string>{"n1"}, "unix:" + tmp_.str() + "/a2.sock", "", "", &keys_);
  auto req = marker_request();
  req.set_cred(sign(cred()));
  expect_refused(std::move(req), "this agent has no key for job");
  ASSERT_TRUE(a_->on_loop([&] { return keys_.add(keyed(cred().jobid)).ok(); }));
  report_.reset();
  launch(request({"/bin/sh", "-c", "echo $CORRAL_TASK_RANK"}, {{"n1", a_.get(), 2}}));
  ASSERT_TRUE(report_.wait_done());
  std::lock_guard lock(report_.mu);
  EXPECT_TRUE(report_.errors.empty()) << report_.errors[0].message();
  EXPECT_EQ(report_.out[0], "0\n");
}

TEST_F(StepNodeTest, AReplayedRequestIsRefused) {
  auto req = request({"/bin/true"}, {{"n1", a_.get(), 1}});
  req.set_cred(sign(cred()));
  auto copy = req;
  launch(std::move(req));
  ASSERT_TRUE(report_.wait_done());
  {
    std::lock_guard lock(report_.mu);
    ASSERT_TRUE(report_.errors.empty());
    ASSERT_EQ(report_.exits.size(), 1u);
  }
  report_.reset();
  launch(std::move(copy));
  ASSERT_TRUE(report_.wait_done());
  std::lock_guard lock(report_.mu);
  ASSERT_EQ(report_.errors.size(), 1u);
  EXPECT_THAT(report_.errors[0].message(), HasSubstr("already used on this agent"));
}

TEST_F(StepNodeTest, RefusedChildNodeIsReportedThroughTheTree) {
  auto req = request({"/bin/true"}, {{"n1", a_.get(), 1}, {"n2", b_.get(), 2}});
  auto c = cred();
  c.nodes = "n1";
  c.cores.erase("n2");
  req.set_cred(sign(c));
  launch(std::move(req));
  ASSERT_TRUE(report_.wait_done());
  std::lock_guard lock(report_.mu);
  ASSERT_EQ(report_.errors.size(), 1u);
  EXPECT_EQ(report_.errors[0].node(), "n2");
  EXPECT_THAT(report_.errors[0].message(), HasSubstr("does not include node n2"));
  EXPECT_EQ(report_.exits, (std::map<uint32_t, int>{{0, 0}, {1, 1 << 8}, {2, 1 << 8}}));
}

TEST_F(StepNodeTest, UnreachableChildAgentFailsItsRanks) {
  launch(request({"/bin/true"}, {{"n1", a_.get(), 1}, {"n2", nullptr, 2}}));
  ASSERT_TRUE(report_.wait_done());
  std::lock_guard lock(report_.mu);
  ASSERT_EQ(report_.errors.size(), 1u);
  EXPECT_EQ(report_.errors[0].node(), "n2");
  EXPECT_THAT(report_.errors[0].message(), HasSubstr("nobody.sock"));
  EXPECT_EQ(report_.exits, (std::map<uint32_t, int>{{0, 0}, {1, 1 << 8}, {2, 1 << 8}}));
}

TEST_F(StepNodeTest, SignalReachesEveryTask) {
  auto id = launch(request({"sleep", "30"}, {{"n1", a_.get(), 1}, {"n2", b_.get(), 1}}));
  ASSERT_TRUE(report_.wait([&] { return report_.started.size() == 2; }));
  v1::LaunchDown down;
  down.set_signal(SIGTERM);
  deliver(id, down);
  ASSERT_TRUE(report_.wait_done(5000ms));
  std::lock_guard lock(report_.mu);
  ASSERT_EQ(report_.exits.size(), 2u);
  for (auto [rank, status] : report_.exits) {
    EXPECT_TRUE(WIFSIGNALED(status)) << "rank " << rank << " status " << status;
    EXPECT_EQ(WTERMSIG(status), SIGTERM) << "rank " << rank;
  }
}

// An agent starts one node's tasks per turn of its loop; a signal that ends the step
// while later nodes wait for their turn keeps them from starting.
TEST_F(StepNodeTest, NodesWaitingForTheirTurnDoNotStartAfterTheStepIsKilled) {
  b_.reset();
  b_ =
      std::make_unique<TestAgent>(std::vector<std::string>{"n2", "n3"}, "unix:" + tmp_.str() + "/b2.sock", kClusterKey);
  b_->serve();
  // In the same turn: n3 has not started yet.
  launch_and_signal(*b_, request({"sleep", "30"}, {{"n2", b_.get(), 1}, {"n3", b_.get(), 1}}), SIGKILL);
  ASSERT_TRUE(report_.wait_done(5000ms));
  std::lock_guard lock(report_.mu);
  ASSERT_EQ(report_.errors.size(), 1u);
  EXPECT_EQ(report_.errors[0].node(), "n3");
  EXPECT_THAT(report_.errors[0].message(), HasSubstr("ended (signal 9) before its tasks started"));
  ASSERT_EQ(report_.exits.size(), 2u);
  EXPECT_TRUE(WIFSIGNALED(report_.exits[0]) && WTERMSIG(report_.exits[0]) == SIGKILL) << report_.exits[0];
}

TEST_F(StepNodeTest, AbandonKillsTheSubtree) {
  auto id = launch(request({"sleep", "30"}, {{"n1", a_.get(), 1}, {"n2", b_.get(), 1}}));
  ASSERT_TRUE(report_.wait([&] { return report_.started.size() == 2; }));
  a_->loop().post([this, id] { a_->node().abandon(id); });
  ASSERT_TRUE(report_.wait_done(5000ms));
  {
    std::lock_guard lock(report_.mu);
    EXPECT_EQ(report_.exits.size(), 2u);
  }
  // The child agent sees its stream cancelled and kills its part too.
  size_t left = 1;
  for (int i = 0; i < 200 && left > 0; ++i) {
    left = b_->on_loop([&] { return b_->tasks().live(); });
    if (left > 0) std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(left, 0u);
}

TEST_F(StepNodeTest, StdinGoesToRankZeroOnItsAgent) {
  // Rank 0 lives on the child agent, so stdin travels down the tree.
  auto req = request({"cat"}, {{"n2", b_.get(), 1}, {"n1", a_.get(), 1}});
  req.set_stdin_open(true);
  auto id = launch(std::move(req));
  v1::LaunchDown in;
  in.set_stdin("hello ");
  deliver(id, in);
  in.set_stdin("world\n");
  in.set_stdin_eof(true);
  deliver(id, in);
  ASSERT_TRUE(report_.wait_done());
  std::lock_guard lock(report_.mu);
  EXPECT_EQ(report_.out[0], "hello world\n");
  EXPECT_EQ(report_.out[1], "");  // /dev/null
  EXPECT_EQ(report_.exits, (std::map<uint32_t, int>{{0, 0}, {1, 0}}));
}

TEST_F(StepNodeTest, RankZeroOnATerminal) {
  auto req =
      request({"/bin/sh", "-c", "read x; test -t 0 && test -t 1 && echo tty-ok; stty size"}, {{"n1", a_.get(), 1}});
  req.set_pty(true);
  req.set_stdin_open(true);
  auto id = launch(std::move(req));
  v1::LaunchDown down;
  down.mutable_winsize()->set_rows(40);
  down.mutable_winsize()->set_cols(100);
  deliver(id, down);
  v1::LaunchDown in;
  in.set_stdin("go\n");
  deliver(id, in);
  ASSERT_TRUE(report_.wait_done());
  std::lock_guard lock(report_.mu);
  EXPECT_THAT(report_.out[0], HasSubstr("tty-ok"));
  EXPECT_THAT(report_.out[0], HasSubstr("40 100"));
  EXPECT_EQ(report_.exits[0], 0) << report_.out[0];
}

TEST_F(StepNodeTest, LaunchStreamMustStartWithTheRequest) {
  auto channel = grpc::CreateChannel(b_->uri(), grpc::InsecureChannelCredentials());
  auto stub = v1::StepService::NewStub(channel);
  grpc::ClientContext ctx;
  auto stream = stub->LaunchTasks(&ctx);
  v1::LaunchDown down;
  down.set_stdin("no launch first");
  ASSERT_TRUE(stream->Write(down));
  stream->WritesDone();
  v1::LaunchUp up;
  EXPECT_FALSE(stream->Read(&up));
  grpc::Status st = stream->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("must carry `launch`"));
}

// As root with corral-imp: the credential's user runs the tasks, stdin and the terminal
// still reach rank 0.
class StepNodeAsRootTest : public StepNodeTest {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root";
    if (!fs::exists(imp_path())) GTEST_SKIP() << "corral-imp not built next to the test";
    StepNodeTest::SetUp();
    a_.reset();
    a_ = std::make_unique<TestAgent>(std::vector<std::string>{"n1"}, "unix:" + tmp_.str() + "/a2.sock", kClusterKey,
                                     imp_path());
  }
  v1::LaunchTasksRequest nobody_request(std::vector<std::string> argv, uint32_t ntasks) {
    auto req = request(std::move(argv), {{"n1", a_.get(), ntasks}});
    req.set_cwd("/");
    cred_user_ = 65534;  // launch() signs for nobody what the test finally asks for
    return req;
  }
};

TEST_F(StepNodeAsRootTest, TasksRunAsTheCredentialsUser) {
  auto req = nobody_request({"/bin/sh", "-c", "id -u; cat"}, 2);
  req.set_stdin_open(true);
  auto id = launch(std::move(req));
  v1::LaunchDown in;
  in.set_stdin("to rank 0\n");
  in.set_stdin_eof(true);
  deliver(id, in);
  ASSERT_TRUE(report_.wait_done());
  std::lock_guard lock(report_.mu);
  EXPECT_EQ(report_.out[0], "65534\nto rank 0\n") << report_.err[0];
  EXPECT_EQ(report_.out[1], "65534\n") << report_.err[1];
  EXPECT_EQ(report_.exits, (std::map<uint32_t, int>{{0, 0}, {1, 0}}));
}

TEST_F(StepNodeAsRootTest, TerminalThroughImp) {
  auto req = nobody_request({"/bin/sh", "-c", "read x; id -u; test -t 0 && test -t 2 && echo tty-ok; stty size"}, 1);
  req.set_pty(true);
  req.set_stdin_open(true);
  auto id = launch(std::move(req));
  v1::LaunchDown down;
  down.mutable_winsize()->set_rows(33);
  down.mutable_winsize()->set_cols(77);
  deliver(id, down);
  v1::LaunchDown in;
  in.set_stdin("go\n");
  deliver(id, in);
  ASSERT_TRUE(report_.wait_done());
  std::lock_guard lock(report_.mu);
  EXPECT_THAT(report_.out[0], HasSubstr("65534"));
  EXPECT_THAT(report_.out[0], HasSubstr("tty-ok"));
  EXPECT_THAT(report_.out[0], HasSubstr("33 77"));
  EXPECT_EQ(report_.exits[0], 0) << report_.out[0];
}

class StepNodeMpiTest : public StepNodeTest {
 protected:
  static void SetUpTestSuite() {
    StepNodeTest::SetUpTestSuite();
    dir_ = fs::temp_directory_path() / ("corral-step-mpi-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    program_ = dir_ / "pmi_ring";
    compiled_ =
        run_command({"mpicc.mpich", "-o", program_.string(), (test_data_dir() / "mpi" / "pmi_ring.c").string()});
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  static inline fs::path dir_, program_;
  static inline int compiled_ = -1;
};

TEST_F(StepNodeMpiTest, RingAcrossTwoAgents) {
  if (compiled_ == -1) GTEST_SKIP() << "mpicc.mpich not found (apt-get install libmpich-dev mpich)";
  ASSERT_EQ(compiled_, 0) << "mpicc.mpich could not build pmi_ring.c";
  launch(request({program_.string()}, {{"n1", a_.get(), 2}, {"n2", b_.get(), 2}}));
  ASSERT_TRUE(report_.wait_done(20000ms));
  std::lock_guard lock(report_.mu);
  EXPECT_TRUE(report_.errors.empty());
  EXPECT_TRUE(report_.aborts.empty()) << report_.aborts[0];
  ASSERT_EQ(report_.exits.size(), 4u);
  for (uint32_t r = 0; r < 4; ++r) {
    EXPECT_EQ(report_.exits[r], 0) << "rank " << r << ":\n" << report_.out[r] << report_.err[r];
    EXPECT_THAT(report_.out[r], HasSubstr("rank " + std::to_string(r) + " of 4"));
  }
  EXPECT_THAT(report_.out[0], HasSubstr("ring and allreduce ok"));
  // Every barrier went up once, merged over both nodes.
  ASSERT_GE(report_.fences.size(), 1u);
  for (const auto& f : report_.fences) EXPECT_EQ(f.nodes(), 2u);
}

}  // namespace
}  // namespace corral::node
