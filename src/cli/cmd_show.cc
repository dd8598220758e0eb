// corral show job ID | show node NAME: scontrol-style Key=Value text, or JSON.
#include <memory>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/client/client.h"
#include "cli/commands.h"
#include "cli/job_format.h"
#include "cli/job_ids.h"
#include "job/eventlog.h"
#include "util/hostlist.h"
#include "util/units.h"

namespace corral::cli {

namespace {

struct ShowState {
  std::string target;
  bool json = false;
};

void show_job(const Globals& g, const ShowState& st) {
  const uint64_t id = parse_jobids_or_exit("show job", {st.target}).front();
  Client client(resolve_uri(g.uri));
  pb::GetJobRequest req;
  req.set_jobid(id);
  pb::JobInfo info = expect_ok("show job", client.get_job(req));
  if (st.json)
    fmt::print("{}\n", job_to_json(info).dump(2));
  else
    fmt::print("{}", show_job_text(info, job::now()));
}

std::string node_text(const pb::NodeInfo& n) {
  std::string parts, jobs;
  for (const auto& p : n.partitions()) parts += (parts.empty() ? "" : ",") + p;
  for (auto id : n.jobs()) jobs += (jobs.empty() ? "" : ",") + std::to_string(id);
  std::string out = fmt::format("NodeName={} State={}\n", n.name(), n.state());
  out += fmt::format("   CPUTot={} CPUAlloc={} GPUTot={} GPUAlloc={}\n", n.cores(), n.cores_used(), n.gpus(),
                     n.gpus_used());
  out += fmt::format("   RealMemory={} AllocMem={}\n", n.memory_mb(), n.memory_used_mb());
  out += fmt::format("   Partitions={} Jobs={} Agent={}\n", parts.empty() ? "(null)" : parts,
                     jobs.empty() ? "(null)" : jobs, n.agent());
  if (!n.reason().empty())
    out += fmt::format("   Reason={} [{}@{}]\n", n.reason(), n.reason_userid(), format_timestamp(n.reason_time()));
  return out;
}

void show_node(const Globals& g, const ShowState& st) {
  if (auto hl = Hostlist::parse(st.target); !hl)
    usage_error("show node", fmt::format("invalid hostlist '{}': {}", st.target, hl.message()));
  Client client(resolve_uri(g.uri));
  pb::ListNodesRequest req;
  req.set_hostlist(st.target);
  auto reply = expect_ok("show node", client.list_nodes(req));
  if (reply.nodes_size() == 0) fail("show node", fmt::format("no node matches '{}'", st.target));
  if (st.json) {
    auto arr = nlohmann::json::array();
    for (const auto& n : reply.nodes()) arr.push_back(node_to_json(n));
    fmt::print("{}\n", arr.dump(2));
    return;
  }
  for (const auto& n : reply.nodes()) fmt::print("{}", node_text(n));
}

}  // namespace

void add_show_command(CLI::App& app, Globals& g) {
  CLI::App* show = app.add_subcommand("show", "Show one job or node in detail (scontrol show)");
  show->require_subcommand(1);

  auto job = std::make_shared<ShowState>();
  CLI::App* sj = show->add_subcommand("job", "Show a job: state, reason, nodes, times, exit code");
  sj->add_option("ID", job->target, "The job id")->required();
  sj->add_flag("--json", job->json, "Print a JSON object (with jobspec and R)");
  sj->callback([&g, job] { show_job(g, *job); });

  auto node = std::make_shared<ShowState>();
  CLI::App* sn = show->add_subcommand("node", "Show nodes: resources, use, jobs, drain reason");
  sn->add_option("HOSTLIST", node->target, "Node names, e.g. node[0-3]")->required();
  sn->add_flag("--json", node->json, "Print a JSON array");
  sn->callback([&g, node] { show_node(g, *node); });
}

}  // namespace corral::cli
