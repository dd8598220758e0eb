// build_jobspec: command-line values to an RFC 25 document, validated by the same
// reader as submitted documents so the CLI reports the same errors.
//
// Task layout. Without --nodes the request is ntasks slots of cores_per_task cores
// (and gpus) each, anywhere. With --nodes N the request is N nodes, each holding
// ceil(ntasks / N) slots; when ntasks is a multiple of N every slot runs one task
// (count.per_slot = 1), otherwise tasks[0].count.total = ntasks and the last slots
// stay empty: tasks are spread so each node runs floor or ceil(ntasks / N) of them.
#include <charconv>
#include <cmath>

#include <nlohmann/json.hpp>

#include "job/dependency.h"
#include "job/jobspec.h"
#include "job/mpi_kind.h"

namespace corral::job {
namespace {

using json = nlohmann::json;

// --setopt values: booleans and numbers keep their type, anything else is a string.
json option_value(const std::string& s) {
  if (s == "true") return true;
  if (s == "false") return false;
  const char* end = s.data() + s.size();
  if (!s.empty() && s.find_first_not_of("-0123456789") == std::string::npos) {
    int64_t i = 0;
    auto [p, ec] = std::from_chars(s.data(), end, i);
    if (ec == std::errc() && p == end) return i;
  }
  if (s.find_first_of("0123456789") != std::string::npos &&
      s.find_first_not_of("-.eE0123456789") == std::string::npos) {
    double d = 0;
    auto [p, ec] = std::from_chars(s.data(), end, d);
    if (ec == std::errc() && p == end && std::isfinite(d)) return d;
  }
  return s;
}

// "a.b.c=v" sets options["a"]["b"]["c"] = v.
Status set_option(json& options, const std::string& key, const std::string& value) {
  json* node = &options;
  size_t start = 0;
  while (true) {
    auto dot = key.find('.', start);
    std::string part = key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (part.empty()) return invalid("--setopt " + key + ": empty name in the option key");
    if (!node->is_object()) {
      return invalid("--setopt " + key + ": \"" + key.substr(0, start - 1) +
                     "\" is already set to a value, so it cannot hold \"" + part + "\"");
    }
    if (dot == std::string::npos) {
      (*node)[part] = option_value(value);
      return {};
    }
    auto [it, added] = node->emplace(part, json::object());
    node = &*it;
    start = dot + 1;
  }
}

json file_stream(const std::string& path) { return {{"type", "file"}, {"path", path}}; }

Result<json> shell_options(const JobRequest& req) {
  json options = json::object();
  if (!req.output.empty()) options["output"]["stdout"] = file_stream(req.output);
  if (!req.error.empty()) options["output"]["stderr"] = file_stream(req.error);
  if (!req.input.empty()) options["input"]["stdin"] = file_stream(req.input);
  for (const auto& [key, value] : req.options) {
    if (auto st = set_option(options, key, value); !st) return st.error();
  }
  for (const auto& [name, value] : req.rlimits) options["rlimit"][name] = value;
  if (!req.mpi.empty()) options[std::string(kMpiOption)] = req.mpi;
  return options;
}

// RFC 26 objects, so other RFC 26 readers understand them.
Result<json> dependency_objects(const std::vector<std::string>& texts) {
  json deps = json::array();
  for (const auto& text : texts) {
    auto parsed = parse_dependencies(text);
    if (!parsed) return parsed.error();
    for (const auto& d : *parsed) {
      std::string uri = d.uri();
      json obj = {{"scheme", d.scheme}};
      if (auto colon = uri.find(':'); colon != std::string::npos) obj["value"] = uri.substr(colon + 1);
      deps.push_back(std::move(obj));
    }
  }
  return deps;
}

std::string default_name(const JobRequest& req) {
  if (!req.name.empty()) return req.name;
  if (req.alloc) return "interactive";
  if (!req.batch_script.empty() || req.command.empty()) return "batch";
  const std::string& cmd = req.command.front();
  auto slash = cmd.find_last_of('/');
  std::string base = slash == std::string::npos ? cmd : cmd.substr(slash + 1);
  return base.empty() ? cmd : base;
}

Result<json> system_attributes(const JobRequest& req) {
  json sys = {{"duration", req.duration}, {"job", {{"name", default_name(req)}}}};
  if (!req.cwd.empty()) sys["cwd"] = req.cwd;
  if (!req.environment.empty()) sys["environment"] = req.environment;
  if (!req.partition.empty()) sys["queue"] = req.partition;
  if (!req.requested_nodes.empty()) sys["constraints"]["hostlist"] = req.requested_nodes;
  if (!req.excluded_nodes.empty()) sys["constraints"]["exclude"] = req.excluded_nodes;
  if (req.switches > 0) {
    sys["constraints"]["switches"]["count"] = req.switches;
    if (req.switch_wait >= 0) sys["constraints"]["switches"]["max_wait"] = req.switch_wait;
  }
  if (req.begin_time > 0) sys["begin-time"] = req.begin_time;
  if (!req.dw.empty()) sys["dw"] = req.dw;
  if (!req.ib.empty()) sys["infiniband"] = req.ib;
  if (req.mock_duration >= 0) sys["exec"]["test"]["run_duration"] = req.mock_duration;
  if (!req.batch_script.empty()) sys["batch"]["script"] = req.batch_script;
  if (req.alloc) sys["alloc"] = true;
  if (req.requeue) sys["requeue"] = *req.requeue;
  if (req.mem_per_node_mb > 0) sys["memory-per-node"] = req.mem_per_node_mb;
  if (!req.dependencies.empty()) {
    auto deps = dependency_objects(req.dependencies);
    if (!deps) return deps.error();
    sys["dependencies"] = std::move(*deps);
  }
  auto options = shell_options(req);
  if (!options) return options.error();
  if (!options->empty()) sys["shell"]["options"] = std::move(*options);
  return sys;
}

Status resources_and_tasks(const JobRequest& req, json& doc) {
  unsigned ntasks = req.ntasks != 0 ? req.ntasks : (req.nnodes != 0 ? req.nnodes : 1);
  if (req.nnodes > ntasks) {
    return invalid("--nodes " + std::to_string(req.nnodes) + " is more than --ntasks " + std::to_string(ntasks) +
                   ": every node needs at least one task");
  }
  if (req.exclusive && req.nnodes == 0) {
    return invalid("--exclusive needs a node count (--nodes): whole nodes are allocated");
  }
  json with = json::array({{{"type", "core"}, {"count", req.cores_per_task}}});
  if (req.gpus_per_task > 0) with.push_back({{"type", "gpu"}, {"count", req.gpus_per_task}});
  unsigned slots = req.nnodes == 0 ? ntasks : (ntasks + req.nnodes - 1) / req.nnodes;
  json slot = {{"type", "slot"}, {"count", slots}, {"label", "task"}, {"with", std::move(with)}};
  json top = std::move(slot);
  if (req.nnodes != 0) {
    top = {{"type", "node"}, {"count", req.nnodes}, {"with", json::array({std::move(top)})}};
    if (req.exclusive) top["exclusive"] = true;
  }
  doc["resources"] = json::array({std::move(top)});
  bool even = req.nnodes == 0 || ntasks % req.nnodes == 0;
  json count = even ? json{{"per_slot", 1}} : json{{"total", ntasks}};
  json task = {{"slot", "task"}, {"count", std::move(count)}};
  if (!req.command.empty())
    task["command"] = req.command;
  else if (req.alloc)
    task["command"] = json::array({"true"});  // never run: a placeholder
  doc["tasks"] = json::array({std::move(task)});
  return {};
}

}  // namespace

namespace {

Result<json> build_document(const JobRequest& req) {
  json doc = {{"version", 1}};
  if (auto st = resources_and_tasks(req, doc); !st) return st.error();
  auto sys = system_attributes(req);
  if (!sys) return sys.error();
  doc["attributes"] = {{"system", std::move(*sys)}};
  return doc;
}

}  // namespace

Result<Jobspec> build_jobspec(const JobRequest& req) {
  auto doc = build_document(req);
  if (!doc) return doc.error();
  return jobspec_from_document(*doc);
}

Result<std::string> build_jobspec_text(const JobRequest& req) {
  auto doc = build_document(req);
  if (!doc) return doc.error();
  return doc->dump();
}

}  // namespace corral::job
