#include "fabric/infiniband/cli/ib_command.h"

#include <algorithm>

#include <cstdlib>
#include <fstream>
#include <memory>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/client/client.h"
#include "cli/commands.h"
#include "cli/hook_query.h"
#include "cli/table.h"
#include "util/hostlist.h"
#include "util/natural_sort.h"

namespace corral::fabric::infiniband {
namespace {

using cli::expect_ok;
using cli::Globals;
using cli::resolve_uri;
using nlohmann::json;

std::string capability_text(const json& c) {
  std::string s = fmt::format("{} x {} ({}) on {}", c.value("count", 0u), c.value("name", ""), c.value("vendor", ""),
                              c.value("fabric", ""));
  return s;
}

void print_classes(const json& doc) {
  size_t i = 0;
  for (const auto& c : doc["classes"]) {
    std::vector<std::string> names;
    for (const auto& n : c["nodes"]) names.push_back(n.get<std::string>());
    std::sort(names.begin(), names.end(), natural_less);
    Hostlist hl;
    for (const auto& n : names) hl.append(n);
    fmt::print("class ib-{}: {} node{} {}\n", ++i, c["nodes"].size(), c["nodes"].size() == 1 ? "" : "s", hl.encode());
    for (const auto& cap : c["capabilities"]) fmt::print("  {}\n", capability_text(cap));
    for (const auto& [node, why] : c["degraded"].items())
      fmt::print("  degraded: {}: {}\n", node, why.get<std::string>());
  }
  if (i == 0) fmt::print("no node has reported Infiniband devices\n");
}

void print_pool(const json& p) {
  for (const auto& [name, key] : p["partitions"].items())
    fmt::print("partition {}: key {}\n", name, key.get<std::string>());
  if (p.contains("pkey_pool"))
    fmt::print("per-job keys {}: {} free, {} reserved, {} waiting for cleanup\n", p["pkey_pool"].get<std::string>(),
               p["free"].get<size_t>(), p["reserved"].size(), p["quarantined"].size());
  else
    fmt::print("per-job keys: none (no infiniband.pkey-pool)\n");
  for (const auto& r : p["reserved"]) fmt::print("  job {}: {}\n", r["jobid"].get<uint64_t>(), r["pkeys"].dump());
  for (const auto& q : p["quarantined"])
    fmt::print("  job {} (ended): {} until {} confirm\n", q["jobid"].get<uint64_t>(), q["pkeys"].dump(),
               q["nodes"].dump());
  fmt::print("virtual function GUIDs: {} held of {}\n", p["guids_held"].get<uint64_t>(),
             p["guid_pool_size"].get<uint64_t>());
}

int show(bool as_json) {
  const char* path = std::getenv("CORRAL_IB_CONFIG");
  if (path == nullptr || *path == '\0')
    cli::fail("ib show", "CORRAL_IB_CONFIG is not set: run this inside a job submitted with --ib");
  std::ifstream in(path);
  json doc = json::parse(in, nullptr, false);
  if (!doc.is_object()) cli::fail("ib show", fmt::format("cannot read {}", path));
  if (as_json) {
    fmt::print("{}\n", doc.dump(2));
    return 0;
  }
  cli::Table t({{"DEVICE"}, {"MODEL"}, {"FABRIC"}, {"INSTANCE"}, {"FUNCTION"}, {"GUID"}, {"PARTITION"}, {"PKEY"}});
  for (const auto& i : doc["interfaces"]) {
    std::string fn = i.value("function_type", "physical");
    if (i.contains("virtual_function_id")) fn += fmt::format(" {}", i["virtual_function_id"].get<unsigned>());
    t.add_row({i.value("device", ""), i.value("model", ""), i.value("fabric", ""),
               std::to_string(i.value("device_instance", 0u)), fn, i.value("guid", ""), i.value("partition", ""),
               i.value("pkey", "")});
  }
  fmt::print("{}", t.render());
  return 0;
}

}  // namespace

void add_ib_command(CLI::App& app, Globals& g) {
  CLI::App* ib = app.add_subcommand("ib", "Infiniband: node classes, partition keys, a job's interfaces");
  ib->require_subcommand(1);
  auto as_json = std::make_shared<bool>(false);
  // A subcommand that asks the hook one query and prints its answer, or the JSON with --json.
  auto query = [&g, ib, as_json](const char* what, const char* help, void (*print)(const json&)) {
    CLI::App* sub = ib->add_subcommand(what, help);
    sub->add_flag("--json", *as_json, "Print the controller's JSON document");
    sub->callback([&g, as_json, what, print] {
      auto doc = expect_ok(fmt::format("ib {}", what),
                           cli::hook_query_json(resolve_uri(g.uri), "infiniband", what, json::object()));
      if (*as_json)
        fmt::print("{}\n", doc.dump(2));
      else
        print(doc);
    });
  };
  query("classes",
        "Nodes grouped by identical Infiniband capabilities (model, vendor, fabric, count); members with a port down "
        "or a card missing are flagged",
        print_classes);
  query("pool", "Partition keys (named, and per-job from the pool) and VF GUIDs in use", print_pool);
  CLI::App* sh = ib->add_subcommand("show", "Inside a job: its Infiniband interfaces ($CORRAL_IB_CONFIG)");
  sh->add_flag("--json", *as_json, "Print the document as the job has it");
  sh->callback([as_json] { std::exit(show(*as_json)); });
}

}  // namespace corral::fabric::infiniband
