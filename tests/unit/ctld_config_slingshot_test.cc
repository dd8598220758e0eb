// The [slingshot] section of corrald's configuration: corrald hands it to the hook as read
// (ctld/hooks/registry.cc), and the hook keeps its defaults or refuses bad values with the
// key named (corrald then refuses to start, changing nothing).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ctld/config.h"
#include "ctld/hooks/registry.h"
#include "fabric/slingshot/slingshot_config.h"

namespace corral::ctld {
namespace {

using fabric::slingshot::SlingshotConfig;

Result<SlingshotConfig> with(std::vector<std::string> sets) {
  auto c = load_config("", sets, hook_sections());
  if (!c) return c.error();
  return fabric::slingshot::parse_slingshot_settings(c->hook_settings["slingshot"]);
}

TEST(SlingshotConfig, DefaultsAreOffWithTheUsualPool) {
  auto c = with({});
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_FALSE(c->enabled);
  EXPECT_EQ(c->vni_pool, "1024-65535");
  EXPECT_EQ(c->vnis_per_job, 1u);
  EXPECT_TRUE(c->vni_reserve_fatal);
}

TEST(SlingshotConfig, AcceptsGoodValues) {
  auto c = with({"slingshot.enabled=true", "slingshot.vni-pool=2000-2099,3000", "slingshot.vnis-per-job=4",
                 "slingshot.vni-reserve-fatal=false", "slingshot.prolog-timeout=90s", "slingshot.epilog-retry=2.5"});
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_TRUE(c->enabled);
  EXPECT_EQ(c->vnis_per_job, 4u);
  EXPECT_FALSE(c->vni_reserve_fatal);
  EXPECT_EQ(c->prolog_timeout, 90);
  EXPECT_EQ(c->epilog_retry, 2.5);
}

TEST(SlingshotConfig, BadValuesNameTheKey) {
  struct Case {
    std::string set, expect;
  };
  for (const auto& [set, expect] : std::vector<Case>{
           {"slingshot.vni-pool=1-2000", "slingshot.vni-pool"},  // holds 1 and 10
           {"slingshot.vni-pool=10", "slingshot.vni-pool"},
           {"slingshot.vni-pool=60000-70000", "slingshot.vni-pool"},
           {"slingshot.vni-pool=abc", "slingshot.vni-pool"},
           {"slingshot.vnis-per-job=5", "slingshot.vnis-per-job"},
           {"slingshot.vnis-per-job=-1", "slingshot.vnis-per-job"},
           {"slingshot.vni-reserve-fatal=perhaps", "slingshot.vni-reserve-fatal"},
           {"slingshot.prolog-timeout=-3", "slingshot.prolog-timeout"},
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

TEST(SlingshotConfig, TheRegistryMakesTheHookOnlyWhenEnabled) {
  auto off = load_config("", {}, hook_sections());
  ASSERT_TRUE(off.ok()) << off.message();
  auto hooks = make_hooks(*off, {});
  ASSERT_TRUE(hooks.ok()) << hooks.message();
  auto named = [](const std::vector<std::unique_ptr<hook::JobHook>>& hs, std::string_view name) {
    for (const auto& h : hs)
      if (h->name() == name) return true;
    return false;
  };
  EXPECT_TRUE(named(*hooks, "dependency"));
  EXPECT_FALSE(named(*hooks, "cray-slingshot"));
  auto on = load_config("", {"slingshot.enabled=true"}, hook_sections());
  ASSERT_TRUE(on.ok()) << on.message();
  auto with_ss = make_hooks(*on, {});
  ASSERT_TRUE(with_ss.ok()) << with_ss.message();
  EXPECT_TRUE(named(*with_ss, "cray-slingshot"));
  auto bad = load_config("", {"slingshot.vnis-per-job=9"}, hook_sections());
  ASSERT_TRUE(bad.ok());  // the controller does not know the hook's keys ...
  auto refused = make_hooks(*bad, {});
  ASSERT_FALSE(refused.ok());  // ... the hook does
  EXPECT_NE(refused.message().find("slingshot.vnis-per-job"), std::string::npos) << refused.message();
}

TEST(SlingshotConfig, WithoutTheHookItsSectionIsUnknown) {
  auto c = load_config("", {"slingshot.enabled=true"});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("slingshot.enabled=true: unknown key"), std::string::npos) << c.message();
}

}  // namespace
}  // namespace corral::ctld
