#include <gtest/gtest.h>

#include "fabric/slingshot/cxi_resources.h"
#include "fabric/slingshot/sim_cxi_config.h"

namespace ss = corral::fabric::slingshot;
using ss::Rsrc;

namespace {

const ss::Limit& at(const ss::Limits& l, Rsrc r) { return l[static_cast<size_t>(r)]; }
ss::Limit& at(ss::Limits& l, Rsrc r) { return l[static_cast<size_t>(r)]; }

ss::Nic cassini(std::vector<ss::Service> services = {}) {
  return ss::Nic{"cxi0", ss::cassini_capacity(), std::move(services)};
}

ss::Service limited_service(uint32_t id, Rsrc r, uint32_t reserved) {
  ss::Service s;
  s.id = id;
  s.desc.limited = true;
  at(s.desc.limits, r) = {reserved, reserved};
  return s;
}

}  // namespace

TEST(SlingshotResources, DesiredLimitsFollowTheSeedTable) {
  const ss::Limits l = ss::desired_limits(4);
  EXPECT_EQ(at(l, Rsrc::TXQ).reserved, 8u);
  EXPECT_EQ(at(l, Rsrc::TXQ).max, 2048u);
  EXPECT_EQ(at(l, Rsrc::TGQ).reserved, 4u);
  EXPECT_EQ(at(l, Rsrc::TGQ).max, 1024u);
  EXPECT_EQ(at(l, Rsrc::EQ).reserved, 8u);
  EXPECT_EQ(at(l, Rsrc::EQ).max, 2047u);
  EXPECT_EQ(at(l, Rsrc::CT).reserved, 4u);
  EXPECT_EQ(at(l, Rsrc::CT).max, 2047u);
  EXPECT_EQ(at(l, Rsrc::PTE).reserved, 24u);
  EXPECT_EQ(at(l, Rsrc::PTE).max, 2048u);
  EXPECT_EQ(at(l, Rsrc::LE).reserved, 64u);
  EXPECT_EQ(at(l, Rsrc::LE).max, 16384u);
  EXPECT_EQ(at(l, Rsrc::AC).reserved, 8u);
  EXPECT_EQ(at(l, Rsrc::AC).max, 1022u);
}

TEST(SlingshotResources, TlesAreTheSpecialCaseWithTheDriversMinimum) {
  EXPECT_EQ(at(ss::desired_limits(20), Rsrc::TLE).reserved, 20u);
  EXPECT_EQ(at(ss::desired_limits(20), Rsrc::TLE).max, 20u);
  // Below 8 the driver refuses a TLE pool, so 4 cores still get 8.
  EXPECT_EQ(at(ss::desired_limits(4), Rsrc::TLE).reserved, 8u);
  EXPECT_EQ(at(ss::desired_limits(4), Rsrc::TLE).max, 8u);
}

TEST(SlingshotResources, AvailableCountsOnlyLimitedServicesReservations) {
  ss::Service unlimited;  // the default service: no limits, reserves nothing
  unlimited.id = 1;
  unlimited.desc.system = true;
  auto nic = cassini({unlimited, limited_service(2, Rsrc::TXQ, 1000), limited_service(3, Rsrc::TXQ, 12)});
  const ss::Limits left = ss::available_limits(nic);
  EXPECT_EQ(at(left, Rsrc::TXQ).max, 12u);  // 1024 - 1000 - 12
  EXPECT_EQ(at(left, Rsrc::PTE).max, 2048u);
}

TEST(SlingshotResources, FitsUnchangedOnAnEmptyNicButClampsMaxToCapacity) {
  auto fit = ss::fit_limits(ss::desired_limits(4), cassini());
  EXPECT_TRUE(fit.warnings.empty());
  EXPECT_EQ(at(fit.limits, Rsrc::TXQ).reserved, 8u);
  EXPECT_EQ(at(fit.limits, Rsrc::TXQ).max, 1024u);  // the table's 2048 is more than Cassini has
  EXPECT_EQ(at(fit.limits, Rsrc::TGQ).max, 512u);
  EXPECT_EQ(at(fit.limits, Rsrc::LE).max, 16384u);
}

TEST(SlingshotResources, ScalesBackWhatDoesNotFitWithAWarningPerResource) {
  // Another service holds 1012 of 1024 TXQs and 2000 of 2047 EQs.
  ss::Service other = limited_service(2, Rsrc::TXQ, 1012);
  at(other.desc.limits, Rsrc::EQ) = {2000, 2000};
  auto fit = ss::fit_limits(ss::desired_limits(20), cassini({other}));
  EXPECT_EQ(at(fit.limits, Rsrc::TXQ).reserved, 12u);
  EXPECT_EQ(at(fit.limits, Rsrc::TXQ).max, 12u);      // max clamped to what is left too
  EXPECT_EQ(at(fit.limits, Rsrc::EQ).reserved, 40u);  // 2*20 fits in the 47 left
  EXPECT_EQ(at(fit.limits, Rsrc::EQ).max, 47u);
  EXPECT_EQ(at(fit.limits, Rsrc::PTE).reserved, 120u);
  ASSERT_EQ(fit.warnings.size(), 1u);
  EXPECT_EQ(fit.warnings[0], "txqs reserved 40 -> 12 (NIC cxi0 has 12 left)");
}

TEST(SlingshotResources, ScalesBackSeveralResources) {
  ss::Service other = limited_service(2, Rsrc::LE, 16000);
  at(other.desc.limits, Rsrc::AC) = {1000, 1000};
  auto fit = ss::fit_limits(ss::desired_limits(32), cassini({other}));
  EXPECT_EQ(at(fit.limits, Rsrc::LE).reserved, 384u);  // asked 512
  EXPECT_EQ(at(fit.limits, Rsrc::AC).reserved, 22u);   // asked 64 of 1022 - 1000
  ASSERT_EQ(fit.warnings.size(), 2u);
  EXPECT_EQ(fit.warnings[0], "les reserved 512 -> 384 (NIC cxi0 has 384 left)");
  EXPECT_EQ(fit.warnings[1], "acs reserved 64 -> 22 (NIC cxi0 has 22 left)");
}

TEST(SlingshotResources, TlesBelowTheDriversMinimumAreDropped) {
  auto fit = ss::fit_limits(ss::desired_limits(20), cassini({limited_service(2, Rsrc::TLE, 2044)}));
  EXPECT_EQ(at(fit.limits, Rsrc::TLE).reserved, 0u);
  EXPECT_EQ(at(fit.limits, Rsrc::TLE).max, 0u);
  ASSERT_EQ(fit.warnings.size(), 1u);
  EXPECT_EQ(fit.warnings[0], "tles reserved 20 -> 0 (NIC cxi0 has 4 left; the driver needs at least 8)");
}

TEST(SlingshotResources, TlesScaledBackKeepMaxEqualToReserved) {
  auto fit = ss::fit_limits(ss::desired_limits(20), cassini({limited_service(2, Rsrc::TLE, 2038)}));
  EXPECT_EQ(at(fit.limits, Rsrc::TLE).reserved, 10u);
  EXPECT_EQ(at(fit.limits, Rsrc::TLE).max, 10u);
}
