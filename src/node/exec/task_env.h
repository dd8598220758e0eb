// The environment a task starts with: the submit environment, corral's CORRAL_*
// variables and whatever controller hooks add.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "node/exec/agent_config.h"

namespace corral::node {

using EnvMap = std::map<std::string, std::string>;

// What is common to every task of one job on one node.
struct JobNodeEnv {
  uint64_t jobid = 0;
  std::string job_name;
  std::string node_name;
  uint32_t node_index = 0;
  std::string nodelist;  // hostlist of all the job's nodes
  uint32_t total_nodes = 0;
  uint32_t total_tasks = 0;
  uint32_t restarts = 0;  // the run's attempt: CORRAL_RESTART_COUNT (Slurm's SLURM_RESTART_COUNT)
  std::string cores;      // idset of this node's cores
  std::string gpus;       // idset of this node's gpus, may be empty
  std::string cwd;
  std::string controller_uri;
  // "cluster-key" on a site without MUNGE: CORRAL_AUTH, so that `corral` in a task gets
  // its credentials from corral-authd whatever the job's environment says.
  std::string auth;
  std::string user_name;  // fills USER/LOGNAME when the submit environment lacks them
  std::string home;       // fills HOME likewise
};

// The fields every node environment of this agent shares (the controller's address, the
// site's authentication), for a job's tasks and a step's alike.
JobNodeEnv agent_node_env(const AgentConfig& config);

// One variable as execve takes it, "NAME=VALUE", with where its name ends.
struct EnvEntry {
  std::string kv;
  size_t name_len = 0;
  std::string_view name() const { return std::string_view(kv).substr(0, name_len); }
  std::string_view value() const { return std::string_view(kv).substr(name_len + 1); }
};
EnvEntry env_entry(std::string_view name, std::string_view value);
// Whether the "NAME=VALUE" entry `kv` sets `name`.
inline bool env_names(std::string_view kv, std::string_view name) {
  return kv.size() > name.size() && kv[name.size()] == '=' && kv.starts_with(name);
}
// Sets `name` in `entries`: in the place of an entry of that name, else at the end.
void set_env_entry(std::vector<EnvEntry>& entries, std::string_view name, std::string_view value);

// submit env, then the CORRAL_* variables (which win over submitted ones), then
// `extra` (controller hooks win over everything but the per-task ranks).
EnvMap build_node_env(EnvMap submit_env, const JobNodeEnv& job, const EnvMap& extra);
// What build_node_env sets over the submitted environment: the basics a shell expects
// where `submitted` says the submit environment lacks them (PATH, HOME, USER, LOGNAME),
// the CORRAL_* variables, then `extra`. A caller that keeps the submitted variables where
// they are (a step's, in its request) merges the two itself instead of copying them.
EnvMap node_env_overrides(const JobNodeEnv& job, const EnvMap& extra,
                          const std::function<bool(std::string_view)>& submitted);
// The same before `extra`, appended to `out` (each name once): a step builds its tasks'
// variables from these without a map.
void append_node_env(const JobNodeEnv& job, const std::function<bool(std::string_view)>& submitted,
                     std::vector<EnvEntry>& out);
// Appends "KEY=VALUE" to `out`, one allocation.
void add_env_entry(std::vector<std::string>& out, std::string_view key, std::string_view value);
// CORRAL_TASK_RANK and CORRAL_LOCAL_RANK: each task's own (build_task_env), never
// inherited.
bool is_task_variable(std::string_view name);
// PMI_* and PMIX_* variables: those a task inherits from where it was submitted would only
// mislead the MPI library, which must see the ones of its own PMI server.
bool is_pmi_variable(std::string_view name);

// The final "KEY=VALUE" list for one task.
std::vector<std::string> build_task_env(const EnvMap& node_env, uint32_t rank, uint32_t local_rank);

// "0-2,5" -> "0,1,2,5" (CUDA_VISIBLE_DEVICES wants a plain list); invalid input is
// returned unchanged.
std::string idset_to_list(const std::string& idset);
// Number of ids in an idset string, 0 when it is invalid or empty.
size_t idset_count(const std::string& idset);

}  // namespace corral::node
