#include <gtest/gtest.h>

#include "node/exec/output_pattern.h"

namespace corral::node {
namespace {

PatternVars vars() { return PatternVars{12, 3, 1, "node7", "myjob", "alice"}; }

TEST(NodeOutputPattern, ExpandsEverySequence) {
  EXPECT_EQ(expand_output_pattern("out-%j-%t-%n-%N-%x-%u.txt", vars()), "out-12-3-1-node7-myjob-alice.txt");
}

TEST(NodeOutputPattern, PercentPercentIsALiteralPercent) {
  EXPECT_EQ(expand_output_pattern("100%%-%j", vars()), "100%-12");
}

TEST(NodeOutputPattern, UnknownAndTrailingPercentAreKept) {
  EXPECT_EQ(expand_output_pattern("a%qb%", vars()), "a%qb%");
  EXPECT_EQ(expand_output_pattern("%%%j", vars()), "%12");
  EXPECT_EQ(expand_output_pattern("", vars()), "");
}

TEST(NodeOutputPattern, AFieldNeverAddsDirectories) {
  PatternVars v = vars();
  v.job_name = "../../etc/cron.d/x";
  EXPECT_EQ(expand_output_pattern("/home/a/%x.out", v), "/home/a/.._.._etc_cron.d_x.out");
  v.job_name = "..";
  EXPECT_EQ(expand_output_pattern("/home/a/%x", v), "/home/a/__");
  v.job_name = ".";
  EXPECT_EQ(expand_output_pattern("/home/a/%x/o", v), "/home/a/_/o");
  v.job_name = "ok.name";
  EXPECT_EQ(expand_output_pattern("%x", v), "ok.name");
}

TEST(NodeOutputPattern, ResolvesRelativeToCwd) {
  EXPECT_EQ(resolve_path("o.txt", "/home/a"), "/home/a/o.txt");
  EXPECT_EQ(resolve_path("o.txt", "/home/a/"), "/home/a/o.txt");
  EXPECT_EQ(resolve_path("/abs/o.txt", "/home/a"), "/abs/o.txt");
  EXPECT_EQ(resolve_path("o.txt", ""), "o.txt");
}

}  // namespace
}  // namespace corral::node
