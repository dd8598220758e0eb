#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>

#include "node/exec/task_env.h"
#include "node/steps/step_tasks.h"

namespace corral::node {
namespace {

bool has(const std::vector<std::string>& env, const std::string& kv) {
  return std::find(env.begin(), env.end(), kv) != env.end();
}

JobNodeEnv job() {
  JobNodeEnv j;
  j.jobid = 42;
  j.job_name = "sim";
  j.node_name = "n3";
  j.node_index = 2;
  j.nodelist = "n[1-4]";
  j.total_nodes = 4;
  j.total_tasks = 8;
  j.cores = "0-2,5";
  j.gpus = "0-1,3";
  j.cwd = "/home/u/run";
  j.controller_uri = "unix:/run/corral.sock";
  j.user_name = "u";
  j.home = "/home/u";
  j.restarts = 2;
  return j;
}

TEST(NodeTaskEnv, HasEveryCorralVariable) {
  auto env = build_task_env(build_node_env({{"FOO", "bar"}, {"PATH", "/x"}}, job(), {}), 5, 1);
  for (const char* kv : {"FOO=bar",
                         "PATH=/x",
                         "CORRAL_JOBID=42",
                         "CORRAL_JOB_NAME=sim",
                         "CORRAL_NODENAME=n3",
                         "CORRAL_NODEID=2",
                         "CORRAL_NODELIST=n[1-4]",
                         "CORRAL_NNODES=4",
                         "CORRAL_NTASKS=8",
                         "CORRAL_RESTART_COUNT=2",
                         "CORRAL_TASK_RANK=5",
                         "CORRAL_LOCAL_RANK=1",
                         "CORRAL_CPUS_ON_NODE=4",
                         "CORRAL_JOB_CPUS=0-2,5",
                         "CUDA_VISIBLE_DEVICES=0,1,3",
                         "ROCR_VISIBLE_DEVICES=0,1,3",
                         "CORRAL_GPUS=0-1,3",
                         "CORRAL_SUBMIT_DIR=/home/u/run",
                         "CORRAL_URI=unix:/run/corral.sock",
                         "HOME=/home/u",
                         "USER=u",
                         "LOGNAME=u"})
    EXPECT_TRUE(has(env, kv)) << kv;
}

TEST(NodeTaskEnv, ASiteWithoutMungeTellsItsTasksHowToAuthenticate) {
  auto munge = build_task_env(build_node_env({}, job(), {}), 0, 0);
  for (const auto& kv : munge) EXPECT_NE(kv.rfind("CORRAL_AUTH=", 0), 0u) << kv;
  JobNodeEnv j = job();
  j.auth = "cluster-key";
  auto keyed = build_task_env(build_node_env({{"CORRAL_AUTH", "munge"}}, j, {}), 0, 0);
  EXPECT_TRUE(has(keyed, "CORRAL_AUTH=cluster-key"));
}

// A step's tasks get it from the agent too, whatever the client's environment said
// (step_node_env and the job's tasks start from the same agent_node_env).
TEST(NodeTaskEnv, AStepOnASiteWithoutMungeIsToldHowToAuthenticate) {
  AgentConfig config;
  config.controller_uri = "ctl:6817";
  config.auth = net::AuthMethod::cluster_key;
  v1::LaunchTasksRequest req;
  req.set_jobid(42);
  req.add_env("CORRAL_AUTH=munge");
  v1::LaunchNode node;
  node.set_name("n1");
  node.set_cores("0");
  auto env = step_node_env(req, node, StepUser{1000, 1000, "u", "/home/u"}, "/tmp", config);
  ASSERT_TRUE(env.ok()) << env.message();
  EXPECT_TRUE(has(*env, "CORRAL_AUTH=cluster-key"));
  EXPECT_FALSE(has(*env, "CORRAL_AUTH=munge"));
  EXPECT_TRUE(has(*env, "CORRAL_URI=ctl:6817"));
  config.auth = net::AuthMethod::munge;
  auto plain = step_node_env(req, node, StepUser{1000, 1000, "u", "/home/u"}, "/tmp", config);
  ASSERT_TRUE(plain.ok()) << plain.message();
  EXPECT_TRUE(has(*plain, "CORRAL_AUTH=munge"));  // the client's own, untouched
}

// A node hook that applies to jobs with HOOK_ON from the controller: it sees the whole
// environment and changes it.
class EnvHook final : public hook::NodeHook {
 public:
  std::string_view name() const override { return "env-test"; }
  bool task_env_applies(const hook::TaskEnvRequest& req) const override {
    return req.from_controller->contains("HOOK_ON");
  }
  Status task_env(const hook::TaskEnvRequest&, hook::EnvMap& env) override {
    seen = env;
    env.erase("DROP_ME");
    env.try_emplace("KEEP_MINE", "hook");  // the user's own wins
    env["HOOK_SET"] = env["CORRAL_JOBID"];
    return {};
  }
  hook::EnvMap seen;
};

struct StepEnvCase {
  AgentConfig config;
  EnvHook* hook = nullptr;
  v1::LaunchTasksRequest req;
  v1::LaunchNode node;

  StepEnvCase() {
    auto h = std::make_unique<EnvHook>();
    hook = h.get();
    std::vector<std::unique_ptr<hook::NodeHook>> all;
    all.push_back(std::move(h));
    config.hooks = std::make_shared<NodeHooks>(std::move(all));
    req.set_jobid(7);
    req.set_stepid(3);
    req.set_stepmgr("unix:/run/s.sock");
    req.add_env("FROM_CLIENT=yes");
    req.add_env("PATH=/opt/bin");
    req.add_env("CORRAL_JOBID=999");     // corral's value wins
    req.add_env("CORRAL_TASK_RANK=12");  // each task's own
    req.add_env("PMI_RANK=4");           // an outer launcher's
    req.add_env("DROP_ME=1");
    req.add_env("KEEP_MINE=user");
    req.add_env("FROM_CLIENT=again");  // sent twice: the first is what getenv saw
    (*req.mutable_extra_env())["SLINGSHOT_VNIS"] = "1024";
    node.set_name("n1");
    node.set_cores("0-1");
    (*node.mutable_env())["CORRAL_TOPOLOGY_ADDR"] = "s1";
  }
  std::vector<std::string> build() {
    auto env = step_node_env(req, node, StepUser{1000, 1000, "u", "/home/u"}, "/tmp", config);
    EXPECT_TRUE(env.ok()) << env.message();
    return env.ok() ? *env : std::vector<std::string>{};
  }
};

// Each of corral's variables once, with the value the precedence gives it; the client's
// FROM_CLIENT, sent twice, has its first value first.
void expect_step_basics(const std::vector<std::string>& env) {
  std::set<std::string> keys;
  for (const auto& kv : env) {
    if (kv.starts_with("FROM_CLIENT=")) continue;
    EXPECT_TRUE(keys.insert(kv.substr(0, kv.find('='))).second) << "twice: " << kv;
  }
  auto first =
      std::find_if(env.begin(), env.end(), [](const std::string& kv) { return kv.starts_with("FROM_CLIENT="); });
  ASSERT_NE(first, env.end());
  EXPECT_EQ(*first, "FROM_CLIENT=yes");
  EXPECT_TRUE(has(env, "PATH=/opt/bin"));
  EXPECT_TRUE(has(env, "HOME=/home/u"));  // a default the client lacked
  EXPECT_TRUE(has(env, "CORRAL_JOBID=7"));
  EXPECT_TRUE(has(env, "CORRAL_STEPID=3"));
  EXPECT_TRUE(has(env, "CORRAL_STEPMGR=unix:/run/s.sock"));
  EXPECT_TRUE(has(env, "CORRAL_CPUS_ON_NODE=2"));
  EXPECT_TRUE(has(env, "SLINGSHOT_VNIS=1024"));
  EXPECT_TRUE(has(env, "CORRAL_TOPOLOGY_ADDR=s1"));
  EXPECT_FALSE(keys.contains("CORRAL_TASK_RANK"));
  EXPECT_FALSE(keys.contains("PMI_RANK"));
}

TEST(NodeTaskEnv, AStepWithoutHooksToApplyKeepsTheClientsVariablesUnderCorrals) {
  StepEnvCase c;
  auto env = c.build();
  expect_step_basics(env);
  EXPECT_TRUE(has(env, "DROP_ME=1"));
  EXPECT_TRUE(has(env, "KEEP_MINE=user"));
  EXPECT_TRUE(c.hook->seen.empty());  // not called
  // The agent's last node of the step takes the request's strings: the same list.
  EXPECT_EQ(step_node_env(c.req, c.node, StepUser{1000, 1000, "u", "/home/u"}, "/tmp", c.config, true).value(), env);
  auto task = step_task_env(env, 5, 1, {"PMI_FD=3"});
  EXPECT_TRUE(has(task, "CORRAL_TASK_RANK=5"));
  EXPECT_TRUE(has(task, "CORRAL_LOCAL_RANK=1"));
  EXPECT_TRUE(has(task, "PMI_FD=3"));
}

TEST(NodeTaskEnv, AHookThatAppliesSeesAndChangesTheWholeStepEnvironment) {
  StepEnvCase c;
  (*c.req.mutable_extra_env())["HOOK_ON"] = "1";
  auto env = c.build();
  expect_step_basics(env);
  EXPECT_EQ(c.hook->seen.at("FROM_CLIENT"), "yes");
  EXPECT_EQ(c.hook->seen.at("CORRAL_STEPID"), "3");
  EXPECT_FALSE(c.hook->seen.contains("PMI_RANK"));
  EXPECT_FALSE(has(env, "DROP_ME=1"));
  EXPECT_TRUE(has(env, "KEEP_MINE=user"));
  EXPECT_TRUE(has(env, "HOOK_SET=7"));
}

TEST(NodeTaskEnv, SubmitEnvironmentWinsForUserBasics) {
  auto env = build_task_env(build_node_env({{"HOME", "/elsewhere"}, {"USER", "x"}}, job(), {}), 0, 0);
  EXPECT_TRUE(has(env, "HOME=/elsewhere"));
  EXPECT_TRUE(has(env, "USER=x"));
}

TEST(NodeTaskEnv, CorralVariablesOverrideSubmittedOnesAndExtraOverridesBoth) {
  auto env = build_task_env(build_node_env({{"CORRAL_JOBID", "1"}, {"CORRAL_NNODES", "9"}, {"CORRAL_TASK_RANK", "77"}},
                                           job(), {{"CORRAL_NNODES", "5"}, {"SLINGSHOT_VNIS", "1024"}}),
                            3, 0);
  EXPECT_TRUE(has(env, "CORRAL_JOBID=42"));
  EXPECT_TRUE(has(env, "CORRAL_NNODES=5"));
  EXPECT_TRUE(has(env, "SLINGSHOT_VNIS=1024"));
  EXPECT_TRUE(has(env, "CORRAL_TASK_RANK=3"));
  EXPECT_FALSE(has(env, "CORRAL_TASK_RANK=77"));
}

TEST(NodeTaskEnv, NoGpuVariablesWithoutGpus) {
  JobNodeEnv j = job();
  j.gpus.clear();
  auto env = build_task_env(build_node_env({}, j, {}), 0, 0);
  for (const auto& kv : env) {
    EXPECT_NE(kv.rfind("CUDA_VISIBLE_DEVICES=", 0), 0u);
    EXPECT_NE(kv.rfind("ROCR_VISIBLE_DEVICES=", 0), 0u);
    EXPECT_NE(kv.rfind("CORRAL_GPUS=", 0), 0u);
  }
  EXPECT_TRUE(has(env, "PATH=/usr/local/bin:/usr/bin:/bin"));
}

TEST(NodeTaskEnv, SettingANameAgainReplacesItInItsPlace) {
  std::vector<EnvEntry> v;
  set_env_entry(v, "B", "1");
  set_env_entry(v, "A", "1");
  set_env_entry(v, "B", "2");
  set_env_entry(v, "AB", "x");
  set_env_entry(v, "A", "");
  std::vector<std::string> kv;
  for (const auto& e : v) kv.push_back(e.kv);
  EXPECT_EQ(kv, (std::vector<std::string>{"B=2", "A=", "AB=x"}));
  EXPECT_EQ(v[2].name(), "AB");
  EXPECT_EQ(v[2].value(), "x");
  EXPECT_EQ(v[1].value(), "");
}

TEST(NodeTaskEnv, IdsetHelpers) {
  EXPECT_EQ(idset_to_list("0-2,5"), "0,1,2,5");
  EXPECT_EQ(idset_count("0-2,5"), 4u);
  EXPECT_EQ(idset_count(""), 0u);
}

}  // namespace
}  // namespace corral::node
