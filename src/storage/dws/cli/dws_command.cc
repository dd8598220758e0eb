#include "storage/dws/cli/dws_command.h"

#include <memory>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/client/client.h"
#include "cli/hook_query.h"
#include "cli/table.h"
#include "util/units.h"

namespace corral::storage::dws {
namespace {

using cli::expect_ok;
using cli::Globals;
using cli::resolve_uri;
using cli::Table;
using nlohmann::json;

Result<json> dws_query(const std::string& uri, const std::string& what, const json& args) {
  auto j = cli::hook_query_json(uri, "dws", what, args);
  if (!j && j.error().code == Errc::not_found && j.message().find("no hook") != std::string::npos)
    return Error{Errc::not_found, j.message() + " ([rabbit] enabled = true turns it on)"};
  return j;
}

void print_workflows(const json& doc) {
  if (!doc.value("synced", false))
    fmt::print(stderr, "corral dws: corrald has not listed the workflows yet (is the API server reachable?)\n");
  Table t({{"JOBID", Table::Align::right},
           {"WORKFLOW"},
           {"DESIRED"},
           {"STATE"},
           {"STATUS"},
           {"IN STATE", Table::Align::right},
           {"HOLDS"},
           {"MESSAGE"}});
  for (const auto& w : doc["workflows"]) {
    std::string status = w.value("status", "");
    if (w.value("deleting", false)) status = "Deleting";
    t.add_row({std::to_string(w.value("jobid", uint64_t{0})), w.value("name", ""), w.value("desired", ""),
               w.value("state", "") + (w.value("ready", false) ? "" : "*"), status,
               format_elapsed(w.value("seconds_in_state", 0.0)), w.value("holds", ""), w.value("message", "")});
  }
  fmt::print("{}", t.render());
  for (const auto& o : doc.value("orphans", json::array()))
    fmt::print("orphan {}: {}\n", o.value("name", ""),
               o.value("deleting", false) ? "deleting" : "tearing down (its job is gone)");
}

}  // namespace

void add_dws_command(CLI::App& app, Globals& g) {
  CLI::App* dws = app.add_subcommand("dws", "Rabbit storage: the DWS workflows of jobs, and tearing one down");
  dws->require_subcommand(1);
  auto as_json = std::make_shared<bool>(false);
  CLI::App* wf = dws->add_subcommand(
      "workflows",
      "List the jobs' workflows: desired and current state (* = not ready yet), status, time in state, "
      "what the job is held by, DWS's message");
  wf->add_flag("--json", *as_json, "Print the controller's JSON document");
  wf->callback([&g, as_json] {
    auto doc = expect_ok("dws workflows", dws_query(resolve_uri(g.uri), "workflows", json::object()));
    if (*as_json)
      fmt::print("{}\n", doc.dump());
    else
      print_workflows(doc);
  });
  CLI::App* stats = dws->add_subcommand(
      "stats",
      "Print the hook's figures as JSON: workflows, writes pending, the watch's lag (from a state's "
      "readyChange in the API server to corrald acting on it) and PreRun ready to the job's start");
  stats->callback([&g] {
    fmt::print("{}\n", expect_ok("dws stats", dws_query(resolve_uri(g.uri), "stats", json::object())).dump());
  });
  auto jobid = std::make_shared<uint64_t>(0);
  CLI::App* td = dws->add_subcommand("teardown",
                                     "Tear down a job's storage now (root or the cluster's owner): the job gets a "
                                     "fatal 'dws' exception and its workflow goes to Teardown, then is deleted");
  td->add_option("JOBID", *jobid, "The job")->required();
  td->callback([&g, jobid] {
    auto r = expect_ok("dws teardown", dws_query(resolve_uri(g.uri), "teardown", json{{"jobid", *jobid}}));
    fmt::print(stderr, "corral dws teardown: job {}: workflow {} goes to Teardown (it was in {})\n", *jobid,
               r.value("name", ""), r.value("was", ""));
  });
}

}  // namespace corral::storage::dws
