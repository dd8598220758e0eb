#include "job/port_range.h"

#include <gtest/gtest.h>

namespace corral::job {
namespace {

PortRange R(uint16_t a, uint16_t b) { return PortRange{a, b}; }

TEST(PortRange, ParsesRangesAndSinglePorts) {
  auto r = PortRange::parse("12000-12999");
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(*r, R(12000, 12999));
  EXPECT_EQ(r->size(), 1000u);
  EXPECT_EQ(r->encode(), "12000-12999");
  EXPECT_EQ(*PortRange::parse("1024"), R(1024, 1024));
  EXPECT_EQ(PortRange::parse("1024")->encode(), "1024");
  EXPECT_EQ(*PortRange::parse("1024-65535"), R(1024, 65535));
  EXPECT_EQ(PortRange::parse("1024-65535")->size(), 64512u);
}

TEST(PortRange, RejectsBadText) {
  for (auto bad :
       {"", "-", "abc", "12000-", "-12000", "12000-12x", "12000--13000", " 12000", "12000-13000-14000", "1e4"}) {
    auto r = PortRange::parse(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, Errc::invalid_argument);
    EXPECT_NE(r.message().find("port range \"" + std::string(bad) + "\""), std::string::npos) << r.message();
  }
}

TEST(PortRange, RejectsReversedAndOutOfBounds) {
  auto rev = PortRange::parse("13000-12000");
  ASSERT_FALSE(rev.ok());
  EXPECT_EQ(rev.message(), "port range \"13000-12000\": it ends before it starts");
  auto low = PortRange::parse("1023-2000");
  ASSERT_FALSE(low.ok());
  EXPECT_NE(low.message().find("port 1023 is below 1024"), std::string::npos) << low.message();
  auto high = PortRange::parse("60000-65536");
  ASSERT_FALSE(high.ok());
  EXPECT_NE(high.message().find("port 65536 is above 65535"), std::string::npos);
  EXPECT_FALSE(PortRange::parse("0-100").ok());
  EXPECT_FALSE(PortRange::parse("99999999999999999999").ok());
}

TEST(PortRange, FormatsStepEnvironment) {
  EXPECT_EQ(mpi_ports_env(R(12000, 12009)), "CORRAL_MPI_PORTS=12000-12009");
  EXPECT_EQ(mpi_ports_env(R(12000, 12000)), "CORRAL_MPI_PORTS=12000");
}

TEST(PortPool, SplitsFirstFitUntilExhausted) {
  PortPool pool(R(12000, 12099));
  EXPECT_EQ(*pool.split(40), R(12000, 12039));
  EXPECT_EQ(*pool.split(40), R(12040, 12079));
  auto none = pool.split(40);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, Errc::unavailable);
  EXPECT_NE(none.message().find("exhausted"), std::string::npos) << none.message();
  EXPECT_EQ(*pool.split(20), R(12080, 12099));
  EXPECT_EQ(pool.free_count(), 0u);
  EXPECT_EQ(pool.split(1).error().code, Errc::unavailable);
}

TEST(PortPool, ReleasedSharesAreReusedAndMerged) {
  PortPool pool(R(12000, 12029));
  auto a = *pool.split(10), b = *pool.split(10), c = *pool.split(10);
  ASSERT_TRUE(pool.release(b).ok());
  EXPECT_EQ(pool.free_count(), 10u);
  EXPECT_EQ(pool.split(11).error().code, Errc::unavailable);  // no 11 contiguous
  ASSERT_TRUE(pool.release(a).ok());                          // merges with b's gap
  EXPECT_EQ(*pool.split(15), R(12000, 12014));                // first fit, lowest ports
  ASSERT_TRUE(pool.release(c).ok());
  EXPECT_EQ(pool.free_count(), 15u);
  EXPECT_EQ(*pool.split(15), R(12015, 12029));  // 12015-12019 and c merged
}

TEST(PortPool, RejectsImpossibleSharesAndBadReleases) {
  PortPool pool(R(12000, 12009));
  auto big = pool.split(11);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().code, Errc::invalid_argument);
  EXPECT_EQ(big.message(), "MPI port shares of 11 ports do not fit the configured range 12000-12009 (10 ports)");
  EXPECT_EQ(pool.split(0).error().code, Errc::invalid_argument);
  auto s = *pool.split(5);
  EXPECT_EQ(pool.release(R(11990, 11999)).error().code, Errc::invalid_argument);
  EXPECT_EQ(pool.release(R(12005, 12006)).message(), "ports 12005-12006 of 12000-12009 are already free");
  ASSERT_TRUE(pool.release(s).ok());
  EXPECT_EQ(pool.release(s).error().code, Errc::invalid_argument);  // twice
  EXPECT_EQ(pool.free_count(), 10u);
}

TEST(PortShare, GivesStepsContiguousPorts) {
  PortShare share(R(12000, 12019));
  auto s0 = share.take(8), s1 = share.take(8);
  ASSERT_TRUE(s0.ok() && s1.ok());
  EXPECT_EQ(*s0, R(12000, 12007));
  EXPECT_EQ(*s1, R(12008, 12015));
  EXPECT_EQ(mpi_ports_env(*s1), "CORRAL_MPI_PORTS=12008-12015");
  auto wait = share.take(8);
  ASSERT_FALSE(wait.ok());
  EXPECT_EQ(wait.error().code, Errc::unavailable);
  EXPECT_EQ(wait.message(), "no 8 contiguous free ports in 12000-12019 (4 free in all)");
  ASSERT_TRUE(share.give_back(*s0).ok());
  EXPECT_EQ(*share.take(8), R(12000, 12007));
  EXPECT_EQ(*share.take(4), R(12016, 12019));
  EXPECT_EQ(share.free_count(), 0u);
}

TEST(PortShare, StepAskingMoreThanTheShareIsInvalid) {
  PortShare share(R(12000, 12009));
  auto r = share.take(11);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::invalid_argument);
  EXPECT_EQ(r.message(), "the step asks for 11 MPI ports; the job's share 12000-12009 has only 10");
  EXPECT_EQ(share.give_back(R(12010, 12010)).error().code, Errc::invalid_argument);
}

TEST(PortFreeList, KeepsSpansSortedAndMerged) {
  PortFreeList fl(R(2000, 2009));
  std::vector<PortRange> got;
  for (int i = 0; i < 5; ++i) got.push_back(*fl.take(2));
  EXPECT_TRUE(fl.free_spans().empty());
  ASSERT_TRUE(fl.give_back(got[3]).ok());
  ASSERT_TRUE(fl.give_back(got[1]).ok());
  EXPECT_EQ(fl.free_spans(), (std::vector<PortRange>{R(2002, 2003), R(2006, 2007)}));
  ASSERT_TRUE(fl.give_back(got[2]).ok());  // bridges both
  EXPECT_EQ(fl.free_spans(), (std::vector<PortRange>{R(2002, 2007)}));
  ASSERT_TRUE(fl.give_back(got[4]).ok());
  ASSERT_TRUE(fl.give_back(got[0]).ok());
  EXPECT_EQ(fl.free_spans(), (std::vector<PortRange>{R(2000, 2009)}));
  EXPECT_FALSE(fl.give_back(R(2001, 2000)).ok());  // reversed
}

TEST(PortFreeList, HandlesTheTopPort) {
  PortFreeList fl(R(65530, 65535));
  EXPECT_EQ(*fl.take(6), R(65530, 65535));
  ASSERT_TRUE(fl.give_back(R(65535, 65535)).ok());
  ASSERT_TRUE(fl.give_back(R(65530, 65534)).ok());
  EXPECT_EQ(fl.free_spans(), (std::vector<PortRange>{R(65530, 65535)}));
}

}  // namespace
}  // namespace corral::job
