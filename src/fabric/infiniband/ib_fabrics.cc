#include "fabric/infiniband/ib_fabrics.h"

#include <algorithm>
#include <cctype>
#include <set>

#include <fmt/format.h>

#include "fabric/infiniband/parse_unsigned.h"

namespace corral::fabric::infiniband {
namespace {

// `n` groups of 1-4 hex digits separated by ':' at the start of `text` (all of it when
// `exact`).
bool hex_groups(std::string_view text, int n, uint64_t& out, bool exact) {
  uint64_t v = 0;
  for (int g = 0; g < n; ++g) {
    size_t colon = text.find(':');
    std::string_view group = text.substr(0, colon);
    auto x = group.size() <= 4 && group.find_first_of("xX") == std::string_view::npos ? parse_unsigned(group, 16)
                                                                                      : std::nullopt;
    if (!x) return false;
    v = (v << 16) | *x;
    const bool last = g == n - 1;
    if (last && exact && colon != std::string_view::npos) return false;
    if (!last && colon == std::string_view::npos) return false;
    text = colon == std::string_view::npos ? std::string_view() : text.substr(colon + 1);
  }
  out = v;
  return true;
}

}  // namespace

bool valid_name(std::string_view s) {
  return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

Result<uint64_t> parse_subnet_prefix(std::string_view text) {
  uint64_t v = 0;
  if (!hex_groups(text, 4, v, true))
    return invalid(fmt::format("'{}' is not a subnet prefix (four groups of hex digits, e.g. fe80:0000:0000:0001)",
                               text.substr(0, 64)));
  return v;
}

Result<uint64_t> gid_subnet_prefix(std::string_view gid) {
  uint64_t v = 0;
  if (!hex_groups(gid, 4, v, false)) return invalid(fmt::format("'{}' is not a port GID", gid.substr(0, 64)));
  return v;
}

Result<Fabrics> Fabrics::create(const std::vector<FabricDef>& defs, std::string default_name) {
  Fabrics f;
  if (!valid_name(default_name))
    return invalid(fmt::format("infiniband: the default fabric name '{}' must be 1-64 letters, digits, '-', '_' or '.'",
                               default_name.substr(0, 64)));
  f.default_ = std::move(default_name);
  std::set<std::string> names;
  for (const auto& d : defs) {
    if (!valid_name(d.name))
      return invalid(fmt::format("infiniband.fabric: the name '{}' must be 1-64 letters, digits, '-', '_' or '.'",
                                 d.name.substr(0, 64)));
    auto prefix = parse_subnet_prefix(d.subnet_prefix);
    if (!prefix) return invalid(fmt::format("infiniband.fabric {}: {}", d.name, prefix.message()));
    if (!names.insert(d.name).second) return invalid(fmt::format("infiniband.fabric: {} is named twice", d.name));
    if (!f.by_prefix_.emplace(*prefix, d.name).second)
      return invalid(fmt::format("infiniband.fabric {}: subnet prefix {} is already fabric {}", d.name, d.subnet_prefix,
                                 f.by_prefix_[*prefix]));
  }
  return f;
}

const std::string& Fabrics::of_prefix(uint64_t prefix) const {
  auto it = by_prefix_.find(prefix);
  return it == by_prefix_.end() ? default_ : it->second;
}

bool Fabrics::known(std::string_view name) const {
  if (name == default_) return true;
  return std::any_of(by_prefix_.begin(), by_prefix_.end(), [&](const auto& p) { return p.second == name; });
}

std::vector<std::string> Fabrics::names() const {
  std::set<std::string> all{default_};
  for (const auto& [p, n] : by_prefix_) all.insert(n);
  return {all.begin(), all.end()};
}

}  // namespace corral::fabric::infiniband
