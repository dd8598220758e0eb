// Pure helpers of the command line: tables, argument splitting, job formatting, and the
// node split of `corral start`.
#include <sys/wait.h>

#include <cstdio>
#include <memory>

#include <gtest/gtest.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/argv_split.h"
#include "cli/job_format.h"
#include "cli/job_row.h"
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

TEST(CliTable, StreamedRenderMatchesStored) {
  Table t({{"ID", Table::Align::right}, {"NAME"}, {"LAST"}});
  const std::vector<std::vector<std::string>> rows{{"7", "a", "x"}, {"123", "longer", ""}};
  for (const auto& r : rows) t.add_row(r);
  for (bool header : {true, false}) {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::tmpfile(), &std::fclose);
    ASSERT_TRUE(f);
    t.render_to(
        f.get(), rows.size(), [&](size_t i, std::vector<std::string>& cells) { cells = rows[i]; }, header);
    std::rewind(f.get());
    std::string got(256, '\0');
    got.resize(std::fread(got.data(), 1, got.size(), f.get()));
    EXPECT_EQ(got, t.render(header));
  }
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
  std::vector<std::string> split(std::vector<std::string>& args) { return split_trailing_command(app, takes, args); }
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

corral::v1::JobInfo job(std::string state, std::string result = "", int ws = -1, std::string exc = "") {
  corral::v1::JobInfo j;
  j.set_state(std::move(state));
  j.set_result(std::move(result));
  j.set_waitstatus(ws);
  j.set_exception_type(std::move(exc));
  return j;
}

// Rows view the JobInfo and a buffer for the joined dependencies; both outlive the check.
struct RowOf {
  corral::v1::JobInfo info;
  std::string deps;
  JobRow row;
  explicit RowOf(corral::v1::JobInfo j) : info(std::move(j)), row(row_of(info, deps)) {}
};
std::string_view short_state(const corral::v1::JobInfo& j) {
  static thread_local std::unique_ptr<RowOf> keep;
  keep = std::make_unique<RowOf>(j);
  return corral::cli::short_state(keep->row);
}
double run_time(const corral::v1::JobInfo& j, double now) {
  RowOf r(j);
  return corral::cli::run_time(r.row, now);
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

corral::v1::JobInfo full_job() {
  auto j = job("INACTIVE", "FAILED", 2 << 8, "exec");
  j.set_id(42);
  j.set_userid(1000);
  j.set_username("alice");
  j.set_name("say \"hi\"\tnow\n");
  j.set_nodelist("node[1-2]");
  j.set_nnodes(2);
  j.set_t_submit(1700000000.25);
  j.set_exception_note("a\\b\x01");
  j.add_dependencies("afterok:1");
  j.add_dependencies("afterany:2");
  return j;
}

TEST(CliJobRow, JsonMatchesJobToJsonAndEscapes) {
  auto j = full_job();
  std::string deps, text;
  append_job_json(text, row_of(j, deps), 0);
  auto parsed = nlohmann::json::parse(text);  // valid JSON despite quotes and controls
  EXPECT_EQ(parsed["name"], "say \"hi\"\tnow\n");
  EXPECT_EQ(parsed["exception_note"], "a\\b\x01");
  EXPECT_EQ(parsed["dependencies"], nlohmann::json::array({"afterok:1", "afterany:2"}));
  EXPECT_EQ(parsed["exit_code"], 2);
  EXPECT_DOUBLE_EQ(parsed["t_submit"].get<double>(), 1700000000.25);
  EXPECT_EQ(parsed, job_to_json(j));
  auto pending = job("SCHED");
  text.clear();
  append_job_json(text, row_of(pending, deps), 0);
  EXPECT_TRUE(nlohmann::json::parse(text)["exit_code"].is_null());
  EXPECT_EQ(nlohmann::json::parse(text)["dependencies"], nlohmann::json::array());
}

TEST(CliJobRow, TableRowsAndConsistency) {
  corral::v1::JobTable t;
  for (const char* s : {"", "alice", "run", "RUN"}) t.add_strings(s);
  auto add_row = [&](uint64_t id) {
    t.add_id(id);
    t.add_userid(1000);
    t.add_username(1);
    t.add_name(2);
    t.add_state(3);
    t.add_result(0);
    t.add_reason(0);
    t.add_urgency(16);
    t.add_priority(0);
    t.add_t_submit(1);
    t.add_t_run(2);
    t.add_t_cleanup(0);
    t.add_t_inactive(0);
    t.add_nodelist(0);
    t.add_nnodes(1);
    t.add_ntasks(1);
    t.add_ncores(1);
    t.add_ngpus(0);
    t.add_partition(0);
    t.add_duration(0);
    t.add_waitstatus(-1);
    t.add_exception_type(0);
    t.add_exception_note(0);
    t.add_cwd(0);
    t.add_dependencies(0);
  };
  add_row(7);
  add_row(8);
  ASSERT_TRUE(table_is_consistent(t));
  JobRow r = row_at(t, 1);
  EXPECT_EQ(r.id, 8u);
  EXPECT_EQ(r.username, "alice");
  EXPECT_EQ(corral::cli::short_state(r), "R");
  EXPECT_DOUBLE_EQ(corral::cli::run_time(r, 5), 3);
  t.set_name(1, 99);  // an index past the dictionary
  EXPECT_FALSE(table_is_consistent(t));
  t.set_name(1, 2);
  t.add_id(9);  // a column longer than the others
  EXPECT_FALSE(table_is_consistent(t));
}

TEST(CliLocalCluster, SplitsNodesEvenly) {
  EXPECT_EQ(split_nodes(8, 4), (std::vector<std::string>{"node[0-1]", "node[2-3]", "node[4-5]", "node[6-7]"}));
  EXPECT_EQ(split_nodes(5, 2), (std::vector<std::string>{"node[0-2]", "node[3-4]"}));
  EXPECT_EQ(split_nodes(2, 4), (std::vector<std::string>{"node0", "node1"}));
  EXPECT_EQ(split_nodes(1, 1), (std::vector<std::string>{"node0"}));
}

}  // namespace
}  // namespace corral::cli
