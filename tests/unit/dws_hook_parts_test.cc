// The dws hook's pure parts: a jobspec's #DW directives, Servers allocation sets, the
// kubeconfig reader and the [rabbit] section.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "storage/dws/allocation_sets.h"
#include "storage/dws/job_directives.h"
#include "storage/dws/json_fields.h"
#include "storage/dws/kube_client.h"
#include "storage/dws/kube_config.h"
#include "storage/dws/node/dws_node_hook.h"
#include "storage/dws/rabbit_config.h"

namespace corral::storage::dws {
namespace {

using nlohmann::json;

json spec_with(json dw) { return {{"attributes", {{"system", {{"dw", std::move(dw)}}}}}}; }

TEST(DwsJobDirectives, SplitsAtEachDwAndBoundsTheCount) {
  auto one = job_directives(
      spec_with("#DW jobdw type=xfs capacity=1GiB name=a #DW copy_in source=/x destination=$DW_JOB_a/"), 32);
  ASSERT_TRUE(one.ok()) << one.message();
  ASSERT_EQ(one->size(), 2u);
  EXPECT_EQ((*one)[0], "#DW jobdw type=xfs capacity=1GiB name=a");
  EXPECT_EQ((*one)[1], "#DW copy_in source=/x destination=$DW_JOB_a/");
  auto list = job_directives(spec_with(json::array({"#DW jobdw a=1", "  #DW jobdw b=2  "})), 32);
  ASSERT_TRUE(list.ok());
  EXPECT_EQ((*list)[1], "#DW jobdw b=2");
  EXPECT_TRUE(job_directives(json::object(), 32)->empty());
  EXPECT_NE(job_directives(spec_with("jobdw type=xfs"), 32).message().find("not a #DW directive"), std::string::npos);
  EXPECT_NE(job_directives(spec_with(json::array({1})), 32).message().find("must be a string"), std::string::npos);
  EXPECT_NE(job_directives(spec_with(json{{"a", 1}}), 32).message().find("string or a list"), std::string::npos);
  json many = json::array();
  for (int i = 0; i < 5; ++i) many.push_back("#DW jobdw x=" + std::to_string(i));
  EXPECT_NE(job_directives(spec_with(many), 4).message().find("at most 4"), std::string::npos);
  EXPECT_NE(job_directives(spec_with("#DW jobdw #DW jobdw #DW jobdw"), 2).message().find("at most 2"),
            std::string::npos);
  EXPECT_FALSE(job_directives(spec_with("#DW " + std::string(kMaxDirectiveText, 'x')), 32).ok());
}

TEST(DwsAllocationSets, PerComputeAcrossServersAndSingleServer) {
  std::vector<std::pair<std::string, unsigned>> per{{"r0", 3}, {"r1", 6}};
  json xfs = json::array({{{"label", "xfs"}, {"allocationStrategy", "AllocatePerCompute"}, {"minimumCapacity", 1000}}});
  auto a = allocation_sets(xfs, per, 9, 0);
  ASSERT_TRUE(a.ok()) << a.message();
  EXPECT_EQ((*a)[0]["allocationSize"], 1000);
  EXPECT_EQ((*a)[0]["storage"][1]["allocationCount"], 6);
  // OSTs: gcd of 3 and 6 is 3, so each rabbit gets nodes/3 allocations of 3/9 of the capacity.
  json ost =
      json::array({{{"label", "ost"}, {"allocationStrategy", "AllocateAcrossServers"}, {"minimumCapacity", 900}}});
  auto o = allocation_sets(ost, per, 9, 0);
  EXPECT_EQ((*o)[0]["allocationSize"], 300);
  EXPECT_EQ((*o)[0]["storage"][0]["allocationCount"], 1);
  EXPECT_EQ((*o)[0]["storage"][1]["allocationCount"], 2);
  // The single server goes to the rabbit with the most of the job's nodes.
  json mgt = json::array({{{"label", "mgt"}, {"allocationStrategy", "AllocateSingleServer"}, {"minimumCapacity", 10}}});
  auto m = allocation_sets(mgt, per, 9, 4096);
  EXPECT_EQ((*m)[0]["storage"].size(), 1u);
  EXPECT_EQ((*m)[0]["storage"][0]["name"], "r1");
  EXPECT_EQ((*m)[0]["allocationSize"], 4096);  // the minimum
  EXPECT_FALSE(allocation_sets(xfs, {}, 0, 0).ok());
  EXPECT_FALSE(allocation_sets(json::array({{{"allocationStrategy", "Nope"}}}), per, 9, 0).ok());
}

TEST(DwsKubeConfig, CurrentContextTokenAndCa) {
  char dir[] = "/tmp/kubecfgXXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string d = dir;
  std::ofstream(d + "/token") << "s3cret\n";
  std::ofstream(d + "/ca.pem") << "PEM";
  std::ofstream(d + "/config") << "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                                  "clusters:\n- name: k\n  cluster:\n    server: https://h:6443/\n"
                                  "    certificate-authority: ca.pem\n"
                                  "contexts:\n- name: c\n  context: {cluster: k, user: u}\n"
                                  "users:\n- name: u\n  user: {tokenFile: token}\n";
  auto kc = load_kubeconfig(d + "/config");
  ASSERT_TRUE(kc.ok()) << kc.message();
  EXPECT_EQ(kc->server, "https://h:6443");
  EXPECT_EQ(kc->token, "s3cret");
  EXPECT_EQ(kc->ca_pem, "PEM");
  std::ofstream(d + "/bad") << "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\n"
                               "clusters:\n- name: k\n  cluster: {server: 'https://h'}\n"
                               "users:\n- name: u\n  user: {exec: {command: x}}\n";
  EXPECT_NE(load_kubeconfig(d + "/bad").message().find("only token authentication"), std::string::npos);
  EXPECT_NE(load_kubeconfig(d + "/missing").message().find("cannot read"), std::string::npos);
  std::ofstream(d + "/data") << "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k}\n"
                                "clusters:\n- name: k\n  cluster: {server: 'http://h', certificate-authority-data: "
                                "UEVNIQ==}\n";
  EXPECT_EQ(load_kubeconfig(d + "/data")->ca_pem, "PEM!");
  std::system(("rm -rf " + d).c_str());
}

TEST(DwsRabbitConfig, KeysInBothSpellingsAndChecks) {
  hook::Settings s{{"enabled", hook::Setting::Kind::boolean, "true", "t: rabbit.enabled"},
                   {"kubeconfig", hook::Setting::Kind::string, "/k", "t: rabbit.kubeconfig"},
                   {"tc_timeout", hook::Setting::Kind::integer, "3", "t: rabbit.tc_timeout"},
                   {"prerun-timeout", hook::Setting::Kind::string, "2m", "t: rabbit.prerun-timeout"}};
  auto c = parse_rabbit_settings(s);
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->tc_timeout, 3);
  EXPECT_EQ(c->prerun_timeout, 120);
  s.push_back({"bogus", hook::Setting::Kind::string, "x", "t: rabbit.bogus"});
  EXPECT_FALSE(parse_rabbit_settings(s).ok());
  EXPECT_FALSE(parse_rabbit_settings({{"enabled", hook::Setting::Kind::boolean, "true", "t"}}).ok());
  EXPECT_FALSE(parse_rabbit_settings({{"namespace", hook::Setting::Kind::string, "Bad/NS", "t"}}).ok());
}

TEST(DwsJsonFields, WrongShapesReadAsEmpty) {
  json o = {{"status", nullptr}, {"n", "x"}, {"a", 5}};
  EXPECT_TRUE(obj_at(o, "status").empty());
  EXPECT_TRUE(arr_at(o, "n").empty());
  EXPECT_EQ(str_at(o, "a"), "");
  EXPECT_EQ(str_at(json(3), "n"), "");
  EXPECT_EQ(u64_at(o, "a"), 5u);
  EXPECT_FALSE(bool_at(o, "n"));
  EXPECT_EQ(query_escape("a/b=c d"), "a%2Fb%3Dc%20d");
}

TEST(DwsNodeHook, TasksStartOnlyWithTheirStorageMountedAndTheirs) {
  char dir[] = "/tmp/dwsnodeXXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string mount = std::string(dir) + "/fs";
  auto hook = make_dws_node_hook();
  hook::EnvMap from = {{"DW_JOB_scratch", mount}, {"SLINGSHOT_VNIS", "1024"}}, env;
  hook::TaskEnvRequest req{"node3", getuid(), &from};
  auto st = hook->task_env(req, env);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "DW_JOB_scratch: the job's rabbit storage " + mount + " is not mounted on node node3");
  ASSERT_EQ(::mkdir(mount.c_str(), 0700), 0);
  EXPECT_TRUE(hook->task_env(req, env).ok());
  hook::TaskEnvRequest other{"node3", getuid() + 1, &from};
  EXPECT_NE(hook->task_env(other, env).message().find("not to the job's user"), std::string::npos);
  // A job without rabbit storage is none of its business.
  hook::EnvMap none = {{"PATH", "/bin"}};
  EXPECT_TRUE(hook->task_env(hook::TaskEnvRequest{"node3", 0, &none}, env).ok());
  std::system(("rm -rf " + std::string(dir)).c_str());
}

}  // namespace
}  // namespace corral::storage::dws
