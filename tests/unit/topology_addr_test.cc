// CORRAL_TOPOLOGY_ADDR / _PATTERN in Slurm's SLURM_TOPOLOGY_ADDR format.
#include <gtest/gtest.h>

#include "topology/topology.h"
#include "topology/topology_generate.h"

namespace corral::topology {
namespace {

Topology conf(const std::string& text) {
  auto set = parse_topology_conf(text, "t.conf");
  EXPECT_TRUE(set.ok()) << set.message();
  return set ? set->topologies.front() : Topology{};
}

TEST(TopologyAddr, ThreeLevelTreeFromTopDown) {
  Topology t = conf(
      "SwitchName=s0 Nodes=tux[0-1]\n"
      "SwitchName=s1 Nodes=tux[2-3]\n"
      "SwitchName=s2 Nodes=tux[4-5]\n"
      "SwitchName=s3 Nodes=tux[6-7]\n"
      "SwitchName=s4 Switches=s[0-1]\n"
      "SwitchName=s5 Switches=s[2-3]\n"
      "SwitchName=s6 Switches=s[4-5]\n");
  TopologyAddr a = topology_addr(t, "tux5");
  EXPECT_EQ(a.addr, "s6.s5.s2.tux5");
  EXPECT_EQ(a.pattern, "switch.switch.switch.node");
  EXPECT_EQ(topology_addr(t, "ghost").addr, "ghost");
  EXPECT_EQ(topology_addr(t, "ghost").pattern, "node");
}

TEST(TopologyAddr, ForestLeafOnly) {
  Topology t = conf("SwitchName=s0 Nodes=tux[0-3]\nSwitchName=s1 Nodes=tux[4-7]\n");
  EXPECT_EQ(topology_addr(t, "tux4").addr, "s1.tux4");
  EXPECT_EQ(topology_addr(t, "tux4").pattern, "switch.node");
}

TEST(TopologyAddr, BlockFlatTorus) {
  Topology b = conf("BlockName=b1 Nodes=n[1-2]\nBlockName=b2 Nodes=n[3-4]\n");
  EXPECT_EQ(topology_addr(b, "n3").addr, "b2.n3");
  EXPECT_EQ(topology_addr(b, "n3").pattern, "block.node");
  EXPECT_EQ(topology_addr(Topology{}, "n1").addr, "n1");
  EXPECT_EQ(topology_addr(Topology{}, "n1").pattern, "node");
  Topology torus = conf("TorusNodes=x[000-001]\n");
  EXPECT_EQ(topology_addr(torus, "x001").addr, "x001");
  EXPECT_EQ(topology_addr(torus, "x001").pattern, "node");
}

TEST(TopologyAddr, GeneratedDragonfly) {
  auto t = generate_dragonfly({2, 2, 2, "n"});
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ(topology_addr(*t, "n7").addr, "s2-0.s1-1.s0-3.n7");
  EXPECT_EQ(topology_addr(*t, "n7").pattern, "switch.switch.switch.node");
}

}  // namespace
}  // namespace corral::topology
