// The pure parts of the step commands: labels across chunks, StepSpec from options, step
// exit codes, history times and rows, cancel targets, merged step listings.
#include <sys/wait.h>

#include <csignal>

#include <gtest/gtest.h>

#include "cli/cancel_targets.h"
#include "cli/history_format.h"
#include "cli/job_format.h"
#include "cli/step_format.h"
#include "cli/step_io.h"
#include "cli/step_spec.h"
#include "cli/step_target.h"
#include "job/step_id.h"

namespace corral::cli {
namespace {

namespace pb = corral::v1;

// ------------------------------------------------------------------ labels

TEST(LineLabeler, LabelsEveryLineAndHoldsBackLinesSplitAcrossChunks) {
  LineLabeler l;
  EXPECT_EQ(l.label(0, false, "hel", false), "");
  EXPECT_EQ(l.label(0, false, "lo\nwor", false), "0: hello\n");
  EXPECT_EQ(l.label(0, false, "ld\n", false), "0: world\n");
  EXPECT_EQ(l.label(0, false, "a\nb\n\nc\n", false), "0: a\n0: b\n0: \n0: c\n");
}

TEST(LineLabeler, NeverMixesLinesOfDifferentRanksOrStreams) {
  LineLabeler l;
  EXPECT_EQ(l.label(1, false, "one", false), "");
  EXPECT_EQ(l.label(2, false, "two\n", false), "2: two\n");
  EXPECT_EQ(l.label(1, true, "err\n", false), "1: err\n");  // stderr has its own lines
  EXPECT_EQ(l.label(1, false, " more\n", false), "1: one more\n");
  EXPECT_EQ(l.label(12, false, "x\n", false), "12: x\n");
}

TEST(LineLabeler, EndsAnUnfinishedLineAtEofOrFlush) {
  LineLabeler l;
  EXPECT_EQ(l.label(3, false, "no newline", true), "3: no newline\n");
  EXPECT_EQ(l.label(3, false, "", true), "");
  EXPECT_EQ(l.label(3, false, "next\n", false), "3: next\n");
  l.label(4, false, "out", false);
  l.label(5, true, "err", false);
  EXPECT_EQ(l.flush(), (std::pair<std::string, std::string>{"4: out\n", "5: err\n"}));
  EXPECT_EQ(l.flush(), (std::pair<std::string, std::string>{"", ""}));
}

// ------------------------------------------------------------------ exit codes

TEST(StepExitCode, IsTheTasksCodeOrOneWhenNothingRan) {
  pb::StepExit e;
  e.set_state("COMPLETED");
  e.set_waitstatus(0);
  e.add_tasks()->set_rank(0);
  EXPECT_EQ(step_exit_code(e), 0);
  e.set_waitstatus(7 << 8);
  e.set_state("FAILED");
  EXPECT_EQ(step_exit_code(e), 7);
  e.set_waitstatus(SIGKILL);
  EXPECT_EQ(step_exit_code(e), 128 + SIGKILL);
  pb::StepExit refused;
  refused.set_state("FAILED");
  refused.set_waitstatus(0);
  refused.set_error("the step asks for 17 cores; the job has 16");
  EXPECT_EQ(step_exit_code(refused), 1);
  refused.set_waitstatus(-1);
  EXPECT_EQ(step_exit_code(refused), 1);
  EXPECT_EQ(step_label(42, 3), "42.3");
  EXPECT_EQ(step_label(42, job::kBatchStep), "42.batch");
}

// ------------------------------------------------------------------ StepSpec

JobContext context() {
  JobContext ctx;
  ctx.cwd = "/home/u/work";
  ctx.env = {{"PATH", "/usr/bin"}, {"HOME", "/home/u"}};
  ctx.now = 1700000000;
  return ctx;
}

TEST(StepSpec, TakesCountsPlacementFlagsEnvironmentAndCwd) {
  JobOptions o;
  o.nodes = "2";
  o.ntasks = "8";
  o.cpus_per_task = "2";
  o.gpus_per_task = "1";
  o.nodelist = "node[0-1]";
  StepFlags f;
  f.overlap = true;
  f.immediate = true;
  f.kill_on_bad_exit = true;
  auto spec = build_step_spec(42, o, f, {"/usr/bin/hostname", "-s"}, context());
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_EQ(spec->jobid(), 42u);
  ASSERT_EQ(spec->argv_size(), 2);
  EXPECT_EQ(spec->argv(1), "-s");
  EXPECT_EQ(spec->nnodes(), 2u);
  EXPECT_EQ(spec->ntasks(), 8u);
  EXPECT_EQ(spec->cores_per_task(), 2u);
  EXPECT_EQ(spec->gpus_per_task(), 1u);
  EXPECT_EQ(spec->nodelist(), "node[0-1]");
  EXPECT_TRUE(spec->overlap());
  EXPECT_TRUE(spec->immediate());
  EXPECT_TRUE(spec->kill_on_bad_exit());
  EXPECT_EQ(spec->name(), "hostname");
  EXPECT_EQ(spec->cwd(), "/home/u/work");
  EXPECT_EQ(spec->env(1), "PATH=/usr/bin");
  EXPECT_EQ(spec->env_size(), 2);
  EXPECT_TRUE(spec->stdin_open());
  EXPECT_TRUE(spec->input().empty());
}

TEST(StepSpec, DefaultsLeaveTheChoiceToTheStepManager) {
  auto spec = build_step_spec(7, JobOptions{}, StepFlags{}, {"true"}, context());
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_EQ(spec->nnodes(), 0u);
  EXPECT_EQ(spec->ntasks(), 0u);
  EXPECT_EQ(spec->cores_per_task(), 1u);
  EXPECT_FALSE(spec->overlap());
  EXPECT_FALSE(spec->immediate());
  EXPECT_EQ(spec->nodelist(), "");
}

TEST(StepSpec, NodelistAloneSetsTheNodeCountAndFilesReplaceStreams) {
  JobOptions o;
  o.nodelist = "node[3-5]";
  o.input = "in.txt";
  o.output = "out-%t.txt";
  o.error = "err.txt";
  o.job_name = "mystep";
  o.chdir = "sub";
  auto spec = build_step_spec(7, o, StepFlags{}, {"a.out"}, context());
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_EQ(spec->nnodes(), 3u);
  EXPECT_EQ(spec->input(), "in.txt");
  EXPECT_EQ(spec->output(), "out-%t.txt");
  EXPECT_EQ(spec->error(), "err.txt");
  EXPECT_FALSE(spec->stdin_open());
  EXPECT_EQ(spec->name(), "mystep");
  EXPECT_EQ(spec->cwd(), "/home/u/work/sub");
}

TEST(StepSpec, RefusesJobOnlyOptionsAndBadValuesByName) {
  JobOptions o;
  o.time = "10";
  auto r = build_step_spec(42, o, StepFlags{}, {"true"}, context());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("-t/--time"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("42"), std::string::npos) << r.message();

  JobOptions part;
  part.partition = "debug";
  EXPECT_NE(build_step_spec(1, part, {}, {"true"}, context()).message().find("-p/--partition"), std::string::npos);

  JobOptions bad;
  bad.ntasks = "zero";
  auto b = build_step_spec(1, bad, {}, {"true"}, context());
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.message().find("-n/--ntasks"), std::string::npos) << b.message();

  JobOptions few;
  few.nodes = "1";
  few.nodelist = "node[0-3]";
  EXPECT_FALSE(build_step_spec(1, few, {}, {"true"}, context()).ok());

  JobOptions fn;
  fn.nodelist = "switch{s1}";
  EXPECT_FALSE(build_step_spec(1, fn, {}, {"true"}, context()).ok());

  EXPECT_FALSE(build_step_spec(1, JobOptions{}, {}, {}, context()).ok());  // no command
}

TEST(StepTarget, ComesFromTheEnvironmentInsideAnAllocation) {
  std::map<std::string, std::string> env = {{"CORRAL_JOBID", "42"}, {"CORRAL_STEPMGR", "unix:/tmp/a/step.sock"}};
  auto t = step_target_from_env(env, 0);
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE(t->has_value());
  EXPECT_EQ((*t)->jobid, 42u);
  EXPECT_EQ((*t)->stepmgr, "unix:/tmp/a/step.sock");
  EXPECT_TRUE(step_target_from_env(env, 42)->has_value());
  EXPECT_FALSE(step_target_from_env(env, 43)->has_value());  // another job: ask the controller
  EXPECT_FALSE(step_target_from_env({{"CORRAL_JOBID", "42"}}, 0)->has_value());
  EXPECT_FALSE(step_target_from_env({{"CORRAL_JOBID", "x"}, {"CORRAL_STEPMGR", "a"}}, 0).ok());
}

TEST(StepTarget, SaysWhyAJobHasNoStepManager) {
  pb::JobInfo j;
  j.set_id(42);
  j.set_state("SCHED");
  j.set_reason("Resources");
  EXPECT_EQ(not_running_message(j), "job 42 is not running (it is SCHED: Resources)");
  j.set_state("INACTIVE");
  j.set_result("COMPLETED");
  EXPECT_NE(not_running_message(j).find("has ended (COMPLETED)"), std::string::npos);
}

// ------------------------------------------------------------------ cancel

TEST(CancelTargets, MixesJobsAndSteps) {
  auto t = parse_cancel_targets({"42.3", "43", "44.batch,45", "46.interactive"});
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ(t->jobids, (std::vector<uint64_t>{43, 45}));
  ASSERT_EQ(t->steps.size(), 3u);
  EXPECT_EQ(t->steps[0].jobid, 42u);
  EXPECT_EQ(t->steps[0].step, 3u);
  EXPECT_EQ(t->steps[1].step, job::kBatchStep);
  EXPECT_EQ(t->steps[2].step, job::kInteractiveStep);
}

TEST(CancelTargets, NamesTheBadWord) {
  auto bad = parse_cancel_targets({"42", "42.x"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("42.x"), std::string::npos) << bad.message();
  auto word = parse_cancel_targets({"abc"});
  ASSERT_FALSE(word.ok());
  EXPECT_NE(word.message().find("'abc'"), std::string::npos) << word.message();
  EXPECT_FALSE(parse_cancel_targets({".3"}).ok());
  EXPECT_FALSE(parse_cancel_targets({"42."}).ok());
}

// ------------------------------------------------------------------ history

TEST(HistoryTime, AcceptsRelativeAbsoluteAndEpochTimes) {
  const double now = 1700000000;
  EXPECT_DOUBLE_EQ(*parse_history_time("-S", "now", now), now);
  EXPECT_DOUBLE_EQ(*parse_history_time("-S", "now-1h", now), now - 3600);
  EXPECT_DOUBLE_EQ(*parse_history_time("-S", "now-30min", now), now - 1800);
  EXPECT_DOUBLE_EQ(*parse_history_time("-S", "now-2days", now), now - 2 * 86400);
  EXPECT_DOUBLE_EQ(*parse_history_time("-S", "now+60", now), now + 60);
  EXPECT_DOUBLE_EQ(*parse_history_time("-S", "1600000000", now), 1600000000);
  EXPECT_DOUBLE_EQ(*parse_history_time("-S", "@1600000000", now), 1600000000);
  auto iso = parse_history_time("-S", "2023-11-14T12:00:00", now);
  ASSERT_TRUE(iso.ok());
  auto day = parse_history_time("-S", "2023-11-14", now);
  ASSERT_TRUE(day.ok());
  EXPECT_DOUBLE_EQ(*iso - *day, 12 * 3600);
  auto clock = parse_history_time("-S", "10:00", now);
  ASSERT_TRUE(clock.ok());
  EXPECT_LE(*clock, now);  // the latest 10:00, not tomorrow's
  EXPECT_GT(*clock, now - 86400);
}

TEST(HistoryTime, ErrorsNameTheOptionAndValue) {
  auto r = parse_history_time("-E/--endtime", "yesterdayish", 0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("-E/--endtime"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("yesterdayish"), std::string::npos) << r.message();
  EXPECT_FALSE(parse_history_time("-S", "now-", 0).ok());
  EXPECT_FALSE(parse_history_time("-S", "now-1fortnight", 0).ok());
  EXPECT_FALSE(parse_history_time("-S", "", 0).ok());
}

TEST(HistoryFormat, ExitCodesAndCpuTimesLookLikeSacct) {
  EXPECT_EQ(exit_code_pair(0), "0:0");
  EXPECT_EQ(exit_code_pair(3 << 8), "3:0");
  EXPECT_EQ(exit_code_pair(SIGKILL), "0:9");
  EXPECT_EQ(exit_code_pair(-1), "0:0");
  EXPECT_EQ(format_cpu_time(0), "00:00.000");
  EXPECT_EQ(format_cpu_time(1.5), "00:01.500");
  EXPECT_EQ(format_cpu_time(125.25), "02:05.250");
  EXPECT_EQ(format_cpu_time(3725), "01:02:05");
  EXPECT_EQ(format_cpu_time(2 * 86400 + 3600), "2-01:00:00");
}

pb::StepInfo make_step(uint64_t jobid, const std::string& step, const std::string& state) {
  pb::StepInfo s;
  s.set_jobid(jobid);
  s.set_step(step);
  s.set_state(state);
  s.set_name("sh");
  s.set_nnodes(2);
  s.set_ntasks(4);
  s.set_ncores(4);
  s.set_nodelist("node[0-1]");
  s.set_t_start(1000);
  s.set_t_end(state == "RUNNING" ? 0 : 1065);
  s.set_waitstatus(state == "RUNNING" ? -1 : 2 << 8);
  s.set_cpu_seconds(3);
  return s;
}

TEST(HistoryFormat, RowsListEachJobThenItsSteps) {
  pb::HistoryReply reply;
  auto* h = reply.add_jobs();
  auto* j = h->mutable_job();
  j->set_id(42);
  j->set_name("job.sh");
  j->set_username("alice");
  j->set_state("INACTIVE");
  j->set_result("FAILED");
  j->set_t_run(1000);
  j->set_t_cleanup(1100);
  j->set_t_inactive(1101);
  j->set_waitstatus(1 << 8);
  j->set_nnodes(2);
  j->set_nodelist("node[0-1]");
  j->set_cpu_seconds(1);
  *h->add_steps() = make_step(42, "1", "FAILED");
  *h->add_steps() = make_step(42, "0", "COMPLETED");
  *h->add_steps() = make_step(42, "batch", "COMPLETED");
  auto rows = history_rows(reply, 2000);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"42", "job.sh", "alice", "FAILED", "1:40", "1:0", "2", "node[0-1]",
                                               "00:07.000"}));
  EXPECT_EQ(rows[1][0], "42.batch");
  EXPECT_EQ(rows[2][0], "42.0");
  EXPECT_EQ(rows[3][0], "42.1");
  EXPECT_EQ(rows[3][4], "1:05");
  EXPECT_EQ(rows[3][5], "2:0");
  EXPECT_EQ(rows[3][8], "00:03.000");
}

// ------------------------------------------------------------------ steps listing

TEST(StepListing, MergesLiveAndRecordedStepsWithTheLiveViewWinning) {
  std::vector<pb::StepInfo> recorded = {make_step(42, "0", "COMPLETED"), make_step(42, "2", "FAILED")};
  pb::StepInfo stale = make_step(42, "10", "COMPLETED");
  recorded.push_back(stale);
  std::vector<pb::StepInfo> live = {make_step(42, "10", "RUNNING"), make_step(42, "2", "FAILED")};
  auto merged = merge_steps(live, recorded);
  ASSERT_EQ(merged.size(), 3u);
  EXPECT_EQ(merged[0].step(), "0");
  EXPECT_EQ(merged[1].step(), "2");
  EXPECT_EQ(merged[2].step(), "10");  // by number, not by text
  EXPECT_EQ(merged[2].state(), "RUNNING");
  auto cells = step_cells(merged[2], 1030);
  EXPECT_EQ(cells, (std::vector<std::string>{"42.10", "sh", "RUNNING", "2", "4", "4", "0:30", "node[0-1]"}));
}

}  // namespace
}  // namespace corral::cli
