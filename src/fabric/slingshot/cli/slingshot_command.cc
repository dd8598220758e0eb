#include "fabric/slingshot/cli/slingshot_command.h"

#include <chrono>
#include <memory>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/client/client.h"
#include "cli/commands.h"
#include "cli/hook_query.h"
#include "cli/progress.h"
#include "cli/table.h"
#include "util/hostlist.h"
#include "util/idset.h"

namespace corral::fabric::slingshot {
namespace {

using cli::expect_ok;
using cli::fail;
using cli::fail_rpc;
using cli::Globals;
using cli::ProgressLine;
using cli::resolve_uri;
using cli::Table;
using cli::usage_error;
using nlohmann::json;

// One HookQuery to the cray-slingshot hook; the reply's JSON document.
Result<json> slingshot_query(const std::string& uri, const std::string& what, const json& args) {
  return cli::hook_query_json(uri, "cray-slingshot", what, args);
}

std::string vnis_text(const json& vnis) {
  IdSet set;
  for (const auto& v : vnis) set.insert(v.get<uint32_t>());
  return set.encode();
}

std::string nodes_text(const json& nodes) {
  Hostlist hl;
  for (const auto& n : nodes) hl.append(n.get<std::string>());
  return hl.encode();
}

void print_pool(const json& p) {
  const auto& reserved = p["reserved"];
  const auto& quarantined = p["quarantined"];
  size_t nres = 0, nquar = 0;
  for (const auto& r : reserved) nres += r["vnis"].size();
  for (const auto& q : quarantined) nquar += q["vnis"].size();
  fmt::print("VNI pool {}: {} VNIs, {} free, {} reserved, {} waiting for cleanup\n", p["pool"].get<std::string>(),
             p["size"].get<size_t>(), p["free"].get<size_t>(), nres, nquar);
  std::string free_vnis = p.value("free_vnis", std::string());
  fmt::print("free: {}\n", free_vnis.empty() ? "(none)" : free_vnis);
  if (!reserved.empty()) {
    Table t({{"JOBID", Table::Align::right}, {"RESERVED VNIS"}});
    for (const auto& r : reserved) t.add_row({std::to_string(r["jobid"].get<uint64_t>()), vnis_text(r["vnis"])});
    fmt::print("\n{}", t.render());
  }
  if (!quarantined.empty()) {
    Table t({{"JOBID", Table::Align::right}, {"QUARANTINED VNIS"}, {"WAITING FOR NODES"}});
    for (const auto& q : quarantined)
      t.add_row({std::to_string(q["jobid"].get<uint64_t>()), vnis_text(q["vnis"]), nodes_text(q["nodes"])});
    fmt::print("\n{}", t.render());
  }
}

struct CleanOptions {
  std::string hostlist;
  bool no_wait = false;
  double timeout = 120;
};

// Nodes of `targets` that some quarantine still waits for.
std::set<std::string> still_pending(const json& pool, const std::set<std::string>& targets) {
  std::set<std::string> out;
  for (const auto& q : pool["quarantined"])
    for (const auto& n : q["nodes"])
      if (targets.count(n.get<std::string>())) out.insert(n.get<std::string>());
  return out;
}

void clean(const Globals& g, const CleanOptions& o) {
  auto hl = Hostlist::parse(o.hostlist);
  if (!hl || hl->empty())
    usage_error("slingshot clean", fmt::format("invalid hostlist '{}'{}", o.hostlist, hl ? "" : ": " + hl.message()));
  const std::string uri = resolve_uri(g.uri);
  json args{{"nodes", hl->uniq().hosts()}};
  auto started = slingshot_query(uri, "clean", args);
  if (!started) {
    if (started.error().code == Errc::permission_denied)
      fail("slingshot clean", started.message() + " (cleaning destroys CXI services as root on the nodes)");
    fail_rpc("slingshot clean", started.error());
  }
  if (o.no_wait) {
    fmt::print(stderr, "corral slingshot clean: started on {}\n", hl->uniq().encode());
    return;
  }
  const std::set<std::string> targets(hl->hosts().begin(), hl->hosts().end());
  ProgressLine progress;
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    auto pool = expect_ok("slingshot clean", slingshot_query(uri, "pool", json::object()));
    auto pending = still_pending(pool, targets);
    if (pending.empty()) {
      progress.clear();
      fmt::print(stderr, "corral slingshot clean: {}: no VNI waits for cleanup there\n", hl->uniq().encode());
      return;
    }
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    Hostlist left(std::vector<std::string>(pending.begin(), pending.end()));
    if (waited >= o.timeout) {
      progress.clear();
      fail("slingshot clean", fmt::format("{} still hold quarantined VNIs after {:.0f}s: their CXI services could "
                                          "not be destroyed (see 'corral-slingshot list' on the node)",
                                          left.encode(), waited));
    }
    progress.show(fmt::format("corral slingshot clean: waiting for {} ({:.0f}s)", left.encode(), waited));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

}  // namespace

void add_slingshot_command(CLI::App& app, Globals& g) {
  CLI::App* ss = app.add_subcommand("slingshot", "Slingshot VNIs: show the pool, clean nodes' leftover CXI services");
  ss->require_subcommand(1);

  auto as_json = std::make_shared<bool>(false);
  CLI::App* pool =
      ss->add_subcommand("pool", "Show the VNI pool: free, reserved by jobs, quarantined until nodes clean up");
  pool->add_flag("--json", *as_json, "Print the controller's JSON document");
  pool->callback([&g, as_json] {
    auto p = expect_ok("slingshot pool", slingshot_query(resolve_uri(g.uri), "pool", json::object()));
    if (*as_json)
      fmt::print("{}\n", p.dump());
    else
      print_pool(p);
  });

  auto co = std::make_shared<CleanOptions>();
  CLI::App* cl = ss->add_subcommand("clean",
                                    "Destroy every job CXI service whose VNIs are in the pool on NODES (root or the "
                                    "cluster's owner), then wait until their quarantined VNIs are free");
  cl->add_option("NODES", co->hostlist, "Nodes, e.g. node[0-3]")->required();
  cl->add_flag("--no-wait", co->no_wait, "Return once the cleanup has started");
  cl->add_option("--timeout", co->timeout, "Seconds to wait (default 120)")->check(CLI::PositiveNumber);
  cl->callback([&g, co] { clean(g, *co); });
}

}  // namespace corral::fabric::slingshot
