// Synthetic topologies, topology.conf output that reads back the same, and ibnetdiscover.
#include "topology/topology_generate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "topology/topology.h"

namespace corral::topology {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// "Well under a second" for 100,000 nodes in optimized builds (about 0.06 s); debug
// builds are several times slower, and the machine may be shared.
#ifdef NDEBUG
constexpr double kGenerateLimit = 1.0;
#else
constexpr double kGenerateLimit = 3.0;
#endif

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

unsigned count_level(const Topology& t, unsigned level) {
  unsigned n = 0;
  for (const Switch& s : t.switches) n += s.level == level;
  return n;
}

// The conf text parsed back gives the same switches, blocks and nodes.
void expect_round_trip(const Topology& t) {
  const std::string text = to_topology_conf(t);
  auto set = parse_topology_conf(text, "roundtrip.conf");
  ASSERT_TRUE(set.ok()) << set.message() << "\n" << text.substr(0, 2000);
  const Topology& back = set->topologies.front();
  EXPECT_EQ(back.kind, t.kind);
  EXPECT_EQ(back.topo_optional, t.topo_optional);
  ASSERT_EQ(back.switches.size(), t.switches.size());
  for (size_t i = 0; i < t.switches.size(); ++i) {
    EXPECT_EQ(back.switches[i].name, t.switches[i].name);
    EXPECT_EQ(back.switches[i].children, t.switches[i].children);
    EXPECT_EQ(back.switches[i].nodes, t.switches[i].nodes);
    EXPECT_EQ(back.switches[i].parent, t.switches[i].parent);
    EXPECT_EQ(back.switches[i].level, t.switches[i].level);
    EXPECT_EQ(back.switches[i].link_speed, t.switches[i].link_speed);
  }
  ASSERT_EQ(back.blocks.size(), t.blocks.size());
  for (size_t i = 0; i < t.blocks.size(); ++i) {
    EXPECT_EQ(back.blocks[i].name, t.blocks[i].name);
    EXPECT_EQ(back.blocks[i].nodes, t.blocks[i].nodes);
  }
  EXPECT_EQ(back.block_sizes, t.block_sizes);
  ASSERT_EQ(back.torus.size(), t.torus.size());
  for (size_t i = 0; i < t.torus.size(); ++i) {
    EXPECT_EQ(back.torus[i].name, t.torus[i].name);
    EXPECT_EQ(back.torus[i].coord, t.torus[i].coord);
  }
}

TEST(TopologyGenerate, FatTree100kIsFastAndShapedRight) {
  const auto t0 = std::chrono::steady_clock::now();
  auto t = generate_fat_tree({100000, 32, 32, 3, "node"});
  const double took = seconds_since(t0);
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_LT(took, kGenerateLimit);
  EXPECT_EQ(t->kind, Kind::tree);
  EXPECT_EQ(count_level(*t, 0), 3125u);
  EXPECT_EQ(count_level(*t, 1), 98u);
  EXPECT_EQ(count_level(*t, 2), 1u);
  EXPECT_EQ(t->switches.back().children.size(), 98u);  // the top joins the whole level
  EXPECT_EQ(t->node_leaf.size(), 100000u);
  EXPECT_EQ(t->switches.front().nodes.front(), "node00000");
  EXPECT_EQ(t->switches[3124].nodes.back(), "node99999");
  EXPECT_EQ(t->switches[3124].name, "s0-3124");
  EXPECT_EQ(t->switches.back().name, "s2-0");
  const auto t1 = std::chrono::steady_clock::now();
  expect_round_trip(*t);
  EXPECT_LT(seconds_since(t1), 5 * kGenerateLimit);
}

TEST(TopologyGenerate, FatTreeErrors) {
  EXPECT_THAT(generate_fat_tree({0, 32, 32, 3, "n"}).message(), HasSubstr("nodes"));
  EXPECT_THAT(generate_fat_tree({10, 0, 32, 3, "n"}).message(), HasSubstr("per leaf"));
  EXPECT_THAT(generate_fat_tree({10, 4, 32, 0, "n"}).message(), HasSubstr("levels"));
  EXPECT_THAT(generate_fat_tree({2000, 32, 2, 1, "n"}).message(),
              HasSubstr("one level is one leaf switch of 32 nodes, not 2000"));
  EXPECT_THAT(generate_fat_tree({10, 4, 1, 3, "n"}).message(), HasSubstr("radix"));
  EXPECT_THAT(generate_fat_tree({10, 4, 32, 2, "n[x"}).message(), HasSubstr("prefix"));
  auto one = generate_fat_tree({8, 8, 4, 1, "n"});
  ASSERT_TRUE(one.ok()) << one.message();
  EXPECT_EQ(one->switches.size(), 1u);
}

TEST(TopologyGenerate, Dragonfly) {
  auto t = generate_dragonfly({4, 3, 2, "n"});
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ(t->kind, Kind::dragonfly);
  EXPECT_EQ(t->node_leaf.size(), 24u);
  EXPECT_EQ(count_level(*t, 0), 12u);
  EXPECT_EQ(count_level(*t, 1), 4u);
  EXPECT_EQ(count_level(*t, 2), 1u);
  EXPECT_THAT(t->nodes_under_switch(*t->find_switch("s1-1")), ElementsAre("n06", "n07", "n08", "n09", "n10", "n11"));
  expect_round_trip(*t);
  EXPECT_THAT(to_topology_conf(*t), HasSubstr("TopologyParam=dragonfly\n"));

  const auto t0 = std::chrono::steady_clock::now();
  auto big = generate_dragonfly({58, 12, 16, "node"});  // 11,136 nodes
  ASSERT_TRUE(big.ok()) << big.message();
  EXPECT_LT(seconds_since(t0), kGenerateLimit);
  EXPECT_EQ(big->node_leaf.size(), 11136u);
  EXPECT_THAT(generate_dragonfly({0, 1, 1, "n"}).message(), HasSubstr("groups"));
  EXPECT_THAT(generate_dragonfly({1, 0, 1, "n"}).message(), HasSubstr("switches per group"));
  EXPECT_THAT(generate_dragonfly({1, 1, 0, "n"}).message(), HasSubstr("nodes per switch"));
}

TEST(TopologyGenerate, Blocks) {
  const auto t0 = std::chrono::steady_clock::now();
  auto t = generate_blocks({65536, 16, {}, "node"});
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_LT(seconds_since(t0), kGenerateLimit);
  EXPECT_EQ(t->kind, Kind::block);
  EXPECT_EQ(t->blocks.size(), 4096u);
  EXPECT_EQ(t->block_sizes.front(), 16u);
  EXPECT_EQ(t->block_sizes.back(), 65536u);
  EXPECT_EQ(t->blocks[1].name, "b1");
  EXPECT_EQ(t->blocks[1].nodes.front(), "node00016");
  expect_round_trip(*t);

  auto sized = generate_blocks({64, 16, {16, 32, 64}, "n"});
  ASSERT_TRUE(sized.ok()) << sized.message();
  EXPECT_THAT(sized->block_sizes, ElementsAre(16u, 32u, 64u));
  expect_round_trip(*sized);

  EXPECT_THAT(generate_blocks({60, 16, {}, "n"}).message(),
              HasSubstr("60 nodes do not divide into base blocks of 16 nodes"));
  EXPECT_THAT(generate_blocks({64, 16, {32, 64}, "n"}).message(), HasSubstr("BlockSizes starts with 32"));
  EXPECT_THAT(generate_blocks({0, 16, {}, "n"}).message(), HasSubstr("nodes"));
  EXPECT_THAT(generate_blocks({16, 0, {}, "n"}).message(), HasSubstr("base block size"));
}

TEST(TopologyGenerate, HandWrittenFilesRoundTrip) {
  auto tree = parse_topology_conf(
      "TopologyParam=TopoOptional\n"
      "SwitchName=s0 Nodes=tux[0-3,12] LinkSpeed=900\n"
      "SwitchName=s1 Nodes=tux[4-7]\n"
      "SwitchName=top Switches=s[1,0]\n"
      "SwitchName=lone Nodes=x1\n",
      "t.conf");
  ASSERT_TRUE(tree.ok()) << tree.message();
  expect_round_trip(tree->topologies.front());
  auto torus = parse_topology_conf("TorusNodes=t[000-002]\nNodeName=odd Coords=7,8,9\nTorusNodes=t00A\n", "t.conf");
  ASSERT_TRUE(torus.ok()) << torus.message();
  expect_round_trip(torus->topologies.front());
}

constexpr const char* kIbnetdiscover = R"(#
# Topology file: generated on Mon Jan  6 10:00:00 2025
#
vendid=0x2c9
switchguid=0x7cfe900300aa0001(7cfe900300aa0001)
Switch	36 "S-7cfe900300aa0001"		# "MF0;leaf01:MSB7700/U1" enhanced port 0 lid 3 lmc 0
[1]	"H-0002c90300a1b2c0"[1](2c90300a1b2c1) 		# "node001 HCA-1" lid 10 4xEDR
[2]	"H-0002c90300a1b2d0"[1](2c90300a1b2d1) 		# "node002 HCA-1" lid 11 4xEDR
[35]	"S-7cfe900300cc0001"[1]		# "MF0;spine01:MSB7800/U1" lid 5 4xEDR

vendid=0x2c9
switchguid=0x7cfe900300aa0002(7cfe900300aa0002)
Switch	36 "S-7cfe900300aa0002"		# "MF0;leaf02:MSB7700/U1" enhanced port 0 lid 4 lmc 0
[1]	"H-0002c90300a1b2e0"[1](2c90300a1b2e1) 		# "node003 HCA-1" lid 12 4xEDR
[2]	"H-0002c90300a1b2f0"[1](2c90300a1b2f1) 		# "node004 HCA-1" lid 13 4xEDR
[3]	"H-0002c90300a1b3a0"[1](2c90300a1b3a1) 		# "Mellanox Technologies Aggregation Node" lid 14 4xEDR
[4]	"H-0002c90300a1b2c0"[2](2c90300a1b2c2) 		# "node001 HCA-2" lid 15 4xEDR
[35]	"S-7cfe900300cc0001"[2]		# "MF0;spine01:MSB7800/U1" lid 5 4xEDR

vendid=0x2c9
switchguid=0x7cfe900300cc0001(7cfe900300cc0001)
Switch	36 "S-7cfe900300cc0001"		# "MF0;spine01:MSB7800/U1" enhanced port 0 lid 5 lmc 0
[1]	"S-7cfe900300aa0001"[35]		# "MF0;leaf01:MSB7700/U1" lid 3 4xEDR
[2]	"S-7cfe900300aa0002"[35]		# "MF0;leaf02:MSB7700/U1" lid 4 4xEDR

vendid=0x2c9
caguid=0x2c90300a1b2c0
Ca	2 "H-0002c90300a1b2c0"		# "node001 HCA-1"
[1](2c90300a1b2c1) 	"S-7cfe900300aa0001"[1]		# lid 10 lmc 0 "MF0;leaf01:MSB7700/U1" lid 3 4xEDR
)";

TEST(TopologyGenerate, IbnetdiscoverLeavesAndParents) {
  auto t = from_ibnetdiscover(kIbnetdiscover, "ib.txt");
  ASSERT_TRUE(t.ok()) << t.message();
  ASSERT_EQ(t->switches.size(), 3u);
  const Switch& leaf1 = t->switches[*t->find_switch("leaf01")];
  const Switch& leaf2 = t->switches[*t->find_switch("leaf02")];
  const Switch& spine = t->switches[*t->find_switch("spine01")];
  EXPECT_THAT(leaf1.nodes, ElementsAre("node001", "node002"));
  // The aggregation node is no host; node001's second HCA stays on its first switch.
  EXPECT_THAT(leaf2.nodes, ElementsAre("node003", "node004"));
  EXPECT_EQ(spine.level, 1u);
  EXPECT_EQ(spine.children.size(), 2u);
  EXPECT_EQ(t->switches[*leaf2.parent].name, "spine01");
  expect_round_trip(*t);
  EXPECT_EQ(topology_addr(*t, "node003").addr, "spine01.leaf02.node003");
}

TEST(TopologyGenerate, IbnetdiscoverSampleFileWithTwoSpines) {
  const char* data = std::getenv("CORRAL_TEST_DATA");
  if (!data) GTEST_SKIP() << "CORRAL_TEST_DATA not set";
  std::ifstream in(std::string(data) + "/topology/two-leaf.ibnetdiscover");
  std::stringstream text;
  text << in.rdbuf();
  auto t = from_ibnetdiscover(text.str(), "two-leaf.ibnetdiscover");
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ(t->switches.size(), 4u);
  EXPECT_EQ(t->switches[*t->find_switch("spine02")].children.size(), 2u);
  EXPECT_EQ(t->node_leaf.size(), 4u);
}

TEST(TopologyGenerate, IbnetdiscoverErrorsAndGenericNames) {
  EXPECT_THAT(from_ibnetdiscover("hello\n", "x.txt").message(), HasSubstr("x.txt: no \"Switch\" entries found"));
  EXPECT_THAT(from_ibnetdiscover("Switch 36 \"S-1\" # \"a\"\n[1] \"S-2\"[1]\n", "x.txt").message(),
              HasSubstr("no switch has hosts"));
  EXPECT_THAT(from_ibnetdiscover("Switch 36 nothing\n", "x.txt").message(),
              HasSubstr("x.txt:1: a Switch line without"));
  // Two switches with the same generic description get s<N> names.
  auto t = from_ibnetdiscover(
      "Switch 8 \"S-1\" # \"Mellanox Technologies\" lid 1\n"
      "[1] \"H-1\"[1] # \"n1 HCA-1\" lid 2\n"
      "\n"
      "Switch 8 \"S-2\" # \"Mellanox Technologies\" lid 3\n"
      "[1] \"H-2\"[1] # \"n2 HCA-1\" lid 4\n",
      "x.txt");
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ(t->switches[0].name, "s0");
  EXPECT_EQ(t->switches[1].name, "s1");
}

}  // namespace
}  // namespace corral::topology
