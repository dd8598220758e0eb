#include <gtest/gtest.h>

#include "cli/job_options.h"

namespace corral::cli {
namespace {

JobContext test_context() {
  JobContext ctx;
  ctx.cwd = "/home/u/work";
  ctx.env = {{"HOME", "/home/u"}, {"PATH", "/bin"}};
  ctx.now = 1700000000;
  return ctx;
}

TEST(CliJobOptions, ParsesEveryOption) {
  auto opts = parse_job_option_words({"-N",
                                      "2",
                                      "-n8",
                                      "--cpus-per-task=2",
                                      "--gpus-per-task",
                                      "1",
                                      "--mem",
                                      "4G",
                                      "-t",
                                      "1:30:00",
                                      "-J",
                                      "sim",
                                      "-o",
                                      "out.%j",
                                      "-e",
                                      "err",
                                      "-i",
                                      "in",
                                      "-w",
                                      "n[1-2]",
                                      "-x",
                                      "n3",
                                      "-p",
                                      "batch",
                                      "--exclusive",
                                      "-d",
                                      "afterok:5",
                                      "--begin",
                                      "now+60",
                                      "--export",
                                      "NONE,X=1",
                                      "-D",
                                      "sub",
                                      "--urgency",
                                      "20",
                                      "--setopt",
                                      "a.b=3",
                                      "--setopt",
                                      "flag",
                                      "--cc",
                                      "1-3",
                                      "--test-run-duration",
                                      "2s"});
  ASSERT_TRUE(opts.ok()) << opts.message();
  auto job = to_job_request(*opts, test_context());
  ASSERT_TRUE(job.ok()) << job.message();
  const auto& r = job->request;
  EXPECT_EQ(r.nnodes, 2u);
  EXPECT_EQ(r.ntasks, 8u);
  EXPECT_EQ(r.cores_per_task, 2u);
  EXPECT_EQ(r.gpus_per_task, 1u);
  EXPECT_EQ(r.mem_per_node_mb, 4096u);
  EXPECT_DOUBLE_EQ(r.duration, 5400);
  EXPECT_EQ(r.name, "sim");
  EXPECT_EQ(r.output, "out.%j");
  EXPECT_EQ(r.error, "err");
  EXPECT_EQ(r.input, "in");
  EXPECT_EQ(r.requested_nodes, "n[1-2]");
  EXPECT_EQ(r.excluded_nodes, "n3");
  EXPECT_EQ(r.partition, "batch");
  EXPECT_TRUE(r.exclusive);
  EXPECT_EQ(r.dependencies, std::vector<std::string>{"afterok:5"});
  EXPECT_DOUBLE_EQ(r.begin_time, 1700000060);
  EXPECT_EQ(r.environment, (std::map<std::string, std::string>{{"X", "1"}}));
  EXPECT_EQ(r.cwd, "/home/u/work/sub");
  EXPECT_EQ(job->urgency, 20u);
  ASSERT_EQ(r.options.size(), 2u);
  EXPECT_EQ(r.options[0], (std::pair<std::string, std::string>{"a.b", "3"}));
  EXPECT_EQ(r.options[1], (std::pair<std::string, std::string>{"flag", "true"}));
  EXPECT_EQ(job->cc, "1-3");
  EXPECT_DOUBLE_EQ(r.mock_duration, 2);
}

TEST(CliJobOptions, RequeueIsThreeWayAndALaterLineWins) {
  auto none = to_job_request(JobOptions{}, test_context());
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->request.requeue.has_value());  // the site decides
  auto script = parse_job_option_words({"--requeue"});
  auto line = parse_job_option_words({"--no-requeue"});
  ASSERT_TRUE(script.ok() && line.ok());
  auto merged = to_job_request(merge_job_options(*script, *line), test_context());
  ASSERT_TRUE(merged.ok()) << merged.message();
  EXPECT_EQ(merged->request.requeue, std::optional<bool>(false));
  auto yes = to_job_request(*script, test_context());
  ASSERT_TRUE(yes.ok());
  EXPECT_EQ(yes->request.requeue, std::optional<bool>(true));
  auto both = parse_job_option_words({"--requeue", "--no-requeue"});
  ASSERT_TRUE(both.ok());
  EXPECT_NE(to_job_request(*both, test_context()).message().find("contradict"), std::string::npos);
}

TEST(CliJobOptions, DefaultsComeFromTheContext) {
  auto job = to_job_request(JobOptions{}, test_context());
  ASSERT_TRUE(job.ok()) << job.message();
  EXPECT_EQ(job->request.cwd, "/home/u/work");
  EXPECT_EQ(job->request.environment, test_context().env);
  EXPECT_EQ(job->request.nnodes, 0u);
  EXPECT_FALSE(job->urgency.has_value());
  EXPECT_LT(job->request.mock_duration, 0);
}

TEST(CliJobOptions, MemoryBareNumberIsMiB) {
  JobOptions o;
  o.mem = "100";
  EXPECT_EQ(to_job_request(o, test_context())->request.mem_per_node_mb, 100u);
}

TEST(CliJobOptions, NodelistImpliesNodeCount) {
  JobOptions o;
  o.nodelist = "n[1-3]";
  EXPECT_EQ(to_job_request(o, test_context())->request.nnodes, 3u);
  o.nodes = "2";
  auto bad = to_job_request(o, test_context());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("-w/--nodelist"), std::string::npos);
}

struct BadCase {
  JobOptions opts;
  std::string expect;  // in the message
};

TEST(CliJobOptions, BadValuesNameTheOption) {
  auto with = [](auto set) {
    JobOptions o;
    set(o);
    return o;
  };
  std::vector<BadCase> cases{
      {with([](JobOptions& o) { o.nodes = "abc"; }), "-N/--nodes: expected a positive integer, got 'abc'"},
      {with([](JobOptions& o) { o.ntasks = "0"; }), "-n/--ntasks"},
      {with([](JobOptions& o) { o.cpus_per_task = "x"; }), "-c/--cpus-per-task"},
      {with([](JobOptions& o) { o.gpus_per_task = "-1"; }), "--gpus-per-task"},
      {with([](JobOptions& o) { o.mem = "10Q"; }), "--mem: invalid value '10Q'"},
      {with([](JobOptions& o) { o.time = "1x"; }), "-t/--time: invalid value '1x'"},
      {with([](JobOptions& o) { o.nodelist = "n[1-"; }), "-w/--nodelist"},
      {with([](JobOptions& o) { o.exclude = "n[1-"; }), "-x/--exclude"},
      {with([](JobOptions& o) { o.dependency = "afterok:xyz"; }), "-d/--dependency"},
      {with([](JobOptions& o) { o.begin = "garbage"; }), "--begin"},
      {with([](JobOptions& o) { o.export_env = "A-B"; }), "--export"},
      {with([](JobOptions& o) { o.urgency = "32"; }), "--urgency"},
      {with([](JobOptions& o) { o.setopt = {"=x"}; }), "--setopt"},
      {with([](JobOptions& o) { o.cc = "x"; }), "--cc"},
      {with([](JobOptions& o) { o.test_run_duration = "soon"; }), "--test-run-duration"},
  };
  for (const auto& c : cases) {
    auto r = to_job_request(c.opts, test_context());
    ASSERT_FALSE(r.ok()) << c.expect;
    EXPECT_NE(r.message().find(c.expect), std::string::npos) << r.message();
  }
}

TEST(CliJobOptions, UnknownWordsAreErrors) {
  EXPECT_FALSE(parse_job_option_words({"--bogus"}).ok());
  EXPECT_FALSE(parse_job_option_words({"stray"}).ok());
  EXPECT_FALSE(parse_job_option_words({"-N"}).ok());
}

TEST(CliJobOptions, MergeLetsTheLaterWin) {
  JobOptions base, over;
  base.nodes = "2";
  base.time = "10";
  base.setopt = {"a=1"};
  over.nodes = "4";
  over.exclusive = true;
  over.setopt = {"a=2"};
  JobOptions m = merge_job_options(base, over);
  EXPECT_EQ(m.nodes, "4");
  EXPECT_EQ(m.time, "10");
  EXPECT_TRUE(m.exclusive);
  EXPECT_EQ(m.setopt, (std::vector<std::string>{"a=1", "a=2"}));
}

}  // namespace
}  // namespace corral::cli
