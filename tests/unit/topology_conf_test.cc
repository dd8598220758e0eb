// topology.conf parsing: the topology guide's examples, corral's extra lines, bad files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "topology/topology.h"

namespace corral::topology {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Topology parse_ok(const std::string& text) {
  auto set = parse_topology_conf(text, "t.conf");
  EXPECT_TRUE(set.ok()) << set.message();
  if (!set) return {};
  EXPECT_EQ(set->topologies.size(), 1u);
  EXPECT_EQ(set->cluster_default, "default");
  return set->topologies.front();
}

std::string parse_error(const std::string& text) {
  auto set = parse_topology_conf(text, "t.conf");
  EXPECT_FALSE(set.ok());
  return set ? std::string() : set.message();
}

const Switch& sw(const Topology& t, const std::string& name) {
  static const Switch none;
  auto i = t.find_switch(name);
  EXPECT_TRUE(i.has_value()) << name;
  return i ? t.switches[*i] : none;
}

// The guide's first example: a three-level tree where every switch has two children.
constexpr const char* kGuideThreeLevel = R"(# topology.conf
# Switch Configuration
SwitchName=s0 Nodes=tux[0-1]
SwitchName=s1 Nodes=tux[2-3]
SwitchName=s2 Nodes=tux[4-5]
SwitchName=s3 Nodes=tux[6-7]
SwitchName=s4 Switches=s[0-1]
SwitchName=s5 Switches=s[2-3]
SwitchName=s6 Switches=s[4-5]
)";

TEST(TopologyConf, GuideThreeLevelExample) {
  Topology t = parse_ok(kGuideThreeLevel);
  EXPECT_EQ(t.kind, Kind::tree);
  ASSERT_EQ(t.switches.size(), 7u);
  EXPECT_THAT(sw(t, "s0").nodes, ElementsAre("tux0", "tux1"));
  EXPECT_EQ(sw(t, "s0").level, 0u);
  EXPECT_EQ(sw(t, "s4").level, 1u);
  EXPECT_EQ(sw(t, "s6").level, 2u);
  EXPECT_EQ(t.switches[*sw(t, "s0").parent].name, "s4");
  EXPECT_EQ(t.switches[*sw(t, "s5").parent].name, "s6");
  EXPECT_FALSE(sw(t, "s6").parent.has_value());
  EXPECT_THAT(t.nodes_under_switch(*t.find_switch("s6")),
              ElementsAre("tux0", "tux1", "tux2", "tux3", "tux4", "tux5", "tux6", "tux7"));
  EXPECT_EQ(t.switches[*t.leaf_of("tux5")].name, "s2");
  EXPECT_EQ(sw(t, "s0").line, 3u);
  EXPECT_FALSE(t.topo_optional);
}

TEST(TopologyConf, GuideTwoLevelExampleWithLinkSpeed) {
  Topology t = parse_ok(R"(# topology.conf
# Switch Configuration
SwitchName=s0 Nodes=tux[0-3] LinkSpeed=900
SwitchName=s1 Nodes=tux[4-7] LinkSpeed=900
SwitchName=s2 Nodes=tux[8-11] LinkSpeed=900
SwitchName=s3 Nodes=tux[12-15] LinkSpeed=1800
SwitchName=s4 Switches=s[0-3] LinkSpeed=1800
SwitchName=s5 Switches=s[0-3] LinkSpeed=1800
SwitchName=s6 Switches=s[0-3] LinkSpeed=1800
SwitchName=s7 Switches=s[0-3] LinkSpeed=1800
)");
  ASSERT_EQ(t.switches.size(), 8u);
  EXPECT_EQ(sw(t, "s0").link_speed, 900u);
  EXPECT_EQ(sw(t, "s3").link_speed, 1800u);
  // Every leaf has four parents; the first listing it is the one recorded.
  EXPECT_EQ(t.switches[*sw(t, "s2").parent].name, "s4");
  EXPECT_EQ(sw(t, "s7").level, 1u);
  EXPECT_EQ(t.nodes_under_switch(*t.find_switch("s7")).size(), 16u);
}

TEST(TopologyConf, GuideOneTopSwitchAndForest) {
  const std::string leaves = R"(# topology.conf
# Switch Configuration
SwitchName=s0 Nodes=tux[0-3]
SwitchName=s1 Nodes=tux[4-7]
SwitchName=s2 Nodes=tux[8-11]
SwitchName=s3 Nodes=tux[12-15]
)";
  Topology one = parse_ok(leaves + "SwitchName=s4 Switches=s[0-3]\n");
  EXPECT_EQ(one.switches.size(), 5u);
  EXPECT_EQ(sw(one, "s4").level, 1u);
  EXPECT_EQ(one.switches[*sw(one, "s3").parent].name, "s4");

  // "it is legal to remove the line SwitchName=s4 Switches=s[0-3]": a forest.
  Topology forest = parse_ok(leaves);
  EXPECT_EQ(forest.switches.size(), 4u);
  for (const Switch& s : forest.switches) EXPECT_FALSE(s.parent.has_value());
  EXPECT_FALSE(forest.topo_optional);
  EXPECT_EQ(forest.all_nodes().size(), 16u);

  Topology optional = parse_ok(leaves + "TopologyParam=TopoOptional\n");
  EXPECT_TRUE(optional.topo_optional);
  EXPECT_EQ(optional.kind, Kind::tree);
}

TEST(TopologyConf, DragonflyAndCaseInsensitiveKeys) {
  Topology t = parse_ok(
      "topologyparam=Dragonfly,topooptional\n"
      "switchname=g0 nodes=n[0-1] LINKSPEED=5   # a comment\n"
      "SWITCHNAME=g1 Nodes=n[2-3]\n"
      "switchName=top switches=g[0-1]\n");
  EXPECT_EQ(t.kind, Kind::dragonfly);
  EXPECT_TRUE(t.topo_optional);
  EXPECT_EQ(sw(t, "g0").link_speed, 5u);
  EXPECT_EQ(sw(t, "top").level, 1u);
}

TEST(TopologyConf, NonConsecutiveHostlistsAndForwardReferences) {
  Topology t = parse_ok(
      "SwitchName=top Switches=s[0-2,4]\n"
      "SwitchName=s0 Nodes=tux[0-3,12,18-20]\n"
      "SwitchName=s1 Nodes=tux[4-5]\n"
      "SwitchName=s2 Nodes=tux6\n"
      "SwitchName=s4 Nodes=tux7\r\n");
  EXPECT_THAT(sw(t, "s0").nodes, ElementsAre("tux0", "tux1", "tux2", "tux3", "tux12", "tux18", "tux19", "tux20"));
  EXPECT_EQ(sw(t, "top").children.size(), 4u);
  EXPECT_EQ(sw(t, "top").line, 1u);
}

TEST(TopologyConf, Blocks) {
  const std::string blocks =
      "BlockName=b1 Nodes=node[01-04]\n"
      "BlockName=b2 Nodes=node[05-08]\n"
      "BlockName=b3 Nodes=node[09-12]\n"
      "BlockName=b4 Nodes=node[13-16]\n";
  Topology t = parse_ok(blocks + "BlockSizes=4,16\n");
  EXPECT_EQ(t.kind, Kind::block);
  ASSERT_EQ(t.blocks.size(), 4u);
  EXPECT_THAT(t.block_sizes, ElementsAre(4u, 16u));
  EXPECT_EQ(t.blocks[*t.leaf_of("node06")].name, "b2");
  EXPECT_EQ(t.blocks[1].line, 2u);

  Topology defaults = parse_ok(blocks);
  EXPECT_THAT(defaults.block_sizes, ElementsAre(4u, 8u, 16u));

  Topology first = parse_ok("blocksizes=4,8\n" + blocks);
  EXPECT_THAT(first.block_sizes, ElementsAre(4u, 8u));
}

TEST(TopologyConf, TorusFromNamesAndCoords) {
  Topology t = parse_ok(
      "TorusNodes=bgq00A,bgq00B\n"
      "NodeName=odd Coords=3,4,5\n");
  EXPECT_EQ(t.kind, Kind::torus);
  ASSERT_EQ(t.torus.size(), 3u);
  EXPECT_EQ(t.torus[0].name, "bgq00A");
  EXPECT_EQ(t.torus[0].coord, (std::array<int, 3>{0, 0, 10}));
  EXPECT_EQ(t.torus[1].coord, (std::array<int, 3>{0, 0, 11}));
  EXPECT_EQ(t.torus[2].coord, (std::array<int, 3>{3, 4, 5}));
}

TEST(TopologyConf, ChassisBesideTheNetwork) {
  Topology t = parse_ok(
      "SwitchName=s0 Nodes=node[0-3]\n"
      "ChassisName=c0 Nodes=node[0-1] Storage=38TB\n"
      "ChassisName=c1 Nodes=node[2-3]\n");
  EXPECT_EQ(t.kind, Kind::tree);
  ASSERT_EQ(t.chassis.size(), 2u);
  EXPECT_EQ(t.chassis[*t.chassis_of("node1")].name, "c0");
  EXPECT_EQ(t.chassis[0].storage_bytes, 38'000'000'000'000ull);
  EXPECT_EQ(t.chassis[1].storage_bytes, 0u);
  EXPECT_FALSE(t.chassis_of("node9"));
  EXPECT_NE(parse_error("ChassisName=c0 Nodes=n[0-1]\nChassisName=c1 Nodes=n1\n")
                .find("t.conf:2: node n1 is in chassis c0 and in chassis c1"),
            std::string::npos);
  EXPECT_NE(parse_error("ChassisName=c0 Nodes=n0 Storage=lots\n").find("t.conf:1: Storage=lots"), std::string::npos);
  EXPECT_NE(parse_error("ChassisName=c0\n").find("t.conf:1: chassis c0 has no Nodes="), std::string::npos);
}

TEST(TopologyConf, EmptyFileIsFlat) {
  Topology t = parse_ok("# nothing here\n\n");
  EXPECT_EQ(t.kind, Kind::flat);
}

TEST(TopologyConf, GuideExampleFromDataFile) {
  const char* data = std::getenv("CORRAL_TEST_DATA");
  if (!data) GTEST_SKIP() << "CORRAL_TEST_DATA not set";
  auto set = load_topology(std::string(data) + "/topology/guide-three-level.conf");
  ASSERT_TRUE(set.ok()) << set.message();
  EXPECT_EQ(set->default_topology()->switches.size(), 7u);
}

// ---------------------------------------------------------------- bad files

TEST(TopologyConf, UnknownSwitchNamesTheLine) {
  EXPECT_EQ(parse_error("SwitchName=s0 Nodes=tux[0-1]\nSwitchName=s4 Switches=s[0-1]\n"),
            "t.conf:2: switch s4: Switches= names s1, which is not defined");
}

TEST(TopologyConf, CycleIsAnError) {
  std::string e = parse_error(
      "SwitchName=s0 Nodes=tux0\n"
      "SwitchName=a Switches=b\n"
      "SwitchName=b Switches=a\n");
  EXPECT_THAT(e, HasSubstr("t.conf:2:"));
  EXPECT_THAT(e, HasSubstr("cycle"));
}

TEST(TopologyConf, NodeOnTwoSwitches) {
  EXPECT_EQ(parse_error("SwitchName=s0 Nodes=tux[0-1]\nSwitchName=s1 Nodes=tux[1-2]\n"),
            "t.conf:2: node tux1 is on switch s0 and on switch s1");
}

TEST(TopologyConf, BadHostlist) {
  std::string e = parse_error("\nSwitchName=s0 Nodes=tux[0-\n");
  EXPECT_THAT(e, HasSubstr("t.conf:2: Nodes=tux[0-:"));
}

TEST(TopologyConf, UnknownKeys) {
  EXPECT_THAT(parse_error("SwitchName=s0 Nodes=tux0 Speed=3\n"), HasSubstr("t.conf:1: unknown key 'Speed'"));
  EXPECT_THAT(parse_error("# x\nPartitionName=p Nodes=tux0\n"), HasSubstr("t.conf:2: unknown key 'PartitionName'"));
  EXPECT_THAT(parse_error("SwitchName s0\n"), HasSubstr("t.conf:1: expected KEY=VALUE"));
  EXPECT_THAT(parse_error("SwitchName=s0 Nodes=a Nodes=b\n"), HasSubstr("t.conf:1: Nodes is given twice"));
  EXPECT_THAT(parse_error("TopologyParam=RouteTree\n"),
              HasSubstr("t.conf:1: TopologyParam: unknown parameter 'RouteTree'"));
  EXPECT_THAT(parse_error("SwitchName=s0 Nodes=a LinkSpeed=fast\n"), HasSubstr("t.conf:1: LinkSpeed=fast"));
}

TEST(TopologyConf, StructuralErrors) {
  EXPECT_THAT(parse_error("SwitchName=s0 Nodes=a\nSwitchName=s0 Nodes=b\n"),
              HasSubstr("t.conf:2: switch s0 is defined twice"));
  EXPECT_THAT(parse_error("SwitchName=s0 Nodes=a\nSwitchName=s1 Nodes=b Switches=s0\n"),
              HasSubstr("t.conf:2: switch s1 has both Nodes= and Switches="));
  EXPECT_THAT(parse_error("SwitchName=s0\n"), HasSubstr("t.conf:1: switch s0 has neither Nodes= nor Switches="));
  EXPECT_THAT(parse_error("SwitchName=a.b Nodes=x\n"), HasSubstr("t.conf:1: switch name 'a.b'"));
  EXPECT_THAT(parse_error("SwitchName=s0 Nodes=\n"), HasSubstr("t.conf:1: Nodes is empty"));
  EXPECT_THAT(parse_error("SwitchName=s0 Nodes=tux[0-1],tux1\n"),
              HasSubstr("t.conf:1: switch s0 lists node tux1 twice"));
  EXPECT_THAT(parse_error("SwitchName=s0 Nodes=a\nSwitchName=s1 Switches=s0,s0\n"),
              HasSubstr("t.conf:2: switch s1 lists switch s0 twice"));
  EXPECT_THAT(parse_error("BlockName=b1 Nodes=n[1-2],n1\n"), HasSubstr("t.conf:1: block b1 lists node n1 twice"));
}

TEST(TopologyConf, SwitchAndBlockLinesDoNotMix) {
  EXPECT_EQ(parse_error("SwitchName=s0 Nodes=a\n\nBlockName=b1 Nodes=c\n"),
            "t.conf:3: BlockName/BlockSizes lines cannot be mixed with SwitchName lines (line "
            "1): a file describes one kind of topology; use topology.yaml for several");
  EXPECT_THAT(parse_error("BlockName=b1 Nodes=c\nTopologyParam=dragonfly\n"),
              HasSubstr("t.conf:2: TopologyParam=dragonfly/TopoOptional apply to switch"));
}

TEST(TopologyConf, BlockSizesErrors) {
  const std::string blocks =
      "BlockName=b1 Nodes=n[0-3]\n"
      "BlockName=b2 Nodes=n[4-7]\n";
  EXPECT_THAT(parse_error(blocks + "BlockSizes=4,4\n"),
              HasSubstr("t.conf:3: BlockSizes must be ascending: 4 follows 4"));
  EXPECT_THAT(parse_error(blocks + "BlockSizes=8,16\n"),
              HasSubstr("t.conf:3: BlockSizes starts with 8, but base blocks have 4 nodes"));
  EXPECT_THAT(parse_error(blocks + "BlockSizes=4,6\n"), HasSubstr("t.conf:3: BlockSizes: 6 is not a multiple of 4"));
  EXPECT_THAT(parse_error(blocks + "BlockSizes=4,x\n"),
              HasSubstr("t.conf:3: BlockSizes=4,x: 'x' is not a non-negative integer"));
  EXPECT_THAT(parse_error(blocks + "BlockSizes=4\nBlockSizes=4\n"),
              HasSubstr("t.conf:4: BlockSizes is given twice (first at line 3)"));
  EXPECT_THAT(parse_error("BlockName=b1 Nodes=n[0-3]\nBlockName=b2 Nodes=n[4-6]\n"),
              HasSubstr("t.conf:2: block b2 has 3 nodes but block b1 (t.conf:1) has 4"));
  EXPECT_THAT(parse_error("BlockSizes=4\n"), HasSubstr("t.conf:1: BlockSizes given but no BlockName lines"));
  EXPECT_THAT(parse_error("BlockName=b1\n"), HasSubstr("t.conf:1: block b1 has no Nodes="));
  EXPECT_THAT(parse_error(blocks + "BlockName=b1 Nodes=n[8-11]\n"), HasSubstr("t.conf:3: block b1 is defined twice"));
}

TEST(TopologyConf, TorusErrors) {
  EXPECT_THAT(parse_error("TorusNodes=n-1\n"),
              HasSubstr("t.conf:1: node n-1: cannot take torus coordinates from the name"));
  EXPECT_THAT(parse_error("NodeName=a Coords=1,2\n"), HasSubstr("t.conf:1: Coords=1,2: expected three coordinates"));
  EXPECT_THAT(parse_error("NodeName=a[1-2] Coords=1,2,3\n"), HasSubstr("t.conf:1: NodeName="));
  EXPECT_THAT(parse_error("TorusNodes=x000\nNodeName=x000 Coords=1,1,1\n"),
              HasSubstr("t.conf:2: node x000 is given twice (first at line 1)"));
}

TEST(TopologyConf, LoadMissingFile) {
  auto set = load_topology("/nonexistent/topology.conf");
  ASSERT_FALSE(set.ok());
  EXPECT_THAT(set.message(), HasSubstr("cannot read topology file /nonexistent/topology.conf"));
}

}  // namespace
}  // namespace corral::topology
