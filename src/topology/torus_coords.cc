// Torus helpers: node coordinates from names and the 3-D Hilbert curve order that the
// torus placer uses to turn the torus into a line where neighbours stay close.
#include <algorithm>

#include "topology/topology.h"

namespace corral::topology {

namespace {

std::optional<int> base36_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'Z') return c - 'A' + 10;
  if (c >= 'a' && c <= 'z') return c - 'a' + 10;
  return std::nullopt;
}

}  // namespace

// Slurm's convention for torus systems: the last three characters of a node name are its
// X, Y and Z coordinates, each one base-36 digit: "bgq0A3" is at (0, 10, 3).
std::optional<std::array<int, 3>> coords_from_name(const std::string& name) {
  if (name.size() < 3) return std::nullopt;
  std::array<int, 3> c{};
  for (size_t i = 0; i < 3; ++i) {
    auto d = base36_digit(name[name.size() - 3 + i]);
    if (!d) return std::nullopt;
    c[i] = *d;
  }
  return c;
}

// Skilling's method ("Programming the Hilbert curve", 2004): the coordinates are turned in
// place into the "transposed" Hilbert index, whose bits, interleaved from the most
// significant bit of axis 0 downwards, form the index. Undoing the rotations and
// reflections level by level is what keeps consecutive indices one unit step apart.
uint64_t hilbert_index(const std::array<int, 3>& coord, unsigned bits_per_axis) {
  constexpr unsigned kDims = 3;
  const unsigned bits = std::min(bits_per_axis, 21u);
  if (bits == 0) return 0;
  const uint32_t mask = (uint32_t{1} << bits) - 1;
  std::array<uint32_t, kDims> x{};
  for (unsigned i = 0; i < kDims; ++i) x[i] = static_cast<uint32_t>(std::max(coord[i], 0)) & mask;

  const uint32_t top = uint32_t{1} << (bits - 1);
  // From the coarsest level down: reflect axis 0 where an axis has the level bit set,
  // otherwise swap the low bits of axis 0 and that axis.
  for (uint32_t q = top; q > 1; q >>= 1) {
    const uint32_t low = q - 1;
    for (unsigned i = 0; i < kDims; ++i) {
      if (x[i] & q) {
        x[0] ^= low;
      } else {
        const uint32_t t = (x[0] ^ x[i]) & low;
        x[0] ^= t;
        x[i] ^= t;
      }
    }
  }
  // Gray code across the axes, then the correction that makes the walk continuous.
  for (unsigned i = 1; i < kDims; ++i) x[i] ^= x[i - 1];
  uint32_t fix = 0;
  for (uint32_t q = top; q > 1; q >>= 1)
    if (x[kDims - 1] & q) fix ^= q - 1;
  for (unsigned i = 0; i < kDims; ++i) x[i] ^= fix;

  uint64_t index = 0;
  for (int b = static_cast<int>(bits) - 1; b >= 0; --b)
    for (unsigned i = 0; i < kDims; ++i) index = (index << 1) | ((x[i] >> b) & 1u);
  return index;
}

}  // namespace corral::topology
