#include "util/hostlist.h"

#include <chrono>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "util/natural_sort.h"

namespace corral {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> expand(std::string_view expr) {
  auto hl = Hostlist::parse(expr);
  EXPECT_TRUE(hl.ok()) << expr << ": " << (hl.ok() ? "" : hl.message());
  return hl.ok() ? hl->hosts() : std::vector<std::string>{};
}

std::vector<std::string> split(const std::string& csv) {
  std::vector<std::string> out;
  if (csv.empty()) return out;
  size_t start = 0;
  while (true) {
    size_t comma = csv.find(',', start);
    out.push_back(csv.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string parse_error(std::string_view expr) {
  auto hl = Hostlist::parse(expr);
  EXPECT_FALSE(hl.ok()) << expr << " should not parse";
  if (hl.ok()) return "";
  EXPECT_EQ(hl.error().code, Errc::invalid_argument);
  return hl.message();
}

// The test vectors of Flux RFC 29, section "Test Vectors".
TEST(HostlistRfc29, TestVectors) {
  const std::vector<std::pair<std::string, std::string>> vectors = {
      {"", ""},
      {"foox,fooy,fooz", "foox,fooy,fooz"},
      {"[1-3,5-6]", "1,2,3,5,6"},
      {"foo[1-5]", "foo1,foo2,foo3,foo4,foo5"},
      {"foo[0-4]-eth2", "foo0-eth2,foo1-eth2,foo2-eth2,foo3-eth2,foo4-eth2"},
      {"foo1,foo1,foo1", "foo1,foo1,foo1"},
      {"[00-02]", "00,01,02"},
      {"[00-2]", "00,01,02"},
      {"foo[1,1,2,1]", "foo1,foo1,foo2,foo1"},
  };
  for (const auto& [in, out] : vectors) EXPECT_EQ(expand(in), split(out)) << in;
}

TEST(HostlistRfc29, LeadingZerosOfFirstElementApplyToWholeList) {
  // As in Slurm, each range keeps its own padding.
  EXPECT_THAT(expand("n[005,4,11-13]"), ElementsAre("n005", "n4", "n11", "n12", "n13"));
  EXPECT_THAT(expand("node[01-02,5]"), ElementsAre("node01", "node02", "node5"));
  EXPECT_THAT(expand("n[1-010]"), ElementsAre("n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9", "n10"));
  EXPECT_THAT(expand("n[08-11]"), ElementsAre("n08", "n09", "n10", "n11"));
}

TEST(HostlistRfc29, IdListKeepsOrderAndRepeats) {
  EXPECT_THAT(expand("h[5,4,10-11,2,2]"), ElementsAre("h5", "h4", "h10", "h11", "h2", "h2"));
}

TEST(HostlistRfc29, EncodingRoundTripsTheTestVectors) {
  for (const char* expr :
       {"foox,fooy,fooz", "[1-3,5-6]", "foo[1-5]", "foo[0-4]-eth2", "foo1,foo1,foo1", "[00-02]", "foo[1,1,2,1]"}) {
    auto hl = Hostlist::parse(expr);
    ASSERT_TRUE(hl.ok());
    auto again = Hostlist::parse(hl->encode());
    ASSERT_TRUE(again.ok()) << hl->encode();
    EXPECT_EQ(*again, *hl) << expr << " -> " << hl->encode();
  }
}

// Slurm's documented forms: slurm_hostlist_create(3), Slurm::Hostlist(3pm), slurm.conf(5).
TEST(HostlistSlurm, SimpleRangesFromTheManPages) {
  EXPECT_THAT(expand("linux[1-3,6]"), ElementsAre("linux1", "linux2", "linux3", "linux6"));
  EXPECT_EQ(expand("tux[0-5,12,20-25]").size(), 13u);
  EXPECT_EQ(expand("node1,node[2-5,12]").size(), 6u);
  EXPECT_EQ(expand("lx[10-20]").size(), 11u);
}

TEST(HostlistSlurm, MultipleBracketsExpandAsCartesianProductFirstBracketSlowest) {
  EXPECT_THAT(expand("rack[1-2]-node[01-03]"), ElementsAre("rack1-node01", "rack1-node02", "rack1-node03",
                                                           "rack2-node01", "rack2-node02", "rack2-node03"));
  // Each range keeps the padding of its own low end, as in Slurm: 5 stays "5".
  EXPECT_THAT(expand("rack[01-3]-node[01-2,5]"),
              ElementsAre("rack01-node01", "rack01-node02", "rack01-node5", "rack02-node01", "rack02-node02",
                          "rack02-node5", "rack03-node01", "rack03-node02", "rack03-node5"));
  auto blades = expand("rack[0-63]_blade[0-41]");
  ASSERT_EQ(blades.size(), 64u * 42u);
  EXPECT_EQ(blades[0], "rack0_blade0");
  EXPECT_EQ(blades[41], "rack0_blade41");
  EXPECT_EQ(blades[42], "rack1_blade0");
  EXPECT_EQ(blades.back(), "rack63_blade41");
}

TEST(HostlistSlurm, ZeroPaddingAndSuffixes) {
  EXPECT_THAT(expand("d[1-5],n[01-05]"), ElementsAre("d1", "d2", "d3", "d4", "d5", "n01", "n02", "n03", "n04", "n05"));
  EXPECT_THAT(expand("n[098-101]"), ElementsAre("n098", "n099", "n100", "n101"));
  EXPECT_THAT(expand("n[8-10]"), ElementsAre("n8", "n9", "n10"));
  EXPECT_THAT(expand("login[1-2]-ib.cluster"), ElementsAre("login1-ib.cluster", "login2-ib.cluster"));
}

TEST(HostlistSlurm, WhitespaceSeparatesLikeCommas) {
  EXPECT_THAT(expand("node1 node[2-3]\tnode9\n"), ElementsAre("node1", "node2", "node3", "node9"));
  EXPECT_THAT(expand("a,,b,"), ElementsAre("a", "b"));
}

TEST(HostlistEncode, MergesOnlyAdjacentAscendingRuns) {
  EXPECT_EQ(Hostlist({"n1", "n2", "n3", "n0"}).encode(), "n[1-3],n0");
  EXPECT_EQ(Hostlist({"n1", "n2", "n3", "n5", "n7", "n8"}).encode(), "n[1-3,5,7-8]");
  EXPECT_EQ(Hostlist({"n3", "n2", "n1"}).encode(), "n3,n2,n1");
  EXPECT_EQ(Hostlist({"n1", "m2", "n3"}).encode(), "n1,m2,n3");
  EXPECT_EQ(Hostlist({"n1", "n1"}).encode(), "n1,n1");
  EXPECT_EQ(Hostlist().encode(), "");
  EXPECT_EQ(Hostlist({"login"}).encode(), "login");
}

TEST(HostlistEncode, KeepsWidthsApart) {
  EXPECT_EQ(Hostlist({"n09", "n10", "n11"}).encode(), "n[09-11]");
  EXPECT_EQ(Hostlist({"n8", "n9", "n10"}).encode(), "n[8-10]");
  EXPECT_EQ(Hostlist({"n1", "n01"}).encode(), "n1,n01");
  EXPECT_EQ(Hostlist({"n9", "n010"}).encode(), "n9,n010");
  EXPECT_EQ(Hostlist({"n01", "n002"}).encode(), "n01,n002");
}

TEST(HostlistEncode, SuffixesAndMultipleNumbers) {
  EXPECT_EQ(Hostlist::parse("foo[0-4]-eth2")->encode(), "foo[0-4]-eth2");
  EXPECT_EQ(Hostlist::parse("rack[1-2]-node[01-03]")->encode(), "rack1-node[01-03],rack2-node[01-03]");
  EXPECT_EQ(Hostlist({"r1n1", "r2n1", "r3n1"}).encode(), "r[1-3]n1");
  EXPECT_EQ(Hostlist({"foox", "fooy"}).encode(), "foox,fooy");
}

TEST(HostlistEncode, RandomListsRoundTrip) {
  std::mt19937 rng(42);
  const std::vector<std::string> prefixes = {"n", "node", "rack1-n", "x", ""};
  const std::vector<std::string> suffixes = {"", "-ib", "a"};
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::string> hosts;
    int n = static_cast<int>(rng() % 30);
    for (int k = 0; k < n; ++k) {
      std::string num = std::to_string(rng() % 120);
      if (rng() % 4 == 0) num = std::string(rng() % 3 + 1, '0') + num;
      hosts.push_back(prefixes[rng() % prefixes.size()] + num + suffixes[rng() % suffixes.size()]);
    }
    Hostlist hl(hosts);
    auto again = Hostlist::parse(hl.encode());
    ASSERT_TRUE(again.ok()) << hl.encode();
    EXPECT_EQ(again->hosts(), hosts) << hl.encode();
  }
}

TEST(HostlistOps, NthFindContains) {
  auto hl = *Hostlist::parse("n[1-4]");
  EXPECT_EQ(*hl.nth(0), "n1");
  EXPECT_EQ(*hl.nth(3), "n4");
  EXPECT_EQ(*hl.nth(-1), "n4");
  EXPECT_EQ(*hl.nth(-4), "n1");
  EXPECT_EQ(hl.nth(4).error().code, Errc::not_found);
  EXPECT_EQ(hl.nth(-5).error().code, Errc::not_found);
  EXPECT_THAT(hl.nth(7).message(), HasSubstr("7"));
  EXPECT_EQ(hl.find("n3"), 2u);
  EXPECT_FALSE(hl.find("n5"));
  EXPECT_TRUE(hl.contains("n1"));
  EXPECT_EQ(hl.count(), 4u);
}

TEST(HostlistOps, AppendKeepsOrderAndDuplicates) {
  auto hl = *Hostlist::parse("node1,node[2-5,12]");
  hl.append(*Hostlist::parse("node21,node[27-34]"));
  hl.append("node2");
  EXPECT_EQ(hl.count(), 6u + 9u + 1u);
  EXPECT_EQ(hl.encode(), "node[1-5,12,21,27-34],node2");
}

TEST(HostlistOps, SortedUsesNaturalOrder) {
  auto hl = *Hostlist::parse("n10,n2,n1,m3,n2");
  EXPECT_THAT(hl.sorted().hosts(), ElementsAre("m3", "n1", "n2", "n2", "n10"));
  EXPECT_THAT(hl.uniq().hosts(), ElementsAre("m3", "n1", "n2", "n10"));
  EXPECT_EQ(hl.uniq().encode(), "m3,n[1-2,10]");
}

TEST(HostlistOps, SetOperationsAreSortedAndUnique) {
  auto a = *Hostlist::parse("n[5,1-3,3]");
  auto b = *Hostlist::parse("n[3-6]");
  EXPECT_EQ(a.union_with(b).encode(), "n[1-6]");
  EXPECT_EQ(a.intersect(b).encode(), "n[3,5]");
  EXPECT_EQ(a.minus(b).encode(), "n[1-2]");
  EXPECT_EQ(b.minus(a).encode(), "n[4,6]");
  EXPECT_TRUE(a.intersect(Hostlist()).empty());
}

TEST(NaturalSort, ComparesNumbersByValue) {
  EXPECT_TRUE(natural_less("n2", "n10"));
  EXPECT_TRUE(natural_less("rack2-node9", "rack10-node1"));
  EXPECT_TRUE(natural_less("a", "b"));
  EXPECT_TRUE(natural_less("n", "n1"));
  EXPECT_TRUE(natural_less("n1", "n01"));  // same value: less padding first, still total
  EXPECT_FALSE(natural_less("n01", "n1"));
  EXPECT_EQ(natural_compare("n007", "n007"), 0);
  EXPECT_TRUE(natural_less("n99999999999999999999998", "n99999999999999999999999"));
}

TEST(HostlistErrors, UnbalancedBrackets) {
  EXPECT_THAT(parse_error("n[1-3"), HasSubstr("'[' without a matching ']' at column 2"));
  EXPECT_THAT(parse_error("n1-3]"), HasSubstr("']' without a matching '[' at column 5"));
  EXPECT_THAT(parse_error("n[1[2]]"), HasSubstr("'[' inside brackets at column 4"));
  EXPECT_THAT(parse_error("a,b[1,2"), HasSubstr("\"a,b[1,2\""));
}

TEST(HostlistErrors, BadRanges) {
  EXPECT_THAT(parse_error("n[5-1]"), HasSubstr("reversed range \"5-1\" at column 3"));
  EXPECT_THAT(parse_error("n[]"), HasSubstr("empty brackets"));
  EXPECT_THAT(parse_error("n[1,]"), HasSubstr("empty range"));
  EXPECT_THAT(parse_error("n[,1]"), HasSubstr("empty range"));
  EXPECT_THAT(parse_error("n[a-b]"), HasSubstr("\"a-b\" is not a number"));
  EXPECT_THAT(parse_error("n[1-]"), HasSubstr("\"1-\""));
  EXPECT_THAT(parse_error("n[1-2-3]"), HasSubstr("\"1-2-3\""));
  EXPECT_THAT(parse_error("n[1, 2]"), HasSubstr("\" 2\""));
  EXPECT_THAT(parse_error("n[1234567890123456789]"), HasSubstr("digits"));
  EXPECT_THAT(parse_error("n\x01"), HasSubstr("control character 0x01"));
}

TEST(HostlistErrors, HugeRanges) {
  // Slurm's per-range limit, then the whole expression's.
  EXPECT_THAT(parse_error("n[1-2000000]"),
              HasSubstr("too many hosts in range \"1-2000000\" (at most 65536 per range)"));
  EXPECT_TRUE(Hostlist::parse("n[1-65536]").ok());
  EXPECT_THAT(parse_error("n[0-65536]"), HasSubstr("at most 65536 per range"));
  EXPECT_THAT(parse_error("r[1-1000]n[1-1001]"), HasSubstr("more than 1000000 hosts"));
  EXPECT_THAT(parse_error("n[0-999999999999999999]"), HasSubstr("at most 65536 per range"));
  // 16 ranges of 62,500 hosts are a million; one more host is too many.
  std::string million;
  for (int i = 0; i < 16; ++i) million += fmt::format("{}r{}[1-62500]", i ? "," : "", i);
  EXPECT_TRUE(Hostlist::parse(million).ok());
  EXPECT_THAT(parse_error(million + ",x1"), HasSubstr("more than 1000000 hosts"));
}

TEST(HostlistErrors, LongNamesTimesManyHostsAreRefused) {
  // 810,000 hosts (under the host limit) whose names are 200 bytes each: 160 MB of names
  // from a few hundred bytes of expression, found by the topology.conf fuzzer.
  const std::string filler(180, 'x');
  const std::string expr = "a" + filler + "[1-30]b[1-30]c[1-30]d[1-30]";
  EXPECT_THAT(parse_error(expr), HasSubstr("MiB of host names"));
  EXPECT_TRUE(Hostlist::parse("a[1-30]b[1-30]c[1-30]d[1-30]").ok());  // short names are fine
}

TEST(HostlistErrors, LongExpressionsAreShownAroundTheError) {
  std::string expr = "n[1-1000]";
  for (int i = 0; i < 50; ++i) expr += ",m" + std::to_string(i);
  expr += ",x[9-1]";
  std::string msg = parse_error(expr);
  EXPECT_THAT(msg, HasSubstr("x[9-1]"));
  EXPECT_THAT(msg, HasSubstr("..."));
  EXPECT_LT(msg.size(), 200u);
}

TEST(HostlistPerformance, HundredThousandHostsInMilliseconds) {
  auto start = std::chrono::steady_clock::now();
  auto hl = Hostlist::parse("rack[1-100]-node[0001-1000]");
  ASSERT_TRUE(hl.ok());
  ASSERT_EQ(hl->count(), 100'000u);
  std::string encoded = hl->encode();
  auto again = Hostlist::parse(encoded);
  ASSERT_TRUE(again.ok());
  auto flat = Hostlist::parse("n[1-50000,50001-100000]");
  ASSERT_TRUE(flat.ok());
  // Split where Slurm's per-range limit would refuse it, so it parses again.
  EXPECT_EQ(flat->encode(), "n[1-65536,65537-100000]");
  ASSERT_TRUE(Hostlist::parse(flat->encode()).ok());
  auto elapsed = std::chrono::steady_clock::now() - start;
  // Generous for unoptimized builds on a shared machine; release builds take a few ms.
  EXPECT_LT(std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count(), 2000);
}

}  // namespace
}  // namespace corral
