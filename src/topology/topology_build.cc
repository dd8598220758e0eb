// Shared checks for topology definitions, whichever syntax they came from.
#include "topology/topology_build.h"

#include <fmt/format.h>

#include <charconv>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "util/hostlist.h"

namespace corral::topology::detail {

std::string where(const std::string& file, unsigned line) { return line ? fmt::format("{}:{}", file, line) : file; }

Result<std::vector<std::string>> expand_hostlist(const std::string& expr, const std::string& key,
                                                 const std::string& file, unsigned line) {
  if (expr.empty()) return invalid(fmt::format("{}: {} is empty", where(file, line), key));
  auto hl = Hostlist::parse(expr);
  if (!hl) return invalid(fmt::format("{}: {}={}: {}", where(file, line), key, expr, hl.message()));
  return hl->hosts();
}

Status check_unit_name(const std::string& name, const std::string& what, const std::string& file, unsigned line) {
  if (name.empty()) return invalid(fmt::format("{}: {} name is empty", where(file, line), what));
  if (name.find_first_of(",[]{}.= \t") != std::string::npos)
    return invalid(
        fmt::format("{}: {} name '{}' may not contain any of , [ ] {{ }} . = or blanks (names are used in "
                    "hostlists and in CORRAL_TOPOLOGY_ADDR, where '.' separates them)",
                    where(file, line), what, name));
  return {};
}

namespace {

// A name listed twice in one Nodes= / Switches= (the hostlist parser keeps duplicates).
Status no_duplicates(const std::vector<std::string>& names, const std::string& what, const std::string& owner,
                     const std::string& file, unsigned line) {
  std::unordered_set<std::string_view> seen;
  for (const std::string& n : names)
    if (!seen.insert(n).second)
      return invalid(fmt::format("{}: {} lists {} {} twice", where(file, line), owner, what, n));
  return {};
}

}  // namespace

Status build_switches(Topology& t, std::vector<SwitchDef> defs, const std::string& file) {
  std::unordered_map<std::string, uint32_t> index;
  for (uint32_t i = 0; i < defs.size(); ++i) index.emplace(defs[i].name, i);
  t.switches.clear();
  t.switches.reserve(defs.size());
  for (SwitchDef& d : defs) {
    const std::string at = where(file, d.line);
    if (d.children.empty() && d.nodes.empty())
      return invalid(fmt::format("{}: switch {} has neither Nodes= nor Switches=", at, d.name));
    if (!d.children.empty() && !d.nodes.empty())
      return invalid(
          fmt::format("{}: switch {} has both Nodes= and Switches= (a switch is either a leaf switch with "
                      "nodes or a parent of other switches)",
                      at, d.name));
    const std::string owner = "switch " + d.name;
    if (auto st = no_duplicates(d.nodes, "node", owner, file, d.line); !st) return st;
    if (auto st = no_duplicates(d.children, "switch", owner, file, d.line); !st) return st;
    Switch s;
    s.name = std::move(d.name);
    s.nodes = std::move(d.nodes);
    s.link_speed = d.link_speed;
    s.line = d.line;
    for (const std::string& c : d.children) {
      auto it = index.find(c);
      if (it == index.end())
        return invalid(fmt::format("{}: switch {}: Switches= names {}, which is not defined", at, s.name, c));
      s.children.push_back(it->second);
    }
    t.switches.push_back(std::move(s));
  }
  return t.finalize(file);
}

namespace {

Status check_base_blocks(const Topology& t, const std::string& file) {
  if (t.blocks.empty()) return {};
  const Block& first = t.blocks.front();
  for (const Block& b : t.blocks)
    if (b.nodes.size() != first.nodes.size())
      return invalid(fmt::format(
          "{}: block {} has {} nodes but block {} ({}) has {}: base blocks must all be the "
          "same size",
          where(file, b.line), b.name, b.nodes.size(), first.name, where(file, first.line), first.nodes.size()));
  return {};
}

Status check_block_sizes(const Topology& t, const std::string& file, unsigned line) {
  const std::string at = where(file, line);
  const auto& sizes = t.block_sizes;
  if (sizes.empty()) return {};
  const size_t base = t.blocks.front().nodes.size();
  if (sizes.front() != base)
    return invalid(
        fmt::format("{}: BlockSizes starts with {}, but base blocks have {} nodes: the first size must be "
                    "the base block size",
                    at, sizes.front(), base));
  for (size_t i = 1; i < sizes.size(); ++i) {
    if (sizes[i] <= sizes[i - 1])
      return invalid(fmt::format("{}: BlockSizes must be ascending: {} follows {}", at, sizes[i], sizes[i - 1]));
    if (sizes[i] % sizes[i - 1] != 0)
      return invalid(
          fmt::format("{}: BlockSizes: {} is not a multiple of {} (a block level is made of whole blocks "
                      "of the level below)",
                      at, sizes[i], sizes[i - 1]));
  }
  return {};
}

}  // namespace

Status build_blocks(Topology& t, const std::string& file, unsigned sizes_line) {
  if (t.blocks.empty())
    return invalid(fmt::format("{}: BlockSizes given but no BlockName lines", where(file, sizes_line)));
  for (const Block& b : t.blocks) {
    if (b.nodes.empty()) return invalid(fmt::format("{}: block {} has no Nodes=", where(file, b.line), b.name));
    if (auto st = no_duplicates(b.nodes, "node", "block " + b.name, file, b.line); !st) return st;
  }
  if (auto st = check_base_blocks(t, file); !st) return st;
  if (auto st = check_block_sizes(t, file, sizes_line); !st) return st;
  return t.finalize(file);
}

Result<std::vector<long>> parse_number_list(const std::string& text, const std::string& key, const std::string& file,
                                            unsigned line) {
  std::vector<long> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(pos, comma - pos);
    long v = 0;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || v < 0)
      return invalid(fmt::format("{}: {}={}: '{}' is not a non-negative integer", where(file, line), key, text, item));
    out.push_back(v);
    pos = comma + 1;
  }
  return out;
}

Result<std::vector<TorusNode>> torus_from_names(const std::vector<std::string>& names, const std::string& file,
                                                unsigned line) {
  std::vector<TorusNode> out;
  out.reserve(names.size());
  for (const std::string& n : names) {
    auto c = coords_from_name(n);
    if (!c)
      return invalid(
          fmt::format("{}: node {}: cannot take torus coordinates from the name (the last three "
                      "characters must be base-36 digits 0-9/A-Z); give Coords= instead",
                      where(file, line), n));
    out.push_back({n, *c});
  }
  return out;
}

Status build_torus(Topology& t, const std::vector<unsigned>& lines, const std::string& file) {
  std::unordered_map<std::string, size_t> seen;
  for (size_t i = 0; i < t.torus.size(); ++i) {
    auto [it, fresh] = seen.emplace(t.torus[i].name, i);
    if (!fresh)
      return invalid(fmt::format("{}: node {} is given twice (first at line {})",
                                 where(file, i < lines.size() ? lines[i] : 0), t.torus[i].name,
                                 it->second < lines.size() ? lines[it->second] : 0));
  }
  return t.finalize(file);
}

}  // namespace corral::topology::detail
