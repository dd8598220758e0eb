// The SWF trace parser and the simulator's cluster config.
#include <cstdlib>

#include <gtest/gtest.h>

#include "sim/cluster_config.h"
#include "sim/swf.h"

namespace corral::sim {
namespace {

// One SWF job line: the fields that matter here, the rest unknown.
std::string line(const std::string& id, const std::string& submit, const std::string& run, const std::string& alloc,
                 const std::string& req_procs = "-1", const std::string& req_time = "-1") {
  return id + " " + submit + " -1 " + run + " " + alloc + " -1 -1 " + req_procs + " " + req_time +
         " -1 1 -1 -1 -1 0 -1 -1 -1\n";
}

TEST(Swf, ReadsHeaderAndJobs) {
  auto t = parse_swf(
      "; Version: 2\n;MaxNodes: 4\n\n" + line("1", "0", "100", "3", "-1", "200") + line("2", "10.5", "50", "2"),
      "t.swf");
  ASSERT_TRUE(t) << t.message();
  ASSERT_EQ(t->header.size(), 2u);
  EXPECT_EQ(t->header[0], " Version: 2");
  ASSERT_EQ(t->jobs.size(), 2u);
  EXPECT_EQ(t->jobs[0].id, 1u);
  EXPECT_EQ(t->jobs[0].procs, 3u);
  EXPECT_EQ(t->jobs[0].run, 100);
  EXPECT_EQ(t->jobs[0].requested, 200);
  EXPECT_EQ(t->jobs[0].line, 4u);
  EXPECT_EQ(t->jobs[1].submit, 10.5);
  EXPECT_EQ(t->skipped, 0u);
}

TEST(Swf, UnknownFieldsFallBack) {
  auto t = parse_swf(line("1", "0", "30", "-1", "4", "-1") +      // allocated unknown: requested
                         line("2", "0", "30", "2", "-1", "-1") +  // requested unknown: allocated
                         line("3", "0", "30", "2", "8", "90"),    // both known: requested wins
                     "t.swf");
  ASSERT_TRUE(t) << t.message();
  ASSERT_EQ(t->jobs.size(), 3u);
  EXPECT_EQ(t->jobs[0].procs, 4u);
  EXPECT_EQ(t->jobs[0].requested, 30);  // requested time unknown: the run time
  EXPECT_EQ(t->jobs[1].procs, 2u);
  EXPECT_EQ(t->jobs[2].procs, 8u);
  EXPECT_EQ(t->jobs[2].requested, 90);
}

TEST(Swf, SkipsJobsWithoutRunTimeOrProcessors) {
  auto t = parse_swf(line("1", "0", "-1", "4") + line("2", "0", "10", "-1") + line("3", "0", "10", "0", "0") +
                         line("4", "5", "0", "1"),
                     "t.swf");
  ASSERT_TRUE(t) << t.message();
  EXPECT_EQ(t->skipped, 3u);
  ASSERT_EQ(t->jobs.size(), 1u);
  EXPECT_EQ(t->jobs[0].id, 4u);
  EXPECT_EQ(t->jobs[0].run, 0);
}

TEST(Swf, BadLinesNameFileLineAndField) {
  auto few = parse_swf("; c\n" + line("1", "0", "1", "1") + "2 0 -1 5 1\n", "w.swf");
  ASSERT_FALSE(few);
  EXPECT_EQ(few.message(), "w.swf:3: expected 18 fields (SWF job line), found 5");

  auto word = parse_swf(line("1", "0", "ten", "1"), "w.swf");
  ASSERT_FALSE(word);
  EXPECT_EQ(word.message(), "w.swf:1: field 4 (run time) is not a number: 'ten'");

  auto frac = parse_swf(line("1", "0", "10", "2.5"), "w.swf");
  ASSERT_FALSE(frac);
  EXPECT_NE(frac.message().find("w.swf:1: field 5 (allocated processors) must be a whole"), std::string::npos)
      << frac.message();

  auto submit = parse_swf(line("1", "-1", "10", "2"), "w.swf");
  ASSERT_FALSE(submit);
  EXPECT_EQ(submit.message(), "w.swf:1: field 2 (submit time) is unknown or negative");
}

TEST(Swf, LimitKeepsTheFirstJobs) {
  auto t = parse_swf(line("1", "0", "1", "1") + line("2", "1", "1", "1") + "garbage\n", "t.swf", 2);
  ASSERT_TRUE(t) << t.message();  // the bad line after the limit is never read
  EXPECT_EQ(t->jobs.size(), 2u);
}

TEST(Swf, MissingFileIsNamed) {
  auto t = load_swf("/nonexistent/trace.swf");
  ASSERT_FALSE(t);
  EXPECT_EQ(t.message(), "cannot read trace '/nonexistent/trace.swf'");
}

TEST(Swf, ReadsTheTestTrace) {
  const char* data = std::getenv("CORRAL_TEST_DATA");
  ASSERT_NE(data, nullptr);
  auto t = load_swf(std::string(data) + "/sim/tiny.swf");
  ASSERT_TRUE(t) << t.message();
  EXPECT_EQ(t->jobs.size(), 6u);
  EXPECT_EQ(t->skipped, 1u);
}

TEST(ClusterConfig, ReadsKeys) {
  auto c = parse_cluster_config(
      "nodes = \"node[0-15]\"\ncores_per_node = 4\ngpus_per_node = 2\n"
      "topology = \"topo.conf\"\ntopology_name = \"fat\"\n",
      "/etc/corral/sim.toml");
  ASSERT_TRUE(c) << c.message();
  EXPECT_EQ(c->nodes, "node[0-15]");
  EXPECT_EQ(c->cores_per_node, 4u);
  EXPECT_EQ(c->gpus_per_node, 2u);
  EXPECT_EQ(c->topology, "/etc/corral/topo.conf");  // relative to the config file
  EXPECT_EQ(c->topology_name, "fat");
}

TEST(ClusterConfig, Defaults) {
  auto c = parse_cluster_config("nodes = \"n[1-4]\"\n", "c.toml");
  ASSERT_TRUE(c) << c.message();
  EXPECT_EQ(c->cores_per_node, 1u);
  EXPECT_EQ(c->gpus_per_node, 0u);
  EXPECT_TRUE(c->topology.empty());
}

TEST(ClusterConfig, ErrorsNameFileLineAndKey) {
  auto unknown = parse_cluster_config("nodes = \"n1\"\ncores = 4\n", "c.toml");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.message().rfind("c.toml:2: cores: unknown key", 0), 0u) << unknown.message();

  auto zero = parse_cluster_config("cores_per_node = 0\n", "c.toml");
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.message(), "c.toml:1: cores_per_node: expected a whole number of at least 1");

  auto type = parse_cluster_config("nodes = 5\n", "c.toml");
  ASSERT_FALSE(type);
  EXPECT_EQ(type.message(), "c.toml:1: nodes: expected a string");

  auto syntax = parse_cluster_config("nodes = \n", "c.toml");
  ASSERT_FALSE(syntax);
  EXPECT_EQ(syntax.message().rfind("c.toml:1: ", 0), 0u) << syntax.message();
}

}  // namespace
}  // namespace corral::sim
