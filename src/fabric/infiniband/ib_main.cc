// corral-infiniband: configures a node's Infiniband interfaces for a corral job and undoes
// it. The node agent runs it as root for the infiniband hook's prolog and epilog, with
// CORRAL_IB_JOB (what the controller chose and allocated), CORRAL_IB_FABRICS,
// CORRAL_IB_SYSFS, CORRAL_IB_STATE and CORRAL_NODENAME set.
#include <cstdio>
#include <cstdlib>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "fabric/infiniband/ib_node_ops.h"
#include "fabric/infiniband/pci_names.h"

namespace ib = corral::fabric::infiniband;
using nlohmann::json;

namespace {

std::string env_or(const char* name, std::string fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

int fail(const std::string& message, int code = 1) {
  std::printf("error: %s\n", message.c_str());
  return code;
}

corral::Result<ib::Fabrics> fabrics_from_env() {
  std::vector<ib::FabricDef> defs;
  auto j = json::parse(env_or("CORRAL_IB_FABRICS", "[]"), nullptr, false);
  if (!j.is_array()) return corral::invalid("CORRAL_IB_FABRICS is not a JSON list");
  for (const auto& f : j)
    if (f.is_object()) defs.push_back({f.value("name", ""), f.value("subnet_prefix", "")});
  return ib::Fabrics::create(defs, env_or("CORRAL_IB_DEFAULT_FABRIC", ib::kDefaultFabric));
}

}  // namespace

int main(int argc, char** argv) {
  ib::NodePaths paths{env_or("CORRAL_IB_SYSFS", "/sys"), env_or("CORRAL_PCI_IDS", ib::kDefaultPciIds),
                      env_or("CORRAL_IB_STATE", ""), env_or("CORRAL_NODENAME", "")};
  CLI::App app{
      "corral-infiniband: set up and undo a corral job's Infiniband interfaces on this node.\n"
      "The node agent runs it (as root). Exit status: 0 done, 1 failed, 2 bad input."};
  app.require_subcommand(1);
  app.add_option("--sysfs", paths.sysfs_root, "sysfs root (default $CORRAL_IB_SYSFS, else /sys)");
  app.add_option("--state", paths.state_dir,
                 "where job documents are kept, in a directory per node (default $CORRAL_IB_STATE)");
  app.add_option("--node", paths.node, "this node's name (default $CORRAL_NODENAME)");
  auto* prolog = app.add_subcommand(
      "prolog",
      "Map the job's interfaces ($CORRAL_IB_JOB) to this node's devices, enable and name the virtual functions "
      "asked for, and write the job's document (what its tasks read at $CORRAL_IB_CONFIG). Prints it.");
  uint64_t jobid = 0;
  auto* epilog = app.add_subcommand("epilog", "Undo what the prolog did for a job (nothing recorded: nothing to do)");
  epilog->add_option("--job", jobid, "the job")->required();
  CLI11_PARSE(app, argc, argv);
  if (paths.state_dir.empty()) return fail("no state directory (--state or $CORRAL_IB_STATE)", 2);
  paths.sysfs_root = ib::sysfs_root_for(paths.sysfs_root, paths.node);
  paths.state_dir = ib::node_state_dir(paths.state_dir, paths.node);
  if (*epilog) {
    auto st = ib::node_epilog(paths, jobid);
    return st.ok() ? 0 : fail(st.message());
  }
  (void)prolog;
  auto fabrics = fabrics_from_env();
  if (!fabrics) return fail(fabrics.message(), 2);
  auto spec = json::parse(env_or("CORRAL_IB_JOB", ""), nullptr, false);
  auto job = ib::node_job_from_json(spec);
  if (!job) return fail(job.message(), 2);
  auto doc = ib::node_prolog(paths, *fabrics, *job);
  if (!doc) return fail(doc.message());
  std::printf("config: %s\n", doc->dump().c_str());
  return 0;
}
