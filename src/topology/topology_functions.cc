// Hostlist functions (Slurm's switch{}, block{}, switchwith{}, blockwith{}) expanded to
// plain hostlists, so every place that takes a node list can name network units.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <unordered_set>

#include "topology/topology.h"
#include "util/hostlist.h"

namespace corral::topology {

namespace {

constexpr std::array<std::string_view, 4> kFunctions{"switchwith", "blockwith", "switch", "block"};

std::string lowercase(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Items separated by commas outside [] and {}: "tux[1,2],switch{s1}" is two items.
std::vector<std::string> split_items(const std::string& expr) {
  std::vector<std::string> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < expr.size(); ++i) {
    const char c = expr[i];
    if (c == '[' || c == '{') ++depth;
    if ((c == ']' || c == '}') && depth > 0) --depth;
    if (c == ',' && depth == 0) {
      out.push_back(expr.substr(start, i - start));
      start = i + 1;
    }
  }
  out.push_back(expr.substr(start));  // the last item, also when a bracket is left open
  return out;
}

struct Call {
  std::string function;  // lowercase
  std::string argument;
};

// "switch{s1}" -> {switch, s1}; nullopt for an ordinary hostlist item.
std::optional<Call> as_call(const std::string& item) {
  const size_t open = item.find('{');
  if (open == std::string::npos || item.empty() || item.back() != '}') return std::nullopt;
  const std::string name = lowercase(std::string_view(item).substr(0, open));
  if (std::find(kFunctions.begin(), kFunctions.end(), name) == kFunctions.end()) return std::nullopt;
  return Call{name, item.substr(open + 1, item.size() - open - 2)};
}

bool is_switch_kind(Kind k) { return k == Kind::tree || k == Kind::dragonfly; }

Status check_kind(const Call& c, const std::string& item, const Topology& topo) {
  const bool wants_switch = c.function.rfind("switch", 0) == 0;
  if (wants_switch && !is_switch_kind(topo.kind))
    return invalid(fmt::format("{}: the topology '{}' is a {} topology and has no switches", item, topo.name,
                               kind_name(topo.kind)));
  if (!wants_switch && topo.kind != Kind::block)
    return invalid(
        fmt::format("{}: the topology '{}' is a {} topology and has no blocks", item, topo.name, kind_name(topo.kind)));
  return {};
}

Result<std::vector<std::string>> unit_nodes(const Call& c, const std::string& arg, const std::string& item,
                                            const Topology& topo) {
  if (c.function == "switch") {
    auto sw = topo.find_switch(arg);
    if (!sw) return not_found(fmt::format("{}: no switch named {}", item, arg));
    return topo.nodes_under_switch(*sw);
  }
  if (c.function == "block") {
    auto b = topo.find_block(arg);
    if (!b) return not_found(fmt::format("{}: no block named {}", item, arg));
    return topo.blocks[*b].nodes;
  }
  auto leaf = topo.leaf_of(arg);
  if (!leaf)
    return not_found(
        fmt::format("{}: node {} is in no {}", item, arg, c.function == "switchwith" ? "switch" : "block"));
  if (c.function == "switchwith") return topo.switches[*leaf].nodes;
  return topo.blocks[*leaf].nodes;
}

// The nodes a function item names; its argument may itself be a hostlist (switch{s[1-2]}).
Result<std::vector<std::string>> expand_call(const Call& c, const std::string& item, const Topology& topo) {
  if (auto st = check_kind(c, item, topo); !st) return st.error();
  auto args = Hostlist::parse(c.argument);
  if (!args || args->empty())
    return invalid(fmt::format("{}: invalid argument '{}'{}", item, c.argument, args ? "" : ": " + args.message()));
  std::vector<std::string> out;
  for (const std::string& arg : args->hosts()) {
    auto nodes = unit_nodes(c, arg, item, topo);
    if (!nodes) return nodes;
    out.insert(out.end(), nodes->begin(), nodes->end());
  }
  return out;
}

}  // namespace

bool has_topology_functions(const std::string& expr) {
  const std::string low = lowercase(expr);
  for (std::string_view f : kFunctions) {
    for (size_t pos = low.find(f); pos != std::string::npos; pos = low.find(f, pos + 1)) {
      // A function name starts an item and is followed by '{'.
      const bool starts = pos == 0 || low[pos - 1] == ',';
      if (starts && pos + f.size() < low.size() && low[pos + f.size()] == '{') return true;
    }
  }
  return false;
}

Result<std::string> expand_topology_functions(const std::string& expr, const Topology& topo) {
  if (!has_topology_functions(expr)) return expr;
  std::vector<std::string> hosts;
  for (const std::string& item : split_items(expr)) {
    if (item.empty()) continue;
    if (auto call = as_call(item)) {
      auto nodes = expand_call(*call, item, topo);
      if (!nodes) return nodes.error();
      hosts.insert(hosts.end(), nodes->begin(), nodes->end());
      continue;
    }
    auto hl = Hostlist::parse(item);
    if (!hl) return invalid(fmt::format("{}: {}", item, hl.message()));
    hosts.insert(hosts.end(), hl->hosts().begin(), hl->hosts().end());
  }
  // A node named twice (a switch and one of its nodes) is listed once, first place kept.
  std::unordered_set<std::string> seen;
  std::vector<std::string> unique;
  for (std::string& h : hosts)
    if (seen.insert(h).second) unique.push_back(std::move(h));
  return Hostlist(std::move(unique)).encode();
}

}  // namespace corral::topology
