#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "storage/dws/directive.h"
#include "storage/dws/directive_rules.h"

namespace corral::storage::dws {
namespace {

TEST(DwsDirective, TokenizesLikeDws) {
  auto d = parse_directive("#DW jobdw  type=xfs capacity=10GiB name=a-b flag");
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->command, "jobdw");
  EXPECT_EQ(d->arg("type"), "xfs");
  EXPECT_EQ(d->arg("flag"), std::nullopt);
  EXPECT_EQ(d->args.size(), 4u);
  EXPECT_NE(parse_directive("DW jobdw").error().message.find("missing '#DW' prefix"), std::string::npos);
  EXPECT_NE(parse_directive("#DW jobdw a=1 a=2").error().message.find("repeated argument 'a'"), std::string::npos);
  EXPECT_FALSE(parse_directive("#DW").ok());
}

TEST(DwsDirective, Capacities) {
  EXPECT_EQ(*parse_capacity("10GiB"), 10ULL << 30);
  EXPECT_EQ(*parse_capacity("10GB"), 10'000'000'000ULL);
  EXPECT_EQ(*parse_capacity("3TiB"), 3ULL << 40);
  EXPECT_EQ(*parse_capacity("512"), 512u);
  EXPECT_FALSE(parse_capacity("0GiB").ok());
  EXPECT_FALSE(parse_capacity("10XB").ok());
  EXPECT_FALSE(parse_capacity("GiB").ok());
  EXPECT_FALSE(parse_capacity("99999999999999999999GiB").ok());
}

TEST(DwsDirectiveRules, ChecksArgumentsAndUniqueness) {
  auto spec = nlohmann::json::parse(R"([{"command": "jobdw", "watchStates": "Proposal, Setup",
     "ruleDefs": [{"key": "^type$", "type": "string", "pattern": "^(xfs|lustre)$", "isRequired": true},
                  {"key": "^name$", "type": "string", "pattern": "^[a-z][a-z0-9-]+$", "isRequired": true,
                   "uniqueWithin": "jobdw_name"},
                  {"key": "^count$", "type": "integer", "min": 1, "max": 4},
                  {"key": "^quiet$", "type": "bool"}]}])");
  auto rules = DirectiveRules::from_spec(spec);
  ASSERT_TRUE(rules.ok()) << rules.error().message;
  EXPECT_EQ(rules->rules()[0].watch_states, (std::vector<std::string>{"Proposal", "Setup"}));
  EXPECT_TRUE(rules->validate({"#DW jobdw type=xfs name=ab count=2 quiet"}).ok());
  auto msg = [&](std::vector<std::string> d) { return rules->validate(d).message(); };
  EXPECT_NE(msg({"#DW jobdw type=zfs name=ab"}).find("argument 'type' invalid string 'zfs'"), std::string::npos);
  EXPECT_NE(msg({"#DW jobdw type=xfs"}).find("missing required argument '^name$'"), std::string::npos);
  EXPECT_NE(msg({"#DW jobdw type=xfs name=ab size=1"}).find("unsupported argument 'size'"), std::string::npos);
  EXPECT_NE(msg({"#DW jobdw type=xfs name=ab count=9"}).find("greater than maximum"), std::string::npos);
  EXPECT_NE(msg({"#DW jobdw type=xfs name=ab count=x"}).find("invalid integer"), std::string::npos);
  EXPECT_NE(
      msg({"#DW jobdw type=xfs name=ab", "#DW jobdw type=xfs name=ab"}).find("must be unique within 'jobdw_name'"),
      std::string::npos);
  EXPECT_NE(msg({"#DW copy_in source=a"}).find("invalid directive '#DW copy_in source=a'"), std::string::npos);
  EXPECT_NE(msg({"#DW jobdw type name=ab"}).find("argument 'type' requires value"), std::string::npos);
}

}  // namespace
}  // namespace corral::storage::dws
