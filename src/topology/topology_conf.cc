// topology.conf: Slurm's line syntax (SwitchName=, BlockName=, BlockSizes=) plus the lines
// corral reads here because it has no slurm.conf (TopologyParam=) and its torus lines
// (NodeName=... Coords=, TorusNodes=).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <sstream>

#include "topology/topology.h"
#include "topology/topology_build.h"
#include "util/units.h"

namespace corral::topology {

namespace {

using detail::where;

struct Field {
  std::string key;    // as written, for messages
  std::string lower;  // for matching: keys are case-insensitive
  std::string value;
};

std::string lowercase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Result<std::vector<Field>> split_fields(const std::string& line, const std::string& at) {
  std::vector<Field> out;
  std::istringstream in(line);
  std::string tok;
  while (in >> tok) {
    const size_t eq = tok.find('=');
    if (eq == std::string::npos || eq == 0) return invalid(fmt::format("{}: expected KEY=VALUE, got '{}'", at, tok));
    Field f{tok.substr(0, eq), lowercase(tok.substr(0, eq)), tok.substr(eq + 1)};
    for (const Field& g : out)
      if (g.lower == f.lower) return invalid(fmt::format("{}: {} is given twice", at, f.key));
    out.push_back(std::move(f));
  }
  return out;
}

enum class Section { none, tree, block, torus };

std::string_view section_lines(Section s) {
  switch (s) {
    case Section::tree:
      return "SwitchName";
    case Section::block:
      return "BlockName/BlockSizes";
    case Section::torus:
      return "NodeName/TorusNodes";
    case Section::none:
      break;
  }
  return "";
}

class ConfParser {
 public:
  explicit ConfParser(std::string file) : file_(std::move(file)) {}

  Status line(const std::string& raw, unsigned lineno) {
    line_ = lineno;
    std::string text = raw.substr(0, raw.find('#'));
    auto fields = split_fields(text, at());
    if (!fields) return fields.status();
    if (fields->empty()) return {};
    const std::string& kind = fields->front().lower;
    if (kind == "switchname") return switch_line(*fields);
    if (kind == "blockname") return block_line(*fields);
    if (kind == "blocksizes") return block_sizes_line(*fields);
    if (kind == "topologyparam") return param_line(*fields);
    if (kind == "nodename") return torus_node_line(*fields);
    if (kind == "torusnodes") return torus_nodes_line(*fields);
    if (kind == "chassisname") return chassis_line(*fields);
    return invalid(
        fmt::format("{}: unknown key '{}' (a line starts with SwitchName, BlockName, BlockSizes, "
                    "TopologyParam, NodeName, TorusNodes or ChassisName)",
                    at(), fields->front().key));
  }

  Result<TopologySet> finish() {
    Topology t;
    if (auto st = build(t); !st) return st.error();
    TopologySet set;
    set.cluster_default = t.name;
    set.topologies.push_back(std::move(t));
    return set;
  }

 private:
  std::string at() const { return where(file_, line_); }

  Status enter(Section s) {
    if (section_ == Section::none) {
      section_ = s;
      section_line_ = line_;
      return {};
    }
    if (section_ == s) return {};
    return invalid(
        fmt::format("{}: {} lines cannot be mixed with {} lines (line {}): a file describes one kind of "
                    "topology; use topology.yaml for several",
                    at(), section_lines(s), section_lines(section_), section_line_));
  }

  Status only_keys(const std::vector<Field>& f, std::initializer_list<std::string_view> keys, std::string_view hint) {
    for (size_t i = 1; i < f.size(); ++i)
      if (std::find(keys.begin(), keys.end(), f[i].lower) == keys.end())
        return invalid(fmt::format("{}: unknown key '{}' ({})", at(), f[i].key, hint));
    return {};
  }

  static const Field* get(const std::vector<Field>& f, std::string_view key) {
    for (const Field& x : f)
      if (x.lower == key) return &x;
    return nullptr;
  }

  Status switch_line(const std::vector<Field>& f) {
    if (auto st = enter(Section::tree); !st) return st;
    if (auto st =
            only_keys(f, {"switches", "nodes", "linkspeed"}, "SwitchName lines take Switches=, Nodes= and LinkSpeed=");
        !st)
      return st;
    detail::SwitchDef d;
    d.name = f.front().value;
    d.line = line_;
    if (auto st = detail::check_unit_name(d.name, "switch", file_, line_); !st) return st;
    if (const Field* s = get(f, "switches")) {
      auto names = detail::expand_hostlist(s->value, s->key, file_, line_);
      if (!names) return names.status();
      d.children = std::move(*names);
    }
    if (const Field* n = get(f, "nodes")) {
      auto nodes = detail::expand_hostlist(n->value, n->key, file_, line_);
      if (!nodes) return nodes.status();
      d.nodes = std::move(*nodes);
    }
    if (const Field* l = get(f, "linkspeed")) {
      auto v = detail::parse_number_list(l->value, l->key, file_, line_);
      if (!v || v->size() != 1) return invalid(fmt::format("{}: {}={}: expected one number", at(), l->key, l->value));
      d.link_speed = static_cast<uint64_t>(v->front());
    }
    switches_.push_back(std::move(d));
    return {};
  }

  // The name (first field) and the expanded Nodes= of a BlockName or ChassisName line.
  Result<std::pair<std::string, std::vector<std::string>>> named_nodes(const std::vector<Field>& f, const char* kind) {
    std::string name = f.front().value;
    if (auto st = detail::check_unit_name(name, kind, file_, line_); !st) return st.error();
    const Field* n = get(f, "nodes");
    if (!n) return invalid(fmt::format("{}: {} {} has no Nodes=", at(), kind, name));
    auto nodes = detail::expand_hostlist(n->value, n->key, file_, line_);
    if (!nodes) return nodes.error();
    return std::make_pair(std::move(name), std::move(*nodes));
  }

  Status block_line(const std::vector<Field>& f) {
    if (auto st = enter(Section::block); !st) return st;
    if (auto st = only_keys(f, {"nodes"}, "BlockName lines take Nodes="); !st) return st;
    auto unit = named_nodes(f, "block");
    if (!unit) return unit.status();
    topo_.blocks.push_back(Block{std::move(unit->first), std::move(unit->second), line_});
    return {};
  }

  // ChassisName lines stand beside any network kind: they do not enter a section.
  Status chassis_line(const std::vector<Field>& f) {
    if (auto st = only_keys(f, {"nodes", "storage"}, "ChassisName lines take Nodes= and Storage="); !st) return st;
    auto unit = named_nodes(f, "chassis");
    if (!unit) return unit.status();
    Chassis c{std::move(unit->first), std::move(unit->second), 0, line_};
    if (const Field* s = get(f, "storage")) {
      auto bytes = parse_size(s->value);
      if (!bytes) return invalid(fmt::format("{}: Storage={}: {}", at(), s->value, bytes.message()));
      c.storage_bytes = *bytes;
    }
    topo_.chassis.push_back(std::move(c));
    return {};
  }

  Status block_sizes_line(const std::vector<Field>& f) {
    if (auto st = enter(Section::block); !st) return st;
    if (auto st = only_keys(f, {}, "BlockSizes= stands alone on its line"); !st) return st;
    if (sizes_line_) return invalid(fmt::format("{}: BlockSizes is given twice (first at line {})", at(), sizes_line_));
    auto v = detail::parse_number_list(f.front().value, f.front().key, file_, line_);
    if (!v) return v.status();
    for (long x : *v) topo_.block_sizes.push_back(static_cast<unsigned>(x));
    sizes_line_ = line_;
    return {};
  }

  Status param_line(const std::vector<Field>& f) {
    if (auto st = only_keys(f, {}, "TopologyParam= stands alone on its line"); !st) return st;
    if (!param_line_) param_line_ = line_;
    std::string value = f.front().value;
    size_t pos = 0;
    while (pos <= value.size()) {
      size_t comma = std::min(value.find(',', pos), value.size());
      const std::string item = value.substr(pos, comma - pos);
      const std::string low = lowercase(item);
      if (low == "dragonfly")
        dragonfly_ = true;
      else if (low == "topooptional")
        topo_optional_ = true;
      else
        return invalid(
            fmt::format("{}: TopologyParam: unknown parameter '{}' (corral knows dragonfly and "
                        "TopoOptional)",
                        at(), item));
      pos = comma + 1;
    }
    return {};
  }

  Status torus_node_line(const std::vector<Field>& f) {
    if (auto st = enter(Section::torus); !st) return st;
    if (auto st = only_keys(f, {"coords"}, "NodeName lines take Coords=X,Y,Z"); !st) return st;
    auto names = detail::expand_hostlist(f.front().value, f.front().key, file_, line_);
    if (!names) return names.status();
    if (names->size() != 1)
      return invalid(
          fmt::format("{}: NodeName={} names {} nodes; Coords= places one node", at(), f.front().value, names->size()));
    const Field* c = get(f, "coords");
    if (!c) return invalid(fmt::format("{}: NodeName={} has no Coords=X,Y,Z", at(), f.front().value));
    auto v = detail::parse_number_list(c->value, c->key, file_, line_);
    if (!v) return v.status();
    if (v->size() != 3)
      return invalid(fmt::format("{}: {}={}: expected three coordinates X,Y,Z", at(), c->key, c->value));
    topo_.torus.push_back(
        {names->front(), {static_cast<int>((*v)[0]), static_cast<int>((*v)[1]), static_cast<int>((*v)[2])}});
    torus_lines_.push_back(line_);
    return {};
  }

  Status torus_nodes_line(const std::vector<Field>& f) {
    if (auto st = enter(Section::torus); !st) return st;
    if (auto st = only_keys(f, {}, "TorusNodes= stands alone on its line"); !st) return st;
    auto names = detail::expand_hostlist(f.front().value, f.front().key, file_, line_);
    if (!names) return names.status();
    auto nodes = detail::torus_from_names(*names, file_, line_);
    if (!nodes) return nodes.status();
    for (TorusNode& n : *nodes) {
      topo_.torus.push_back(std::move(n));
      torus_lines_.push_back(line_);
    }
    return {};
  }

  Status build(Topology& t) {
    t = std::move(topo_);
    if (section_ != Section::tree && (dragonfly_ || topo_optional_))
      return invalid(
          fmt::format("{}: TopologyParam=dragonfly/TopoOptional apply to switch topologies, and this "
                      "file has no SwitchName lines",
                      where(file_, param_line_)));
    switch (section_) {
      case Section::tree:
        t.kind = dragonfly_ ? Kind::dragonfly : Kind::tree;
        t.topo_optional = topo_optional_;
        return detail::build_switches(t, std::move(switches_), file_);
      case Section::block:
        t.kind = Kind::block;
        return detail::build_blocks(t, file_, sizes_line_);
      case Section::torus:
        t.kind = Kind::torus;
        return detail::build_torus(t, torus_lines_, file_);
      case Section::none:
        break;
    }
    t.kind = Kind::flat;
    return t.finalize(file_);
  }

  std::string file_;
  unsigned line_ = 0;
  Section section_ = Section::none;
  unsigned section_line_ = 0;
  Topology topo_;
  std::vector<detail::SwitchDef> switches_;
  std::vector<unsigned> torus_lines_;
  unsigned sizes_line_ = 0, param_line_ = 0;
  bool dragonfly_ = false, topo_optional_ = false;
};

}  // namespace

Result<TopologySet> parse_topology_conf(const std::string& text, const std::string& file) {
  ConfParser p(file);
  std::istringstream in(text);
  std::string raw;
  unsigned lineno = 0;
  while (std::getline(in, raw)) {
    ++lineno;
    if (!raw.empty() && raw.back() == '\r') raw.pop_back();
    if (auto st = p.line(raw, lineno); !st) return st.error();
  }
  return p.finish();
}

}  // namespace corral::topology
