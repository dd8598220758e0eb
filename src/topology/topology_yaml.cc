// topology.yaml (Slurm 25.05): a list of named topologies, each exactly one of tree,
// block or flat, plus corral's extensions (dragonfly/topo_optional in a tree, torus).
// Also load_topology, which picks the syntax from the file name.
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "topology/topology.h"
#include "topology/topology_build.h"

namespace corral::topology {

namespace {

using detail::where;

unsigned line_of(const YAML::Node& n) {
  const YAML::Mark m = n.Mark();
  return m.is_null() ? 0 : static_cast<unsigned>(m.line + 1);
}

// A mapping whose keys are checked against the ones a section allows.
class Map {
 public:
  Map(const YAML::Node& node, std::string what, const std::string& file)
      : node_(node), what_(std::move(what)), file_(file) {}

  Status check(std::initializer_list<std::string_view> allowed) const {
    if (!node_.IsMap()) return invalid(fmt::format("{}: {} must be a mapping (key: value lines)", at(node_), what_));
    for (auto it = node_.begin(); it != node_.end(); ++it) {
      const std::string key = it->first.as<std::string>();
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        std::string list;
        for (auto a : allowed) list += fmt::format("{}{}", list.empty() ? "" : ", ", a);
        return invalid(fmt::format("{}: {}: unknown key '{}' (expected {})", at(it->first), what_, key, list));
      }
    }
    return {};
  }

  bool has(const std::string& key) const { return static_cast<bool>(node_[key]); }
  YAML::Node get(const std::string& key) const { return node_[key]; }
  unsigned line() const { return line_of(node_); }
  std::string at(const YAML::Node& n) const {
    const unsigned l = line_of(n);
    return where(file_, l ? l : line_of(node_));
  }

  Result<std::string> scalar(const std::string& key, bool required) const {
    YAML::Node v = node_[key];
    if (!v) {
      if (!required) return std::string();
      return invalid(fmt::format("{}: {} has no '{}'", at(node_), what_, key));
    }
    if (!v.IsScalar()) return invalid(fmt::format("{}: {}: '{}' must be a single value", at(v), what_, key));
    return v.as<std::string>();
  }

  Result<bool> flag(const std::string& key) const {
    YAML::Node v = node_[key];
    if (!v) return false;
    bool b = false;
    if (!v.IsScalar() || !YAML::convert<bool>::decode(v, b))
      return invalid(fmt::format("{}: {}: '{}' must be true or false", at(v), what_, key));
    return b;
  }

  // A hostlist, written as one expression or as a list of them.
  Result<std::vector<std::string>> hostlist(const std::string& key) const {
    YAML::Node v = node_[key];
    if (!v) return std::vector<std::string>{};
    std::string expr;
    if (v.IsSequence()) {
      for (const auto& item : v) expr += (expr.empty() ? "" : ",") + item.as<std::string>();
    } else if (v.IsScalar()) {
      expr = v.as<std::string>();
    } else {
      return invalid(fmt::format("{}: {}: '{}' must be a hostlist", at(v), what_, key));
    }
    return detail::expand_hostlist(expr, key, file_, line_of(v));
  }

 private:
  const YAML::Node& node_;
  std::string what_;
  const std::string& file_;
};

Result<std::vector<long>> number_list(const YAML::Node& v, const std::string& key, const std::string& file) {
  if (v.IsScalar()) return detail::parse_number_list(v.as<std::string>(), key, file, line_of(v));
  if (!v.IsSequence()) return invalid(fmt::format("{}: '{}' must be a list of numbers", where(file, line_of(v)), key));
  std::string text;
  for (const auto& item : v) text += (text.empty() ? "" : ",") + item.as<std::string>();
  return detail::parse_number_list(text, key, file, line_of(v));
}

Status parse_tree(Topology& t, const YAML::Node& node, const std::string& file) {
  Map tree(node, fmt::format("topology {}: tree", t.name), file);
  if (auto st = tree.check({"switches", "dragonfly", "topo_optional"}); !st) return st;
  auto dragonfly = tree.flag("dragonfly");
  if (!dragonfly) return dragonfly.status();
  auto optional = tree.flag("topo_optional");
  if (!optional) return optional.status();
  t.kind = *dragonfly ? Kind::dragonfly : Kind::tree;
  t.topo_optional = *optional;
  YAML::Node list = tree.get("switches");
  if (!list || !list.IsSequence() || list.size() == 0)
    return invalid(fmt::format("{}: topology {}: tree needs a non-empty 'switches' list", tree.at(list), t.name));
  std::vector<detail::SwitchDef> defs;
  for (const auto& item : list) {
    Map sw(item, "switch", file);
    if (auto st = sw.check({"switch", "children", "nodes", "link_speed"}); !st) return st;
    detail::SwitchDef d;
    d.line = sw.line();
    auto name = sw.scalar("switch", true);
    if (!name) return name.status();
    d.name = *name;
    if (auto st = detail::check_unit_name(d.name, "switch", file, d.line); !st) return st;
    auto children = sw.hostlist("children");
    if (!children) return children.status();
    d.children = std::move(*children);
    auto nodes = sw.hostlist("nodes");
    if (!nodes) return nodes.status();
    d.nodes = std::move(*nodes);
    if (sw.has("link_speed")) {
      auto v = number_list(sw.get("link_speed"), "link_speed", file);
      if (!v || v->size() != 1)
        return invalid(fmt::format("{}: link_speed must be one number", sw.at(sw.get("link_speed"))));
      d.link_speed = static_cast<uint64_t>(v->front());
    }
    defs.push_back(std::move(d));
  }
  return detail::build_switches(t, std::move(defs), file);
}

Status parse_block(Topology& t, const YAML::Node& node, const std::string& file) {
  Map block(node, fmt::format("topology {}: block", t.name), file);
  if (auto st = block.check({"block_sizes", "blocks"}); !st) return st;
  t.kind = Kind::block;
  unsigned sizes_line = block.line();
  if (block.has("block_sizes")) {
    sizes_line = line_of(block.get("block_sizes"));
    auto v = number_list(block.get("block_sizes"), "block_sizes", file);
    if (!v) return v.status();
    for (long x : *v) t.block_sizes.push_back(static_cast<unsigned>(x));
  }
  YAML::Node list = block.get("blocks");
  if (!list || !list.IsSequence() || list.size() == 0)
    return invalid(fmt::format("{}: topology {}: block needs a non-empty 'blocks' list", block.at(list), t.name));
  for (const auto& item : list) {
    Map b(item, "block", file);
    if (auto st = b.check({"block", "nodes"}); !st) return st;
    Block out;
    out.line = b.line();
    auto name = b.scalar("block", true);
    if (!name) return name.status();
    out.name = *name;
    if (auto st = detail::check_unit_name(out.name, "block", file, out.line); !st) return st;
    auto nodes = b.hostlist("nodes");
    if (!nodes) return nodes.status();
    out.nodes = std::move(*nodes);
    t.blocks.push_back(std::move(out));
  }
  return detail::build_blocks(t, file, sizes_line);
}

Status parse_torus_list(Topology& t, const YAML::Node& list, std::vector<unsigned>& lines, const std::string& file) {
  for (const auto& item : list) {
    Map n(item, "torus node", file);
    if (auto st = n.check({"node", "coords"}); !st) return st;
    auto name = n.scalar("node", true);
    if (!name) return name.status();
    TorusNode tn{*name, {}};
    if (n.has("coords")) {
      auto v = number_list(n.get("coords"), "coords", file);
      if (!v) return v.status();
      if (v->size() != 3)
        return invalid(
            fmt::format("{}: node {}: coords must be three numbers [x, y, z]", n.at(n.get("coords")), *name));
      for (size_t i = 0; i < 3; ++i) tn.coord[i] = static_cast<int>((*v)[i]);
    } else {
      auto c = detail::torus_from_names({*name}, file, n.line());
      if (!c) return c.status();
      tn = c->front();
    }
    t.torus.push_back(std::move(tn));
    lines.push_back(n.line());
  }
  return {};
}

Status parse_torus(Topology& t, const YAML::Node& node, const std::string& file) {
  Map torus(node, fmt::format("topology {}: torus", t.name), file);
  if (auto st = torus.check({"nodes"}); !st) return st;
  t.kind = Kind::torus;
  YAML::Node nodes = torus.get("nodes");
  std::vector<unsigned> lines;
  if (nodes && nodes.IsScalar()) {
    auto names = torus.hostlist("nodes");
    if (!names) return names.status();
    auto list = detail::torus_from_names(*names, file, line_of(nodes));
    if (!list) return list.status();
    t.torus = std::move(*list);
    lines.assign(t.torus.size(), line_of(nodes));
  } else if (nodes && nodes.IsSequence() && nodes.size() > 0) {
    if (auto st = parse_torus_list(t, nodes, lines, file); !st) return st;
  } else {
    return invalid(fmt::format("{}: topology {}: torus needs 'nodes': a hostlist or a list of {{node, coords}}",
                               torus.at(nodes), t.name));
  }
  return detail::build_torus(t, lines, file);
}

// One entry of the top-level list. Returns whether it says cluster_default: true.
Result<bool> parse_entry(Topology& t, const YAML::Node& item, const std::string& file) {
  Map m(item, "topology", file);
  if (auto st = m.check({"topology", "cluster_default", "tree", "block", "flat", "torus"}); !st) return st.error();
  auto name = m.scalar("topology", true);
  if (!name) return name.error();
  t.name = *name;
  if (t.name.empty()) return invalid(fmt::format("{}: topology name is empty", m.at(item)));
  auto is_default = m.flag("cluster_default");
  if (!is_default) return is_default.error();
  auto flat = m.flag("flat");
  if (!flat) return flat.error();
  const int kinds = m.has("tree") + m.has("block") + m.has("torus") + (*flat ? 1 : 0);
  if (kinds != 1)
    return invalid(
        fmt::format("{}: topology {} must define exactly one of tree, block, flat: true or torus", m.at(item), t.name));
  Status st;
  if (m.has("tree"))
    st = parse_tree(t, m.get("tree"), file);
  else if (m.has("block"))
    st = parse_block(t, m.get("block"), file);
  else if (m.has("torus"))
    st = parse_torus(t, m.get("torus"), file);
  else
    st = t.finalize(file);  // flat
  if (!st) return st.error();
  return *is_default;
}

Result<TopologySet> parse_document(const YAML::Node& root, const std::string& file) {
  if (!root.IsSequence() || root.size() == 0)
    return invalid(
        fmt::format("{}: expected a list of topologies ('- topology: NAME' entries)", where(file, line_of(root))));
  TopologySet set;
  for (const auto& item : root) {
    Topology t;
    auto is_default = parse_entry(t, item, file);
    if (!is_default) return is_default.error();
    if (set.find(t.name))
      return invalid(fmt::format("{}: topology {} is defined twice", where(file, line_of(item)), t.name));
    // Slurm: the first one marked cluster_default wins.
    if (*is_default && set.cluster_default.empty()) set.cluster_default = t.name;
    set.topologies.push_back(std::move(t));
  }
  if (set.cluster_default.empty()) set.cluster_default = set.topologies.front().name;
  return set;
}

bool has_suffix(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Result<TopologySet> parse_topology_yaml(const std::string& text, const std::string& file) {
  try {
    return parse_document(YAML::Load(text), file);
  } catch (const YAML::Exception& e) {
    const unsigned line = e.mark.is_null() ? 0 : static_cast<unsigned>(e.mark.line + 1);
    return invalid(fmt::format("{}: {}", where(file, line), e.msg));
  }
}

Result<TopologySet> load_topology(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return io_error(fmt::format("cannot read topology file {}: it is a directory", path));
  std::ifstream in(path);
  if (!in) return io_error(fmt::format("cannot read topology file {}: {}", path, std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return io_error(fmt::format("cannot read topology file {}", path));
  if (has_suffix(path, ".yaml") || has_suffix(path, ".yml")) return parse_topology_yaml(text.str(), path);
  return parse_topology_conf(text.str(), path);
}

}  // namespace corral::topology
