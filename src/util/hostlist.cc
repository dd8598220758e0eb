#include "util/hostlist.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <unordered_set>

#include <fmt/format.h>

#include "util/natural_sort.h"

namespace corral {
namespace {

// A bigger expression is almost certainly a typo ("n[1-10000000]") and would
// exhaust memory before anyone noticed.
constexpr uint64_t kMaxHosts = 1'000'000;
// Numeric parts are held in 64 bits; 18 digits always fit.
constexpr size_t kMaxDigits = 18;
// Slurm's limits: one range ("1-65536") and one bracket's list hold at most 64Ki entries.
constexpr uint64_t kMaxRange = 64 * 1024;
// What the expanded names may take together: a million hosts of long names would
// otherwise be gigabytes from a few hundred bytes of brackets.
constexpr uint64_t kMaxExpandedBytes = 64u << 20;
constexpr size_t kMaxRangesPerBracket = 64 * 1024;

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_control(char c) {
  auto u = static_cast<unsigned char>(c);
  return u < 0x20 || u == 0x7f;
}
bool all_digits(std::string_view s) { return std::all_of(s.begin(), s.end(), is_digit); }

// "007" is zero padded to width 3; "7" and "0" are not padded (width 0).
size_t padded_width(std::string_view digits) { return digits.size() > 1 && digits[0] == '0' ? digits.size() : 0; }

uint64_t to_number(std::string_view digits) {
  uint64_t v = 0;
  std::from_chars(digits.data(), digits.data() + digits.size(), v);
  return v;
}

void append_number(std::string& out, uint64_t value, size_t width) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  auto len = static_cast<size_t>(end - buf);
  if (len < width) out.append(width - len, '0');
  out.append(buf, len);
}

struct IdRange {
  uint64_t lo = 0;
  uint64_t hi = 0;
  size_t width = 0;  // 0 = no zero padding
};

// One piece of a hostlist term: literal text, or a bracketed id list.
struct Part {
  std::string literal;
  std::vector<IdRange> ids;
  bool bracket = false;
};

class Parser {
 public:
  explicit Parser(std::string_view expr) : expr_(expr) {}

  Result<Hostlist> run() {
    std::vector<std::string> hosts;
    size_t i = 0;
    while (i < expr_.size()) {
      if (expr_[i] == ',' || is_space(expr_[i])) {
        ++i;  // empty terms ("a,,b", a trailing comma) add nothing, like Slurm
        continue;
      }
      auto term = parse_term(i);
      if (!term) return term.error();
      auto st = expand(*term, i, hosts);
      if (!st) return st.error();
      i = next_;
    }
    return Hostlist(std::move(hosts));
  }

 private:
  Error fail(std::string_view why, size_t pos) const {
    return invalid(fmt::format("invalid hostlist \"{}\": {} at column {}", excerpt(pos), why, pos + 1));
  }

  // Long lists are shown only around the error so the message stays readable.
  std::string excerpt(size_t pos) const {
    constexpr size_t kShow = 60;
    if (expr_.size() <= kShow) return std::string(expr_);
    size_t from = pos > kShow / 2 ? pos - kShow / 2 : 0;
    std::string out = from > 0 ? "..." : "";
    out += expr_.substr(from, kShow);
    if (from + kShow < expr_.size()) out += "...";
    return out;
  }

  // Parses from `start` to the next top-level separator; leaves the end in next_.
  Result<std::vector<Part>> parse_term(size_t start) {
    std::vector<Part> parts;
    size_t i = start;
    while (i < expr_.size() && expr_[i] != ',' && !is_space(expr_[i])) {
      char c = expr_[i];
      if (c == ']') return fail("']' without a matching '['", i);
      if (is_control(c)) {
        return fail(fmt::format("control character 0x{:02x}", static_cast<unsigned char>(c)), i);
      }
      if (c == '[') {
        size_t close = expr_.find_first_of("[]", i + 1);
        if (close == std::string_view::npos) return fail("'[' without a matching ']'", i);
        if (expr_[close] == '[') return fail("'[' inside brackets", close);
        auto ids = parse_ids(i + 1, close);
        if (!ids) return ids.error();
        parts.push_back(Part{{}, std::move(*ids), true});
        i = close + 1;
        continue;
      }
      if (parts.empty() || parts.back().bracket) parts.emplace_back();
      parts.back().literal += c;
      ++i;
    }
    next_ = i;
    return parts;
  }

  // Parses the id list between brackets at [begin, end). As in Slurm, each range has
  // the zero padding of its own low end: "[01-02,5]" is 01,02,5.
  Result<std::vector<IdRange>> parse_ids(size_t begin, size_t end) {
    std::vector<IdRange> ids;
    if (begin == end) return fail("empty brackets", begin - 1);
    size_t pos = begin;
    while (pos <= end) {
      if (ids.size() == kMaxRangesPerBracket)
        return fail(fmt::format("more than {} ranges in one pair of brackets", kMaxRangesPerBracket), pos);
      size_t comma = expr_.find(',', pos);
      size_t stop = std::min(comma, end);
      auto range = parse_range(pos, stop);
      if (!range) return range.error();
      ids.push_back(*range);
      pos = stop + 1;
    }
    return ids;
  }

  Result<IdRange> parse_range(size_t begin, size_t end) {
    std::string_view item = expr_.substr(begin, end - begin);
    if (item.empty()) return fail("empty range in brackets", begin);
    size_t dash = item.find('-');
    std::string_view lo = item.substr(0, dash);
    std::string_view hi = dash == std::string_view::npos ? lo : item.substr(dash + 1);
    if (lo.empty() || hi.empty() || !all_digits(lo) || !all_digits(hi)) {
      return fail(fmt::format("\"{}\" is not a number or a range of numbers", item), begin);
    }
    if (lo.size() > kMaxDigits || hi.size() > kMaxDigits) {
      return fail(fmt::format("number in \"{}\" has more than {} digits", item, kMaxDigits), begin);
    }
    IdRange r{to_number(lo), to_number(hi), padded_width(lo)};
    if (r.hi < r.lo) return fail(fmt::format("reversed range \"{}\"", item), begin);
    if (r.hi - r.lo >= kMaxRange)
      return fail(fmt::format("too many hosts in range \"{}\" (at most {} per range)", item, kMaxRange), begin);
    return r;
  }

  Status expand(const std::vector<Part>& parts, size_t pos, std::vector<std::string>& out) {
    uint64_t n = 1, name_bytes = 0;
    for (const Part& p : parts) {
      if (!p.bracket) {
        name_bytes += p.literal.size();
        continue;
      }
      uint64_t size = bracket_size(p);
      if (size > kMaxHosts || n > kMaxHosts / size) return too_many(pos);
      n *= size;
      name_bytes += bracket_digits(p);
    }
    if (out.size() + n > kMaxHosts) return too_many(pos);
    expanded_bytes_ += n * (name_bytes + sizeof(std::string));
    if (expanded_bytes_ > kMaxExpandedBytes)
      return fail(fmt::format("expands to more than {} MiB of host names", kMaxExpandedBytes >> 20), pos);

    // Earlier brackets vary slowest: "r[1-2]n[1-2]" is r1n1,r1n2,r2n1,r2n2 (Slurm's order).
    std::vector<std::string> cur(1);
    for (const Part& p : parts) {
      if (!p.bracket) {
        for (std::string& s : cur) s += p.literal;
        continue;
      }
      std::vector<std::string> next;
      next.reserve(cur.size() * bracket_size(p));
      for (const std::string& s : cur) {
        for (const IdRange& r : p.ids) {
          for (uint64_t v = r.lo; v <= r.hi; ++v) {
            std::string& h = next.emplace_back(s);
            append_number(h, v, r.width);
          }
        }
      }
      cur = std::move(next);
    }
    out.insert(out.end(), std::make_move_iterator(cur.begin()), std::make_move_iterator(cur.end()));
    return {};
  }

  // The most digits one number of the bracket prints with.
  static uint64_t bracket_digits(const Part& p) {
    uint64_t most = 0;
    for (const IdRange& r : p.ids)
      most = std::max<uint64_t>(most, std::max<uint64_t>(r.width, std::to_string(r.hi).size()));
    return most;
  }

  // Stops counting past kMaxHosts so that many huge ranges cannot overflow.
  static uint64_t bracket_size(const Part& p) {
    uint64_t size = 0;
    for (const IdRange& r : p.ids) {
      size += r.hi - r.lo + 1;  // each range is below 10^18
      if (size > kMaxHosts) break;
    }
    return size;
  }

  Error too_many(size_t pos) const { return fail(fmt::format("expands to more than {} hosts", kMaxHosts), pos); }

  std::string_view expr_;
  size_t next_ = 0;
  uint64_t expanded_bytes_ = 0;
};

// True if `digits` prints the same when formatted at `width` (0 = unpadded).
bool fits_width(std::string_view digits, size_t width) {
  if (padded_width(digits) != 0) return digits.size() == width;
  return digits.size() >= width;
}

void append_ranges(std::string& out, const std::vector<IdRange>& ranges) {
  for (size_t k = 0; k < ranges.size(); ++k) {
    if (k > 0) out += ',';
    append_number(out, ranges[k].lo, ranges[k].width);
    if (ranges[k].hi != ranges[k].lo) {
      out += '-';
      append_number(out, ranges[k].hi, ranges[k].width);
    }
  }
}

// Encodes hosts[i...] as one "prefix[ranges]suffix" group, as long as hosts share the
// prefix, suffix and width and their numbers keep increasing; returns the index after it.
size_t encode_group(const std::vector<std::string>& hosts, size_t i, std::string& out) {
  const std::string& head = hosts[i];
  if (i + 1 == hosts.size()) {
    out += head;
    return i + 1;
  }
  // The varying number is the digit run where head and the next host first differ.
  const std::string& second = hosts[i + 1];
  size_t p = std::mismatch(head.begin(), head.end(), second.begin(), second.end()).first - head.begin();
  while (p > 0 && is_digit(head[p - 1])) --p;
  size_t e = p;
  while (e < head.size() && is_digit(head[e])) ++e;
  if (e == p || e - p > kMaxDigits) {
    out += head;
    return i + 1;
  }
  std::string_view prefix(head.data(), p), suffix(head.data() + e, head.size() - e);
  size_t width = padded_width(std::string_view(head).substr(p, e - p));
  uint64_t first = to_number(std::string_view(head).substr(p, e - p));
  std::vector<IdRange> ranges{{first, first, width}};

  size_t j = i + 1;
  for (; j < hosts.size(); ++j) {
    std::string_view h = hosts[j];
    if (h.size() <= p + suffix.size() || !h.starts_with(prefix) || !h.ends_with(suffix)) break;
    std::string_view mid = h.substr(p, h.size() - p - suffix.size());
    if (mid.size() > kMaxDigits || !all_digits(mid) || !fits_width(mid, width)) break;
    uint64_t v = to_number(mid);
    // Ranges and lists stay within what parse() (and Slurm) accept.
    if (v == ranges.back().hi + 1 && ranges.back().hi - ranges.back().lo + 1 < kMaxRange) {
      ranges.back().hi = v;
    } else if (v > ranges.back().hi && ranges.size() < kMaxRangesPerBracket) {
      ranges.push_back({v, v, width});
    } else {
      break;  // not ascending: merging would reorder hosts
    }
  }
  if (j == i + 1) {
    out += head;
    return j;
  }
  out += prefix;
  out += '[';
  append_ranges(out, ranges);
  out += ']';
  out += suffix;
  return j;
}

// Node lists usually arrive sorted already; checking first skips an O(n log n) sort.
void natural_sort(std::vector<std::string>& hosts) {
  if (!std::is_sorted(hosts.begin(), hosts.end(), natural_less)) {
    std::stable_sort(hosts.begin(), hosts.end(), natural_less);
  }
}

std::vector<std::string> sorted_unique(std::vector<std::string> hosts) {
  natural_sort(hosts);
  hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
  return hosts;
}

}  // namespace

Result<Hostlist> Hostlist::parse(std::string_view expr) { return Parser(expr).run(); }

Result<std::string> Hostlist::nth(long n) const {
  auto size = static_cast<long>(hosts_.size());
  long idx = n < 0 ? n + size : n;
  if (idx < 0 || idx >= size) {
    return not_found(fmt::format("index {} is out of range for a hostlist of {} hosts", n, hosts_.size()));
  }
  return hosts_[static_cast<size_t>(idx)];
}

std::optional<size_t> Hostlist::find(std::string_view host) const {
  auto it = std::find(hosts_.begin(), hosts_.end(), host);
  if (it == hosts_.end()) return std::nullopt;
  return static_cast<size_t>(it - hosts_.begin());
}

void Hostlist::append(const Hostlist& other) { hosts_.insert(hosts_.end(), other.hosts_.begin(), other.hosts_.end()); }

std::string Hostlist::encode() const {
  std::string out;
  size_t i = 0;
  while (i < hosts_.size()) {
    if (i > 0) out += ',';
    i = encode_group(hosts_, i, out);
  }
  return out;
}

Hostlist Hostlist::sorted() const {
  std::vector<std::string> hosts = hosts_;
  natural_sort(hosts);
  return Hostlist(std::move(hosts));
}

Hostlist Hostlist::uniq() const { return Hostlist(sorted_unique(hosts_)); }

Hostlist Hostlist::union_with(const Hostlist& other) const {
  std::vector<std::string> all = hosts_;
  all.insert(all.end(), other.hosts_.begin(), other.hosts_.end());
  return Hostlist(sorted_unique(std::move(all)));
}

Hostlist Hostlist::intersect(const Hostlist& other) const {
  std::unordered_set<std::string_view> theirs(other.hosts_.begin(), other.hosts_.end());
  std::vector<std::string> out;
  for (const std::string& h : hosts_) {
    if (theirs.contains(h)) out.push_back(h);
  }
  return Hostlist(sorted_unique(std::move(out)));
}

Hostlist Hostlist::minus(const Hostlist& other) const {
  std::unordered_set<std::string_view> theirs(other.hosts_.begin(), other.hosts_.end());
  std::vector<std::string> out;
  for (const std::string& h : hosts_) {
    if (!theirs.contains(h)) out.push_back(h);
  }
  return Hostlist(sorted_unique(std::move(out)));
}

}  // namespace corral
