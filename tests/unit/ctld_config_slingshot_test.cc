// The [slingshot] section of corrald's configuration: defaults, and bad values refused
// with the key named (corrald then refuses to start, changing nothing).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ctld/config.h"

namespace corral::ctld {
namespace {

Result<Config> with(std::vector<std::string> sets) { return load_config("", sets); }

TEST(SlingshotConfig, DefaultsAreOffWithTheUsualPool) {
  auto c = with({});
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_FALSE(c->slingshot.enabled);
  EXPECT_EQ(c->slingshot.vni_pool, "1024-65535");
  EXPECT_EQ(c->slingshot.vnis_per_job, 1u);
  EXPECT_TRUE(c->slingshot.vni_reserve_fatal);
}

TEST(SlingshotConfig, AcceptsGoodValues) {
  auto c = with({"slingshot.enabled=true", "slingshot.vni-pool=2000-2099,3000",
                 "slingshot.vnis-per-job=4", "slingshot.vni-reserve-fatal=false"});
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_TRUE(c->slingshot.enabled);
  EXPECT_EQ(c->slingshot.vnis_per_job, 4u);
  EXPECT_FALSE(c->slingshot.vni_reserve_fatal);
}

TEST(SlingshotConfig, BadValuesNameTheKey) {
  struct Case {
    std::string set, expect;
  };
  for (const auto& [set, expect] : std::vector<Case>{
           {"slingshot.vni-pool=1-2000", "slingshot.vni-pool"},   // holds 1 and 10
           {"slingshot.vni-pool=10", "slingshot.vni-pool"},
           {"slingshot.vni-pool=60000-70000", "slingshot.vni-pool"},
           {"slingshot.vni-pool=abc", "slingshot.vni-pool"},
           {"slingshot.vnis-per-job=5", "slingshot.vnis-per-job"},
           {"slingshot.vni-reserve-fatal=perhaps", "slingshot.vni-reserve-fatal"},
           {"slingshot.no-such-key=1", "no-such-key"},
       }) {
    auto c = with({set});
    ASSERT_FALSE(c.ok()) << set << " was accepted";
    EXPECT_NE(c.message().find(expect), std::string::npos) << set << ": " << c.message();
  }
  auto both = with({"slingshot.vni-pool=1-2000"});
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.message().find("1 and 10"), std::string::npos) << both.message();
}

}  // namespace
}  // namespace corral::ctld
