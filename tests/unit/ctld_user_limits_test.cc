#include "ctld/user_limits.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ctld/config.h"

namespace corral::ctld {
namespace {

using ::testing::HasSubstr;

TEST(UserLimits, UnfinishedJobsPerUser) {
  LimitsConfig cfg;
  cfg.max_submit_jobs = 3;
  UserLimits limits(cfg);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(limits.admit(1001, 1, 0).ok());
    limits.job_added(1001);
  }
  auto st = limits.admit(1001, 1, 0);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, Errc::resource_exhausted);
  EXPECT_THAT(st.message(), HasSubstr("uid 1001 has 3 unfinished job(s)"));
  EXPECT_THAT(st.message(), HasSubstr("limits.max-submit-jobs"));
  EXPECT_TRUE(limits.admit(1002, 3, 0).ok());   // another user is not affected
  EXPECT_FALSE(limits.admit(1002, 4, 0).ok());  // a --cc of 4 would pass the limit
  limits.job_removed(1001);
  EXPECT_TRUE(limits.admit(1001, 1, 0).ok());
}

TEST(UserLimits, SubmissionRateIsATokenBucketPerUser) {
  LimitsConfig cfg;
  cfg.submit_rate = 2;
  cfg.submit_burst = 3;
  UserLimits limits(cfg);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limits.admit(7, 1, 100.0).ok()) << i;
  auto st = limits.admit(7, 1, 100.0);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("limits.submit-rate"));
  EXPECT_THAT(st.message(), HasSubstr("try again in 0.5 s"));
  EXPECT_TRUE(limits.admit(8, 1, 100.0).ok());  // others keep their own bucket
  EXPECT_TRUE(limits.admit(7, 1, 100.5).ok());  // one token back after half a second
  EXPECT_FALSE(limits.admit(7, 1, 100.6).ok());
  EXPECT_TRUE(limits.admit(7, 1, 200.0).ok());  // refilled, up to the burst
}

TEST(UserLimits, RunningJobsPerUser) {
  LimitsConfig cfg;
  cfg.max_running_jobs = 2;
  UserLimits limits(cfg);
  EXPECT_TRUE(limits.may_run(5));
  limits.run_added(5);
  limits.run_added(5);
  EXPECT_FALSE(limits.may_run(5));
  EXPECT_TRUE(limits.may_run(6));
  limits.run_removed(5);
  EXPECT_TRUE(limits.may_run(5));
  limits.run_removed(99);  // never counted: nothing happens
}

TEST(UserLimits, NoLimitsByDefault) {
  LimitsConfig cfg;
  UserLimits limits(cfg);
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(limits.admit(1, 1, 0).ok());
    limits.job_added(1);
  }
  EXPECT_EQ(limits.active(1), 1000u);
}

TEST(LimitsConfig, KeysAndBadValues) {
  auto cfg = load_config(
      "", {"limits.max-submit-jobs=10", "limits.max-running-jobs=4", "limits.submit-rate=2.5", "limits.submit-burst=5",
           "limits.max-batch-script=\"1MiB\"", "controller.private-data=[\"jobs\"]"});
  ASSERT_TRUE(cfg.ok()) << cfg.message();
  EXPECT_EQ(cfg->limits.max_submit_jobs, 10u);
  EXPECT_EQ(cfg->limits.max_running_jobs, 4u);
  EXPECT_DOUBLE_EQ(cfg->limits.submit_rate, 2.5);
  EXPECT_EQ(cfg->limits.submit_burst, 5u);
  EXPECT_EQ(cfg->limits.max_batch_script, 1u << 20);
  EXPECT_TRUE(cfg->private_jobs);
  auto defaults = load_config("", {});
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->limits.max_batch_script, 4u << 20);
  EXPECT_FALSE(defaults->private_jobs);
  for (const char* bad :
       {"limits.max-submit-jobs=-1", "limits.submit-rate=-2", "limits.max-batch-script=\"12\"", "limits.nonsense=1",
        "controller.private-data=[\"everything\"]", "limits.max-batch-script=\"64MiB\""}) {
    auto r = load_config("", {bad});
    EXPECT_FALSE(r.ok()) << bad;
  }
  EXPECT_THAT(load_config("", {"controller.private-data=[\"everything\"]"}).message(),
              HasSubstr("unknown item 'everything' (known: jobs)"));
}

}  // namespace
}  // namespace corral::ctld
