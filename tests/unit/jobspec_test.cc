#include "job/jobspec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace corral::job {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

json node_doc() {
  return json::parse(R"({
    "version": 1,
    "resources": [{"type": "node", "count": 2, "exclusive": true,
                   "with": [{"type": "slot", "count": 4, "label": "task",
                             "with": [{"type": "core", "count": 2},
                                      {"type": "gpu", "count": 1}]}]}],
    "tasks": [{"command": ["/usr/bin/hostname", "-s"], "slot": "task",
               "count": {"per_slot": 1}}],
    "attributes": {
      "system": {
        "duration": 3600, "cwd": "/home/u", "environment": {"PATH": "/bin"},
        "job": {"name": "hn"}, "queue": "pbatch", "memory-per-node": 4096,
        "dependencies": [{"scheme": "afterok", "value": "12"}, "afterany:13:14"],
        "begin-time": 1700000000.5,
        "constraints": {"hostlist": "node[1-4]", "exclude": "node3"},
        "exec": {"test": {"run_duration": "2s"}},
        "shell": {"options": {
          "output": {"stdout": {"type": "file", "path": "out.%j"},
                     "stderr": {"type": "file", "path": "err.%j"}},
          "input": {"stdin": {"type": "file", "path": "in.txt"}},
          "cray-slingshot": {"vnicount": 2}, "gpu-affinity": "per-task"}}
      },
      "user": {"anything": [1, 2, 3]}
    }
  })");
}

json slot_doc() {
  return json::parse(R"({"version":1,
    "resources":[{"type":"slot","count":3,"label":"task","with":[{"type":"core","count":1}]}],
    "tasks":[{"command":["app"],"slot":"task","count":{"per_slot":1}}],
    "attributes":{"system":{"duration":0}}})");
}

std::string error_of(const json& doc) {
  auto spec = jobspec_from_document(doc);
  return spec.ok() ? std::string("(accepted)") : spec.message();
}

TEST(JobspecTest, ReadsEveryField) {
  auto spec = jobspec_from_document(node_doc());
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_EQ(spec->nnodes, 2u);
  EXPECT_EQ(spec->ntasks, 8u);
  EXPECT_EQ(spec->cores_per_task, 2u);
  EXPECT_EQ(spec->gpus_per_task, 1u);
  EXPECT_TRUE(spec->exclusive);
  EXPECT_EQ(spec->mem_per_node_mb, 4096u);
  EXPECT_EQ(spec->command, (std::vector<std::string>{"/usr/bin/hostname", "-s"}));
  EXPECT_EQ(spec->cwd, "/home/u");
  EXPECT_EQ(spec->environment.at("PATH"), "/bin");
  EXPECT_EQ(spec->duration, 3600);
  EXPECT_EQ(spec->name, "hn");
  EXPECT_EQ(spec->partition, "pbatch");
  EXPECT_EQ(spec->requested_nodes, "node[1-4]");
  EXPECT_EQ(spec->excluded_nodes, "node3");
  EXPECT_EQ(spec->dependencies, (std::vector<std::string>{"afterok:12", "afterany:13", "afterany:14"}));
  EXPECT_DOUBLE_EQ(spec->begin_time, 1700000000.5);
  EXPECT_DOUBLE_EQ(spec->mock_duration, 2.0);
  EXPECT_EQ(spec->output.path, "out.%j");
  EXPECT_EQ(spec->error.path, "err.%j");
  EXPECT_EQ(spec->input, "in.txt");
  EXPECT_TRUE(spec->batch_script.empty());
  ASSERT_NE(spec->document, nullptr);
  EXPECT_EQ((*spec->document)["attributes"]["user"]["anything"][2], 3);
}

TEST(JobspecTest, SlotWithoutNodeMeansAnyNodes) {
  auto spec = jobspec_from_document(slot_doc());
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_EQ(spec->nnodes, 0u);
  EXPECT_EQ(spec->ntasks, 3u);
  EXPECT_EQ(spec->cores_per_task, 1u);
  EXPECT_EQ(spec->name, "app");
  EXPECT_EQ(spec->mock_duration, -1);
  EXPECT_EQ(spec->duration, 0);
}

TEST(JobspecTest, TaskCountForms) {
  json doc = slot_doc();
  doc["tasks"][0]["count"] = {{"total", 2}};
  auto total = jobspec_from_document(doc);
  ASSERT_TRUE(total.ok()) << total.message();
  EXPECT_EQ(total->ntasks, 2u);

  doc["tasks"][0]["count"] = {{"total", 4}};
  EXPECT_THAT(error_of(doc), HasSubstr("tasks[0].count.total: 4 tasks need 4 slots but the resources give 3"));

  doc = node_doc();
  doc["tasks"][0]["count"] = {{"per_slot", 2}};
  auto per_slot = jobspec_from_document(doc);
  EXPECT_THAT(per_slot.message(), HasSubstr("tasks[0].count.per_slot: 2 tasks cannot evenly share"));
  doc["resources"][0]["with"][0]["with"] = json::parse(R"([{"type":"core","count":4}])");
  per_slot = jobspec_from_document(doc);
  ASSERT_TRUE(per_slot.ok()) << per_slot.message();
  EXPECT_EQ(per_slot->ntasks, 16u);
  EXPECT_EQ(per_slot->cores_per_task, 2u);

  doc["tasks"][0]["count"] = {{"total", 1}};
  EXPECT_THAT(error_of(doc), HasSubstr("1 tasks cannot cover 2 nodes"));
  doc["tasks"][0]["count"] = json::object();
  EXPECT_THAT(error_of(doc), HasSubstr("tasks[0].count: must be an object with either per_slot or total"));
  doc["tasks"][0]["count"] = {{"per_slot", 1}, {"total", 2}};
  EXPECT_THAT(error_of(doc), HasSubstr("either per_slot or total"));
}

TEST(JobspecTest, ErrorsNameTheField) {
  struct Case {
    const char* pointer;
    json value;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"/version", 2, "version: unsupported jobspec version 2 (corral accepts version 1)"},
      {"/resources/0/count", -1, "resources[0].count: must be a positive integer, got -1"},
      {"/resources/0/with/0/count", -1, "resources[0].with[0].count: must be a positive integer, got -1"},
      {"/resources/0/with/0/with/0/count", 0, "resources[0].with[0].with[0].count: must be a positive integer, got 0"},
      {"/resources/0/with/0/with/1/count", "x",
       "resources[0].with[0].with[1].count: must be a positive integer, got \"x\""},
      {"/resources/0/with/0/with/1/type", "memory",
       "resources[0].with[0].with[1].type: unknown resource type \"memory\""},
      {"/resources/0/with/0/with/0/type", "gpu", "a slot may contain only one gpu"},
      {"/resources/0/with/0/type", "core", "a node may only contain a slot"},
      {"/resources/0/type", "socket", "resources[0].type: must be node or slot"},
      {"/resources/0/exclusive", "yes", "resources[0].exclusive: must be true or false"},
      {"/resources/0/with/0/label", 5, "resources[0].with[0].label: a slot needs a label"},
      {"/tasks/0/command", json::array(), "tasks[0].command: must be a non-empty array of strings"},
      {"/tasks/0/command", json::array({"a", 1}), "tasks[0].command: must be a non-empty array"},
      {"/tasks/0/slot", "other", "tasks[0].slot: \"other\" is not a slot label"},
      {"/attributes/system/duration", -5, "attributes.system.duration: must be a non-negative number"},
      {"/attributes/system/duration", "1h", "attributes.system.duration: must be a non-negative number"},
      {"/attributes/system/cwd", 3, "attributes.system.cwd: must be a string"},
      {"/attributes/system/environment/PATH", 1, "attributes.system.environment.PATH: must be a string"},
      {"/attributes/system/memory-per-node", -1, "attributes.system.memory-per-node"},
      {"/attributes/system/dependencies/0", "afterok:x", "attributes.system.dependencies[0]"},
      {"/attributes/system/dependencies/1", 7, "attributes.system.dependencies[1]: must be"},
      {"/attributes/system/constraints/hostlist", "node[1-", "attributes.system.constraints.hostlist"},
      {"/attributes/system/exec/test/run_duration", "soon", "attributes.system.exec.test.run_duration"},
      {"/attributes/system/exec/test/run_duration", -1, "attributes.system.exec.test.run_duration"},
      {"/attributes/system/shell/options/output/stdout/type", "kvs",
       "attributes.system.shell.options.output.stdout.type: must be \"file\""},
      {"/attributes/system/shell/options/input/stdin/path", 1,
       "attributes.system.shell.options.input.stdin.path: must be a string"},
      {"/attributes/system/batch", json::object(), "attributes.system.batch.script"},
      {"/attributes/other", json::object(), "attributes.other: unknown attribute section"},
      {"/extra", 1, "extra: unknown key"},
  };
  for (const auto& c : cases) {
    json doc = node_doc();
    doc[json::json_pointer(c.pointer)] = c.value;
    EXPECT_THAT(error_of(doc), HasSubstr(c.message)) << c.pointer << " = " << c.value.dump();
  }
}

TEST(JobspecTest, MissingSections) {
  json doc = node_doc();
  doc.erase("tasks");
  EXPECT_THAT(error_of(doc), HasSubstr("tasks: missing"));
  doc = node_doc();
  doc.erase("version");
  EXPECT_THAT(error_of(doc), HasSubstr("version: missing"));
  doc = node_doc();
  doc.erase("resources");
  EXPECT_THAT(error_of(doc), HasSubstr("resources: missing"));
  doc = node_doc();
  doc["tasks"][0].erase("command");
  EXPECT_THAT(error_of(doc), HasSubstr("tasks[0].command"));
  doc["attributes"]["system"]["batch"] = {{"script", "#!/bin/sh\nhostname\n"}};
  doc["attributes"]["system"]["job"].erase("name");
  auto batch = jobspec_from_document(doc);
  ASSERT_TRUE(batch.ok()) << batch.message();
  EXPECT_EQ(batch->name, "batch");
  EXPECT_TRUE(batch->command.empty());
  EXPECT_EQ(batch->batch_script, "#!/bin/sh\nhostname\n");
  doc = slot_doc();
  doc["resources"][0]["with"] = json::parse(R"([{"type":"gpu","count":1}])");
  EXPECT_THAT(error_of(doc), HasSubstr("a slot must contain a core"));
  doc = slot_doc();
  doc.erase("attributes");
  EXPECT_TRUE(jobspec_from_document(doc).ok());
}

TEST(JobspecTest, Limits) {
  json doc = slot_doc();
  doc["resources"][0]["with"][0]["count"] = 1025;
  EXPECT_THAT(error_of(doc), HasSubstr("1025 cores per task is more than the limit of 1024"));
  doc = node_doc();
  doc["resources"][0]["count"] = 1000;
  doc["resources"][0]["with"][0]["count"] = 1001;
  EXPECT_THAT(error_of(doc), HasSubstr("1001000 tasks, more than the limit of 1000000"));
}

TEST(JobspecTest, Options) {
  auto spec = jobspec_from_document(node_doc());
  ASSERT_TRUE(spec.ok());
  const json* vni = spec->option("cray-slingshot.vnicount");
  ASSERT_NE(vni, nullptr);
  EXPECT_EQ(*vni, 2);
  ASSERT_NE(spec->option("cray-slingshot"), nullptr);
  EXPECT_EQ(*spec->option("gpu-affinity"), "per-task");
  EXPECT_EQ(spec->option("missing"), nullptr);
  EXPECT_EQ(spec->option("gpu-affinity.x"), nullptr);

  json doc = node_doc();
  doc["attributes"]["system"]["shell"]["options"]["mpi.flavor"] = "pmix";
  auto literal = jobspec_from_document(doc);
  ASSERT_TRUE(literal.ok());
  ASSERT_NE(literal->option("mpi.flavor"), nullptr);
  EXPECT_EQ(*literal->option("mpi.flavor"), "pmix");
  EXPECT_EQ(jobspec_from_document(slot_doc())->option("x"), nullptr);
}

TEST(JobspecTest, JsonTextRoundTrip) {
  auto spec = parse_jobspec(node_doc().dump(2));
  ASSERT_TRUE(spec.ok()) << spec.message();
  auto again = parse_jobspec(jobspec_to_string(*spec));
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_EQ(*again->document, node_doc());
  EXPECT_THAT(parse_jobspec("{\"version\": 1,").message(), HasSubstr("not valid JSON"));
  EXPECT_THAT(parse_jobspec("  \n").message(), HasSubstr("empty"));
}

TEST(JobspecTest, Yaml) {
  const char* yaml = R"yaml(
version: 1
resources:
  - type: node
    count: 1
    with:
      - type: slot
        count: 2
        label: task
        with:
          - type: core
            count: 4
tasks:
  - command: ["python3", "-c", "print(1)"]
    slot: task
    count:
      per_slot: 1
attributes:
  system:
    duration: 1.5
    cwd: /tmp
    environment:
      ANSWER: "42"
    shell:
      options:
        verbose: yes
        quoted: "true"
        flag: true
        ratio: 0.25
        level: -3
        nothing: ~
        hex: 0x10
        sci: 1e3
        qnull: "null"
        date: 2024-01-01
        big: 18446744073709551615
  user:
    project: abc
)yaml";
  auto spec = parse_jobspec(yaml);
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_EQ(spec->nnodes, 1u);
  EXPECT_EQ(spec->ntasks, 2u);
  EXPECT_EQ(spec->cores_per_task, 4u);
  EXPECT_DOUBLE_EQ(spec->duration, 1.5);
  EXPECT_EQ(spec->environment.at("ANSWER"), "42");
  EXPECT_EQ(spec->name, "python3");
  EXPECT_EQ(*spec->option("verbose"), "yes");  // YAML 1.1 booleans stay strings
  EXPECT_EQ(*spec->option("quoted"), "true");
  EXPECT_EQ(*spec->option("flag"), true);
  EXPECT_EQ(*spec->option("ratio"), 0.25);
  EXPECT_EQ(*spec->option("level"), -3);
  EXPECT_TRUE(spec->option("nothing")->is_null());
  EXPECT_EQ(*spec->option("hex"), "0x10");
  EXPECT_EQ(*spec->option("sci"), 1000.0);
  EXPECT_EQ(*spec->option("qnull"), "null");
  EXPECT_EQ(*spec->option("date"), "2024-01-01");
  EXPECT_EQ(*spec->option("big"), 18446744073709551615ull);

  auto bad = parse_jobspec("version: 1\nresources: [\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.message(), HasSubstr("not valid YAML: line"));
  EXPECT_THAT(parse_jobspec("- 1\n- 2\n").message(), HasSubstr("must be a JSON object"));
  EXPECT_THAT(parse_jobspec("version: 2\n").message(), HasSubstr("unsupported jobspec version 2"));
}

// ---- build_jobspec -------------------------------------------------------------------

JobRequest request(std::vector<std::string> command) {
  JobRequest req;
  req.command = std::move(command);
  return req;
}

TEST(BuildJobspecTest, Defaults) {
  auto spec = build_jobspec(request({"/bin/sleep", "1"}));
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_EQ(spec->nnodes, 0u);
  EXPECT_EQ(spec->ntasks, 1u);
  EXPECT_EQ(spec->cores_per_task, 1u);
  EXPECT_EQ(spec->name, "sleep");
  EXPECT_EQ(spec->duration, 0);
  EXPECT_EQ(spec->mock_duration, -1);
  const json& doc = *spec->document;
  EXPECT_EQ(doc["version"], 1);
  EXPECT_EQ(doc["resources"][0]["type"], "slot");
  EXPECT_EQ(doc["tasks"][0]["count"]["per_slot"], 1);
  EXPECT_EQ(doc["attributes"]["system"]["duration"], 0);
}

TEST(BuildJobspecTest, NodesWithEvenTasks) {
  JobRequest req = request({"a.out"});
  req.nnodes = 2;
  req.ntasks = 8;
  req.cores_per_task = 2;
  req.gpus_per_task = 1;
  req.exclusive = true;
  req.mem_per_node_mb = 2048;
  auto spec = build_jobspec(req);
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_EQ(spec->nnodes, 2u);
  EXPECT_EQ(spec->ntasks, 8u);
  EXPECT_EQ(spec->gpus_per_task, 1u);
  EXPECT_TRUE(spec->exclusive);
  EXPECT_EQ(spec->mem_per_node_mb, 2048u);
  const json& doc = *spec->document;
  EXPECT_EQ(doc["resources"][0]["with"][0]["count"], 4);
  EXPECT_EQ(doc["tasks"][0]["count"], json({{"per_slot", 1}}));
}

TEST(BuildJobspecTest, UnevenTasksUseTotal) {
  JobRequest req = request({"a.out"});
  req.nnodes = 3;
  req.ntasks = 7;
  auto spec = build_jobspec(req);
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_EQ(spec->ntasks, 7u);
  EXPECT_EQ(spec->nnodes, 3u);
  const json& doc = *spec->document;
  EXPECT_EQ(doc["resources"][0]["with"][0]["count"], 3);  // ceil(7/3) slots per node
  EXPECT_EQ(doc["tasks"][0]["count"], json({{"total", 7}}));
}

TEST(BuildJobspecTest, NodesOnlyMeansOneTaskPerNode) {
  JobRequest req = request({"a.out"});
  req.nnodes = 4;
  auto spec = build_jobspec(req);
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_EQ(spec->ntasks, 4u);
  req.ntasks = 2;
  EXPECT_THAT(build_jobspec(req).message(), HasSubstr("--nodes 4 is more than --ntasks 2"));
  req = request({"a.out"});
  req.exclusive = true;
  EXPECT_THAT(build_jobspec(req).message(), HasSubstr("--exclusive needs a node count"));
}

// The text a submitting command sends without reading it back is the one the read-back
// jobspec would have; errors of the options themselves are still found while building.
TEST(BuildJobspecTest, TextIsTheReadJobspecsText) {
  JobRequest req = request({"app", "--flag"});
  req.nnodes = 2;
  req.ntasks = 5;
  req.cwd = "/work";
  req.environment = {{"A", "1"}};
  req.duration = 90;
  req.name = "n";
  req.dependencies = {"afterok:3"};
  req.options = {{"mpi", "pmix"}};
  auto text = build_jobspec_text(req);
  auto spec = build_jobspec(req);
  ASSERT_TRUE(text.ok()) << text.message();
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_EQ(*text, jobspec_to_string(*spec));
  req.ntasks = 1;
  EXPECT_THAT(build_jobspec_text(req).message(), HasSubstr("--nodes 2 is more than --ntasks 1"));
}

TEST(BuildJobspecTest, AttributesRoundTrip) {
  JobRequest req = request({"app", "--flag"});
  req.cwd = "/work";
  req.environment = {{"A", "1"}, {"B", "two"}};
  req.duration = 90;
  req.name = "myjob";
  req.partition = "debug";
  req.requested_nodes = "n[1-8]";
  req.excluded_nodes = "n5";
  req.dependencies = {"afterok:12:13", "singleton"};
  req.begin_time = 1700000000;
  req.mock_duration = 0.5;
  req.output = "job.%j.out";
  req.error = "job.%j.err";
  req.input = "/dev/zero";
  req.options = {{"cray-slingshot.vnicount", "2"},      {"verbose", "true"}, {"ratio", "0.5"}, {"mode", "fast"},
                 {"cray-slingshot.tcs", "BEST_EFFORT"}, {"neg", "-4"}};
  auto spec = build_jobspec(req);
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_EQ(spec->cwd, "/work");
  EXPECT_EQ(spec->environment, req.environment);
  EXPECT_EQ(spec->duration, 90);
  EXPECT_EQ(spec->name, "myjob");
  EXPECT_EQ(spec->partition, "debug");
  EXPECT_EQ(spec->requested_nodes, "n[1-8]");
  EXPECT_EQ(spec->excluded_nodes, "n5");
  EXPECT_EQ(spec->dependencies, (std::vector<std::string>{"afterok:12", "afterok:13", "singleton"}));
  EXPECT_EQ(spec->begin_time, 1700000000);
  EXPECT_EQ(spec->mock_duration, 0.5);
  EXPECT_EQ(spec->output.path, "job.%j.out");
  EXPECT_EQ(spec->error.path, "job.%j.err");
  EXPECT_EQ(spec->input, "/dev/zero");
  EXPECT_EQ(*spec->option("cray-slingshot.vnicount"), 2);
  EXPECT_EQ(*spec->option("cray-slingshot.tcs"), "BEST_EFFORT");
  EXPECT_EQ(*spec->option("verbose"), true);
  EXPECT_EQ(*spec->option("ratio"), 0.5);
  EXPECT_EQ(*spec->option("mode"), "fast");
  EXPECT_EQ(*spec->option("neg"), -4);
  const json& deps = (*spec->document)["attributes"]["system"]["dependencies"];
  EXPECT_EQ(deps[0], json({{"scheme", "afterok"}, {"value", "12"}}));
  EXPECT_EQ(deps[2], json({{"scheme", "singleton"}}));

  // The text form parses back to the same jobspec.
  auto again = parse_jobspec(jobspec_to_string(*spec));
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_EQ(*again->document, *spec->document);
  EXPECT_EQ(again->dependencies, spec->dependencies);
}

TEST(BuildJobspecTest, BatchScript) {
  JobRequest req;
  req.batch_script = "#!/bin/sh\nsrun hostname\n";
  req.nnodes = 2;
  auto spec = build_jobspec(req);
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_EQ(spec->name, "batch");
  EXPECT_EQ(spec->batch_script, req.batch_script);
  EXPECT_TRUE(spec->command.empty());
}

TEST(BuildJobspecTest, ErrorsComeFromValidation) {
  JobRequest req;
  EXPECT_THAT(build_jobspec(req).message(), HasSubstr("tasks[0].command: must be a non-empty array"));
  req = request({"x"});
  req.cores_per_task = 2000;
  EXPECT_THAT(build_jobspec(req).message(), HasSubstr("more than the limit of 1024"));
  req = request({"x"});
  req.ntasks = 2'000'000;
  EXPECT_THAT(build_jobspec(req).message(), HasSubstr("limit of 1000000"));
  req = request({"x"});
  req.dependencies = {"afterok:bad"};
  EXPECT_THAT(build_jobspec(req).message(), HasSubstr("\"bad\" is not a job id"));
  req = request({"x"});
  req.options = {{"a", "1"}, {"a.b", "2"}};
  EXPECT_THAT(build_jobspec(req).message(), HasSubstr("--setopt a.b: \"a\" is already set"));
  req.options = {{"a..b", "1"}};
  EXPECT_THAT(build_jobspec(req).message(), HasSubstr("empty name"));
  req = request({"x"});
  req.excluded_nodes = "n[";
  EXPECT_THAT(build_jobspec(req).message(), HasSubstr("attributes.system.constraints.exclude"));
}

}  // namespace
}  // namespace corral::job
