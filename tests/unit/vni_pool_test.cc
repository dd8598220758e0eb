#include "fabric/slingshot/vni_pool.h"

#include <gtest/gtest.h>

namespace corral::fabric::slingshot {
namespace {

using V = std::vector<uint16_t>;

VniPool make(std::string_view set) {
  auto p = make_vni_pool(set);
  EXPECT_TRUE(p.ok()) << p.message();
  return std::move(*p);
}

TEST(VniPool, RefusesBadPools) {
  EXPECT_FALSE(make_vni_pool("").ok());
  EXPECT_FALSE(make_vni_pool("not-a-set").ok());
  auto big = make_vni_pool("65000-65536");
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.message().find("65535"), std::string::npos);
  for (auto bad : {"1", "0-20", "10", "2-9,10-12"}) {
    auto p = make_vni_pool(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.message(), "vni-pool: VNIs 1 and 10 are the default service's and cannot be in the pool");
  }
  EXPECT_TRUE(make_vni_pool("2-9,11-20").ok());
  EXPECT_EQ(make("1024-65535").size(), 64512u);
}

TEST(VniPool, RoundRobinAcrossReservations) {
  VniPool p = make("1024-1027");
  EXPECT_EQ(*p.reserve(1, 1), V{1024});
  EXPECT_EQ(*p.reserve(2, 2), (V{1025, 1026}));
  p.release(1, {});  // 1024 free again, but the cursor goes on
  EXPECT_EQ(*p.reserve(3, 1), V{1027});
  // Wraps: 1024 is free, 1025-1027 are busy.
  EXPECT_EQ(*p.reserve(4, 1), V{1024});
  p.release(2, {});
  EXPECT_EQ(*p.reserve(5, 2), (V{1025, 1026}));
}

TEST(VniPool, WrapsWithinOneReservationAndAcrossRanges) {
  VniPool p = make("2-3,11-12");
  EXPECT_EQ(*p.reserve(1, 3), (V{2, 3, 11}));
  p.release(1, {});
  EXPECT_EQ(*p.reserve(2, 3), (V{12, 2, 3}));
  EXPECT_EQ(p.free_count(), 1u);
  EXPECT_EQ(p.free_set().encode(), "11");
}

TEST(VniPool, ExhaustionMessage) {
  VniPool p = make("1024-1027");
  ASSERT_TRUE(p.reserve(1, 2).ok());
  ASSERT_TRUE(p.reserve(2, 1).ok());
  p.release(1, {"n1"});
  auto r = p.reserve(3, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), "asked for 2 VNIs, 1 of 4 free (1 reserved, 2 waiting for cleanup)");
  EXPECT_EQ(r.error().code, Errc::unavailable);
  EXPECT_EQ(p.reservation(3), nullptr);
  EXPECT_EQ(*p.reserve(3, 1), V{1027});
}

TEST(VniPool, QuarantineUntilEveryNodeConfirms) {
  VniPool p = make("1024-1025");
  ASSERT_EQ(*p.reserve(7, 2), (V{1024, 1025}));
  EXPECT_EQ(p.release(7, {"n1", "n2"}), (V{1024, 1025}));
  EXPECT_EQ(p.reservation(7), nullptr);
  ASSERT_NE(p.quarantine(7), nullptr);
  EXPECT_EQ(p.free_count(), 0u);
  EXPECT_EQ(p.quarantined_count(), 2u);
  EXPECT_FALSE(p.reserve(8, 1).ok());
  EXPECT_FALSE(p.confirm(7, "n1"));
  EXPECT_FALSE(p.confirm(7, "n1"));  // twice changes nothing
  EXPECT_FALSE(p.reserve(8, 1).ok());
  EXPECT_TRUE(p.confirm(7, "n2"));
  EXPECT_EQ(p.quarantine(7), nullptr);
  EXPECT_EQ(p.free_count(), 2u);
  EXPECT_TRUE(p.reserve(8, 1).ok());
}

TEST(VniPool, ConfirmNodeClearsEveryQuarantineThere) {
  VniPool p = make("1024-1031");
  ASSERT_TRUE(p.reserve(1, 1).ok());
  ASSERT_TRUE(p.reserve(2, 1).ok());
  ASSERT_TRUE(p.reserve(3, 1).ok());
  p.release(1, {"n1"});
  p.release(2, {"n1", "n2"});
  p.release(3, {"n3"});
  EXPECT_EQ(p.confirm_node("n1"), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(p.quarantine(1), nullptr);
  ASSERT_NE(p.quarantine(2), nullptr);
  EXPECT_EQ(p.quarantine(2)->nodes, (std::set<std::string>{"n2"}));
  EXPECT_NE(p.quarantine(3), nullptr);
  EXPECT_EQ(p.free_count(), 6u);
}

TEST(VniPool, RestoreAfterRestart) {
  VniPool p = make("1024-1029");
  ASSERT_TRUE(p.restore(5, {1025, 1026}, 100).ok());
  ASSERT_TRUE(p.restore_quarantine(4, {1024}, {"n1"}, 50).ok());
  ASSERT_TRUE(p.restore(3, {1028}, 10).ok());  // older: the cursor stays after 1026
  EXPECT_EQ(p.free_count(), 2u);
  EXPECT_EQ(*p.reserve(6, 1), V{1027});
  EXPECT_EQ(*p.reserve(7, 1), V{1029});
  auto clash = p.restore(9, {1029});
  ASSERT_FALSE(clash.ok());
  EXPECT_NE(clash.message().find("VNI 1029"), std::string::npos);
  EXPECT_NE(clash.message().find("job 7"), std::string::npos);
  EXPECT_FALSE(p.restore(5, {1000}).ok());  // job 5 already holds VNIs
  EXPECT_EQ(p.reservation(9), nullptr);
  // An empty node set means nothing is pending: not kept.
  ASSERT_TRUE(p.restore_quarantine(10, {1000}, {}).ok());
  EXPECT_EQ(p.quarantine(10), nullptr);
}

TEST(VniPool, ReleaseWithoutNodesFreesAtOnceAndUnknownJobIsNoop) {
  VniPool p = make("1024");
  EXPECT_TRUE(p.release(42, {"n1"}).empty());
  ASSERT_TRUE(p.reserve(1, 1).ok());
  EXPECT_FALSE(p.reserve(1, 1).ok());  // one reservation per job
  p.release(1, {});
  EXPECT_EQ(p.free_count(), 1u);
  EXPECT_TRUE(p.reserve(2, 0)->empty());
}

}  // namespace
}  // namespace corral::fabric::slingshot
