// corral-slingshot: creates and destroys a node's CXI services for a job. The node agent
// runs it as root for the cray-slingshot hook's prolog, epilog, housekeeping and clean;
// admins run list (and clean) by hand.
#include <unistd.h>

#include <cstdlib>
#include <string>

#include <CLI/CLI.hpp>

#include "fabric/slingshot/tool_commands.h"

namespace tool = corral::fabric::slingshot::tool;

namespace {

std::string env_or(const char* name, std::string fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

std::string short_hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "";
  std::string h(buf);
  return h.substr(0, h.find('.'));
}

}  // namespace

int main(int argc, char** argv) {
  tool::Target target{env_or("CORRAL_CXI", ""), env_or("CORRAL_NODENAME", short_hostname())};
  CLI::App app{
      "corral-slingshot: manage this node's Slingshot CXI services for corral jobs.\n"
      "The node agent runs it (as root) with CORRAL_JOBID, CORRAL_NODENAME, CORRAL_PERILOG and\n"
      "CORRAL_CXI set. Exit status: 0 done, 1 failed, 2 bad input (nothing changed), 3 services\n"
      "still busy when --retry-for ran out."};
  app.require_subcommand(1);
  app.add_option("--cxi", target.cxi, "NIC backend (default $CORRAL_CXI): sim:STATE_DIR[:CONFIG.toml], libcxi or none");
  app.add_option("--node", target.node, "This node's name (default $CORRAL_NODENAME, else the short hostname)");

  auto* prolog = app.add_subcommand(
      "prolog",
      "Create the job's CXI service on every NIC: members = $CORRAL_SLINGSHOT_UID, VNIs = "
      "$CORRAL_SLINGSHOT_VNIS (e.g. 1024,1025), traffic classes BEST_EFFORT and LOW_LATENCY, resources "
      "per the seed's table for $CORRAL_SLINGSHOT_NCORES cores, scaled back (with a warning) when the NIC "
      "is short. Idempotent; on failure the services it created are removed.");

  double epilog_retry = 10;
  auto* epilog = app.add_subcommand(
      "epilog",
      "Destroy every user service whose VNIs are exactly $CORRAL_SLINGSHOT_VNIS, retrying busy ones every "
      "0.5 s. Exit 3 with 'busy: NIC service ID (VNIs ...)' lines when some are still busy.");
  epilog->add_option("--retry-for", epilog_retry, "Seconds to keep retrying busy services")->capture_default_str();

  std::string clean_vnis;
  double clean_retry = 10;
  auto* clean = app.add_subcommand(
      "clean", "Destroy every user service all of whose VNIs are in --vnis (the VNI pool), like epilog.");
  clean->add_option("--vnis", clean_vnis, "The VNI pool as an id set, e.g. 1024-65535")->required();
  clean->add_option("--retry-for", clean_retry, "Seconds to keep retrying busy services")->capture_default_str();

  bool json = false;
  auto* list = app.add_subcommand("list", "Show the node's NICs, their free resources and services.");
  list->add_flag("--json", json, "Print JSON instead of a table");

  tool::UseArgs use_args;
  uint32_t use_uid = 0;
  auto* use = app.add_subcommand(
      "use",
      "Simulated NICs only: check, as the driver does when a process opens a service, that the user may "
      "use service --svc on --device with --vni and --tc. Prints 'ok' (exit 0) or the reason (exit 1).");
  use->add_option("--device", use_args.device, "The NIC, e.g. cxi0")->required();
  use->add_option("--svc", use_args.svc, "The service id")->required();
  use->add_option("--vni", use_args.vni, "The VNI")->required();
  use->add_option("--tc", use_args.tc, "BEST_EFFORT, LOW_LATENCY, BULK_DATA or DEDICATED_ACCESS")->required();
  auto* uid_opt = use->add_option("--uid", use_uid, "The user (default: the caller)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : tool::kExitBadInput;
  }
  if (*prolog) return tool::prolog(target);
  if (*epilog) return tool::epilog(target, epilog_retry);
  if (*clean) return tool::clean(target, clean_vnis, clean_retry);
  if (*list) return tool::list(target, json);
  if (uid_opt->count() > 0) use_args.uid = use_uid;
  return tool::use(target, use_args);
}
