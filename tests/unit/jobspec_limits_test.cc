// Hostile jobspecs: what would crash or exhaust a parser is refused with a message.
#include <chrono>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "job/jobspec.h"

namespace corral::job {
namespace {

using ::testing::HasSubstr;

const std::string kValidJson =
    R"({"version":1,"resources":[{"type":"slot","count":1,"label":"task","with":[{"type":"core","count":1}]}],)"
    R"("tasks":[{"command":["true"],"slot":"task","count":{"per_slot":1}}],"attributes":{"system":{"duration":0}}})";

TEST(JobspecLimits, DeeplyNestedJsonIsRefusedNotACrash) {
  // 100,000 levels used to overflow the stack of the code that walks the document.
  std::string doc =
      R"({"version":1,"attributes":{"user":)" + std::string(100000, '[') + std::string(100000, ']') + "}}";
  auto spec = parse_jobspec(doc);
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.message(), HasSubstr("nested more than 64 levels deep"));
  // Brackets inside strings do not count.
  std::string quoted = kValidJson;
  quoted.insert(quoted.size() - 2, R"(,"user":{"s":")" + std::string(1000, '[') + R"("})");
  EXPECT_TRUE(parse_jobspec(quoted).ok()) << parse_jobspec(quoted).message();
  std::string escaped = kValidJson;
  escaped.insert(escaped.size() - 2, R"(,"user":{"s":"\"[[[[\\"})");
  EXPECT_TRUE(parse_jobspec(escaped).ok()) << parse_jobspec(escaped).message();
}

TEST(JobspecLimits, DeeplyNestedYamlIsRefused) {
  std::string flow = "version: 1\nattributes: " + std::string(100000, '[') + std::string(100000, ']') + "\n";
  EXPECT_THAT(parse_jobspec(flow).message(), HasSubstr("nested more than 64 levels deep"));
  std::string block = "version: 1\nattributes:\n";
  for (int i = 1; i < 100; ++i) block += std::string(static_cast<size_t>(i), ' ') + "- \n";
  EXPECT_THAT(parse_jobspec(block).message(), HasSubstr("nested more than 64 levels deep"));
  std::string wide = "version: 1\nx:\n" + std::string(5000, ' ') + "y: 1\n";
  EXPECT_THAT(parse_jobspec(wide).message(), HasSubstr("indented more than 512 columns"));
}

TEST(JobspecLimits, YamlAliasBombIsRefusedQuickly) {
  // 351 bytes that expand to hundreds of millions of values ("billion laughs").
  std::string bomb = "version: 1\na: &a [x,x,x,x,x,x,x,x,x]\n";
  char prev = 'a';
  for (char c = 'b'; c <= 'j'; ++c, ++prev)
    bomb += std::string(1, c) + ": &" + c + " [*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev +
            ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + "]\n";
  auto start = std::chrono::steady_clock::now();
  auto spec = parse_jobspec(bomb);
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.message(), HasSubstr("more than 1000000 values"));
  EXPECT_LT(took, std::chrono::seconds(20));  // a bound on failure, not a benchmark
  // A few aliases are fine.
  std::string small =
      "version: 1\nresources: &r\n  - type: slot\n    count: 1\n    label: task\n"
      "    with: [{type: core, count: 1}]\ntasks: [{command: [\"true\"], slot: task, count: {per_slot: 1}}]\n"
      "attributes: {system: {duration: 0}, user: {copy: *r}}\n";
  EXPECT_TRUE(parse_jobspec(small).ok()) << parse_jobspec(small).message();
}

}  // namespace
}  // namespace corral::job
