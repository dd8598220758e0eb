// topology.yaml parsing: Slurm 25.05's example, corral's extensions, bad files with lines.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "topology/topology.h"

namespace corral::topology {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The topology.yaml(5) example.
constexpr const char* kManPageExample = R"(---
- topology: topo1
  cluster_default: true
  tree:
    switches:
      - switch: sw_root
        children: s[1-2]
      - switch: s1
        nodes: node[01-02]
      - switch: s2
        nodes: node[03-04]
- topology: topo2
  cluster_default: false
  block:
    block_sizes:
      - 4
      - 16
    blocks:
      - block: b1
        nodes: node[01-04]
      - block: b2
        nodes: node[05-08]
      - block: b3
        nodes: node[09-12]
      - block: b4
        nodes: node[13-16]
- topology: topo3
  cluster_default: false
  flat: true
)";

TopologySet parse_ok(const std::string& text) {
  auto set = parse_topology_yaml(text, "t.yaml");
  EXPECT_TRUE(set.ok()) << set.message();
  return set ? *set : TopologySet{};
}

std::string parse_error(const std::string& text) {
  auto set = parse_topology_yaml(text, "t.yaml");
  EXPECT_FALSE(set.ok());
  return set ? std::string() : set.message();
}

void expect_man_page_example(const TopologySet& set) {
  ASSERT_EQ(set.topologies.size(), 3u);
  EXPECT_EQ(set.cluster_default, "topo1");
  EXPECT_EQ(set.default_topology()->name, "topo1");
  const Topology* tree = set.find("topo1");
  ASSERT_NE(tree, nullptr);
  EXPECT_EQ(tree->kind, Kind::tree);
  EXPECT_EQ(tree->switches.size(), 3u);
  EXPECT_EQ(tree->switches[*tree->switches[*tree->find_switch("s2")].parent].name, "sw_root");
  EXPECT_EQ(tree->switches[*tree->find_switch("s1")].line, 8u);
  const Topology* block = set.find("topo2");
  ASSERT_NE(block, nullptr);
  EXPECT_EQ(block->kind, Kind::block);
  EXPECT_THAT(block->block_sizes, ElementsAre(4u, 16u));
  EXPECT_EQ(block->blocks.size(), 4u);
  EXPECT_EQ(block->blocks[*block->leaf_of("node10")].name, "b3");
  const Topology* flat = set.find("topo3");
  ASSERT_NE(flat, nullptr);
  EXPECT_EQ(flat->kind, Kind::flat);
}

TEST(TopologyYaml, ManPageExample) { expect_man_page_example(parse_ok(kManPageExample)); }

TEST(TopologyYaml, LoadPicksYamlByExtension) {
  const char* data = std::getenv("CORRAL_TEST_DATA");
  if (!data) GTEST_SKIP() << "CORRAL_TEST_DATA not set";
  auto set = load_topology(std::string(data) + "/topology/multi.yaml");
  ASSERT_TRUE(set.ok()) << set.message();
  expect_man_page_example(*set);
}

TEST(TopologyYaml, ExtensionsDragonflyTopoOptionalAndLinkSpeed) {
  TopologySet set = parse_ok(R"(
- topology: df
  tree:
    dragonfly: true
    topo_optional: true
    switches:
      - switch: g0
        nodes: [n0, "n[1-3]"]
        link_speed: 100
      - switch: g1
        nodes: n[4-7]
)");
  const Topology& t = set.topologies.front();
  EXPECT_EQ(set.cluster_default, "df");  // none marked: the first one
  EXPECT_EQ(t.kind, Kind::dragonfly);
  EXPECT_TRUE(t.topo_optional);
  EXPECT_EQ(t.switches[0].nodes.size(), 4u);
  EXPECT_EQ(t.switches[0].link_speed, 100u);
}

TEST(TopologyYaml, TorusForms) {
  TopologySet set = parse_ok(R"(
- topology: names
  torus:
    nodes: x[000-001]
- topology: coords
  cluster_default: true
  torus:
    nodes:
      - node: a
        coords: [1, 2, 3]
      - node: zz123
)");
  EXPECT_EQ(set.cluster_default, "coords");
  const Topology& names = *set.find("names");
  ASSERT_EQ(names.torus.size(), 2u);
  EXPECT_EQ(names.torus[1].coord, (std::array<int, 3>{0, 0, 1}));
  const Topology& coords = *set.find("coords");
  ASSERT_EQ(coords.torus.size(), 2u);
  EXPECT_EQ(coords.torus[0].coord, (std::array<int, 3>{1, 2, 3}));
  EXPECT_EQ(coords.torus[1].coord, (std::array<int, 3>{1, 2, 3}));
}

TEST(TopologyYaml, FirstClusterDefaultWins) {
  TopologySet set = parse_ok(
      "- topology: a\n  flat: true\n"
      "- topology: b\n  cluster_default: true\n  flat: true\n"
      "- topology: c\n  cluster_default: true\n  flat: true\n");
  EXPECT_EQ(set.cluster_default, "b");
}

// ---------------------------------------------------------------- bad files

TEST(TopologyYaml, SyntaxErrorHasLine) {
  std::string e = parse_error("- topology: a\n  tree: [\n");
  EXPECT_THAT(e, HasSubstr("t.yaml:"));
  EXPECT_THAT(parse_error("- topology: a\n  flat: true\n - bad: indent\n"), HasSubstr("t.yaml:3"));
}

TEST(TopologyYaml, UnknownKeyHasLine) {
  EXPECT_THAT(parse_error("- topology: a\n  flat: true\n  colour: red\n"),
              HasSubstr("t.yaml:3: topology: unknown key 'colour'"));
  EXPECT_THAT(parse_error(R"(- topology: a
  tree:
    switches:
      - switch: s1
        node: x[1-2]
)"),
              HasSubstr("t.yaml:5: switch: unknown key 'node'"));
}

TEST(TopologyYaml, KindErrors) {
  EXPECT_THAT(parse_error("- topology: a\n  cluster_default: true\n"),
              HasSubstr("t.yaml:1: topology a must define exactly one of tree, block, flat"));
  EXPECT_THAT(parse_error("- topology: a\n  flat: true\n  block:\n    blocks: []\n"), HasSubstr("exactly one"));
  EXPECT_THAT(parse_error("- topology: a\n  flat: maybe\n"),
              HasSubstr("t.yaml:2: topology: 'flat' must be true or false"));
  EXPECT_THAT(parse_error("topology: a\n"), HasSubstr("t.yaml:1: expected a list of topologies"));
  EXPECT_THAT(parse_error(""), HasSubstr("expected a list of topologies"));
  EXPECT_THAT(parse_error("- cluster_default: true\n  flat: true\n"),
              HasSubstr("t.yaml:1: topology has no 'topology'"));
  EXPECT_THAT(parse_error("- topology: a\n  flat: true\n- topology: a\n  flat: true\n"),
              HasSubstr("t.yaml:3: topology a is defined twice"));
}

TEST(TopologyYaml, TreeErrorsHaveLines) {
  EXPECT_EQ(parse_error(R"(- topology: a
  tree:
    switches:
      - switch: root
        children: s[1-2]
      - switch: s1
        nodes: n[1-2]
)"),
            "t.yaml:4: switch root: Switches= names s2, which is not defined");
  EXPECT_THAT(parse_error(R"(- topology: a
  tree:
    switches:
      - switch: s1
        nodes: n[1-2]
      - switch: s2
        nodes: n[2-3
)"),
              HasSubstr("t.yaml:7: nodes=n[2-3:"));
  EXPECT_THAT(parse_error(R"(- topology: a
  tree:
    switches:
      - switch: s1
        nodes: n[1-2]
      - switch: s2
        nodes: n[2-3]
)"),
              HasSubstr("t.yaml:6: node n2 is on switch s1 and on switch s2"));
  EXPECT_THAT(parse_error("- topology: a\n  tree:\n    switches: []\n"),
              HasSubstr("t.yaml:3: topology a: tree needs a non-empty 'switches' list"));
}

TEST(TopologyYaml, BlockErrorsHaveLines) {
  EXPECT_THAT(parse_error(R"(- topology: a
  block:
    block_sizes: [4, 6]
    blocks:
      - block: b1
        nodes: n[0-3]
      - block: b2
        nodes: n[4-7]
)"),
              HasSubstr("t.yaml:3: BlockSizes: 6 is not a multiple of 4"));
  EXPECT_THAT(parse_error(R"(- topology: a
  block:
    blocks:
      - block: b1
        nodes: n[0-3]
      - block: b2
        nodes: n[4-5]
)"),
              HasSubstr("t.yaml:6: block b2 has 2 nodes but block b1 (t.yaml:4) has 4"));
}

}  // namespace
}  // namespace corral::topology
