// Id sets (Flux RFC 22): sets of non-negative integers written as "0-3,5,9-10",
// optionally in brackets "[0-3]". Stored as sorted disjoint ranges.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/result.h"

namespace corral {

class IdSet {
 public:
  IdSet() = default;
  static Result<IdSet> parse(std::string_view text);
  static IdSet range(uint32_t first, uint32_t last);  // inclusive

  // "0-3,5"; with brackets "[0-3,5]" when the set has more than one id.
  std::string encode(bool brackets = false) const;

  size_t count() const;
  bool empty() const { return ranges_.empty(); }
  bool contains(uint32_t id) const;
  void insert(uint32_t id);
  void insert_range(uint32_t first, uint32_t last);
  void erase(uint32_t id);
  std::optional<uint32_t> first() const;
  std::optional<uint32_t> last() const;
  std::optional<uint32_t> nth(size_t n) const;
  std::vector<uint32_t> to_vector() const;

  IdSet union_with(const IdSet& o) const;
  IdSet intersect(const IdSet& o) const;
  IdSet minus(const IdSet& o) const;
  // How many ids both sets hold: intersect(o).count() without building the set.
  size_t count_common(const IdSet& o) const;

  const std::vector<std::pair<uint32_t, uint32_t>>& ranges() const { return ranges_; }
  bool operator==(const IdSet&) const = default;

 private:
  std::vector<std::pair<uint32_t, uint32_t>> ranges_;  // inclusive, sorted, disjoint
};

}  // namespace corral
