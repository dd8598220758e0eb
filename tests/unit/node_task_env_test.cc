#include <gtest/gtest.h>

#include <algorithm>

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
  (*req.mutable_env())["CORRAL_AUTH"] = "munge";
  v1::LaunchNode node;
  node.set_name("n1");
  node.set_cores("0");
  auto env = step_node_env(req, node, StepUser{1000, 1000, "u", "/home/u"}, "/tmp", config);
  ASSERT_TRUE(env.ok()) << env.message();
  EXPECT_EQ((*env)["CORRAL_AUTH"], "cluster-key");
  EXPECT_EQ((*env)["CORRAL_URI"], "ctl:6817");
  config.auth = net::AuthMethod::munge;
  auto plain = step_node_env(req, node, StepUser{1000, 1000, "u", "/home/u"}, "/tmp", config);
  ASSERT_TRUE(plain.ok()) << plain.message();
  EXPECT_EQ((*plain)["CORRAL_AUTH"], "munge");  // the client's own, untouched
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

TEST(NodeTaskEnv, IdsetHelpers) {
  EXPECT_EQ(idset_to_list("0-2,5"), "0,1,2,5");
  EXPECT_EQ(idset_count("0-2,5"), 4u);
  EXPECT_EQ(idset_count(""), 0u);
}

}  // namespace
}  // namespace corral::node
