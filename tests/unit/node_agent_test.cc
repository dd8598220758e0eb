// The agent's job execution end to end, without a controller: controller messages go
// straight into Agent::handle and the batches it would send are collected.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent.pb.h"
#include "job/jobspec.h"
#include "loop_until.h"
#include "node/agent.h"

namespace corral::node {
namespace {

namespace fs = std::filesystem;

class NodeAgent : public ::testing::Test {
 protected:
  void SetUp() override { make_agent(false); }
  void make_agent(bool as_root) {
    agent_.reset();
    sent_.clear();
    // The agent reads SIGCHLD from a signalfd.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    dir_ = fs::temp_directory_path() / ("corral-agent-" + std::to_string(::getpid()));
    fs::create_directories(dir_ / "state");
    auto loop = EventLoop::create();
    ASSERT_TRUE(loop);
    loop_ = std::move(*loop);
    AgentConfig c;
    c.agent_id = "n[1-2]";
    c.nodes = {{"n1", 4, 0, 1024, {}}, {"n2", 4, 2, 1024, {}}};
    c.controller_uri = "unix:/tmp/test.sock";
    c.state_dir = (dir_ / "state").string();
    c.kill_grace = 0.2;
    c.handle_termination = false;
    c.as_root = as_root;
    c.imp_path = (fs::read_symlink("/proc/self/exe").parent_path() / "corral-imp").string();
    agent_ = std::make_unique<Agent>(*loop_, c, [this](uint64_t, v1::AgentMessage&& m) { sent_.push_back(m); });
    ASSERT_TRUE(agent_->start());
    auto reg = agent_->begin_register(1);
    EXPECT_EQ(reg.register_().agent_id(), "n[1-2]");
    EXPECT_EQ(reg.register_().nodes_size(), 2);
    v1::ControllerMessage ack;
    ack.set_register_ack(true);
    agent_->on_registered(1, ack);
  }
  void TearDown() override {
    agent_.reset();
    fs::remove_all(dir_);
  }

  bool run_until(const std::function<bool()>& done, double seconds = 10) {
    return test::run_loop_until(*loop_, done, seconds);
  }

  static std::string spec(job::JobRequest req) {
    if (req.cwd.empty()) req.cwd = "/";
    auto s = job::build_jobspec(req);
    EXPECT_TRUE(s) << s.message();
    return job::jobspec_to_string(*s);
  }
  static job::JobRequest command(std::vector<std::string> argv) {
    job::JobRequest r;
    r.command = std::move(argv);
    r.environment = {{"PATH", "/usr/bin:/bin"}};
    return r;
  }

  void start(uint64_t id, const std::string& jobspec, std::vector<std::tuple<std::string, uint32_t, uint32_t>> nodes,
             uint32_t total_tasks = 1, uint32_t uid = ::getuid(), uint32_t gid = ::getgid(), uint32_t attempt = 0) {
    v1::ControllerMessage m;
    auto* s = m.add_start();
    s->set_jobid(id);
    s->set_attempt(attempt);
    s->set_userid(uid);
    s->set_groupid(gid);
    s->set_jobspec(jobspec);
    s->set_nodelist("n[1-2]");
    s->set_total_nodes(static_cast<uint32_t>(nodes.size()));
    s->set_total_tasks(total_tasks);
    uint32_t index = 0;
    for (auto& [name, first, n] : nodes) {
      auto* t = s->add_tasks();
      t->set_node(name);
      t->set_node_index(index++);
      t->set_first_rank(first);
      t->set_ntasks(n);
      t->set_cores("0-1");
    }
    (*s->mutable_extra_env())["EXTRA"] = "yes";
    agent_->handle(m);
  }
  void signal(uint64_t id, int sig, double kill_after = 0, uint32_t attempt = 0) {
    v1::ControllerMessage m;
    auto* s = m.add_signal();
    s->set_jobid(id);
    s->set_attempt(attempt);
    s->set_signal(sig);
    s->set_kill_after(kill_after);
    agent_->handle(m);
  }

  std::vector<v1::JobNodeExit> exits(uint64_t id) const {
    std::vector<v1::JobNodeExit> out;
    for (const auto& m : sent_)
      for (const auto& e : m.exited())
        if (e.jobid() == id) out.push_back(e);
    return out;
  }
  bool started(uint64_t id, const std::string& node) const {
    for (const auto& m : sent_)
      for (const auto& s : m.started())
        if (s.jobid() == id && s.node() == node) return true;
    return false;
  }
  // All output of one stream, and whether its eof arrived.
  std::pair<std::string, bool> output(uint64_t id, uint32_t rank, bool is_err) const {
    std::string data;
    bool eof = false;
    for (const auto& m : sent_)
      for (const auto& o : m.output())
        if (o.jobid() == id && o.rank() == rank && o.stderr() == is_err) {
          data += o.data();
          eof |= o.eof();
        }
    return {data, eof};
  }
  std::function<bool()> exited(uint64_t id, size_t nodes = 1) {
    return [this, id, nodes] { return exits(id).size() >= nodes; };
  }

  fs::path dir_;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<Agent> agent_;
  std::vector<v1::AgentMessage> sent_;
};

TEST_F(NodeAgent, RunsACommandAndStreamsItsOutput) {
  start(1, spec(command({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"})), {{"n1", 0, 1}});
  ASSERT_TRUE(run_until(exited(1)));
  EXPECT_TRUE(started(1, "n1"));
  auto e = exits(1).at(0);
  EXPECT_EQ(e.node(), "n1");
  EXPECT_EQ(e.waitstatus(), 3 << 8);
  ASSERT_EQ(e.tasks_size(), 1);
  EXPECT_EQ(e.tasks(0).waitstatus(), 3 << 8);
  EXPECT_EQ(e.error(), "");
  EXPECT_EQ(output(1, 0, false), std::make_pair(std::string("out\n"), true));
  EXPECT_EQ(output(1, 0, true), std::make_pair(std::string("err\n"), true));
}

TEST_F(NodeAgent, TasksGetTheirEnvironment) {
  start(2,
        spec(command({"/bin/sh", "-c",
                      "echo $CORRAL_JOBID $CORRAL_NODENAME $CORRAL_NODEID $CORRAL_TASK_RANK $CORRAL_LOCAL_RANK "
                      "$CORRAL_NTASKS $CORRAL_NNODES $CORRAL_CPUS_ON_NODE $EXTRA $CORRAL_URI"})),
        {{"n1", 0, 2}, {"n2", 2, 1}}, 3);
  ASSERT_TRUE(run_until(exited(2, 2)));
  EXPECT_EQ(output(2, 0, false).first, "2 n1 0 0 0 3 2 2 yes unix:/tmp/test.sock\n");
  EXPECT_EQ(output(2, 1, false).first, "2 n1 0 1 1 3 2 2 yes unix:/tmp/test.sock\n");
  EXPECT_EQ(output(2, 2, false).first, "2 n2 1 2 0 3 2 2 yes unix:/tmp/test.sock\n");
  for (const auto& e : exits(2)) EXPECT_EQ(e.waitstatus(), 0);
}

TEST_F(NodeAgent, CommandNotFound) {
  start(3, spec(command({"no-such-command-corral"})), {{"n1", 0, 1}});
  ASSERT_TRUE(run_until(exited(3)));
  auto e = exits(3).at(0);
  EXPECT_EQ(e.waitstatus(), 127 << 8);
  EXPECT_EQ(e.error(), "corral-node: n1: job 3: cannot execute 'no-such-command-corral': No such file or directory");
  EXPECT_EQ(output(3, 0, true), std::make_pair(e.error() + "\n", true));
  EXPECT_TRUE(output(3, 0, false).second);
}

TEST_F(NodeAgent, MissingCwd) {
  auto req = command({"true"});
  req.cwd = (dir_ / "nowhere").string();
  start(4, spec(req), {{"n1", 0, 1}});
  ASSERT_TRUE(run_until(exited(4)));
  EXPECT_EQ(exits(4).at(0).waitstatus(), 126 << 8);
  EXPECT_NE(exits(4).at(0).error().find("cannot change directory to"), std::string::npos);
}

TEST_F(NodeAgent, OutputToPatternFiles) {
  auto req = command({"/bin/sh", "-c", "echo task $CORRAL_TASK_RANK; echo oops >&2"});
  req.cwd = dir_.string();
  req.output = "out-%j-%t.txt";
  start(5, spec(req), {{"n1", 0, 2}}, 2);
  ASSERT_TRUE(run_until(exited(5)));
  auto slurp = [](const fs::path& p) {
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  EXPECT_EQ(slurp(dir_ / "out-5-0.txt"), "task 0\noops\n");
  EXPECT_EQ(slurp(dir_ / "out-5-1.txt"), "task 1\noops\n");
  EXPECT_EQ(output(5, 0, false).first, "");
}

TEST_F(NodeAgent, BatchScript) {
  job::JobRequest req;
  req.batch_script = "#!/bin/sh\necho batch $CORRAL_JOBID $0\n";
  req.environment = {{"PATH", "/usr/bin:/bin"}};
  start(6, spec(req), {{"n1", 0, 1}, {"n2", 1, 0}});
  ASSERT_TRUE(run_until(exited(6, 2)));
  EXPECT_EQ(output(6, 0, false).first, "batch 6 " + (dir_ / "state" / "job-6" / "script").string() + "\n");
  v1::ControllerMessage forget;
  forget.add_forget(6);
  agent_->handle(forget);
  EXPECT_FALSE(fs::exists(dir_ / "state" / "job-6"));
}

TEST_F(NodeAgent, MockJobsRunNoProcess) {
  auto req = command({"no-such-command-corral"});
  req.mock_duration = 0;
  start(7, spec(req), {{"n1", 0, 1}, {"n2", 1, 1}}, 2);
  // finished within the same iteration, no process involved
  ASSERT_TRUE(run_until(exited(7, 2), 0.5));
  for (const auto& e : exits(7)) EXPECT_EQ(e.waitstatus(), 0);
  EXPECT_TRUE(started(7, "n1") && started(7, "n2"));

  req.mock_duration = 100;
  start(8, spec(req), {{"n1", 0, 1}});
  run_until([] { return false; }, 0.05);
  EXPECT_TRUE(exits(8).empty());
  signal(8, SIGTERM);
  ASSERT_TRUE(run_until(exited(8), 0.5));
  EXPECT_EQ(exits(8).at(0).waitstatus(), SIGTERM);
}

TEST_F(NodeAgent, SignalKillsTheTree) {
  start(9, spec(command({"/bin/sh", "-c", "sleep 100 & sleep 100"})), {{"n1", 0, 1}});
  run_until([] { return false; }, 0.1);
  signal(9, SIGTERM);
  ASSERT_TRUE(run_until(exited(9), 5));
  EXPECT_EQ(exits(9).at(0).waitstatus(), SIGTERM);
  EXPECT_EQ(agent_->live_processes(), 0u);
}

TEST_F(NodeAgent, KillAfterEscalatesToSigkill) {
  start(10, spec(command({"/bin/sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done"})), {{"n1", 0, 1}});
  ASSERT_TRUE(run_until([&] { return output(10, 0, false).first == "ready\n"; }));
  signal(10, SIGTERM, 0.2);
  ASSERT_TRUE(run_until(exited(10), 5));
  EXPECT_EQ(exits(10).at(0).waitstatus(), SIGKILL);
}

// A requeued job's next run replaces the one still held here (a node that was cut off):
// the earlier run is killed and reported under its own attempt, the next one starts only
// then, and a signal for the earlier attempt does not reach the next.
TEST_F(NodeAgent, ALaterAttemptReplacesTheRunHeldHere) {
  const std::string marker = (dir_ / "second").string();
  auto req = command(
      {"/bin/sh", "-c",
       "echo run $CORRAL_RESTART_COUNT; [ $CORRAL_RESTART_COUNT = 1 ] && touch " + marker + "; exec sleep 100"});
  const std::string js = spec(req);
  start(30, js, {{"n1", 0, 1}});
  ASSERT_TRUE(run_until([&] { return output(30, 0, false).first == "run 0\n"; }));
  start(30, js, {{"n1", 0, 1}}, 1, ::getuid(), ::getgid(), 1);
  start(30, js, {{"n1", 0, 1}}, 1, ::getuid(), ::getgid(), 1);  // sent again: still one next run
  ASSERT_TRUE(run_until([&] { return fs::exists(marker); }));
  ASSERT_EQ(exits(30).size(), 1u);
  EXPECT_EQ(exits(30).at(0).attempt(), 0u);
  EXPECT_EQ(exits(30).at(0).waitstatus(), SIGKILL);
  auto reg = agent_->begin_register(2);
  ASSERT_EQ(reg.register_().running_size(), 1);
  EXPECT_EQ(reg.register_().running(0).attempt(), 1u);
  v1::ControllerMessage ack;
  ack.set_register_ack(true);
  agent_->on_registered(2, ack);

  signal(30, SIGKILL, 0, 0);  // the controller's kill of the earlier run, arriving late
  run_until([] { return false; }, 0.2);
  EXPECT_EQ(exits(30).size(), 1u);
  signal(30, SIGTERM, 0, 1);
  ASSERT_TRUE(run_until(exited(30, 2)));
  EXPECT_EQ(exits(30).at(1).attempt(), 1u);
  EXPECT_EQ(exits(30).at(1).waitstatus(), SIGTERM);
  EXPECT_EQ(output(30, 0, false).first, "run 0\nrun 1\n");
  start(30, js, {{"n1", 0, 1}}, 1, ::getuid(), ::getgid(), 0);  // an old StartJob: ignored
  run_until([] { return false; }, 0.1);
  EXPECT_EQ(output(30, 0, false).first, "run 0\nrun 1\n");
}

// Configless: the controller's node settings apply where the command line set nothing.
TEST_F(NodeAgent, TakesTheControllersSettingsUnlessSetLocally) {
  auto settle = [&](uint64_t session, uint64_t pids, bool bind) {
    agent_->on_disconnected(session - 1);
    agent_->begin_register(session);
    v1::ControllerMessage ack;
    ack.set_register_ack(true);
    ack.mutable_node_settings()->set_job_pids_max(pids);
    ack.mutable_node_settings()->set_cpu_bind(bind);
    agent_->on_registered(session, ack);
  };
  settle(2, 64, false);
  EXPECT_EQ(agent_->config().job_pids_max, 64u);
  EXPECT_FALSE(agent_->config().cpu_bind);
  settle(3, 128, true);  // a reconnect takes the site's current values
  EXPECT_EQ(agent_->config().job_pids_max, 128u);
  EXPECT_TRUE(agent_->config().cpu_bind);
}

TEST_F(NodeAgent, ExitsAreKeptUntilForgotten) {
  start(11, spec(command({"/bin/sh", "-c", "sleep 0.3"})), {{"n1", 0, 1}});
  auto reg = agent_->begin_register(2);
  ASSERT_EQ(reg.register_().running_size(), 1);
  EXPECT_EQ(reg.register_().running(0).jobid(), 11u);
  EXPECT_EQ(reg.register_().running(0).nodes(0), "n1");
  // offline until acknowledged: nothing is sent, the exit is held for the session
  size_t before = sent_.size();
  ASSERT_TRUE(run_until([&] { return agent_->live_processes() == 0; }));
  EXPECT_EQ(sent_.size(), before);
  v1::ControllerMessage ack;
  ack.set_register_ack(true);
  agent_->on_registered(2, ack);
  EXPECT_EQ(exits(11).size(), 1u);
  // the controller went away before persisting it: the next register carries it
  agent_->on_disconnected(2);
  reg = agent_->begin_register(3);
  EXPECT_EQ(reg.register_().running_size(), 0);
  ASSERT_EQ(reg.register_().exited_size(), 1);
  EXPECT_EQ(reg.register_().exited(0).jobid(), 11u);
  v1::ControllerMessage forget;
  forget.set_register_ack(true);
  forget.add_forget(11);
  agent_->on_registered(3, forget);
  EXPECT_EQ(agent_->begin_register(4).register_().exited_size(), 0);
  EXPECT_EQ(agent_->executor().jobs(), 0u);
}

TEST_F(NodeAgent, PerilogResultAndTimeout) {
  v1::ControllerMessage m;
  auto* p = m.add_perilog();
  p->set_jobid(12);
  p->set_kind("prolog");
  p->set_command("echo $CORRAL_PERILOG $CORRAL_NODENAME $CORRAL_JOBID $X; exit 2");
  p->set_timeout(10);
  p->add_nodes("n1");
  p->add_nodes("n2");
  (*p->mutable_env())["X"] = "x";
  auto* q = m.add_perilog();
  q->set_jobid(13);
  q->set_kind("epilog");
  q->set_command("echo started; sleep 100");
  q->set_timeout(0.2);
  q->add_nodes("n1");
  agent_->handle(m);
  auto results = [&] {
    std::vector<v1::PerilogResult> r;
    for (const auto& msg : sent_)
      for (const auto& x : msg.perilog()) r.push_back(x);
    return r;
  };
  ASSERT_TRUE(run_until([&] { return results().size() == 3; }, 5));
  for (const auto& r : results()) {
    if (r.jobid() == 12) {
      EXPECT_EQ(r.waitstatus(), 2 << 8);
      EXPECT_FALSE(r.timed_out());
      EXPECT_EQ(r.output(), "prolog " + r.node() + " 12 x\n");
    } else {
      EXPECT_EQ(r.kind(), "epilog");
      EXPECT_TRUE(r.timed_out());
      EXPECT_EQ(r.waitstatus(), SIGTERM);
      EXPECT_EQ(r.output(), "started\n");
    }
  }
}

// A restarted controller learns from `register` what still runs, and gets the result of
// what finished while it was away after the next register.
TEST_F(NodeAgent, PerilogsAreReportedAcrossAReconnect) {
  v1::ControllerMessage m;
  auto* p = m.add_perilog();
  p->set_jobid(17);
  p->set_kind("housekeeping");
  p->set_command("sleep 0.3; echo scrubbed; exit 1");
  p->set_timeout(10);
  p->add_nodes("n2");
  agent_->handle(m);
  agent_->on_disconnected(1);
  auto reg = agent_->begin_register(2);
  ASSERT_EQ(reg.register_().perilogs_size(), 1);
  EXPECT_EQ(reg.register_().perilogs(0).jobid(), 17u);
  EXPECT_EQ(reg.register_().perilogs(0).kind(), "housekeeping");
  EXPECT_EQ(reg.register_().perilogs(0).node(), "n2");
  agent_->on_disconnected(2);  // never acknowledged
  run_until([] { return false; }, 0.8);
  for (const auto& msg : sent_) EXPECT_EQ(msg.perilog_size(), 0);  // nobody to tell yet
  EXPECT_EQ(agent_->begin_register(3).register_().perilogs_size(), 0);
  size_t before = sent_.size();
  v1::ControllerMessage ack;
  ack.set_register_ack(true);
  agent_->on_registered(3, ack);
  std::vector<v1::PerilogResult> results;
  for (size_t i = before; i < sent_.size(); ++i)
    for (const auto& r : sent_[i].perilog()) results.push_back(r);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].jobid(), 17u);
  EXPECT_EQ(results[0].waitstatus(), 1 << 8);
  EXPECT_EQ(results[0].output(), "scrubbed\n");
}

TEST_F(NodeAgent, RootRunsTasksAsTheJobUserThroughImp) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  make_agent(true);
  job::JobRequest req;
  req.batch_script = "#!/bin/sh\nid -u; id -g; echo $CORRAL_JOBID\n";
  req.environment = {{"PATH", "/usr/bin:/bin"}};
  start(15, spec(req), {{"n1", 0, 1}}, 1, 65534, 65534);
  start(16, spec(command({"no-such-command-corral"})), {{"n1", 0, 1}}, 1, 65534, 65534);
  ASSERT_TRUE(run_until([&] { return exits(15).size() == 1 && exits(16).size() == 1; }));
  EXPECT_EQ(output(15, 0, false).first, "65534\n65534\n15\n");
  EXPECT_EQ(exits(15).at(0).waitstatus(), 0);
  EXPECT_EQ(exits(16).at(0).waitstatus(), 127 << 8);
  EXPECT_EQ(exits(16).at(0).error(),
            "corral-node: n1: job 16: cannot execute 'no-such-command-corral': No such file or directory");
  EXPECT_EQ(output(16, 0, true).first,
            "corral-imp: cannot execute 'no-such-command-corral': No such file or directory\n");
}

TEST_F(NodeAgent, ShutdownKillsEverything) {
  start(14, spec(command({"/bin/sh", "-c", "trap '' TERM; sleep 100 & wait"})), {{"n1", 0, 1}});
  run_until([] { return false; }, 0.1);
  size_t before = sent_.size();
  agent_->shutdown();
  auto t0 = std::chrono::steady_clock::now();
  loop_->run();  // the agent stops the loop once everything is gone
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  EXPECT_EQ(agent_->live_processes(), 0u);
  EXPECT_EQ(sent_.size(), before);  // nothing reported after shutdown
}

}  // namespace
}  // namespace corral::node
