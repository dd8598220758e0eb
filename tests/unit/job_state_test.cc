#include "job/job_state.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace corral::job {
namespace {

using ::testing::HasSubstr;

// Applies events at timestamps 1, 2, 3, ...; fails the test on the first error.
class JobStateTest : public ::testing::Test {
 protected:
  Status post(const std::string& name, const std::string& context = "{}") {
    return apply_event(status_, Event{++clock_, name, context});
  }
  void must(const std::string& name, const std::string& context = "{}") {
    auto st = post(name, context);
    ASSERT_TRUE(st.ok()) << name << ": " << st.message();
  }
  void to_sched() {
    must("submit", R"({"urgency":20,"userid":1000})");
    must("validate");
    must("depend");
    must("priority", R"({"priority":100})");
  }
  void to_run() {
    to_sched();
    must("alloc");
  }

  JobStatus status_;
  double clock_ = 0;
};

TEST_F(JobStateTest, HappyPath) {
  must("submit", R"({"urgency":20,"userid":1000})");
  EXPECT_EQ(status_.state, JobState::NEW);
  EXPECT_EQ(status_.urgency, 20u);
  EXPECT_EQ(status_.t_submit, 1);
  must("validate");
  EXPECT_EQ(status_.state, JobState::DEPEND);
  must("depend");
  EXPECT_EQ(status_.state, JobState::PRIORITY);
  must("priority", R"({"priority":100})");
  EXPECT_EQ(status_.state, JobState::SCHED);
  EXPECT_EQ(status_.priority, 100);
  must("priority", R"({"priority":7})");
  EXPECT_EQ(status_.priority, 7);
  must("alloc");
  EXPECT_EQ(status_.state, JobState::RUN);
  EXPECT_EQ(status_.t_run, 6);
  must("prolog-start", R"({"description":"cray-slingshot"})");
  EXPECT_EQ(status_.prolog_actions.size(), 1u);
  must("prolog-finish", R"({"description":"cray-slingshot","status":0})");
  EXPECT_TRUE(status_.prolog_actions.empty());
  must("start");
  EXPECT_TRUE(status_.started);
  must("cray-slingshot", R"({"vnis":[1024]})");  // hook events change nothing
  must("finish", R"({"status":0})");
  EXPECT_EQ(status_.state, JobState::CLEANUP);
  EXPECT_EQ(status_.t_cleanup, clock_);
  must("release", R"({"ranks":"all","final":true})");
  EXPECT_TRUE(status_.released);
  must("epilog-start", R"({"description":"dws"})");
  auto early = post("clean");
  EXPECT_THAT(early.message(), HasSubstr("epilog actions still running: dws"));
  must("epilog-finish", R"({"description":"dws","status":0})");
  EXPECT_THAT(post("clean").message(), HasSubstr("not freed"));
  must("free");
  must("clean");
  EXPECT_EQ(status_.state, JobState::INACTIVE);
  EXPECT_EQ(status_.t_inactive, clock_);
  EXPECT_EQ(job_result(status_), "COMPLETED");
}

TEST_F(JobStateTest, RequeueAfterANodeFailureStartsTheRunAgainFromSched) {
  to_run();
  must("start");
  must("exception", R"({"type":"node-fail","severity":0,"note":"node c1 is down"})");
  EXPECT_EQ(status_.state, JobState::CLEANUP);
  must("finish", R"({"status":9})");
  must("release", R"({"ranks":"0","final":true})");
  EXPECT_THAT(post("requeue").message(), HasSubstr("not freed"));
  must("epilog-start", R"({"description":"epilog"})");
  must("free");
  EXPECT_THAT(post("requeue").message(), HasSubstr("epilog actions still running"));
  must("epilog-finish", R"({"description":"epilog","status":0})");
  must("requeue", R"({"attempt":1,"note":"node c1 is down"})");
  EXPECT_EQ(status_.state, JobState::SCHED);
  EXPECT_EQ(status_.requeues, 1u);
  EXPECT_EQ(status_.priority, 100);
  EXPECT_EQ(status_.urgency, 20u);
  EXPECT_EQ(status_.t_submit, 1);
  // The next run starts clean: no exception, no finish, resources to allocate again.
  EXPECT_FALSE(status_.fatal_exception);
  EXPECT_TRUE(status_.exception_type.empty());
  EXPECT_FALSE(status_.finished || status_.started || status_.allocated || status_.freed);
  must("alloc");
  must("start");
  must("finish", R"({"status":0})");
  must("release", R"({"ranks":"0","final":true})");
  must("free");
  must("clean");
  EXPECT_EQ(job_result(status_), "COMPLETED");
  EXPECT_EQ(status_.requeues, 1u);
}

TEST_F(JobStateTest, RequeueOnlyFromCleanupAndCancelIsRemembered) {
  to_run();
  EXPECT_THAT(post("requeue").message(), HasSubstr("not valid in state RUN"));
  must("exception", R"({"type":"node-fail","severity":0})");
  must("exception", R"({"type":"cancel","severity":0})");
  EXPECT_EQ(status_.exception_type, "node-fail");  // the first fatal one names the end
  EXPECT_TRUE(status_.canceled);
  must("free");
  EXPECT_THAT(post("requeue", R"({"note":7})").message(), HasSubstr("note must be a string"));
}

TEST_F(JobStateTest, DependenciesHoldDepend) {
  must("submit");
  must("dependency-add", R"({"description":"afterok:12"})");
  must("validate");
  must("dependency-add", R"({"description":"dws-setup"})");
  auto st = post("depend");
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("afterok:12, dws-setup"));
  EXPECT_EQ(status_.state, JobState::DEPEND);
  must("dependency-remove", R"({"description":"afterok:12"})");
  must("dependency-remove", R"({"description":"dws-setup"})");
  must("dependency-remove", R"({"description":"dws-setup"})");  // idempotent
  must("depend");
  EXPECT_EQ(status_.state, JobState::PRIORITY);
  EXPECT_FALSE(post("dependency-add", R"({"description":"late"})").ok());
  EXPECT_THAT(post("dependency-add", "{}").message(), HasSubstr("not valid in state PRIORITY"));
}

TEST_F(JobStateTest, EventsOutOfOrderAreErrorsAndChangeNothing) {
  must("submit");
  must("validate");
  JobStatus before = status_;
  auto st = post("alloc");
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("event alloc: not valid in state DEPEND"));
  EXPECT_EQ(status_.state, before.state);
  EXPECT_FALSE(status_.allocated);
  EXPECT_FALSE(post("submit").ok());
  EXPECT_FALSE(post("finish", R"({"status":0})").ok());
  EXPECT_FALSE(post("clean").ok());
}

TEST_F(JobStateTest, BadContexts) {
  must("submit");
  must("validate");
  must("depend");
  EXPECT_THAT(post("priority").message(), HasSubstr("context.priority is missing"));
  EXPECT_THAT(post("priority", R"({"priority":"high"})").message(), HasSubstr("context.priority must be an integer"));
  EXPECT_THAT(post("priority", "not json").message(), HasSubstr("context is not a JSON object"));
  EXPECT_THAT(post("urgency", R"({"urgency":32})").message(), HasSubstr("outside 0-31"));
  must("urgency", R"({"urgency":0})");
  EXPECT_EQ(status_.urgency, 0u);
  EXPECT_THAT(post("exception", R"({"severity":0})").message(), HasSubstr("context.type is missing"));
  EXPECT_THAT(post("exception", R"({"type":"x","severity":9})").message(), HasSubstr("outside 0-7"));
  EXPECT_EQ(status_.state, JobState::PRIORITY);
}

TEST_F(JobStateTest, InvalidateEndsANewJob) {
  must("submit");
  must("invalidate");
  EXPECT_EQ(status_.state, JobState::INACTIVE);
  EXPECT_EQ(job_result(status_), "FAILED");
}

TEST_F(JobStateTest, NonFatalExceptionChangesNothing) {
  to_run();
  must("exception", R"({"type":"dws","severity":1,"note":"slow"})");
  EXPECT_EQ(status_.state, JobState::RUN);
  EXPECT_FALSE(status_.fatal_exception);
}

// A fatal exception moves every active state before CLEANUP to CLEANUP.
TEST_F(JobStateTest, FatalExceptionAtEachState) {
  const std::vector<std::string> path = {"submit", "validate", "depend", "priority", "alloc"};
  const std::vector<JobState> states = {JobState::NEW, JobState::DEPEND, JobState::PRIORITY, JobState::SCHED,
                                        JobState::RUN};
  for (size_t n = 1; n <= path.size(); ++n) {
    status_ = JobStatus();
    for (size_t i = 0; i < n; ++i) {
      must(path[i], path[i] == "priority" ? R"({"priority":1})" : "{}");
    }
    ASSERT_EQ(status_.state, states[n - 1]);
    must("exception", R"({"type":"cancel","severity":0,"note":"by user","userid":1000})");
    EXPECT_EQ(status_.state, JobState::CLEANUP) << "from " << state_name(states[n - 1]);
    EXPECT_EQ(status_.exception_type, "cancel");
    EXPECT_EQ(status_.exception_note, "by user");
    if (status_.allocated) must("free");
    must("clean");
    EXPECT_EQ(job_result(status_), "CANCELED");
  }
}

TEST_F(JobStateTest, FirstFatalExceptionWins) {
  to_run();
  must("start");
  must("exception", R"({"type":"timeout","severity":0,"note":"time limit"})");
  must("exception", R"({"type":"cancel","severity":0})");
  EXPECT_EQ(status_.exception_type, "timeout");
  must("finish", R"({"status":9})");  // tasks exit after the kill, already in CLEANUP
  EXPECT_EQ(status_.state, JobState::CLEANUP);
  must("free");
  must("clean");
  EXPECT_EQ(job_result(status_), "TIMEOUT");
  EXPECT_FALSE(post("exception", R"({"type":"x","severity":0})").ok());
}

TEST_F(JobStateTest, AnOutOfMemoryKillNamesTheResultUnlessTimeOrCancelEndedIt) {
  to_run();
  must("start");
  must("exception", R"({"type":"oom","severity":1,"note":"node0: 64 MiB"})");
  EXPECT_EQ(status_.state, JobState::RUN);  // not fatal: the job's other tasks go on
  must("finish", R"({"status":0})");        // even when the script itself exits 0
  must("free");
  must("clean");
  EXPECT_EQ(job_result(status_), "OUT_OF_MEMORY");
  status_ = {};
  to_run();
  must("start");
  must("exception", R"({"type":"oom","severity":1})");
  must("exception", R"({"type":"timeout","severity":0})");
  EXPECT_EQ(job_result(status_), "TIMEOUT");
}

TEST_F(JobStateTest, PrologFailure) {
  to_run();
  must("prolog-start", R"({"description":"rabbit"})");
  EXPECT_THAT(post("start").message(), HasSubstr("prolog actions still running: rabbit"));
  EXPECT_THAT(post("prolog-finish", R"({"description":"other","status":0})").message(),
              HasSubstr("no action \"other\""));
  must("exception", R"({"type":"prolog","severity":0,"note":"rabbit failed"})");
  must("prolog-finish", R"({"description":"rabbit","status":1})");
  EXPECT_TRUE(status_.prolog_failed);
  EXPECT_THAT(post("finish", R"({"status":0})").message(), HasSubstr("never started"));
  must("free");
  must("clean");
  EXPECT_EQ(job_result(status_), "FAILED");
}

TEST_F(JobStateTest, NonZeroExitFails) {
  to_run();
  must("start");
  must("finish", R"({"status":256})");
  EXPECT_EQ(status_.waitstatus, 256);
  must("free");
  must("clean");
  EXPECT_EQ(job_result(status_), "FAILED");
}

TEST_F(JobStateTest, MemoDebugAndUnknownEventsAreAccepted) {
  must("submit");
  must("memo", R"({"note":"x"})");
  must("debug", R"({"anything":[1,2]})");
  must("my-hook-event", "not even json");
  EXPECT_EQ(status_.state, JobState::NEW);
}

TEST(JobStateNamesTest, NamesAndAbbreviations) {
  EXPECT_EQ(state_name(JobState::SCHED), "SCHED");
  EXPECT_EQ(state_abbrev(JobState::SCHED), "S");
  EXPECT_EQ(state_abbrev(JobState::CLEANUP), "C");
  EXPECT_EQ(state_name(JobState::INACTIVE), "INACTIVE");
}

TEST(JobStateNamesTest, ParseStateMask) {
  EXPECT_EQ(*parse_state_mask("run"), 16u);
  EXPECT_EQ(*parse_state_mask("SCHED"), 8u);
  EXPECT_EQ(*parse_state_mask("Pending"), 2u | 4u | 8u);
  EXPECT_EQ(*parse_state_mask("running"), 16u | 32u);
  EXPECT_EQ(*parse_state_mask("active"), 63u);
  EXPECT_EQ(*parse_state_mask("inactive"), 64u);
  EXPECT_EQ(*parse_state_mask("sched,run"), 24u);
  auto bad = parse_state_mask("queued");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.message(), HasSubstr("unknown job state \"queued\""));
}

}  // namespace
}  // namespace corral::job
