// Rounding to the nearest whole number, halves away from zero (as std::round), without libm.
// The corral command links no libm.so once nothing calls it: one shared library less to map
// and relocate at every start (docs/performance.md, "twelfth step").
#pragma once

#include <cstdint>
#include <limits>

namespace corral {

// Same result as std::round for every double, NaN and infinities included.
constexpr double round_nearest(double x) {
  constexpr double kWhole = 4503599627370496.0;  // 2^52: from here on every double is whole
  if (!(x < kWhole && x > -kWhole)) return x;
  const double t = static_cast<double>(static_cast<int64_t>(x));  // toward zero
  const double f = x - t;                                         // exact: |f| < 1
  if (f >= 0.5) return t + 1;
  if (f <= -0.5) return t - 1;
  return t == 0 ? x * 0.0 : t;  // keeps the sign of zero, as std::round does
}

// std::lround, except that what does not fit a long (NaN included) saturates instead of
// being unspecified: a converted out-of-range double would be undefined behaviour.
constexpr long round_to_long(double x) {
  constexpr double kLongEnd = 9223372036854775808.0;  // 2^63
  const double r = round_nearest(x);
  if (r >= kLongEnd) return std::numeric_limits<long>::max();
  if (!(r >= -kLongEnd)) return std::numeric_limits<long>::min();
  return static_cast<long>(r);
}

}  // namespace corral
