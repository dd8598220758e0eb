#include "node/exec/task_env.h"

#include <string>
#include <utility>

#include "util/idset.h"

namespace corral::node {

JobNodeEnv agent_node_env(const AgentConfig& config) {
  JobNodeEnv je;
  je.controller_uri = config.controller_uri;
  if (config.auth == net::AuthMethod::cluster_key) je.auth = std::string(net::auth_method_name(config.auth));
  return je;
}

namespace {

void set_default(EnvMap& env, const std::string& key, const std::string& value) {
  if (!value.empty()) env.try_emplace(key, value);
}

}  // namespace

std::string idset_to_list(const std::string& idset) {
  auto parsed = IdSet::parse(idset);
  if (!parsed) return idset;
  std::string out;
  for (uint32_t id : parsed->to_vector()) {
    if (!out.empty()) out += ',';
    out += std::to_string(id);
  }
  return out;
}

size_t idset_count(const std::string& idset) {
  if (idset.empty()) return 0;
  auto parsed = IdSet::parse(idset);
  return parsed ? parsed->count() : 0;
}

EnvMap build_node_env(EnvMap submit_env, const JobNodeEnv& job, const EnvMap& extra) {
  EnvMap env = std::move(submit_env);
  // A job submitted without an environment (e.g. from an API client) still needs the
  // basics a shell expects.
  set_default(env, "PATH", "/usr/local/bin:/usr/bin:/bin");
  set_default(env, "HOME", job.home);
  set_default(env, "USER", job.user_name);
  set_default(env, "LOGNAME", job.user_name);

  env["CORRAL_JOBID"] = std::to_string(job.jobid);
  env["CORRAL_JOB_NAME"] = job.job_name;
  env["CORRAL_NODENAME"] = job.node_name;
  env["CORRAL_NODEID"] = std::to_string(job.node_index);
  env["CORRAL_NODELIST"] = job.nodelist;
  env["CORRAL_NNODES"] = std::to_string(job.total_nodes);
  env["CORRAL_NTASKS"] = std::to_string(job.total_tasks);
  env["CORRAL_RESTART_COUNT"] = std::to_string(job.restarts);
  env["CORRAL_CPUS_ON_NODE"] = std::to_string(idset_count(job.cores));
  env["CORRAL_JOB_CPUS"] = job.cores;
  if (!job.gpus.empty()) {
    // NVIDIA's and AMD's runtimes each read their own; the other one ignores it.
    env["CUDA_VISIBLE_DEVICES"] = idset_to_list(job.gpus);
    env["ROCR_VISIBLE_DEVICES"] = env["CUDA_VISIBLE_DEVICES"];
    env["CORRAL_GPUS"] = job.gpus;
  }
  env["CORRAL_SUBMIT_DIR"] = job.cwd;
  if (!job.controller_uri.empty()) env["CORRAL_URI"] = job.controller_uri;
  if (!job.auth.empty()) env["CORRAL_AUTH"] = job.auth;
  for (const auto& [k, v] : extra) env[k] = v;
  return env;
}

std::vector<std::string> build_task_env(const EnvMap& node_env, uint32_t rank, uint32_t local_rank) {
  std::vector<std::string> out;
  out.reserve(node_env.size() + 2);
  for (const auto& [k, v] : node_env) {
    if (k == "CORRAL_TASK_RANK" || k == "CORRAL_LOCAL_RANK") continue;
    std::string& kv = out.emplace_back();  // one allocation per variable
    kv.reserve(k.size() + 1 + v.size());
    kv.append(k).append(1, '=').append(v);
  }
  out.push_back("CORRAL_TASK_RANK=" + std::to_string(rank));
  out.push_back("CORRAL_LOCAL_RANK=" + std::to_string(local_rank));
  return out;
}

bool is_pmi_variable(const std::string& name) { return name.rfind("PMI_", 0) == 0 || name.rfind("PMIX_", 0) == 0; }

}  // namespace corral::node
