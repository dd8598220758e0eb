// attributes.system.alloc: the jobspec of `corral alloc`.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "job/jobspec.h"

namespace corral::job {
namespace {

constexpr const char* kDoc = R"({"version": 1,
  "resources": [{"type": "slot", "count": 1, "label": "task",
                 "with": [{"type": "core", "count": 1}]}],
  "tasks": [{"command": ["true"], "slot": "task", "count": {"per_slot": 1}}],
  "attributes": {"system": %s}})";

Result<Jobspec> with_system(const std::string& system) {
  std::string doc = kDoc;
  doc.replace(doc.find("%s"), 2, system);
  return parse_jobspec(doc);
}

TEST(JobspecAlloc, ParsedFromSystemAttributes) {
  auto plain = with_system("{}");
  ASSERT_TRUE(plain.ok()) << plain.message();
  EXPECT_FALSE(plain->alloc);
  auto alloc = with_system(R"({"alloc": true})");
  ASSERT_TRUE(alloc.ok()) << alloc.message();
  EXPECT_TRUE(alloc->alloc);
  auto off = with_system(R"({"alloc": false})");
  ASSERT_TRUE(off.ok()) << off.message();
  EXPECT_FALSE(off->alloc);
}

TEST(JobspecAlloc, BadValuesNameTheField) {
  auto str = with_system(R"({"alloc": "yes"})");
  ASSERT_FALSE(str.ok());
  EXPECT_NE(str.message().find("attributes.system.alloc"), std::string::npos) << str.message();
  auto batch = with_system(R"({"alloc": true, "batch": {"script": "#!/bin/sh\n"}})");
  ASSERT_FALSE(batch.ok());
  EXPECT_NE(batch.message().find("attributes.system.alloc"), std::string::npos) << batch.message();
}

TEST(JobspecAlloc, BuiltFromARequestAndKeptInTheText) {
  JobRequest req;
  req.nnodes = 2;
  req.alloc = true;
  auto spec = build_jobspec(req);
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_TRUE(spec->alloc);
  EXPECT_EQ(spec->command, std::vector<std::string>{"true"});  // a placeholder, never run
  EXPECT_EQ(spec->name, "interactive");
  auto again = parse_jobspec(jobspec_to_string(*spec));
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_TRUE(again->alloc);
}

}  // namespace
}  // namespace corral::job
