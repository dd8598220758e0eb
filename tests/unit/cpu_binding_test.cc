// Binding tasks to their cores: the core -> CPU map, the launcher (directly and through
// corral-imp) and the machine's own map from hwloc.
#include "node/exec/cpu_binding.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "node/exec/agent_config.h"
#include "node/exec/imp_args.h"
#include "node/exec/spawn_process.h"
#include "test_programs.h"

namespace corral::node {
namespace {

namespace fs = std::filesystem;

// Two sockets' worth of a hyper-threaded machine: core i has PUs i and i+4.
NodeHardware smt_node() {
  NodeHardware hw{"n1", 4, 0, 1024, {}};
  for (int i = 0; i < 4; ++i) hw.core_cpus.push_back({i, i + 4});
  return hw;
}

TEST(CpuBinding, CoresMapToTheirPus) {
  auto cpus = cpus_of_cores(smt_node(), "1,3");
  ASSERT_TRUE(cpus) << cpus.message();
  EXPECT_EQ(*cpus, (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(cpu_list_text(*cpus), "1,3,5,7");
  EXPECT_EQ(cpu_list_text({0, 1, 2, 5, 7, 8}), "0-2,5,7-8");
  EXPECT_EQ(cpu_list_text({}), "");
}

TEST(CpuBinding, VirtualNodesAndBadCoresAreNotBound) {
  NodeHardware virt{"v1", 64, 0, 1024, {}};
  auto none = cpus_of_cores(virt, "0-63");
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
  auto missing = cpus_of_cores(smt_node(), "2-5");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.message().find("node n1 has no core 4 (it has 4)"), std::string::npos) << missing.message();
  EXPECT_FALSE(cpus_of_cores(smt_node(), "x"));

  using Cpus = std::vector<std::vector<int>>;
  AgentConfig c;
  c.nodes = {smt_node(), virt};
  EXPECT_EQ(task_cpus(c, "v1", "0-1", 2), (Cpus{{}, {}}));
  EXPECT_EQ(task_cpus(c, "n1", "9", 1), (Cpus{{}}));  // logged, the task runs unbound
  EXPECT_EQ(task_cpus(c, "n1", "x", 1), (Cpus{{}}));
  EXPECT_EQ(task_cpus(c, "n1", "", 2), (Cpus{{}, {}}));
  c.cpu_bind = false;
  EXPECT_EQ(task_cpus(c, "n1", "0", 1), (Cpus{{}}));
}

TEST(CpuBinding, TasksOfANodeGetCoresOfTheirOwnWhenTheyDivideEvenly) {
  using Cpus = std::vector<std::vector<int>>;
  AgentConfig c;
  c.nodes = {smt_node()};
  EXPECT_EQ(task_cpus(c, "n1", "0", 1), (Cpus{{0, 4}}));
  EXPECT_EQ(task_cpus(c, "n1", "0-3", 2), (Cpus{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  EXPECT_EQ(task_cpus(c, "n1", "1,3", 2), (Cpus{{1, 5}, {3, 7}}));
  // Three cores for two tasks: no even split, both get all three.
  EXPECT_EQ(task_cpus(c, "n1", "0-2", 2), (Cpus{{0, 1, 2, 4, 5, 6}, {0, 1, 2, 4, 5, 6}}));
}

TEST(CpuBinding, ImpTakesACpuList) {
  ImpArgs a;
  ASSERT_FALSE(parse_imp_args({"--uid", "0", "--gid", "0", "--cpus", "0-2,5", "--", "true"}, a));
  EXPECT_EQ(a.cpus, (std::vector<int>{0, 1, 2, 5}));
  for (const char* bad : {"", "3-1", "a", "1,", "1-", "70000"}) {
    ImpArgs b;
    auto err = parse_imp_args({"--uid", "0", "--gid", "0", "--cpus", bad, "--", "true"}, b);
    ASSERT_TRUE(err) << bad;
    EXPECT_NE(err->find("invalid --cpus"), std::string::npos) << *err;
  }
}

// What the kernel says the task may run on.
std::string allowed_cpus(const SpawnRequest& base, const std::vector<int>& cpus) {
  SpawnRequest r = base;
  r.argv = {"/bin/sh", "-c", "grep Cpus_allowed_list /proc/self/status | cut -f2"};
  r.env = {"PATH=/usr/bin:/bin"};
  r.cwd = "/";
  r.cpus = cpus;
  auto p = spawn_process(r);
  EXPECT_TRUE(p) << p.message();
  if (!p) return {};
  std::string line = test::read_line(p->stdout_pipe.get());
  int st = 0;
  ::waitpid(p->pid, &st, 0);
  return line;
}

TEST(CpuBinding, TasksRunOnlyOnTheirCpus) {
  EXPECT_EQ(allowed_cpus({}, {0}), "0");
  SpawnRequest bad;
  bad.argv = {"/bin/true"};
  bad.cpus = {4095};  // no such CPU here: the launch fails and says so
  auto r = spawn_process(bad);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("cannot bind the task to CPUs 4095"), std::string::npos) << r.message();
}

TEST(CpuBinding, ImpBindsBeforeBecomingTheUser) {
  const fs::path imp = fs::read_symlink("/proc/self/exe").parent_path() / "corral-imp";
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  if (!fs::exists(imp)) GTEST_SKIP() << "corral-imp not built next to the test";
  SpawnRequest r;
  r.imp_path = imp.string();
  r.uid = 65534;
  r.gid = 65534;
  EXPECT_EQ(allowed_cpus(r, {0}), "0");
}

TEST(CpuBinding, ThisMachinesCoresHaveCpus) {
  auto hw = discover_hardware();
  ASSERT_TRUE(hw) << hw.message();
  ASSERT_EQ(hw->core_cpus.size(), hw->cores);
  for (const auto& pus : hw->core_cpus) EXPECT_FALSE(pus.empty());
  auto all = cpus_of_cores(*hw, "0-" + std::to_string(hw->cores - 1));
  ASSERT_TRUE(all);
  EXPECT_EQ(all->size(), static_cast<size_t>(::sysconf(_SC_NPROCESSORS_ONLN)));
}

}  // namespace
}  // namespace corral::node
