// The launch fan-out tree: shape, coverage, depth and the merge back up.
#include <gtest/gtest.h>

#include <numeric>
#include <string>

#include "node/steps/fanout.h"

namespace corral::node {
namespace {

FanoutTree tree(size_t nodes, size_t width) {
  auto t = FanoutTree::build(nodes, width);
  EXPECT_TRUE(t) << t.message();
  return std::move(t).value();
}

// The smallest depth a width-W tree of n nodes can have: levels 0..d hold 1+W+...+W^d.
size_t minimal_depth(size_t n, size_t w) {
  size_t d = 0, capacity = 1, level = 1;
  while (capacity < n) {
    level *= w;
    capacity += level;
    ++d;
  }
  return d;
}

size_t ceil_log(size_t n, size_t w) {
  size_t k = 0, p = 1;
  while (p < n) {
    p *= w;
    ++k;
  }
  return k;
}

// Walks the tree as the messages do, from the root's batches down, counting deliveries.
std::vector<int> deliveries(const FanoutTree& t) {
  std::vector<int> seen(t.size(), 0);
  std::vector<size_t> todo{0};
  seen[0] = 1;
  while (!todo.empty()) {
    size_t i = todo.back();
    todo.pop_back();
    for (const auto& batch : t.subtree_batches(i)) {
      ++seen.at(batch.front());
      todo.push_back(batch.front());
    }
  }
  return seen;
}

void check_consistent(const FanoutTree& t) {
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_LE(t.children(i).size(), t.width());
    for (size_t c : t.children(i)) {
      EXPECT_EQ(t.parent(c), i);
      EXPECT_EQ(t.level(c), t.level(i) + 1);
    }
    // the batches are exactly the subtree below i, in order, each headed by a child
    std::vector<size_t> below;
    auto batches = t.subtree_batches(i);
    ASSERT_EQ(batches.size(), t.children(i).size());
    for (size_t k = 0; k < batches.size(); ++k) {
      EXPECT_EQ(batches[k].front(), t.children(i)[k]);
      below.insert(below.end(), batches[k].begin(), batches[k].end());
    }
    std::vector<size_t> expected(t.subtree_end(i) - i - 1);
    std::iota(expected.begin(), expected.end(), i + 1);
    EXPECT_EQ(below, expected) << "node " << i;
  }
}

TEST(Fanout, SingleNodeIsAlone) {
  auto t = tree(1, 4);
  EXPECT_TRUE(t.children(0).empty());
  EXPECT_FALSE(t.parent(0));
  EXPECT_EQ(t.depth(), 0u);
  EXPECT_TRUE(t.subtree_batches(0).empty());
}

TEST(Fanout, TwoNodes) {
  auto t = tree(2, 2);
  EXPECT_EQ(t.children(0), (std::vector<size_t>{1}));
  EXPECT_EQ(t.parent(1), 0u);
  EXPECT_EQ(t.depth(), 1u);
  EXPECT_EQ(t.subtree_batches(0), (std::vector<std::vector<size_t>>{{1}}));
}

TEST(Fanout, WidthPlusOneNodesIsOneLevel) {
  auto t = tree(5, 4);  // the root and exactly W children
  EXPECT_EQ(t.children(0), (std::vector<size_t>{1, 2, 3, 4}));
  EXPECT_EQ(t.depth(), 1u);
  check_consistent(t);
}

TEST(Fanout, WidthNodesLeavesRoomAtTheRoot) {
  auto t = tree(4, 4);
  EXPECT_EQ(t.children(0), (std::vector<size_t>{1, 2, 3}));
  EXPECT_EQ(t.depth(), 1u);
}

TEST(Fanout, OneMoreThanALevelGoesDeeper) {
  auto t = tree(6, 4);  // 5 below the root in 4 chunks: the first child relays one
  EXPECT_EQ(t.children(0), (std::vector<size_t>{1, 3, 4, 5}));
  EXPECT_EQ(t.children(1), (std::vector<size_t>{2}));
  EXPECT_EQ(t.subtree_batches(0), (std::vector<std::vector<size_t>>{{1, 2}, {3}, {4}, {5}}));
  EXPECT_EQ(t.depth(), 2u);
  check_consistent(t);
}

TEST(Fanout, ThousandNodesEveryWidth) {
  for (size_t w : {2u, 3u, 8u, 16u, 32u, 999u, 1000u, 5000u}) {
    SCOPED_TRACE("width " + std::to_string(w));
    auto t = tree(1000, w);
    check_consistent(t);
    for (int n : deliveries(t)) EXPECT_EQ(n, 1);
    EXPECT_EQ(t.depth(), minimal_depth(1000, w));
    EXPECT_LE(t.depth(), ceil_log(1000, w));
  }
}

TEST(Fanout, DepthIsMinimalForAllSmallTrees) {
  for (size_t w = 2; w <= 6; ++w) {
    for (size_t n = 1; n <= 300; ++n) {
      auto t = tree(n, w);
      ASSERT_EQ(t.depth(), minimal_depth(n, w)) << n << " nodes, width " << w;
      if (n >= 2) {
        ASSERT_LE(t.depth(), ceil_log(n, w));
        ASSERT_GE(t.depth() + 1, ceil_log(n, w)) << n << " nodes, width " << w;
      }
      for (int k : deliveries(t)) ASSERT_EQ(k, 1);
    }
  }
}

TEST(Fanout, WidthBelowTwoIsRefused) {
  for (size_t w : {0u, 1u}) {
    auto t = FanoutTree::build(10, w);
    ASSERT_FALSE(t);
    EXPECT_EQ(t.error().code, Errc::invalid_argument);
    EXPECT_NE(t.message().find("fan-out width " + std::to_string(w)), std::string::npos) << t.message();
    EXPECT_FALSE(forward_batches(std::vector<int>{1, 2, 3}, w));
  }
  EXPECT_FALSE(FanoutTree::build(0, 4));
}

TEST(Fanout, RelaysNeedOnlyTheListTheyReceived) {
  std::vector<std::string> names;
  for (int i = 0; i < 50; ++i) names.push_back("n" + std::to_string(i));
  auto t = tree(names.size(), 3);
  // Re-derive every hop from the received lists alone and compare with the global tree.
  std::vector<std::pair<size_t, std::vector<std::string>>> todo{{0, names}};
  size_t visited = 0;
  while (!todo.empty()) {
    auto [index, received] = std::move(todo.back());
    todo.pop_back();
    ++visited;
    auto batches = forward_batches(received, 3);
    ASSERT_TRUE(batches);
    auto expected = t.subtree_batches(index);
    ASSERT_EQ(batches->size(), expected.size());
    for (size_t k = 0; k < expected.size(); ++k) {
      ASSERT_EQ(batches->at(k).size(), expected[k].size());
      for (size_t j = 0; j < expected[k].size(); ++j) EXPECT_EQ(batches->at(k)[j], names[expected[k][j]]);
      todo.emplace_back(expected[k].front(), batches->at(k));
    }
  }
  EXPECT_EQ(visited, names.size());
}

TEST(Fanout, ReduceUpMergesEveryNodeOnceInTreeOrder) {
  auto t = tree(40, 3);
  std::vector<std::vector<size_t>> values(t.size());
  for (size_t i = 0; i < values.size(); ++i) values[i] = {i};
  auto merged = reduce_up(t, values, [](std::vector<size_t> a, std::vector<size_t> b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  });
  ASSERT_TRUE(merged) << merged.message();
  // own result first, then each child's subtree in order: the original order again
  std::vector<size_t> expected(t.size());
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(*merged, expected);

  auto sum = reduce_up(t, std::vector<int>(t.size(), 1), [](int a, int b) { return a + b; });
  ASSERT_TRUE(sum);
  EXPECT_EQ(*sum, 40);
  EXPECT_FALSE(reduce_up(t, std::vector<int>(3, 1), [](int a, int b) { return a + b; }));
}

}  // namespace
}  // namespace corral::node
