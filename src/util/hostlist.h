// Hostlists: Slurm-compatible host range expressions (Flux RFC 29), e.g.
// "node[01-04,7],login[1-2]-ib". Order and duplicates are kept unless asked otherwise.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace corral {

class Hostlist {
 public:
  Hostlist() = default;
  explicit Hostlist(std::vector<std::string> hosts) : hosts_(std::move(hosts)) {}

  // Parses an expression; the error names the offending position and text.
  static Result<Hostlist> parse(std::string_view expr);

  size_t count() const { return hosts_.size(); }
  bool empty() const { return hosts_.empty(); }
  const std::vector<std::string>& hosts() const { return hosts_; }
  // The nth host (0-based); not_found error when out of range.
  Result<std::string> nth(long n) const;  // negative counts from the end (-1 = last)
  std::optional<size_t> find(std::string_view host) const;
  bool contains(std::string_view host) const { return find(host).has_value(); }

  void append(std::string host) { hosts_.push_back(std::move(host)); }
  void append(const Hostlist& other);

  // Ranged form; merges only adjacent ascending runs with equal prefix, suffix and width,
  // so the order of hosts is preserved: "n1,n2,n3,n0" -> "n[1-3],n0".
  std::string encode() const;

  Hostlist sorted() const;  // natural order (numeric parts compared as numbers)
  Hostlist uniq() const;    // sorted and without duplicates

  // Set operations return sorted, duplicate-free hostlists.
  Hostlist union_with(const Hostlist& other) const;
  Hostlist intersect(const Hostlist& other) const;
  Hostlist minus(const Hostlist& other) const;

  bool operator==(const Hostlist&) const = default;

 private:
  std::vector<std::string> hosts_;
};

}  // namespace corral
