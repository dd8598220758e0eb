// Torus coordinates from names and the 3-D Hilbert curve order.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>

#include "topology/topology.h"

namespace corral::topology {
namespace {

using Coord = std::array<int, 3>;

TEST(TorusCoords, LastThreeBase36Characters) {
  EXPECT_EQ(coords_from_name("bgq0A3"), (Coord{0, 10, 3}));
  EXPECT_EQ(coords_from_name("bgq0a3"), (Coord{0, 10, 3}));
  EXPECT_EQ(coords_from_name("zZ9"), (Coord{35, 35, 9}));
  EXPECT_EQ(coords_from_name("node000"), (Coord{0, 0, 0}));
  EXPECT_FALSE(coords_from_name("ab").has_value());
  EXPECT_FALSE(coords_from_name("").has_value());
  EXPECT_FALSE(coords_from_name("node-12").has_value());
  EXPECT_FALSE(coords_from_name("n1_2").has_value());
}

int distance(const Coord& a, const Coord& b) {
  return std::abs(a[0] - b[0]) + std::abs(a[1] - b[1]) + std::abs(a[2] - b[2]);
}

// Every point of a cube of side 2^bits: indices are a bijection onto [0, side^3) and
// consecutive indices are unit steps apart.
void check_cube(unsigned bits) {
  const int side = 1 << bits;
  std::map<uint64_t, Coord> by_index;
  for (int x = 0; x < side; ++x)
    for (int y = 0; y < side; ++y)
      for (int z = 0; z < side; ++z) {
        const uint64_t h = hilbert_index({x, y, z}, bits);
        EXPECT_LT(h, uint64_t(side) * side * side);
        EXPECT_TRUE(by_index.emplace(h, Coord{x, y, z}).second) << "index " << h << " twice";
      }
  ASSERT_EQ(by_index.size(), size_t(side) * side * side);
  const Coord* prev = nullptr;
  for (const auto& [h, c] : by_index) {
    if (prev) {
      EXPECT_EQ(distance(*prev, c), 1) << "at index " << h;
    }
    prev = &c;
  }
}

TEST(TorusHilbert, EightCubeNeighboursAndBijection) { check_cube(3); }

TEST(TorusHilbert, OtherSizes) {
  check_cube(1);
  check_cube(2);
  check_cube(4);
}

TEST(TorusHilbert, StartsAtOriginAndHandlesWideAxes) {
  EXPECT_EQ(hilbert_index({0, 0, 0}, 3), 0u);
  EXPECT_EQ(hilbert_index({0, 0, 0}, 0), 0u);
  const int max = (1 << 21) - 1;
  const uint64_t h = hilbert_index({max, max, max}, 21);
  EXPECT_LT(h, uint64_t{1} << 63);
  std::set<uint64_t> distinct;
  for (int i = 0; i < 8; ++i) distinct.insert(hilbert_index({max - (i & 1), max - ((i >> 1) & 1), max - (i >> 2)}, 21));
  EXPECT_EQ(distinct.size(), 8u);
}

}  // namespace
}  // namespace corral::topology
