#include <csignal>
#include <ctime>

#include <gtest/gtest.h>

#include "cli/values.h"

namespace corral::cli {
namespace {

TEST(CliValues, PositiveIntegersNameTheOptionAndValue) {
  EXPECT_EQ(*parse_positive("-N/--nodes", "4"), 4u);
  auto bad = parse_positive("-N/--nodes", "abc");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.message(), "-N/--nodes: expected a positive integer, got 'abc'");
  EXPECT_FALSE(parse_positive("-N/--nodes", "0").ok());
  EXPECT_FALSE(parse_positive("-N/--nodes", "-1").ok());
  EXPECT_FALSE(parse_positive("-N/--nodes", "2x").ok());
  EXPECT_FALSE(parse_positive("-N/--nodes", "").ok());
  EXPECT_FALSE(parse_positive("-N/--nodes", "99999999999").ok());
  EXPECT_EQ(*parse_non_negative("--gpus-per-task", "0"), 0u);
}

TEST(CliValues, RangesSayTheRange) {
  EXPECT_EQ(*parse_in_range("--urgency", "31", 0, 31), 31u);
  auto bad = parse_in_range("--urgency", "32", 0, 31);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.message(), "--urgency: expected an integer from 0 to 31, got '32'");
}

TEST(CliValues, Signals) {
  EXPECT_EQ(*parse_signal("-s", "TERM"), SIGTERM);
  EXPECT_EQ(*parse_signal("-s", "sigusr1"), SIGUSR1);
  EXPECT_EQ(*parse_signal("-s", "9"), 9);
  EXPECT_FALSE(parse_signal("-s", "0").ok());
  EXPECT_FALSE(parse_signal("-s", "BOGUS").ok());
}

TEST(CliValues, Users) {
  EXPECT_EQ(*parse_user("-u", "0"), 0u);
  EXPECT_EQ(*parse_user("-u", "root"), 0u);
  auto bad = parse_user("-u", "no-such-user-xyz");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("no-such-user-xyz"), std::string::npos);
}

TEST(CliValues, JobIds) {
  EXPECT_EQ(*parse_jobid("12"), 12u);
  EXPECT_FALSE(parse_jobid("0").ok());
  EXPECT_FALSE(parse_jobid("12.batch").ok());
}

TEST(CliValues, BeginRelative) {
  const double now = 1700000000;
  EXPECT_DOUBLE_EQ(*parse_begin_time("now", now), now);
  EXPECT_DOUBLE_EQ(*parse_begin_time("now+60", now), now + 60);
  EXPECT_DOUBLE_EQ(*parse_begin_time("now+1hour", now), now + 3600);
  EXPECT_DOUBLE_EQ(*parse_begin_time("now+2days", now), now + 2 * 86400);
  EXPECT_DOUBLE_EQ(*parse_begin_time("now+30m", now), now + 1800);
  EXPECT_DOUBLE_EQ(*parse_begin_time("@1700000123", now), 1700000123);
  EXPECT_FALSE(parse_begin_time("now+", now).ok());
  EXPECT_FALSE(parse_begin_time("now+5parsecs", now).ok());
  auto bad = parse_begin_time("garbage", now);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("--begin"), std::string::npos);
  EXPECT_NE(bad.message().find("garbage"), std::string::npos);
}

TEST(CliValues, BeginClockIsTheNextSuchTime) {
  const double now = 1700000000;
  double t = *parse_begin_time("10:30", now);
  EXPECT_GT(t, now);
  EXPECT_LE(t, now + 86400 + 3600);  // within a day (DST may add an hour)
  std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  localtime_r(&tt, &tm);
  EXPECT_EQ(tm.tm_hour, 10);
  EXPECT_EQ(tm.tm_min, 30);
  EXPECT_FALSE(parse_begin_time("25:00", now).ok());
  EXPECT_FALSE(parse_begin_time("10:3", now).ok());
}

TEST(CliValues, BeginDate) {
  double t = *parse_begin_time("2030-01-02T03:04:05", 0);
  std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  localtime_r(&tt, &tm);
  EXPECT_EQ(tm.tm_year, 130);
  EXPECT_EQ(tm.tm_mon, 0);
  EXPECT_EQ(tm.tm_mday, 2);
  EXPECT_EQ(tm.tm_hour, 3);
  EXPECT_EQ(tm.tm_sec, 5);
  EXPECT_TRUE(parse_begin_time("2030-01-02", 0).ok());
  EXPECT_FALSE(parse_begin_time("2030-13-02", 0).ok());
  EXPECT_FALSE(parse_begin_time("2030-01-02T", 0).ok());
}

TEST(CliValues, ExportLikeSlurm) {
  const std::map<std::string, std::string> env{{"HOME", "/h"}, {"PATH", "/bin"}};
  EXPECT_EQ(*parse_export("", env), env);
  EXPECT_EQ(*parse_export("ALL", env), env);
  EXPECT_TRUE(parse_export("NONE", env)->empty());
  auto some = *parse_export("PATH,X=1,MISSING", env);
  EXPECT_EQ(some, (std::map<std::string, std::string>{{"PATH", "/bin"}, {"X", "1"}}));
  auto all_plus = *parse_export("ALL,X=1,HOME=/other", env);
  EXPECT_EQ(all_plus.size(), 3u);
  EXPECT_EQ(all_plus["HOME"], "/other");
  EXPECT_FALSE(parse_export("1BAD=x", env).ok());
}

TEST(CliValues, SplitList) {
  EXPECT_EQ(split_list("a,b,,c"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(split_list("").empty());
}

}  // namespace
}  // namespace corral::cli
