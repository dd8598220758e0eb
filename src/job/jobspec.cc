// Jobspec version 1 (RFC 25) reading and validation.
//
// The resource shapes accepted are RFC 25's: [node[exclusive] >] slot(label) >
// core [, gpu]. Memory is not a V1 resource, so corral reads the per-node memory
// requirement from attributes.system.memory-per-node (MiB, a non-negative integer).
//
// Task counts: tasks[0].count.per_slot P gives P tasks in every slot (the slot's cores
// and gpus are shared evenly among them); tasks[0].count.total T gives T tasks spread
// over the slots, which need T <= slots and, with a node level, at least one task per
// node. See build_jobspec for how the command line uses the two forms.
#include "job/jobspec.h"

#include <charconv>
#include <cmath>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include "job/dependency.h"
#include "job/mpi_kind.h"
#include "job/rlimit.h"
#include "util/hostlist.h"
#include "util/units.h"

namespace corral::job {
namespace {

using json = nlohmann::json;

constexpr uint64_t kMaxTasks = 1'000'000;
constexpr uint64_t kMaxPerTask = 1024;  // cores (and gpus) per task

std::string show(const json& v) {
  std::string s = v.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

Error at(const std::string& path, const std::string& what) { return invalid(path + ": " + what); }

Error wrong_type(const std::string& path, const std::string& expected, const json& got) {
  return at(path, "must be " + expected + ", got " + show(got));
}

std::string index_path(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

// JSON parsing stores non-negative integers as unsigned, YAML conversion and callers
// building documents may use signed ones: accept both.
std::optional<uint64_t> as_count(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return v.get<uint64_t>();
  return std::nullopt;
}

Result<uint64_t> positive_int(const json& v, const std::string& path) {
  auto n = as_count(v);
  if (!n || *n == 0) return wrong_type(path, "a positive integer", v);
  return *n;
}

Result<double> non_negative_number(const json& v, const std::string& path) {
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0) {
    return wrong_type(path, "a non-negative number", v);
  }
  return v.get<double>();
}

Result<std::string> string_field(const json& v, const std::string& path) {
  if (!v.is_string()) return wrong_type(path, "a string", v);
  return v.get<std::string>();
}

Status object_field(const json& v, const std::string& path) {
  if (!v.is_object()) return wrong_type(path, "an object", v);
  return {};
}

const json* child(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

std::string basename_of(const std::string& path) {
  auto slash = path.find_last_of('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  return base.empty() ? path : base;
}

// The slot and its contents, as read from resources.
struct SlotShape {
  uint64_t count = 0;  // slots per node (or in total without a node level)
  uint64_t cores = 0;
  uint64_t gpus = 0;
  std::string label;
};

class Reader {
 public:
  explicit Reader(const json& doc) : doc_(doc) {}
  Result<Jobspec> read();

 private:
  Status read_version();
  Status read_resources();
  Status read_node(const json& node, const std::string& path);
  Status read_slot(const json& slot, const std::string& path);
  Status read_slot_child(const json& r, const std::string& path);
  Status read_tasks();
  Status read_task_count(const json& count, const std::string& path);
  Status read_attributes();
  Status read_system(const json& sys);
  Status read_system_strings(const json& sys);
  Status read_environment(const json& env);
  Status read_dependencies(const json& deps);
  Status read_constraints(const json& c);
  Status read_switches(const json& sw, const std::string& path);
  Status read_exec(const json& exec);
  Status read_shell(const json& shell);
  Status read_rlimits(const json& limits, const std::string& path);
  Status read_file_stream(const json& parent, const std::string& path, const char* key, std::string& out);

  const json& doc_;
  Jobspec spec_;
  SlotShape slot_;
};

Result<Jobspec> Reader::read() {
  if (!doc_.is_object()) return invalid("jobspec: must be a JSON object (a YAML mapping)");
  for (const auto& [key, value] : doc_.items()) {
    if (key != "version" && key != "resources" && key != "tasks" && key != "attributes") {
      return at(key, "unknown key (a jobspec has version, resources, tasks and attributes)");
    }
  }
  for (auto step : {&Reader::read_version, &Reader::read_resources, &Reader::read_attributes, &Reader::read_tasks}) {
    if (auto st = (this->*step)(); !st) return st.error();
  }
  if (spec_.name.empty()) {
    spec_.name = spec_.batch_script.empty() ? basename_of(spec_.command.front()) : "batch";
  }
  spec_.document = std::make_shared<const json>(doc_);
  return std::move(spec_);
}

Status Reader::read_version() {
  const json* v = child(doc_, "version");
  if (v == nullptr) return at("version", "missing (corral accepts version 1)");
  if (!v->is_number_integer() || v->get<int64_t>() != 1) {
    return at("version", "unsupported jobspec version " + show(*v) + " (corral accepts version 1)");
  }
  return {};
}

Status Reader::read_resources() {
  const json* res = child(doc_, "resources");
  if (res == nullptr) return at("resources", "missing (e.g. one slot with a core)");
  if (!res->is_array() || res->size() != 1) {
    return wrong_type("resources", "an array of one node or slot resource", *res);
  }
  const json& top = (*res)[0];
  std::string path = "resources[0]";
  if (auto st = object_field(top, path); !st) return st;
  auto type = string_field(top.value("type", json()), path + ".type");
  if (!type) return type.status();
  if (*type == "node") return read_node(top, path);
  if (*type == "slot") return read_slot(top, path);
  return at(path + ".type", "must be node or slot, got \"" + *type + "\"");
}

Status Reader::read_node(const json& node, const std::string& path) {
  auto count = positive_int(node.value("count", json()), path + ".count");
  if (!count) return count.status();
  if (*count > kMaxTasks) {
    return at(path + ".count",
              std::to_string(*count) + " nodes is more than the limit of " + std::to_string(kMaxTasks));
  }
  spec_.nnodes = static_cast<unsigned>(*count);
  if (const json* ex = child(node, "exclusive")) {
    if (!ex->is_boolean()) return wrong_type(path + ".exclusive", "true or false", *ex);
    spec_.exclusive = ex->get<bool>();
  }
  const json* with = child(node, "with");
  if (with == nullptr || !with->is_array() || with->size() != 1) {
    return at(path + ".with", "a node must contain exactly one slot");
  }
  std::string slot_path = index_path(path + ".with", 0);
  if (auto st = object_field((*with)[0], slot_path); !st) return st;
  auto type = string_field((*with)[0].value("type", json()), slot_path + ".type");
  if (!type) return type.status();
  if (*type != "slot") {
    return at(slot_path + ".type", "a node may only contain a slot, got \"" + *type + "\"");
  }
  return read_slot((*with)[0], slot_path);
}

Status Reader::read_slot(const json& slot, const std::string& path) {
  auto count = positive_int(slot.value("count", json()), path + ".count");
  if (!count) return count.status();
  if (*count > kMaxTasks) {
    return at(path + ".count",
              std::to_string(*count) + " slots is more than the limit of " + std::to_string(kMaxTasks));
  }
  slot_.count = *count;
  const json* label = child(slot, "label");
  if (label == nullptr || !label->is_string() || label->get<std::string>().empty()) {
    return at(path + ".label", "a slot needs a label (a string that tasks[0].slot names)");
  }
  slot_.label = label->get<std::string>();
  const json* with = child(slot, "with");
  if (with == nullptr || !with->is_array() || with->empty()) {
    return at(path + ".with", "a slot must contain a core resource (and optionally a gpu)");
  }
  for (size_t i = 0; i < with->size(); ++i) {
    if (auto st = read_slot_child((*with)[i], index_path(path + ".with", i)); !st) return st;
  }
  if (slot_.cores == 0) return at(path + ".with", "a slot must contain a core resource");
  return {};
}

Status Reader::read_slot_child(const json& r, const std::string& path) {
  if (auto st = object_field(r, path); !st) return st;
  auto type = string_field(r.value("type", json()), path + ".type");
  if (!type) return type.status();
  uint64_t* target = *type == "core" ? &slot_.cores : *type == "gpu" ? &slot_.gpus : nullptr;
  if (target == nullptr) {
    std::string hint = *type == "memory" ? "; give memory as attributes.system.memory-per-node"
                       : *type == "node" ? "; a node must be outside the slot"
                                         : "";
    return at(path + ".type", "unknown resource type \"" + *type +
                                  "\" inside a slot (jobspec version 1 allows core and gpu" + hint + ")");
  }
  if (*target != 0) return at(path + ".type", "a slot may contain only one " + *type);
  if (child(r, "with") != nullptr) return at(path + ".with", "a " + *type + " has no children");
  auto count = positive_int(r.value("count", json()), path + ".count");
  if (!count) return count.status();
  if (*count > kMaxPerTask) {
    return at(path + ".count", std::to_string(*count) + " " + *type + "s per task is more than the limit of " +
                                   std::to_string(kMaxPerTask));
  }
  *target = *count;
  return {};
}

Status Reader::read_tasks() {
  const json* tasks = child(doc_, "tasks");
  if (tasks == nullptr) return at("tasks", "missing (a jobspec needs one task entry)");
  if (!tasks->is_array() || tasks->size() != 1) {
    return wrong_type("tasks", "an array of one task entry", *tasks);
  }
  const json& task = (*tasks)[0];
  if (auto st = object_field(task, "tasks[0]"); !st) return st;
  const json* command = child(task, "command");
  bool command_ok = command != nullptr && command->is_array() && !command->empty();
  for (size_t i = 0; command_ok && i < command->size(); ++i) {
    command_ok = (*command)[i].is_string();
  }
  if (command_ok) {
    spec_.command = command->get<std::vector<std::string>>();
  } else if (command != nullptr || spec_.batch_script.empty()) {
    return at("tasks[0].command", "must be a non-empty array of strings");
  }
  auto slot = string_field(task.value("slot", json()), "tasks[0].slot");
  if (!slot) return slot.status();
  if (*slot != slot_.label) {
    return at("tasks[0].slot", "\"" + *slot + "\" is not a slot label (the slot is labeled \"" + slot_.label + "\")");
  }
  const json* count = child(task, "count");
  if (count == nullptr) return at("tasks[0].count", "missing (e.g. {\"per_slot\": 1})");
  return read_task_count(*count, "tasks[0].count");
}

Status Reader::read_task_count(const json& count, const std::string& path) {
  if (!count.is_object() || count.size() != 1 || !(count.contains("per_slot") || count.contains("total"))) {
    return wrong_type(path, "an object with either per_slot or total", count);
  }
  uint64_t nodes = spec_.nnodes == 0 ? 1 : spec_.nnodes;
  uint64_t slots = nodes * slot_.count;
  uint64_t ntasks = 0;
  spec_.cores_per_task = static_cast<unsigned>(slot_.cores);
  spec_.gpus_per_task = static_cast<unsigned>(slot_.gpus);
  if (count.contains("per_slot")) {
    auto per_slot = positive_int(count["per_slot"], path + ".per_slot");
    if (!per_slot) return per_slot.status();
    if (slot_.cores % *per_slot != 0 || slot_.gpus % *per_slot != 0) {
      return at(path + ".per_slot", std::to_string(*per_slot) + " tasks cannot evenly share a slot's " +
                                        std::to_string(slot_.cores) + " cores and " + std::to_string(slot_.gpus) +
                                        " gpus");
    }
    spec_.cores_per_task = static_cast<unsigned>(slot_.cores / *per_slot);
    spec_.gpus_per_task = static_cast<unsigned>(slot_.gpus / *per_slot);
    ntasks = slots * *per_slot;
  } else {
    auto total = positive_int(count["total"], path + ".total");
    if (!total) return total.status();
    if (*total > slots) {
      return at(path + ".total", std::to_string(*total) + " tasks need " + std::to_string(*total) +
                                     " slots but the resources give " + std::to_string(slots));
    }
    if (*total < spec_.nnodes) {
      return at(path + ".total", std::to_string(*total) + " tasks cannot cover " + std::to_string(spec_.nnodes) +
                                     " nodes (every node needs at least one task)");
    }
    ntasks = *total;
  }
  if (ntasks > kMaxTasks) {
    return at(path, "the job asks for " + std::to_string(ntasks) + " tasks, more than the limit of " +
                        std::to_string(kMaxTasks));
  }
  spec_.ntasks = static_cast<unsigned>(ntasks);
  return {};
}

Status Reader::read_attributes() {
  const json* attrs = child(doc_, "attributes");
  if (attrs == nullptr) return {};
  if (auto st = object_field(*attrs, "attributes"); !st) return st;
  for (const auto& [key, value] : attrs->items()) {
    if (key != "system" && key != "user") {
      return at("attributes." + key, "unknown attribute section (use system or user)");
    }
  }
  const json* sys = child(*attrs, "system");
  if (sys == nullptr) return {};
  if (auto st = object_field(*sys, "attributes.system"); !st) return st;
  return read_system(*sys);
}

Status Reader::read_system(const json& sys) {
  const std::string p = "attributes.system.";
  if (const json* v = child(sys, "duration")) {
    auto d = non_negative_number(*v, p + "duration");
    if (!d) return d.status();
    spec_.duration = *d;
  }
  if (const json* v = child(sys, "begin-time")) {
    auto t = non_negative_number(*v, p + "begin-time");
    if (!t) return t.status();
    spec_.begin_time = *t;
  }
  if (const json* v = child(sys, "memory-per-node")) {
    auto mb = as_count(*v);
    if (!mb) return wrong_type(p + "memory-per-node", "a non-negative integer (MiB)", *v);
    spec_.mem_per_node_mb = *mb;
  }
  if (auto st = read_system_strings(sys); !st) return st;
  using Section = Status (Reader::*)(const json&);
  const std::pair<const char*, Section> sections[] = {{"environment", &Reader::read_environment},
                                                      {"dependencies", &Reader::read_dependencies},
                                                      {"constraints", &Reader::read_constraints},
                                                      {"exec", &Reader::read_exec},
                                                      {"shell", &Reader::read_shell}};
  for (const auto& [key, fn] : sections) {
    if (const json* v = child(sys, key)) {
      if (auto st = (this->*fn)(*v); !st) return st;
    }
  }
  return {};
}

Status Reader::read_system_strings(const json& sys) {
  const std::string p = "attributes.system.";
  if (const json* v = child(sys, "cwd")) {
    auto s = string_field(*v, p + "cwd");
    if (!s) return s.status();
    spec_.cwd = *s;
  }
  if (const json* v = child(sys, "queue")) {
    auto s = string_field(*v, p + "queue");
    if (!s) return s.status();
    spec_.partition = *s;
  }
  if (const json* job = child(sys, "job")) {
    if (auto st = object_field(*job, p + "job"); !st) return st;
    if (const json* v = child(*job, "name")) {
      auto s = string_field(*v, p + "job.name");
      if (!s) return s.status();
      spec_.name = *s;
    }
  }
  if (const json* batch = child(sys, "batch")) {
    if (auto st = object_field(*batch, p + "batch"); !st) return st;
    const json* script = child(*batch, "script");
    if (script == nullptr || !script->is_string() || script->get<std::string>().empty()) {
      return at(p + "batch.script", "must be a non-empty string");
    }
    spec_.batch_script = script->get<std::string>();
  }
  if (const json* v = child(sys, "alloc")) {
    if (!v->is_boolean()) return wrong_type(p + "alloc", "true or false", *v);
    spec_.alloc = v->get<bool>();
    if (spec_.alloc && !spec_.batch_script.empty())
      return at(p + "alloc", "an allocation has no batch script (drop batch.script)");
  }
  if (const json* v = child(sys, "requeue")) {
    if (!v->is_boolean()) return wrong_type(p + "requeue", "true or false", *v);
    spec_.requeue = v->get<bool>();
  }
  return {};
}

Status Reader::read_environment(const json& env) {
  if (auto st = object_field(env, "attributes.system.environment"); !st) return st;
  for (const auto& [key, value] : env.items()) {
    auto s = string_field(value, "attributes.system.environment." + key);
    if (!s) return s.status();
    spec_.environment[key] = *s;
  }
  return {};
}

// RFC 26 objects {"scheme":..,"value":..}; strings ("afterok:12", or Slurm's
// "afterok:12:13,afterany:14") are accepted too. All become URIs.
Status Reader::read_dependencies(const json& deps) {
  const std::string path = "attributes.system.dependencies";
  if (!deps.is_array()) return wrong_type(path, "an array", deps);
  for (size_t i = 0; i < deps.size(); ++i) {
    std::string item_path = index_path(path, i);
    const json& d = deps[i];
    std::string text;
    if (d.is_string()) {
      text = d.get<std::string>();
    } else if (d.is_object()) {
      auto scheme = string_field(d.value("scheme", json()), item_path + ".scheme");
      if (!scheme) return scheme.status();
      text = *scheme;
      if (const json* v = child(d, "value")) {
        if (!v->is_string() && !v->is_number()) {
          return wrong_type(item_path + ".value", "a string or number", *v);
        }
        std::string value = v->is_string() ? v->get<std::string>() : v->dump();
        if (!value.empty()) text += ":" + value;
      }
    } else {
      return wrong_type(item_path, "an RFC 26 object or a string like \"afterok:12\"", d);
    }
    auto parsed = parse_dependencies(text);
    if (!parsed) return at(item_path, parsed.message());
    for (const auto& dep : *parsed) spec_.dependencies.push_back(dep.uri());
  }
  return {};
}

Status Reader::read_constraints(const json& c) {
  const std::string path = "attributes.system.constraints";
  if (auto st = object_field(c, path); !st) return st;
  for (auto [key, out] : {std::pair{"hostlist", &spec_.requested_nodes}, std::pair{"exclude", &spec_.excluded_nodes}}) {
    const json* v = child(c, key);
    if (v == nullptr) continue;
    auto s = string_field(*v, path + "." + key);
    if (!s) return s.status();
    // switch{s1}, block{b1}, ...with{node}: the controller expands these on its topology.
    if (s->find('{') == std::string::npos) {
      auto hl = Hostlist::parse(*s);
      if (!hl) return at(path + "." + key, hl.message());
    }
    *out = *s;
  }
  if (const json* sw = child(c, "switches")) return read_switches(*sw, path + ".switches");
  return {};
}

Status Reader::read_switches(const json& sw, const std::string& path) {
  if (auto st = object_field(sw, path); !st) return st;
  const json* count = child(sw, "count");
  if (count == nullptr || !count->is_number_unsigned() || count->get<uint64_t>() == 0 ||
      count->get<uint64_t>() > 1'000'000)
    return at(path + ".count", "expected a whole number of switches from 1 to 1000000");
  spec_.switches = count->get<unsigned>();
  if (const json* wait = child(sw, "max_wait")) {
    if (!wait->is_number() || wait->get<double>() < 0)
      return at(path + ".max_wait", "expected a number of seconds, not negative");
    spec_.switch_wait = wait->get<double>();
  }
  return {};
}

Status Reader::read_exec(const json& exec) {
  const std::string path = "attributes.system.exec";
  if (auto st = object_field(exec, path); !st) return st;
  const json* test = child(exec, "test");
  if (test == nullptr) return {};
  if (auto st = object_field(*test, path + ".test"); !st) return st;
  const json* run = child(*test, "run_duration");
  if (run == nullptr) {  // a mock job without a duration finishes at once
    spec_.mock_duration = 0;
    return {};
  }
  std::string run_path = path + ".test.run_duration";
  if (run->is_string()) {
    auto d = parse_duration(run->get<std::string>());
    if (!d) return at(run_path, d.message());
    spec_.mock_duration = *d;
    return {};
  }
  auto d = non_negative_number(*run, run_path);
  if (!d) return at(run_path, "must be a duration like \"1s\" or a non-negative number, got " + show(*run));
  spec_.mock_duration = *d;
  return {};
}

Status Reader::read_file_stream(const json& parent, const std::string& path, const char* key, std::string& out) {
  const json* s = child(parent, key);
  if (s == nullptr) return {};
  std::string p = path + "." + key;
  if (auto st = object_field(*s, p); !st) return st;
  if (const json* type = child(*s, "type"); type != nullptr && *type != "file") {
    return at(p + ".type", "must be \"file\", got " + show(*type));
  }
  auto file = string_field(s->value("path", json()), p + ".path");
  if (!file) return file.status();
  out = *file;
  return {};
}

// Only the I/O options are corral's own; every other option belongs to a hook.
Status Reader::read_shell(const json& shell) {
  const std::string path = "attributes.system.shell";
  if (auto st = object_field(shell, path); !st) return st;
  const json* opts = child(shell, "options");
  if (opts == nullptr) return {};
  if (auto st = object_field(*opts, path + ".options"); !st) return st;
  if (const json* output = child(*opts, "output")) {
    std::string p = path + ".options.output";
    if (auto st = object_field(*output, p); !st) return st;
    if (auto st = read_file_stream(*output, p, "stdout", spec_.output.path); !st) return st;
    if (auto st = read_file_stream(*output, p, "stderr", spec_.error.path); !st) return st;
  }
  if (const json* input = child(*opts, "input")) {
    std::string p = path + ".options.input";
    if (auto st = object_field(*input, p); !st) return st;
    if (auto st = read_file_stream(*input, p, "stdin", spec_.input); !st) return st;
  }
  if (const json* mpi = child(*opts, kMpiOption)) {
    const std::string p = path + ".options.mpi";
    if (!mpi->is_string()) return at(p, "must be a string (auto, pmix, pmi2, pmi1, cray-pals, none)");
    auto name = check_mpi_name(mpi->get_ref<const std::string&>(), p);
    if (!name) return name.error();
    spec_.mpi = std::move(*name);
  }
  if (const json* limits = child(*opts, "rlimit")) return read_rlimits(*limits, path + ".options.rlimit");
  return {};
}

Status Reader::read_rlimits(const json& limits, const std::string& p) {
  if (auto st = object_field(limits, p); !st) return st;
  for (const auto& [name, value] : limits.items()) {
    auto resource = rlimit_resource(name);
    if (!resource) {
      std::string known;
      for (auto n : rlimit_names()) known += (known.empty() ? "" : ", ") + std::string(n);
      return at(p + "." + name, "unknown resource limit (known: " + known + ")");
    }
    if (!value.is_number_integer() || value.get<int64_t>() < -1)
      return at(p + "." + name, "must be a whole number of at least 0, or -1 for unlimited");
    spec_.rlimits.push_back(TaskRlimit{*resource, value.get<int64_t>()});
  }
  return {};
}

// ---- YAML ----------------------------------------------------------------------------

bool all_of_chars(std::string_view s, std::string_view allowed) {
  return s.find_first_not_of(allowed) == std::string_view::npos;
}

// Plain YAML scalars become JSON numbers and booleans only when they look exactly like
// them; YAML 1.1's yes/no/on/off stay strings (YAML 1.2 core schema).
json plain_scalar(const std::string& s) {
  const char* end = s.data() + s.size();
  // Non-negative integers become unsigned, as nlohmann's JSON parser makes them.
  if (!s.empty() && all_of_chars(s, "+-0123456789")) {
    uint64_t u = 0;
    auto [pu, ecu] = std::from_chars(s.data() + (s[0] == '+'), end, u);
    if (ecu == std::errc() && pu == end) return u;
    int64_t i = 0;
    auto [p, ec] = std::from_chars(s.data(), end, i);
    if (ec == std::errc() && p == end) return i;
  }
  if (s.find_first_of("0123456789") != std::string::npos && all_of_chars(s, "+-.eE0123456789")) {
    double d = 0;
    auto [p, ec] = std::from_chars(s.data() + (s[0] == '+'), end, d);
    if (ec == std::errc() && p == end) return d;
  }
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  return s;
}

// Limits on the shape of a jobspec document, checked before a parser sees it (the
// parsers and the code walking their trees recurse, so depth costs stack) and while a
// YAML tree is copied (aliases share nodes, so a few hundred bytes can stand for
// gigabytes once expanded: "billion laughs").
constexpr int kMaxDepth = 64;
constexpr size_t kMaxNodes = 1'000'000;
constexpr size_t kMaxIndent = 512;

// Nesting of [ and { outside strings; for YAML also its flow collections (quotes and
// comments are not told apart there, which can only over-count).
Status check_nesting(std::string_view text, bool yaml) {
  int depth = 0;
  bool in_string = false, escaped = false;
  size_t line_start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n') line_start = i + 1;
    if (yaml && i == line_start) {
      size_t indent = 0;
      while (i + indent < text.size() && text[i + indent] == ' ') ++indent;
      if (indent > kMaxIndent)
        return invalid(
            fmt::format("jobspec is indented more than {} columns (line starting at byte {})", kMaxIndent, i));
    }
    if (!yaml && in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"' && !yaml)
      in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth)
        return invalid(fmt::format("jobspec is nested more than {} levels deep (at byte {})", kMaxDepth, i));
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return {};
}

// JSON text must be UTF-8 (nlohmann's parser checks it, and dump() throws on anything
// else); YAML scalars are checked here as they are copied.
bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t n = 0;  // continuation bytes
    uint32_t cp = 0;
    if ((c >> 5) == 0x6)
      n = 1, cp = c & 0x1fu;
    else if ((c >> 4) == 0xe)
      n = 2, cp = c & 0x0fu;
    else if ((c >> 3) == 0x1e)
      n = 3, cp = c & 0x07u;
    else
      return false;
    if (s.size() - i <= n) return false;
    for (size_t k = 1; k <= n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc >> 6) != 0x2) return false;
      cp = (cp << 6) | (cc & 0x3fu);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += n + 1;
  }
  return true;
}

struct YamlCopy {
  size_t nodes = 0;

  Result<json> operator()(const YAML::Node& node, int depth) {
    if (++nodes > kMaxNodes)
      return invalid(fmt::format("jobspec expands to more than {} values (YAML aliases?)", kMaxNodes));
    if (depth > kMaxDepth) return invalid(fmt::format("jobspec is nested more than {} levels deep", kMaxDepth));
    switch (node.Type()) {
      case YAML::NodeType::Scalar:
        if (!valid_utf8(node.Scalar())) return invalid("jobspec: a YAML value is not valid UTF-8");
        // Quoted scalars carry the "!" tag and explicit !!str a full tag: both are strings.
        if (node.Tag() == "?") return plain_scalar(node.Scalar());
        return json(node.Scalar());
      case YAML::NodeType::Sequence: {
        json arr = json::array();
        for (const auto& item : node) {
          auto v = (*this)(item, depth + 1);
          if (!v) return v;
          arr.push_back(std::move(*v));
        }
        return arr;
      }
      case YAML::NodeType::Map: {
        json obj = json::object();
        for (const auto& kv : node) {
          if (!kv.first.IsScalar()) return invalid("jobspec: a YAML mapping key must be a plain value");
          if (!valid_utf8(kv.first.Scalar())) return invalid("jobspec: a YAML key is not valid UTF-8");
          auto v = (*this)(kv.second, depth + 1);
          if (!v) return v;
          obj[kv.first.Scalar()] = std::move(*v);
        }
        return obj;
      }
      default:
        return json(nullptr);
    }
  }
};

Result<json> parse_yaml(std::string_view text) {
  if (auto st = check_nesting(text, true); !st) return st.error();
  try {
    return YamlCopy{}(YAML::Load(std::string(text)), 0);
  } catch (const YAML::Exception& e) {
    return invalid("jobspec is not valid YAML: line " + std::to_string(e.mark.line + 1) + ", column " +
                   std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
}

Result<json> parse_json(std::string_view text) {
  if (auto st = check_nesting(text, false); !st) return st.error();
  try {
    return json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for huge numbers
    std::string_view m = e.what();
    if (auto close = m.find("] "); close != std::string_view::npos) m.remove_prefix(close + 2);
    return invalid("jobspec is not valid JSON: " + std::string(m));
  }
}

const json* find_option(const json& opts, std::string_view key) {
  if (!opts.is_object()) return nullptr;
  auto literal = opts.find(key);
  auto dot = key.find('.');
  if (dot != std::string_view::npos) {
    auto head = opts.find(key.substr(0, dot));
    if (head != opts.end()) {
      if (const json* nested = find_option(*head, key.substr(dot + 1))) return nested;
    }
  }
  return literal == opts.end() ? nullptr : &*literal;
}

}  // namespace

const nlohmann::json* Jobspec::option(std::string_view key) const {
  if (!document) return nullptr;
  const json* opts = document.get();
  for (const char* k : {"attributes", "system", "shell", "options"}) {
    if (!opts->is_object()) return nullptr;
    auto it = opts->find(k);
    if (it == opts->end()) return nullptr;
    opts = &*it;
  }
  return find_option(*opts, key);
}

Result<Jobspec> jobspec_from_document(const nlohmann::json& doc) { return Reader(doc).read(); }

Result<Jobspec> parse_jobspec(std::string_view text) {
  auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return invalid("jobspec is empty");
  auto doc = text[first] == '{' ? parse_json(text) : parse_yaml(text);
  if (!doc) return doc.error();
  return jobspec_from_document(*doc);
}

std::string jobspec_to_string(const Jobspec& spec) { return spec.document ? spec.document->dump() : std::string("{}"); }

}  // namespace corral::job
