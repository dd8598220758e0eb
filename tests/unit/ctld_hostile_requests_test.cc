// Requests written by hand, without the command line's own checks, straight to the
// controller: hostile or oversized input is refused with a message and changes nothing,
// and what a job's owner alone may read is withheld from others.
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include "ctld/controller.h"
#include "ctld_test_controller.h"
#include "job/jobspec.h"
#include "temp_dir.h"

namespace corral::ctld {
namespace {

using ::testing::HasSubstr;

constexpr uint32_t kAlice = 12345, kBob = 12346;

class CtldHostile : public ::testing::Test {
 protected:
  CtldHostile() { spdlog::set_level(spdlog::level::warn); }
  void SetUp() override {
    Config c = test::test_config(dir_);
    c.limits.max_batch_script = 1024;
    ctl_ = test::start_test_controller(dir_, c);
    ASSERT_TRUE(ctl_);
    link_ = test::register_one_node(*ctl_);
    ASSERT_TRUE(link_);
  }

  Status submit_text(uint32_t uid, const std::string& jobspec, v1::SubmitReply* rep) {
    v1::SubmitRequest req;
    req.add_jobspecs(jobspec);
    return ctl_->submit(Caller{uid, uid}, req, rep);
  }
  std::string valid_jobspec(const std::string& script = "") {
    job::JobRequest r;
    r.command = {"true"};
    r.batch_script = script;
    r.cwd = "/home/alice/secret-project";
    r.environment = {{"API_TOKEN", "hunter2"}};
    auto spec = job::build_jobspec(r);
    EXPECT_TRUE(spec.ok()) << spec.message();
    return job::jobspec_to_string(*spec);
  }
  size_t job_count() {
    v1::ListJobsRequest req;
    v1::ListJobsReply rep;
    EXPECT_TRUE(ctl_->list_jobs(Caller{0, 0}, req, &rep).ok());
    return static_cast<size_t>(rep.jobs_size());
  }

  test::TempDir dir_{"corral-ctld-hostile"};
  std::unique_ptr<Controller> ctl_;
  std::shared_ptr<AgentLink> link_;
};

TEST_F(CtldHostile, HostileJobspecsAreRefusedAndChangeNothing) {
  v1::SubmitReply rep;
  const std::string deep =
      R"({"version":1,"attributes":{"user":)" + std::string(200000, '[') + std::string(200000, ']') + "}}";
  auto st = submit_text(kAlice, deep, &rep);
  EXPECT_EQ(st.error().code, Errc::invalid_argument);
  EXPECT_THAT(st.message(), HasSubstr("nested more than 64 levels deep"));
  std::string bomb = "version: 1\na: &a [x,x,x,x,x,x,x,x,x]\n";
  for (char c = 'b', p = 'a'; c <= 'j'; ++c, ++p) {
    bomb += std::string(1, c) + ": &" + c + " [";
    for (int i = 0; i < 9; ++i) bomb += std::string(i ? ",*" : "*") + p;
    bomb += "]\n";
  }
  st = submit_text(kAlice, bomb, &rep);
  EXPECT_THAT(st.message(), HasSubstr("more than 1000000 values"));
  st = submit_text(kAlice, valid_jobspec(std::string(2000, '#')), &rep);
  EXPECT_THAT(st.message(), HasSubstr("more than the 1024 allowed (limits.max-batch-script)"));
  st = submit_text(kAlice, std::string(9u << 20, ' '), &rep);
  EXPECT_THAT(st.message(), HasSubstr("limits.max-jobspec"));
  v1::SubmitRequest cc;
  cc.add_jobspecs(valid_jobspec());
  cc.set_cc(std::string(5000, '1'));
  st = ctl_->submit(Caller{kAlice, kAlice}, cc, &rep);
  EXPECT_THAT(st.message(), HasSubstr("--cc"));
  EXPECT_EQ(job_count(), 0u);
}

TEST_F(CtldHostile, OtherUsersSeeNoSecrets) {
  v1::SubmitReply rep;
  auto submitted = submit_text(kAlice, valid_jobspec(), &rep);
  ASSERT_TRUE(submitted.ok()) << submitted.message();
  const uint64_t id = rep.jobids(0);
  v1::GetJobRequest req;
  req.set_jobid(id);
  req.set_with_eventlog(true);
  v1::JobInfo mine, theirs;
  ASSERT_TRUE(ctl_->get_job(Caller{kAlice, kAlice}, req, &mine).ok());
  ASSERT_TRUE(ctl_->get_job(Caller{kBob, kBob}, req, &theirs).ok());
  EXPECT_THAT(mine.jobspec(), HasSubstr("hunter2"));
  EXPECT_EQ(mine.cwd(), "/home/alice/secret-project");
  EXPECT_EQ(theirs.userid(), kAlice);
  EXPECT_TRUE(theirs.jobspec().empty());
  EXPECT_TRUE(theirs.cwd().empty());
  ASSERT_GT(theirs.eventlog_size(), 0);
  for (const auto& line : theirs.eventlog()) EXPECT_THAT(line, HasSubstr("\"context\":{}"));
  v1::ListJobsRequest lr;
  v1::ListJobsReply lrep;
  ASSERT_TRUE(ctl_->list_jobs(Caller{kBob, kBob}, lr, &lrep).ok());
  ASSERT_EQ(lrep.jobs_size(), 1);
  EXPECT_TRUE(lrep.jobs(0).cwd().empty());
  v1::JobTable table;
  ASSERT_TRUE(ctl_->list_job_table(Caller{kBob, kBob}, lr, &table).ok());
  ASSERT_EQ(table.cwd_size(), 1);
  EXPECT_EQ(table.strings(static_cast<int>(table.cwd(0))), "");
  v1::WatchRequest wr;
  wr.add_jobids(id);
  wr.set_history(true);
  wr.set_output(true);
  std::shared_ptr<Subscriber> sub;
  ASSERT_TRUE(ctl_->subscribe(Caller{kBob, kBob}, wr, &sub).ok());
  v1::WatchReply got;
  for (int i = 0; i < 20 && got.items_size() == 0; ++i) sub->next(got, 50);
  ASSERT_GT(got.items_size(), 0);
  for (const auto& item : got.items()) {
    ASSERT_TRUE(item.has_event());
    EXPECT_EQ(item.event().context(), "{}");
  }
}

}  // namespace
}  // namespace corral::ctld
