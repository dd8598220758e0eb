// NodeProperties: what hooks say nodes offer, and the nodes that offer all a job needs.
#include "sched/node_properties.h"

#include <gtest/gtest.h>

using corral::sched::kMaxPropertiesPerNode;
using corral::sched::NodeProperties;

TEST(NodeProperties, FiltersCandidatesByEveryRequiredName) {
  NodeProperties p;
  bool changed = false;
  p.set(0, {"ib:F1/CX6/0", "ib:F2/CX6/0"}, &changed);
  EXPECT_TRUE(changed);
  p.set(1, {"ib:F1/CX6/0"}, &changed);
  p.set(3, {"ib:F2/CX6/0", "ib:F1/CX6/0"}, &changed);
  EXPECT_EQ(p.filter({0, 1, 2, 3}, {"ib:F1/CX6/0"}), (std::vector<uint32_t>{0, 1, 3}));
  EXPECT_EQ(p.filter({0, 1, 2, 3}, {"ib:F2/CX6/0", "ib:F1/CX6/0"}), (std::vector<uint32_t>{0, 3}));
  EXPECT_EQ(p.filter({1, 2}, {"ib:F2/CX6/0"}), std::vector<uint32_t>{});
  // A name no node ever offered matches nothing (not everything).
  EXPECT_EQ(p.filter({0, 1, 3}, {"ib:F9/CX7/0"}), std::vector<uint32_t>{});
  EXPECT_EQ(p.filter({0, 1}, {}), (std::vector<uint32_t>{0, 1}));
}

TEST(NodeProperties, ReportsChangesAndDropsWhatIsOverTheLimits) {
  NodeProperties p;
  bool changed = false;
  p.set(0, {"a", "b"}, &changed);
  p.set(0, {"b", "a", "a"}, &changed);
  EXPECT_FALSE(changed);  // the same set, whatever the order
  p.set(0, {"a"}, &changed);
  EXPECT_TRUE(changed);
  EXPECT_EQ(p.names(0), std::vector<std::string>{"a"});
  std::vector<std::string> many;
  for (size_t i = 0; i < kMaxPropertiesPerNode + 3; ++i) many.push_back("p" + std::to_string(i));
  many.push_back(std::string(1000, 'x'));
  many.push_back("");
  EXPECT_EQ(p.set(1, many, &changed), 5u);
  EXPECT_EQ(p.names(1).size(), kMaxPropertiesPerNode);
}
