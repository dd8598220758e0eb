#include "util/idset.h"

#include <algorithm>
#include <charconv>
#include <limits>

#include <fmt/format.h>

namespace corral {
namespace {

using Range = std::pair<uint32_t, uint32_t>;

// Calls `each(lo, hi)` for every range both sorted, disjoint range lists hold, in order:
// walks them together, advancing whichever ends first.
template <typename Each>
void for_each_overlap(const std::vector<Range>& a, const std::vector<Range>& b, Each&& each) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const uint32_t lo = std::max(a[i].first, b[j].first);
    const uint32_t hi = std::min(a[i].second, b[j].second);
    if (lo <= hi) each(lo, hi);
    if (a[i].second < b[j].second) {
      ++i;
    } else {
      ++j;
    }
  }
}

Error bad_idset(std::string_view text, std::string_view why, size_t pos) {
  return invalid(fmt::format("invalid idset \"{}\": {} at column {}", text, why, pos + 1));
}

// Parses one decimal id of `item` (a slice of `text` starting at `pos`).
Result<uint32_t> parse_id(std::string_view text, std::string_view item, size_t pos) {
  if (item.empty()) return bad_idset(text, "missing number", pos);
  for (char c : item) {
    if (c < '0' || c > '9') {
      return bad_idset(text, fmt::format("\"{}\" is not a non-negative integer", item), pos);
    }
  }
  uint32_t value = 0;
  auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
  if (ec != std::errc() || end != item.data() + item.size()) {
    return bad_idset(text, fmt::format("id {} is larger than {}", item, std::numeric_limits<uint32_t>::max()), pos);
  }
  return value;
}

Result<Range> parse_item(std::string_view text, std::string_view item, size_t pos) {
  if (item.empty()) return bad_idset(text, "empty element", pos);
  size_t dash = item.find('-');
  if (dash == std::string_view::npos) {
    auto id = parse_id(text, item, pos);
    if (!id) return id.error();
    return Range{*id, *id};
  }
  auto lo = parse_id(text, item.substr(0, dash), pos);
  if (!lo) return lo.error();
  auto hi = parse_id(text, item.substr(dash + 1), pos + dash + 1);
  if (!hi) return hi.error();
  if (*hi < *lo) return bad_idset(text, fmt::format("reversed range \"{}\"", item), pos);
  return Range{*lo, *hi};
}

// Sorts and merges overlapping or adjacent ranges in place.
void normalize(std::vector<Range>& ranges) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<Range> out;
  out.reserve(ranges.size());
  for (const Range& r : ranges) {
    if (!out.empty() && uint64_t{r.first} <= uint64_t{out.back().second} + 1) {
      out.back().second = std::max(out.back().second, r.second);
    } else {
      out.push_back(r);
    }
  }
  ranges = std::move(out);
}

}  // namespace

Result<IdSet> IdSet::parse(std::string_view text) {
  std::string_view body = text;
  size_t offset = 0;
  if (!body.empty() && body.front() == '[') {
    if (body.back() != ']') return bad_idset(text, "'[' without a closing ']'", 0);
    body = body.substr(1, body.size() - 2);
    offset = 1;
  } else if (!body.empty() && body.back() == ']') {
    return bad_idset(text, "']' without an opening '['", text.size() - 1);
  }
  IdSet set;
  if (body.empty()) return set;
  size_t start = 0;
  while (true) {
    size_t comma = body.find(',', start);
    std::string_view item = body.substr(start, comma == std::string_view::npos ? body.npos : comma - start);
    auto range = parse_item(text, item, offset + start);
    if (!range) return range.error();
    set.ranges_.push_back(*range);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  normalize(set.ranges_);
  return set;
}

IdSet IdSet::range(uint32_t first, uint32_t last) {
  IdSet set;
  set.insert_range(first, last);
  return set;
}

std::string IdSet::encode(bool brackets) const {
  std::string out;
  for (const auto& [lo, hi] : ranges_) {
    if (!out.empty()) out += ',';
    if (lo == hi) {
      fmt::format_to(std::back_inserter(out), "{}", lo);
    } else {
      fmt::format_to(std::back_inserter(out), "{}-{}", lo, hi);
    }
  }
  if (brackets && count() > 1) return "[" + out + "]";
  return out;
}

size_t IdSet::count() const {
  size_t n = 0;
  for (const auto& [lo, hi] : ranges_) n += size_t{hi} - lo + 1;
  return n;
}

bool IdSet::contains(uint32_t id) const {
  // First range whose end is >= id; it holds id if it starts at or before it.
  auto it =
      std::lower_bound(ranges_.begin(), ranges_.end(), id, [](const Range& r, uint32_t v) { return r.second < v; });
  return it != ranges_.end() && it->first <= id;
}

void IdSet::insert(uint32_t id) { insert_range(id, id); }

void IdSet::insert_range(uint32_t first, uint32_t last) {
  if (first > last) return;  // an empty range adds nothing
  // Merge in place with every range that overlaps or touches [first, last], so that
  // building a set id by id in ascending order stays cheap.
  auto it = std::lower_bound(ranges_.begin(), ranges_.end(), first,
                             [](const Range& r, uint32_t v) { return uint64_t{r.second} + 1 < v; });
  auto end = it;
  uint32_t lo = first, hi = last;
  while (end != ranges_.end() && uint64_t{end->first} <= uint64_t{last} + 1) {
    lo = std::min(lo, end->first);
    hi = std::max(hi, end->second);
    ++end;
  }
  it = ranges_.erase(it, end);
  ranges_.insert(it, Range{lo, hi});
}

void IdSet::erase(uint32_t id) {
  auto it =
      std::lower_bound(ranges_.begin(), ranges_.end(), id, [](const Range& r, uint32_t v) { return r.second < v; });
  if (it == ranges_.end() || it->first > id) return;
  auto [lo, hi] = *it;
  if (lo == hi) {
    ranges_.erase(it);
  } else if (id == lo) {
    it->first = id + 1;
  } else if (id == hi) {
    it->second = id - 1;
  } else {
    it->second = id - 1;
    ranges_.insert(it + 1, Range{id + 1, hi});
  }
}

std::optional<uint32_t> IdSet::first() const {
  if (ranges_.empty()) return std::nullopt;
  return ranges_.front().first;
}

std::optional<uint32_t> IdSet::last() const {
  if (ranges_.empty()) return std::nullopt;
  return ranges_.back().second;
}

std::optional<uint32_t> IdSet::nth(size_t n) const {
  for (const auto& [lo, hi] : ranges_) {
    size_t len = size_t{hi} - lo + 1;
    if (n < len) return static_cast<uint32_t>(lo + n);
    n -= len;
  }
  return std::nullopt;
}

std::vector<uint32_t> IdSet::to_vector() const {
  std::vector<uint32_t> out;
  out.reserve(count());
  for (const auto& [lo, hi] : ranges_) {
    for (uint64_t id = lo; id <= hi; ++id) out.push_back(static_cast<uint32_t>(id));
  }
  return out;
}

IdSet IdSet::union_with(const IdSet& o) const {
  IdSet out;
  out.ranges_.reserve(ranges_.size() + o.ranges_.size());
  out.ranges_ = ranges_;
  out.ranges_.insert(out.ranges_.end(), o.ranges_.begin(), o.ranges_.end());
  normalize(out.ranges_);
  return out;
}

IdSet IdSet::intersect(const IdSet& o) const {
  IdSet out;
  for_each_overlap(ranges_, o.ranges_, [&](uint32_t lo, uint32_t hi) { out.ranges_.emplace_back(lo, hi); });
  return out;
}

size_t IdSet::count_common(const IdSet& o) const {
  size_t n = 0;
  for_each_overlap(ranges_, o.ranges_, [&](uint32_t lo, uint32_t hi) { n += size_t{hi} - lo + 1; });
  return n;
}

IdSet IdSet::minus(const IdSet& o) const {
  IdSet out;
  size_t j = 0;
  for (auto [lo, hi] : ranges_) {
    uint64_t cur = lo;  // 64-bit so that stepping past UINT32_MAX cannot wrap
    while (j < o.ranges_.size() && o.ranges_[j].second < cur) ++j;
    size_t k = j;
    while (cur <= hi && k < o.ranges_.size() && o.ranges_[k].first <= hi) {
      if (o.ranges_[k].first > cur) {
        out.ranges_.emplace_back(static_cast<uint32_t>(cur), o.ranges_[k].first - 1);
      }
      cur = uint64_t{o.ranges_[k].second} + 1;
      ++k;
    }
    if (cur <= hi) out.ranges_.emplace_back(static_cast<uint32_t>(cur), hi);
  }
  return out;
}

}  // namespace corral
