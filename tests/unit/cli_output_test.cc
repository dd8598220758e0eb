// Pure helpers of the command line: tables, argument splitting, job formatting, and the
// node split of `corral start`.
#include <sys/wait.h>

#include <CLI/CLI.hpp>
#include <gtest/gtest.h>

#include "cli/argv_split.h"
#include "cli/job_format.h"
#include "cli/local_cluster.h"
#include "cli/table.h"

namespace corral::cli {
namespace {

TEST(CliTable, PadsAndAligns) {
  Table t({{"ID", Table::Align::right}, {"NAME"}, {"LAST"}});
  t.add_row({"7", "a", "x"});
  t.add_row({"123", "longer"});
  EXPECT_EQ(t.render(), " ID  NAME    LAST\n  7  a       x\n123  longer\n");
  EXPECT_EQ(t.render(false), "  7  a       x\n123  longer\n");
}

struct SplitFixture : ::testing::Test {
  CLI::App app{"corral"};
  std::string uri, nodes;
  bool flag = false;
  std::set<std::string> takes{"run"};
  void SetUp() override {
    app.add_option("--uri", uri);
    app.require_subcommand(1);
    CLI::App* run = app.add_subcommand("run");
    run->add_option("-N,--nodes", nodes);
    run->add_flag("-l,--label-io", flag);
    app.add_subcommand("queue");
  }
  std::vector<std::string> split(std::vector<std::string>& args) {
    return split_trailing_command(app, takes, args);
  }
};

TEST_F(SplitFixture, CommandStartsAtTheFirstPositional) {
  std::vector<std::string> args{"--uri", "u", "run", "-N", "2", "-l", "ls", "-N", "x"};
  EXPECT_EQ(split(args), (std::vector<std::string>{"ls", "-N", "x"}));
  EXPECT_EQ(args, (std::vector<std::string>{"--uri", "u", "run", "-N", "2", "-l"}));
}

TEST_F(SplitFixture, AttachedValuesAndDashDash) {
  std::vector<std::string> a{"run", "-N2", "--nodes=3", "--", "-x"};
  EXPECT_EQ(split(a), (std::vector<std::string>{"-x"}));
  EXPECT_EQ(a, (std::vector<std::string>{"run", "-N2", "--nodes=3"}));
  std::vector<std::string> b{"run", "--uri", "u", "hostname"};  // parent's option
  EXPECT_EQ(split(b), (std::vector<std::string>{"hostname"}));
  std::vector<std::string> c{"queue", "x"};  // no trailing command: untouched
  EXPECT_TRUE(split(c).empty());
  EXPECT_EQ(c.size(), 2u);
  std::vector<std::string> d{"run", "--bogus", "ls"};  // CLI11 reports --bogus
  EXPECT_EQ(split(d), (std::vector<std::string>{"ls"}));
}

corral::v1::JobInfo job(std::string state, std::string result = "", int ws = -1,
                        std::string exc = "") {
  corral::v1::JobInfo j;
  j.set_state(std::move(state));
  j.set_result(std::move(result));
  j.set_waitstatus(ws);
  j.set_exception_type(std::move(exc));
  return j;
}

TEST(CliJobFormat, StateCodes) {
  EXPECT_EQ(short_state(job("SCHED")), "PD");
  EXPECT_EQ(short_state(job("DEPEND")), "PD");
  EXPECT_EQ(short_state(job("RUN")), "R");
  EXPECT_EQ(short_state(job("CLEANUP")), "CG");
  EXPECT_EQ(short_state(job("INACTIVE", "COMPLETED")), "CD");
  EXPECT_EQ(short_state(job("INACTIVE", "CANCELED")), "CA");
  EXPECT_EQ(short_state(job("INACTIVE", "TIMEOUT")), "TO");
  EXPECT_EQ(short_state(job("INACTIVE", "FAILED")), "F");
}

TEST(CliJobFormat, ExitCodes) {
  EXPECT_EQ(shell_exit_code(3 << 8), 3);
  EXPECT_EQ(shell_exit_code(SIGKILL), 128 + SIGKILL);
  EXPECT_EQ(exit_code_pair(3 << 8), "3:0");
  EXPECT_EQ(exit_code_pair(SIGTERM), "0:15");
  EXPECT_EQ(job_exit_code(job("INACTIVE", "COMPLETED", 0)), 0);
  EXPECT_EQ(job_exit_code(job("INACTIVE", "FAILED", 2 << 8)), 2);
  EXPECT_EQ(job_exit_code(job("INACTIVE", "CANCELED", -1, "cancel")), 1);
  EXPECT_EQ(job_exit_code(job("INACTIVE", "TIMEOUT", SIGTERM, "timeout")), 128 + SIGTERM);
  EXPECT_EQ(job_exit_code(job("INACTIVE", "FAILED", 0, "epilog")), 1);
}

TEST(CliJobFormat, RunTime) {
  auto j = job("RUN");
  j.set_t_run(100);
  EXPECT_DOUBLE_EQ(run_time(j, 130), 30);
  j.set_t_cleanup(110);
  EXPECT_DOUBLE_EQ(run_time(j, 130), 10);
  EXPECT_DOUBLE_EQ(run_time(job("SCHED"), 130), 0);
}

TEST(CliLocalCluster, SplitsNodesEvenly) {
  EXPECT_EQ(split_nodes(8, 4),
            (std::vector<std::string>{"node[0-1]", "node[2-3]", "node[4-5]", "node[6-7]"}));
  EXPECT_EQ(split_nodes(5, 2), (std::vector<std::string>{"node[0-2]", "node[3-4]"}));
  EXPECT_EQ(split_nodes(2, 4), (std::vector<std::string>{"node0", "node1"}));
  EXPECT_EQ(split_nodes(1, 1), (std::vector<std::string>{"node0"}));
}

}  // namespace
}  // namespace corral::cli
