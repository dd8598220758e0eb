// corral topo: check a topology file, show the controller's topology with node use per
// switch or block, and generate topology.conf text (synthetic or from ibnetdiscover).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/client/client.h"
#include "cli/commands.h"
#include "cli/table.h"
#include "topology/topology.h"
#include "topology/topology_generate.h"

namespace corral::cli {

namespace {

namespace topo = corral::topology;
using nlohmann::json;

// ------------------------------------------------------------------ check

// Separate networks: switches joined through child links, whatever their parents (the
// guide's s[4-7] all over s[0-3] is one network with four top switches).
unsigned count_networks(const topo::Topology& t) {
  std::vector<uint32_t> root(t.switches.size());
  for (uint32_t i = 0; i < root.size(); ++i) root[i] = i;
  auto find = [&](uint32_t x) {
    while (root[x] != x) x = root[x] = root[root[x]];
    return x;
  };
  unsigned networks = static_cast<unsigned>(t.switches.size());
  for (uint32_t i = 0; i < t.switches.size(); ++i)
    for (uint32_t c : t.switches[i].children)
      if (uint32_t a = find(i), b = find(c); a != b) root[a] = b, --networks;
  return networks;
}

json tree_summary(const topo::Topology& t) {
  unsigned levels = 0, leaves = 0, tops = 0;
  for (const topo::Switch& s : t.switches) {
    levels = std::max(levels, s.level + 1);
    leaves += s.children.empty() ? 1 : 0;
    tops += s.parent ? 0 : 1;
  }
  return {{"switches", t.switches.size()},   {"levels", levels},
          {"leaf_switches", leaves},         {"top_switches", tops},
          {"networks", count_networks(t)},   {"nodes", t.node_leaf.size()},
          {"topo_optional", t.topo_optional}};
}

json summary(const topo::Topology& t, bool is_default) {
  json j = {{"name", t.name}, {"kind", topo::kind_name(t.kind)}, {"default", is_default}};
  switch (t.kind) {
    case topo::Kind::tree:
    case topo::Kind::dragonfly:
      j.update(tree_summary(t));
      break;
    case topo::Kind::block:
      j["blocks"] = t.blocks.size();
      j["base_block_size"] = t.blocks.empty() ? 0 : t.blocks.front().nodes.size();
      j["block_sizes"] = t.block_sizes;
      j["nodes"] = t.node_leaf.size();
      break;
    case topo::Kind::torus: {
      std::array<int, 3> extent{};
      for (const topo::TorusNode& n : t.torus)
        for (size_t i = 0; i < 3; ++i) extent[i] = std::max(extent[i], n.coord[i] + 1);
      j["nodes"] = t.torus.size();
      j["extent"] = extent;
      break;
    }
    case topo::Kind::flat:
      j["nodes"] = t.flat_nodes.size();
      break;
  }
  return j;
}

std::string summary_text(const json& j) {
  std::string out = fmt::format("{}{}: {}", j["name"].get<std::string>(),
                                j["default"].get<bool>() ? " (cluster default)" : "", j["kind"].get<std::string>());
  const std::string kind = j["kind"];
  if (kind == "tree" || kind == "dragonfly") {
    const unsigned tops = j["top_switches"];
    const unsigned levels = j["levels"];
    out += fmt::format(", {} switches in {} level{}, {} leaf switches, {} top switch{}, {} nodes",
                       j["switches"].get<size_t>(), levels, levels == 1 ? "" : "s", j["leaf_switches"].get<unsigned>(),
                       tops, tops == 1 ? "" : "es", j["nodes"].get<size_t>());
    if (j["topo_optional"].get<bool>()) out += ", TopoOptional";
    const unsigned networks = j["networks"];
    if (networks > 1 && !j["topo_optional"].get<bool>())
      out += fmt::format(
          "\n    note: {} separate networks (no common parent switch): no job "
          "will span them (TopologyParam=TopoOptional allows it)",
          networks);
  } else if (kind == "block") {
    out += fmt::format(", {} base blocks of {} nodes, BlockSizes={}, {} nodes", j["blocks"].get<size_t>(),
                       j["base_block_size"].get<size_t>(),
                       fmt::join(j["block_sizes"].get<std::vector<unsigned>>(), ","), j["nodes"].get<size_t>());
  } else if (kind == "torus") {
    const auto e = j["extent"].get<std::array<int, 3>>();
    out += fmt::format(", {} nodes, extent {}x{}x{}", j["nodes"].get<size_t>(), e[0], e[1], e[2]);
  }
  return out;
}

struct CheckState {
  std::string file;
  bool json = false;
};

void run_check(const CheckState& st) {
  auto set = topo::load_topology(st.file);
  if (!set) fail("topo check", set.message(), kExitUsage);
  json out = {{"file", st.file}, {"cluster_default", set->cluster_default}, {"topologies", json::array()}};
  for (const topo::Topology& t : set->topologies)
    out["topologies"].push_back(summary(t, t.name == set->cluster_default));
  if (st.json) {
    fmt::print("{}\n", out.dump(2));
    return;
  }
  fmt::print("{}: OK, {} topolog{}\n", st.file, set->topologies.size(), set->topologies.size() == 1 ? "y" : "ies");
  for (const json& j : out["topologies"]) fmt::print("  {}\n", summary_text(j));
}

// ------------------------------------------------------------------ show

std::string count_cell(const json& unit, const char* key) {
  auto it = unit.find(key);
  return it == unit.end() || it->is_null() ? "-" : it->dump();
}

void print_topology(const json& t, bool first) {
  const std::string name = t.value("name", "?"), kind = t.value("kind", "?");
  fmt::print("{}TOPOLOGY {} ({}{})\n", first ? "" : "\n", name, kind,
             t.value("default", false) ? ", cluster default" : "");
  const json units = t.value("units", json::array());
  if (units.empty()) {
    fmt::print("  (no switches or blocks: nodes are placed as one line)\n");
    return;
  }
  using A = Table::Align;
  Table table({{"NAME"},
               {"TYPE"},
               {"LEVEL", A::right},
               {"NODES"},
               {"TOTAL", A::right},
               {"IDLE", A::right},
               {"MIXED", A::right},
               {"ALLOC", A::right},
               {"UNAVAIL", A::right}});
  for (const json& u : units)
    table.add_row({u.value("name", ""), u.value("type", ""), count_cell(u, "level"), u.value("nodes", ""),
                   count_cell(u, "total"), count_cell(u, "idle"), count_cell(u, "mixed"), count_cell(u, "allocated"),
                   count_cell(u, "unavailable")});
  fmt::print("{}", table.render());
}

struct TopoShowState {
  std::string name;
  bool json = false;
};

void run_show(const Globals& g, const TopoShowState& st) {
  Client client(resolve_uri(g.uri));
  auto reply = expect_ok("topo show", client.get_topology(st.name));
  if (st.json) {
    fmt::print("{}{}", reply.json(), reply.json().ends_with('\n') ? "" : "\n");
    return;
  }
  json doc = json::parse(reply.json(), nullptr, false);
  if (doc.is_discarded() || !doc.contains("topologies"))
    fail("topo show", "the controller sent a topology description that is not valid JSON");
  bool first = true;
  for (const json& t : doc["topologies"]) {
    print_topology(t, first);
    first = false;
  }
  if (first) fmt::print("no topology{}\n", st.name.empty() ? "" : " named " + st.name);
}

// ------------------------------------------------------------------ generate

void write_output(const std::string& cmd, const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    fmt::print("{}", text);
    return;
  }
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) fail(cmd, fmt::format("cannot write {}: {}", path, std::strerror(errno)));
}

void emit(const std::string& cmd, const Result<topo::Topology>& t, const std::string& output) {
  if (!t) fail(cmd, t.message(), kExitUsage);
  write_output(cmd, output, topo::to_topology_conf(*t));
}

std::string read_input(const std::string& cmd, const std::string& path) {
  std::ostringstream text;
  if (path == "-") {
    text << std::cin.rdbuf();
    return text.str();
  }
  std::ifstream in(path);
  if (!in) fail(cmd, fmt::format("cannot read {}: {}", path, std::strerror(errno)), kExitUsage);
  text << in.rdbuf();
  return text.str();
}

struct GenerateState {
  topo::FatTreeSpec fat;
  topo::DragonflySpec dragonfly;
  topo::BlockSpec blocks;
  std::string input;
  std::string output;
};

void add_output_options(CLI::App* sub, GenerateState& st, std::string* prefix) {
  if (prefix) sub->add_option("--prefix", *prefix, "Node name prefix; names are PREFIX00000...")->capture_default_str();
  sub->add_option("-o,--output", st.output, "Write to FILE instead of standard output")->type_name("FILE");
}

void add_generate(CLI::App* topo_cmd) {
  auto st = std::make_shared<GenerateState>();
  CLI::App* gen =
      topo_cmd->add_subcommand("generate", "Print topology.conf text for a synthetic network or from ibnetdiscover");
  gen->require_subcommand(1);
  gen->footer(
      "Examples:\n"
      "  corral topo generate fat-tree --nodes 100000 --leaf-nodes 32 --radix 32 --levels 3\n"
      "  corral topo generate dragonfly --groups 58 --switches-per-group 12 "
      "--nodes-per-switch 16\n"
      "  corral topo generate blocks --nodes 65536 --base-block-nodes 16 "
      "--block-sizes 16,64,256\n"
      "  ibnetdiscover | corral topo generate ibnetdiscover - -o /etc/corral/topology.conf");

  CLI::App* fat = gen->add_subcommand("fat-tree", "A fat tree under one top switch");
  fat->add_option("--nodes", st->fat.nodes, "Number of compute nodes")->required();
  fat->add_option("--leaf-nodes", st->fat.leaf_nodes, "Nodes per leaf switch")->capture_default_str();
  fat->add_option("--radix", st->fat.radix,
                  "Children per inner switch below the top one (the top switch joins the "
                  "whole level under it)")
      ->capture_default_str();
  fat->add_option("--levels", st->fat.levels, "Switch levels, the leaf switches included")->capture_default_str();
  add_output_options(fat, *st, &st->fat.prefix);
  fat->callback([st] { emit("topo generate", topo::generate_fat_tree(st->fat), st->output); });

  CLI::App* df =
      gen->add_subcommand("dragonfly", "Groups of leaf switches joined all-to-all (TopologyParam=dragonfly)");
  df->add_option("--groups", st->dragonfly.groups, "Number of groups")->required();
  df->add_option("--switches-per-group", st->dragonfly.switches_per_group, "Leaf switches per group")->required();
  df->add_option("--nodes-per-switch", st->dragonfly.nodes_per_switch, "Nodes per leaf switch")->required();
  add_output_options(df, *st, &st->dragonfly.prefix);
  df->callback([st] { emit("topo generate", topo::generate_dragonfly(st->dragonfly), st->output); });

  CLI::App* bl = gen->add_subcommand("blocks", "Base blocks of equal size with BlockSizes");
  bl->add_option("--nodes", st->blocks.nodes, "Number of compute nodes")->required();
  bl->add_option("--base-block-nodes", st->blocks.base_block_nodes, "Nodes per base block")->capture_default_str();
  bl->add_option("--block-sizes", st->blocks.block_sizes,
                 "Block sizes in nodes, ascending, the first the base block size "
                 "(default: base size times 1, 2, 4, ... up to all nodes)")
      ->delimiter(',')
      ->type_name("N,N,...");
  add_output_options(bl, *st, &st->blocks.prefix);
  bl->callback([st] { emit("topo generate", topo::generate_blocks(st->blocks), st->output); });

  CLI::App* ib =
      gen->add_subcommand("ibnetdiscover",
                          "A switch tree from ibnetdiscover output: switches with hosts become leaf switches, "
                          "the switches above them their parents");
  ib->add_option("FILE", st->input, "ibnetdiscover output, or - for standard input")->required();
  add_output_options(ib, *st, nullptr);
  ib->callback([st] {
    const std::string name = st->input == "-" ? "<stdin>" : st->input;
    emit("topo generate", topo::from_ibnetdiscover(read_input("topo generate", st->input), name), st->output);
  });
}

}  // namespace

void add_topo_command(CLI::App& app, Globals& g) {
  CLI::App* topo_cmd =
      app.add_subcommand("topo", "Network topology: check a topology file, show switch/block use, generate files");
  topo_cmd->require_subcommand(1);
  topo_cmd->footer("See docs/topology.md for the file syntax and the placement policies.");

  auto check = std::make_shared<CheckState>();
  CLI::App* c = topo_cmd->add_subcommand("check", "Validate topology.conf or topology.yaml without starting anything");
  c->add_option("FILE", check->file, "The file (.yaml/.yml: topology.yaml syntax)")->required();
  c->add_flag("--json", check->json, "Print the summary as JSON");
  c->footer(
      "Prints each topology's kind and size; exits 2 and prints FILE:LINE: problem on an "
      "invalid file.\nExample:\n  corral topo check /etc/corral/topology.conf");
  c->callback([check] { run_check(*check); });

  auto show = std::make_shared<TopoShowState>();
  CLI::App* s = topo_cmd->add_subcommand(
      "show", "The controller's topologies with idle/mixed/allocated nodes per switch or block");
  s->add_option("NAME", show->name, "Only this topology (default: all)");
  s->add_flag("--json", show->json, "Print the controller's JSON as is");
  s->footer("Examples:\n  corral topo show\n  corral topo show default --json");
  s->callback([&g, show] { run_show(g, *show); });

  add_generate(topo_cmd);
}

}  // namespace corral::cli
