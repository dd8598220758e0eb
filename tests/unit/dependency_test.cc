#include "job/dependency.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace corral::job {
namespace {

using ::testing::HasSubstr;

TEST(DependencyTest, ParsesRfc26Uris) {
  auto d = parse_dependency_uri("afterok:12");
  ASSERT_TRUE(d.ok()) << d.message();
  EXPECT_EQ(d->scheme, "afterok");
  EXPECT_EQ(d->jobid, 12u);
  EXPECT_EQ(d->uri(), "afterok:12");
  for (const char* s : {"after:1", "afterany:2", "afternotok:3"}) {
    auto dep = parse_dependency_uri(s);
    ASSERT_TRUE(dep.ok()) << s << ": " << dep.message();
    EXPECT_EQ(dep->uri(), s);
  }
}

TEST(DependencyTest, BeginTimeIsAFloatTimestamp) {
  auto d = parse_dependency_uri("begin-time:1700000000");
  ASSERT_TRUE(d.ok()) << d.message();
  EXPECT_DOUBLE_EQ(d->time, 1700000000.0);
  EXPECT_EQ(d->uri(), "begin-time:1700000000.0");
  auto half = parse_dependency_uri("begin-time:1700000000.5");
  ASSERT_TRUE(half.ok());
  EXPECT_EQ(half->uri(), "begin-time:1700000000.5");
  EXPECT_THAT(parse_dependency_uri("begin-time:soon").message(), HasSubstr("\"soon\" is not a time"));
}

TEST(DependencyTest, Singleton) {
  auto d = parse_dependency_uri("singleton");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->uri(), "singleton");
  EXPECT_FALSE(parse_dependency_uri("singleton:3").ok());
}

TEST(DependencyTest, SlurmSyntaxExpandsToAllOf) {
  auto deps = parse_dependencies("afterok:12:13,afterany:14");
  ASSERT_TRUE(deps.ok()) << deps.message();
  ASSERT_EQ(deps->size(), 3u);
  EXPECT_EQ((*deps)[0].uri(), "afterok:12");
  EXPECT_EQ((*deps)[1].uri(), "afterok:13");
  EXPECT_EQ((*deps)[2].uri(), "afterany:14");
  auto mixed = parse_dependencies("singleton,begin-time:10.5,after:7");
  ASSERT_TRUE(mixed.ok()) << mixed.message();
  EXPECT_EQ(mixed->size(), 3u);
  EXPECT_TRUE(parse_dependencies("")->empty());
}

TEST(DependencyTest, AnyOfIsRefused) {
  auto deps = parse_dependencies("afterok:12?afterany:13");
  ASSERT_FALSE(deps.ok());
  EXPECT_THAT(deps.message(), HasSubstr("only all of (',')"));
  EXPECT_FALSE(parse_dependency_uri("afterok:12?x=1").ok());
}

TEST(DependencyTest, BadIdsAreNamed) {
  auto deps = parse_dependencies("afterok:12:abc");
  ASSERT_FALSE(deps.ok());
  EXPECT_THAT(deps.message(), HasSubstr("\"abc\" is not a job id"));
  EXPECT_THAT(parse_dependency_uri("afterok:").message(), HasSubstr("\"\" is not a job id"));
  EXPECT_THAT(parse_dependency_uri("afterok:0").message(), HasSubstr("\"0\" is not a job id"));
  EXPECT_THAT(parse_dependency_uri("afterok").message(), HasSubstr("missing job id"));
  EXPECT_THAT(parse_dependencies("afterok").message(), HasSubstr("missing job id"));
  EXPECT_THAT(parse_dependencies("afterok:1+5").message(), HasSubstr("\"1+5\""));
}

TEST(DependencyTest, UnknownSchemesAndEmptyEntries) {
  EXPECT_THAT(parse_dependency_uri("aftercorr:3").message(), HasSubstr("unknown type \"aftercorr\""));
  EXPECT_THAT(parse_dependencies("afterok:1,,afterok:2").message(), HasSubstr("empty entry"));
  EXPECT_THAT(parse_dependency_uri(":3").message(), HasSubstr("missing type"));
}

}  // namespace
}  // namespace corral::job
