#include "job/resource_set.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "util/hostlist.h"

namespace corral::job {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

RNode node(uint32_t rank, std::string name, uint32_t cores, uint32_t gpus = 0, uint64_t mem = 0) {
  RNode n;
  n.rank = rank;
  n.name = std::move(name);
  n.cores = IdSet::range(0, cores - 1);
  if (gpus > 0) n.gpus = IdSet::range(0, gpus - 1);
  n.memory_mb = mem;
  return n;
}

TEST(ResourceSetTest, MergesIdenticalRanks) {
  ResourceSet r;
  r.nodes = {node(0, "n0", 4), node(1, "n1", 4), node(2, "n2", 4, 2), node(3, "n3", 4)};
  r.starttime = 100;
  r.expiration = 200.5;
  json doc = json::parse(to_json(r));
  EXPECT_EQ(doc["version"], 1);
  const json& lite = doc["execution"]["R_lite"];
  ASSERT_EQ(lite.size(), 2u);
  EXPECT_EQ(lite[0]["rank"], "0-1,3");
  EXPECT_EQ(lite[0]["children"], json({{"core", "0-3"}}));
  EXPECT_EQ(lite[1]["rank"], "2");
  EXPECT_EQ(lite[1]["children"], json({{"core", "0-3"}, {"gpu", "0-1"}}));
  EXPECT_EQ(doc["execution"]["nodelist"], json::array({"n[0-3]"}));
  EXPECT_EQ(doc["execution"]["starttime"], 100);
  EXPECT_FALSE(doc.contains("corral"));  // no memory: plain RFC 20
}

TEST(ResourceSetTest, RoundTrip) {
  ResourceSet r;
  r.nodes = {node(5, "c5", 8, 0, 1024), node(2, "c2", 2, 1, 1024), node(9, "c9", 8, 0, 512)};
  r.starttime = 1700000000.25;
  auto back = parse_resource_set(to_json(r));
  ASSERT_TRUE(back.ok()) << back.message();
  ASSERT_EQ(back->nodes.size(), 3u);
  EXPECT_EQ(back->nodes[0].rank, 2u);  // rank order
  EXPECT_EQ(back->nodes[0].name, "c2");
  EXPECT_EQ(back->nodes[0].gpus.encode(), "0");
  EXPECT_EQ(back->nodes[0].memory_mb, 1024u);
  EXPECT_EQ(back->nodes[1].name, "c5");
  EXPECT_EQ(back->nodes[1].cores.encode(), "0-7");
  EXPECT_EQ(back->nodes[2].memory_mb, 512u);
  EXPECT_DOUBLE_EQ(back->starttime, 1700000000.25);
  EXPECT_EQ(back->expiration, 0);
  EXPECT_EQ(back->ncores(), 18u);
  EXPECT_EQ(back->ngpus(), 1u);
  auto names = Hostlist::parse(back->nodelist());
  ASSERT_TRUE(names.ok()) << names.message();
  EXPECT_EQ(names->hosts(), (std::vector<std::string>{"c2", "c5", "c9"}));
  json doc = json::parse(to_json(*back));
  EXPECT_EQ(doc["corral"]["memory_mb"], json({{"2,5", 1024}, {"9", 512}}));
}

TEST(ResourceSetTest, ReadsFluxStyleR) {
  const char* text = R"({"version":1,"execution":{"R_lite":[
      {"rank":"0-1","children":{"core":"0-35","gpu":"0-3"}},
      {"rank":"2","children":{"core":"0-17"}}],
      "nodelist":["tioga[10-11]","tioga20"],"starttime":0,"expiration":0,
      "properties":{"pdebug":"0-2"}}})";
  auto r = parse_resource_set(text);
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_EQ(r->nodes.size(), 3u);
  EXPECT_EQ(r->nodes[1].name, "tioga11");
  EXPECT_EQ(r->nodes[2].name, "tioga20");
  EXPECT_EQ(r->ncores(), 36u * 2 + 18);
  EXPECT_EQ(r->ngpus(), 8u);
  EXPECT_EQ(Hostlist::parse(r->nodelist())->count(), 3u);
}

TEST(ResourceSetTest, WithoutNodelistNamesAreEmpty) {
  auto r = parse_resource_set(R"({"version":1,"execution":{"R_lite":[{"rank":"3","children":{"core":"0"}}]}})");
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->nodes[0].rank, 3u);
  EXPECT_TRUE(r->nodes[0].name.empty());
  EXPECT_FALSE(json::parse(to_json(*r))["execution"].contains("nodelist"));
}

TEST(ResourceSetTest, EmptySet) {
  auto r = parse_resource_set(to_json(ResourceSet()));
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE(r->nodes.empty());
}

TEST(ResourceSetTest, Errors) {
  auto err = [](const char* text) { return parse_resource_set(text).message(); };
  EXPECT_THAT(err("{"), HasSubstr("not valid JSON"));
  EXPECT_THAT(err(R"({"version":2,"execution":{}})"), HasSubstr("unsupported R version 2"));
  EXPECT_THAT(err(R"({"version":1})"), HasSubstr("execution"));
  EXPECT_THAT(err(R"({"version":1,"execution":{}})"), HasSubstr("execution.R_lite: missing"));
  EXPECT_THAT(err(R"({"version":1,"execution":{"R_lite":[{"rank":"x"}]}})"), HasSubstr("execution.R_lite[0].rank"));
  EXPECT_THAT(err(R"({"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":3}}]}})"),
              HasSubstr("execution.R_lite[0].children.core: must be an idset string"));
  EXPECT_THAT(err(R"({"version":1,"execution":{"R_lite":[{"rank":"0","children":{"ssd":"0"}}]}})"),
              HasSubstr("children.ssd: unknown resource type"));
  EXPECT_THAT(err(R"({"version":1,"execution":{"R_lite":[{"rank":"0-1"},{"rank":"1"}]}})"),
              HasSubstr("rank 1 appears in more than one entry"));
  EXPECT_THAT(err(R"({"version":1,"execution":{"R_lite":[{"rank":"0-1"}],"nodelist":["a"]}})"),
              HasSubstr("names 1 hosts but R_lite has 2 ranks"));
  EXPECT_THAT(err(R"({"version":1,"execution":{"R_lite":[{"rank":"0"}]},"corral":{"memory_mb":{"4":10}}})"),
              HasSubstr("corral.memory_mb.4: rank 4 is not in R_lite"));
  EXPECT_THAT(err(R"({"version":1,"execution":{"R_lite":[{"rank":"0"}],"starttime":"now"}})"),
              HasSubstr("execution.starttime"));
}

}  // namespace
}  // namespace corral::job
