// corral sim: replays an SWF workload trace through the real scheduler in virtual time
// (src/sim) and reports utilization, waits, slowdowns and leaf switch use.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "sim/cluster.h"
#include "sim/cluster_config.h"
#include "sim/report.h"
#include "sim/simulator.h"
#include "sim/swf.h"

namespace corral::cli {
namespace {

struct SimState {
  std::string trace, config, topology, topology_name, nodes, jobs_out;
  unsigned cores_per_node = 1, gpus_per_node = 0;
  size_t limit = 0;
  bool json = false, per_job = false;
  // Flags given on the command line override the config file's keys.
  CLI::Option *cores_opt = nullptr, *gpus_opt = nullptr;
};

[[noreturn]] void input_error(const std::string& message) { fail("sim", message, kExitUsage); }

sim::ClusterConfig cluster_config(const SimState& st) {
  sim::ClusterConfig c;
  if (!st.config.empty()) {
    auto loaded = sim::load_cluster_config(st.config);
    if (!loaded) input_error(loaded.message());
    c = std::move(*loaded);
  }
  if (!st.nodes.empty()) c.nodes = st.nodes;
  if (st.cores_opt->count()) c.cores_per_node = st.cores_per_node;
  if (st.gpus_opt->count()) c.gpus_per_node = st.gpus_per_node;
  if (!st.topology.empty()) c.topology = st.topology;
  if (!st.topology_name.empty()) c.topology_name = st.topology_name;
  if (st.config.empty() && c.nodes.empty() && c.topology.empty())
    usage_error("sim", "no cluster: give --config FILE, --nodes HOSTLIST or --topology FILE");
  return c;
}

void write_jobs(const std::string& path, const sim::SimResult& result) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) input_error(fmt::format("--jobs-out: cannot write '{}'", path));
  out << sim::jobs_json(result).dump() << '\n';
  if (!out.flush()) input_error(fmt::format("--jobs-out: error writing '{}'", path));
}

void run_sim(const SimState& st) {
  auto t0 = std::chrono::steady_clock::now();
  auto cluster = sim::resolve_cluster(cluster_config(st));
  if (!cluster) input_error(cluster.message());
  auto trace = sim::load_swf(st.trace, st.limit);
  if (!trace) input_error(trace.message());
  sim::SimResult result = sim::simulate(*cluster, *trace);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  sim::Summary summary = sim::summarize(result, trace->skipped, wall);
  if (cluster->nodes_outside_topology)
    fmt::print(stderr, "corral sim: warning: {} nodes are not in the topology and stay unused\n",
               cluster->nodes_outside_topology);
  if (!st.jobs_out.empty()) write_jobs(st.jobs_out, result);
  if (st.json) {
    nlohmann::json doc = {{"trace", st.trace}, {"summary", sim::summary_json(summary, result)}};
    if (st.per_job) doc["jobs"] = sim::jobs_json(result);
    fmt::print("{}\n", doc.dump(2));
  } else {
    fmt::print("{}", sim::summary_text(summary, result));
  }
}

}  // namespace

void add_sim_command(CLI::App& app, Globals& g) {
  (void)g;
  auto st = std::make_shared<SimState>();
  CLI::App* sub = app.add_subcommand("sim", "Replay a workload trace (SWF) through the scheduler in virtual time");
  sub->footer(
      "The cluster comes from --config FILE (TOML: nodes, cores_per_node, gpus_per_node,\n"
      "topology, topology_name) and/or the flags of the same names, which win. Each trace\n"
      "processor is one core; a job runs for its trace run time and asks for its requested\n"
      "time (else its run time) as the time limit. Without --json, prints a summary; --json\n"
      "prints the summary as JSON, with every job's outcome only with --per-job (or in the\n"
      "file given to --jobs-out). See docs/simulator.md.");
  sub->add_option("--trace", st->trace, "Workload in the Standard Workload Format")->required();
  sub->add_option("--config", st->config, "Cluster description (TOML)");
  sub->add_option("--topology", st->topology, "topology.conf / topology.yaml (default: flat)");
  sub->add_option("--topology-name", st->topology_name, "Which topology of a topology.yaml");
  sub->add_option("--nodes", st->nodes, "Node names (hostlist), e.g. node[0-255]");
  st->cores_opt =
      sub->add_option("--cores-per-node", st->cores_per_node, "Cores per node (1)")->check(CLI::PositiveNumber);
  st->gpus_opt =
      sub->add_option("--gpus-per-node", st->gpus_per_node, "GPUs per node (0)")->check(CLI::NonNegativeNumber);
  sub->add_option("--limit", st->limit, "Simulate only the first N jobs of the trace");
  sub->add_flag("--json", st->json, "Print the summary as JSON");
  sub->add_flag("--per-job", st->per_job, "With --json: add every job's outcome");
  sub->add_option("--jobs-out", st->jobs_out, "Write every job's outcome (JSON array) here");
  sub->callback([st] { run_sim(*st); });
}

}  // namespace corral::cli
