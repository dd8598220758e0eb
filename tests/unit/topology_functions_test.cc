// Hostlist functions: switch{}, block{}, switchwith{}, blockwith{} mixed with hostlists.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "topology/topology.h"
#include "util/hostlist.h"

namespace corral::topology {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Topology tree() {
  auto set = parse_topology_conf(
      "SwitchName=s0 Nodes=tux[0-1]\n"
      "SwitchName=s1 Nodes=tux[2-3]\n"
      "SwitchName=s2 Nodes=tux[4-5]\n"
      "SwitchName=s3 Nodes=tux[6-7]\n"
      "SwitchName=s4 Switches=s[0-1]\n"
      "SwitchName=s5 Switches=s[2-3]\n"
      "SwitchName=s6 Switches=s[4-5]\n",
      "tree.conf");
  EXPECT_TRUE(set.ok()) << set.message();
  return set->topologies.front();
}

Topology blocks() {
  auto set = parse_topology_conf(
      "BlockName=b1 Nodes=node[01-04]\n"
      "BlockName=b2 Nodes=node[05-08]\n",
      "block.conf");
  EXPECT_TRUE(set.ok()) << set.message();
  return set->topologies.front();
}

std::vector<std::string> expand(const std::string& expr, const Topology& t) {
  auto r = expand_topology_functions(expr, t);
  EXPECT_TRUE(r.ok()) << expr << ": " << r.message();
  if (!r) return {};
  auto hl = Hostlist::parse(*r);
  EXPECT_TRUE(hl.ok()) << *r;
  return hl ? hl->hosts() : std::vector<std::string>{};
}

std::string error(const std::string& expr, const Topology& t) {
  auto r = expand_topology_functions(expr, t);
  EXPECT_FALSE(r.ok()) << expr;
  return r ? std::string() : r.message();
}

TEST(TopologyFunctions, SwitchOfLeafAndInnerSwitch) {
  const Topology t = tree();
  EXPECT_EQ(*expand_topology_functions("switch{s0}", t), "tux[0-1]");
  EXPECT_THAT(expand("switch{s4}", t), ElementsAre("tux0", "tux1", "tux2", "tux3"));
  EXPECT_EQ(expand("switch{s6}", t).size(), 8u);
  EXPECT_EQ(*expand_topology_functions("switch{s6}", t), "tux[0-7]");
}

TEST(TopologyFunctions, SwitchWith) {
  const Topology t = tree();
  EXPECT_THAT(expand("switchwith{tux5}", t), ElementsAre("tux4", "tux5"));
}

TEST(TopologyFunctions, MixedWithHostlistsAndCommasInBrackets) {
  const Topology t = tree();
  EXPECT_THAT(expand("tux[6,7],switch{s1}", t), ElementsAre("tux6", "tux7", "tux2", "tux3"));
  EXPECT_THAT(expand("switch{s0},other[1-2],switchwith{tux7}", t),
              ElementsAre("tux0", "tux1", "other1", "other2", "tux6", "tux7"));
  // A node named twice is listed once.
  EXPECT_THAT(expand("switch{s0},tux1,switchwith{tux0}", t), ElementsAre("tux0", "tux1"));
  // The argument may be a hostlist of switches.
  EXPECT_THAT(expand("switch{s[0-1]}", t), ElementsAre("tux0", "tux1", "tux2", "tux3"));
}

TEST(TopologyFunctions, Blocks) {
  const Topology t = blocks();
  EXPECT_EQ(*expand_topology_functions("block{b2}", t), "node[05-08]");
  EXPECT_THAT(expand("blockwith{node02},node09", t), ElementsAre("node01", "node02", "node03", "node04", "node09"));
}

TEST(TopologyFunctions, Errors) {
  const Topology t = tree();
  EXPECT_THAT(error("switch{s9}", t), HasSubstr("switch{s9}: no switch named s9"));
  EXPECT_THAT(error("tux0,switchwith{ghost}", t), HasSubstr("switchwith{ghost}: node ghost is in no switch"));
  EXPECT_THAT(error("block{b1}", t), HasSubstr("block{b1}: the topology 'default' is a tree "
                                               "topology and has no blocks"));
  EXPECT_THAT(error("switch{s0},tux[1-", t), HasSubstr("tux[1-"));
  const Topology b = blocks();
  EXPECT_THAT(error("switch{s0}", b), HasSubstr("has no switches"));
  EXPECT_THAT(error("block{b9}", b), HasSubstr("block{b9}: no block named b9"));
  EXPECT_THAT(error("blockwith{x}", b), HasSubstr("blockwith{x}: node x is in no block"));
}

TEST(TopologyFunctions, Detection) {
  EXPECT_TRUE(has_topology_functions("switch{s1}"));
  EXPECT_TRUE(has_topology_functions("tux[1-2],blockwith{n1}"));
  EXPECT_TRUE(has_topology_functions("Block{b1}"));
  EXPECT_FALSE(has_topology_functions("tux[1-2]"));
  EXPECT_FALSE(has_topology_functions("switchboard[1-2]"));
  EXPECT_FALSE(has_topology_functions("myswitch{1}"));
  const Topology t = tree();
  EXPECT_EQ(*expand_topology_functions("tux[3,1]", t), "tux[3,1]");  // unchanged
}

}  // namespace
}  // namespace corral::topology
