// corral nodes [-s STATES] [HOSTLIST]: the node inventory (sinfo -N).
#include <algorithm>
#include <memory>
#include <set>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/client/client.h"
#include "cli/commands.h"
#include "cli/hook_query.h"
#include "cli/job_format.h"
#include "cli/table.h"
#include "cli/values.h"
#include "util/hostlist.h"
#include "util/natural_sort.h"
#include "util/units.h"

namespace corral::cli {

namespace {

struct NodesState {
  std::string hostlist;
  std::vector<std::string> states;
  bool json = false;
  bool noheader = false;
  bool capabilities = false;
};

// Node states are matched here so a selection can use a group: "up" is every node with
// an agent, "drain" both drained and draining; "down+drained" matches down and drained.
std::set<std::string> parse_states(const std::vector<std::string>& items) {
  static const std::set<std::string> known{"idle", "mixed", "allocated", "down", "drained", "draining", "drain", "up"};
  std::set<std::string> out;
  for (const auto& item : items) {
    for (auto s : split_list(item)) {
      for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (s == "alloc") s = "allocated";
      if (!known.count(s))
        usage_error("nodes", fmt::format("-s/--states: unknown node state '{}' (use idle, mixed, "
                                         "allocated, down, drained, draining, drain or up)",
                                         s));
      out.insert(s);
    }
  }
  return out;
}

bool state_matches(const std::string& state, const std::set<std::string>& wanted) {
  if (wanted.empty()) return true;
  const auto parts = split_list(state, '+');
  for (const auto& w : wanted) {
    if (w == "up" && state.rfind("down", 0) != 0) return true;
    for (const auto& p : parts)
      if (p == w || (w == "drain" && (p == "drained" || p == "draining"))) return true;
  }
  return false;
}

pb::ListNodesRequest make_request(const NodesState& st) {
  pb::ListNodesRequest req;
  if (!st.hostlist.empty()) {
    if (auto hl = Hostlist::parse(st.hostlist); !hl)
      usage_error("nodes", fmt::format("invalid hostlist '{}': {}", st.hostlist, hl.message()));
    req.set_hostlist(st.hostlist);
  }
  return req;
}

std::string used_of(uint64_t used, uint64_t total) { return fmt::format("{}/{}", used, total); }

void print_table(const pb::ListNodesReply& reply, bool header) {
  using A = Table::Align;
  Table t({{"NODE"}, {"STATE"}, {"CPUS", A::right}, {"GPUS", A::right}, {"MEMORY", A::right}, {"JOBS"}, {"REASON"}});
  constexpr uint64_t kMiB = 1024 * 1024;
  for (const auto& n : reply.nodes()) {
    std::string jobs;
    for (auto id : n.jobs()) jobs += (jobs.empty() ? "" : ",") + std::to_string(id);
    t.add_row({n.name(), n.state(), used_of(n.cores_used(), n.cores()), used_of(n.gpus_used(), n.gpus()),
               fmt::format("{}/{}", format_size(n.memory_used_mb() * kMiB), format_size(n.memory_mb() * kMiB)), jobs,
               n.reason()});
  }
  fmt::print("{}", t.render(header));
}

// What the hooks report of each node (hook query "capabilities", asked of every hook):
// its class, a one-line summary, and why it differs from its class.
void print_capabilities(const Globals& g, const pb::ListNodesReply& reply, const NodesState& st) {
  auto doc = expect_ok("nodes", hook_query_json(resolve_uri(g.uri), "*", "capabilities", nlohmann::json::object()));
  if (st.json) {
    auto out = nlohmann::json::object();
    for (const auto& n : reply.nodes()) {
      auto& node = out[n.name()] = nlohmann::json::object();
      for (const auto& [hook, answer] : doc.items())
        if (answer.contains("nodes") && answer["nodes"].contains(n.name())) node[hook] = answer["nodes"][n.name()];
    }
    fmt::print("{}\n", out.dump(2));
    return;
  }
  Table t({{"NODE"}, {"HOOK"}, {"CLASS"}, {"CAPABILITIES"}, {"DIFFERS"}});
  for (const auto& n : reply.nodes())
    for (const auto& [hook, answer] : doc.items()) {
      if (!answer.contains("nodes") || !answer["nodes"].contains(n.name())) continue;
      const auto& a = answer["nodes"][n.name()];
      t.add_row({n.name(), hook, a.value("class", ""), a.value("summary", ""), a.value("differs", "")});
    }
  fmt::print("{}", t.render(!st.noheader));
}

void run_nodes(const Globals& g, const NodesState& st) {
  const std::set<std::string> wanted = parse_states(st.states);
  pb::ListNodesRequest req = make_request(st);
  Client client(resolve_uri(g.uri));
  auto all = expect_ok("nodes", client.list_nodes(req));
  if (!all.warning().empty()) fmt::print(stderr, "corral nodes: warning: {}\n", all.warning());
  pb::ListNodesReply reply;
  for (const auto& n : all.nodes())
    if (state_matches(n.state(), wanted)) *reply.add_nodes() = n;
  std::sort(reply.mutable_nodes()->begin(), reply.mutable_nodes()->end(),
            [](const pb::NodeInfo& a, const pb::NodeInfo& b) { return natural_less(a.name(), b.name()); });
  if (st.capabilities) return print_capabilities(g, reply, st);
  if (st.json) {
    auto arr = nlohmann::json::array();
    for (const auto& n : reply.nodes()) arr.push_back(node_to_json(n));
    fmt::print("{}\n", arr.dump(2));
    return;
  }
  print_table(reply, !st.noheader);
}

}  // namespace

void add_nodes_command(CLI::App& app, Globals& g) {
  auto st = std::make_shared<NodesState>();
  CLI::App* sub =
      app.add_subcommand("nodes", "List nodes: state, use, jobs, and why a node is drained or down (sinfo -N)");
  sub->add_option("HOSTLIST", st->hostlist, "Only these nodes, e.g. node[0-7]");
  sub->add_option("-s,--states", st->states,
                  "Only nodes in these states: idle, mixed, allocated, down, drained, "
                  "draining, drain (both), up (not down)")
      ->type_name("STATES");
  sub->add_flag("--json", st->json, "Print a JSON array of node objects");
  sub->add_flag("--noheader", st->noheader, "Leave out the header line");
  sub->add_flag("--capabilities", st->capabilities,
                "Show what the hooks report of each node (Infiniband devices by model, vendor and fabric): its "
                "class of identical nodes, and why a node differs from its class (a port down, a card missing)");
  sub->callback([&g, st] { run_nodes(g, *st); });
}

}  // namespace corral::cli
