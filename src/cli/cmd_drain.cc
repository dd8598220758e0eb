// corral drain HOSTLIST --reason TEXT / corral resume HOSTLIST: take nodes out of (and
// back into) scheduling. The controller allows this to root and the cluster's owner.
#include <memory>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/client/client.h"
#include "cli/commands.h"
#include "util/hostlist.h"

namespace corral::cli {

namespace {

struct DrainState {
  std::string hostlist, reason;
  bool verbose = false;
};

void set_state(const Globals& g, const DrainState& st, pb::NodeStateRequest::Action action, std::string_view cmd) {
  if (auto hl = Hostlist::parse(st.hostlist); !hl)
    usage_error(cmd, fmt::format("invalid hostlist '{}': {}", st.hostlist, hl.message()));
  if (action == pb::NodeStateRequest::DRAIN && st.reason.empty())
    usage_error(cmd, "--reason is required (say why, so others know)");
  pb::NodeStateRequest req;
  req.set_hostlist(st.hostlist);
  req.set_action(action);
  req.set_reason(st.reason);
  Client client(resolve_uri(g.uri));
  auto reply = expect_ok(cmd, client.set_node_state(req));
  if (st.verbose) {
    std::string nodes;
    for (const auto& n : reply.nodes()) nodes += (nodes.empty() ? "" : ",") + n;
    fmt::print(stderr, "corral {}: {}\n", cmd, nodes.empty() ? "no node changed" : nodes);
  }
}

}  // namespace

void add_drain_commands(CLI::App& app, Globals& g) {
  auto drain = std::make_shared<DrainState>();
  CLI::App* sd = app.add_subcommand("drain", "Stop scheduling jobs on nodes; running jobs finish");
  sd->add_option("HOSTLIST", drain->hostlist, "Nodes, e.g. node[0-3]")->required();
  sd->add_option("-r,--reason", drain->reason, "Why (required)")->type_name("TEXT");
  sd->add_flag("-v,--verbose", drain->verbose, "Print the nodes that changed");
  sd->callback([&g, drain] { set_state(g, *drain, pb::NodeStateRequest::DRAIN, "drain"); });

  auto resume = std::make_shared<DrainState>();
  CLI::App* sr = app.add_subcommand("resume", "Make drained (or down) nodes schedulable again");
  sr->add_option("HOSTLIST", resume->hostlist, "Nodes, e.g. node[0-3]")->required();
  sr->add_flag("-v,--verbose", resume->verbose, "Print the nodes that changed");
  sr->callback([&g, resume] { set_state(g, *resume, pb::NodeStateRequest::RESUME, "resume"); });
}

}  // namespace corral::cli
