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

EnvEntry env_entry(std::string_view name, std::string_view value) {
  EnvEntry e;
  e.kv.reserve(name.size() + 1 + value.size());
  e.kv.append(name).append(1, '=').append(value);
  e.name_len = name.size();
  return e;
}

void set_env_entry(std::vector<EnvEntry>& entries, std::string_view name, std::string_view value) {
  for (auto& e : entries)
    if (e.name() == name) {
      e = env_entry(name, value);
      return;
    }
  entries.push_back(env_entry(name, value));
}

void append_node_env(const JobNodeEnv& job, const std::function<bool(std::string_view)>& submitted,
                     std::vector<EnvEntry>& out) {
  auto set = [&out](std::string_view name, std::string_view value) { out.push_back(env_entry(name, value)); };
  // A job submitted without an environment (e.g. from an API client) still needs the
  // basics a shell expects.
  auto set_default = [&](std::string_view name, std::string_view value) {
    if (!value.empty() && !submitted(name)) set(name, value);
  };
  set_default("PATH", "/usr/local/bin:/usr/bin:/bin");
  set_default("HOME", job.home);
  set_default("USER", job.user_name);
  set_default("LOGNAME", job.user_name);

  set("CORRAL_JOBID", std::to_string(job.jobid));
  set("CORRAL_JOB_NAME", job.job_name);
  set("CORRAL_NODENAME", job.node_name);
  set("CORRAL_NODEID", std::to_string(job.node_index));
  set("CORRAL_NODELIST", job.nodelist);
  set("CORRAL_NNODES", std::to_string(job.total_nodes));
  set("CORRAL_NTASKS", std::to_string(job.total_tasks));
  set("CORRAL_RESTART_COUNT", std::to_string(job.restarts));
  set("CORRAL_CPUS_ON_NODE", std::to_string(idset_count(job.cores)));
  set("CORRAL_JOB_CPUS", job.cores);
  if (!job.gpus.empty()) {
    // NVIDIA's and AMD's runtimes each read their own; the other one ignores it.
    const std::string list = idset_to_list(job.gpus);
    set("CUDA_VISIBLE_DEVICES", list);
    set("ROCR_VISIBLE_DEVICES", list);
    set("CORRAL_GPUS", job.gpus);
  }
  set("CORRAL_SUBMIT_DIR", job.cwd);
  if (!job.controller_uri.empty()) set("CORRAL_URI", job.controller_uri);
  if (!job.auth.empty()) set("CORRAL_AUTH", job.auth);
}

EnvMap node_env_overrides(const JobNodeEnv& job, const EnvMap& extra,
                          const std::function<bool(std::string_view)>& submitted) {
  std::vector<EnvEntry> ours;
  append_node_env(job, submitted, ours);
  EnvMap env;
  for (const auto& e : ours) env.emplace(e.name(), e.value());
  for (const auto& [k, v] : extra) env[k] = v;
  return env;
}

EnvMap build_node_env(EnvMap submit_env, const JobNodeEnv& job, const EnvMap& extra) {
  EnvMap env = std::move(submit_env);
  EnvMap over = node_env_overrides(job, extra, [&env](std::string_view key) { return env.contains(std::string(key)); });
  for (auto& [k, v] : over) env[k] = std::move(v);
  return env;
}

void add_env_entry(std::vector<std::string>& out, std::string_view key, std::string_view value) {
  out.push_back(env_entry(key, value).kv);
}

bool is_task_variable(std::string_view name) { return name == "CORRAL_TASK_RANK" || name == "CORRAL_LOCAL_RANK"; }

std::vector<std::string> build_task_env(const EnvMap& node_env, uint32_t rank, uint32_t local_rank) {
  std::vector<std::string> out;
  out.reserve(node_env.size() + 2);
  for (const auto& [k, v] : node_env)
    if (!is_task_variable(k)) add_env_entry(out, k, v);
  out.push_back("CORRAL_TASK_RANK=" + std::to_string(rank));
  out.push_back("CORRAL_LOCAL_RANK=" + std::to_string(local_rank));
  return out;
}

bool is_pmi_variable(std::string_view name) { return name.starts_with("PMI_") || name.starts_with("PMIX_"); }
}  // namespace corral::node
