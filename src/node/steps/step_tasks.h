// The stateless parts of starting a step's tasks on one node: the credential check (who
// may run what where) and the environment the tasks see. StepNode does the rest.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "job/step_cred.h"
#include "node/exec/agent_config.h"
#include "node/exec/task_env.h"
#include "steps.pb.h"
#include "util/result.h"

namespace corral::node {

struct StepUser {
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::string name;  // the uid in decimal when the account is unknown here
  std::string home;
};

struct StepCredCheck {
  std::string_view cluster_key;          // empty: the job's key from the controller, below
  const std::string* job_key = nullptr;  // the request's job's key (JobKeys), if it came
  double now = 0;
  double clock_skew = 5.0;
  // The agent can start tasks as other users (root with corral-imp); otherwise only as
  // its own uid, and a credential for another user is refused.
  bool can_switch_user = false;
};

// SHA-256 (hex) over what a launch request runs: argv, environment (both maps, in key
// order), working directory, input/output/error patterns, pty and stdin, job name and
// group. The step manager signs it into the credential; every agent recomputes it.
std::string launch_digest(const v1::LaunchTasksRequest& req);

// The checks of a whole request, made before anything of it is forwarded or expanded:
// signature, expiry, job, step and the launch digest (not the node or its cores).
Result<job::StepCred> check_request_cred(const v1::LaunchTasksRequest& req, const StepCredCheck& check);

// Verifies req.cred for `node` (signature, expiry, job, step, node) and that the node's
// cores in the request are granted by it. Errors name the failed check.
Result<job::StepCred> check_node_cred(const v1::LaunchTasksRequest& req, const v1::LaunchNode& node,
                                      const StepCredCheck& check);

// The node's own checks on a credential already verified for the whole request (or made
// by this agent's step manager): it names `node`, grants the node's cores in the
// request, and is for a user this agent can start tasks as.
Status check_node_claims(const job::StepCred& cred, const v1::LaunchNode& node, const StepCredCheck& check);

StepUser lookup_step_user(uint32_t uid, uint32_t gid);

// The request's cwd, else the user's home, else "/".
std::string step_cwd(const v1::LaunchTasksRequest& req, const StepUser& user);

// What every task of the step on `node` has (the contract's "Step environment") up to the
// per-task variables, as KEY=VALUE: the client's environment, CORRAL_* with the step's
// values, the job's hook variables, then what the node hooks add (node/exec/node_hooks.h).
// Inherited PMI_*/PMIX_* variables are dropped (the node's PMI server sets its own).
// `last_use`: no other node of this agent reads the request's environment after this one,
// whose strings are then moved into the result rather than copied.
Result<std::vector<std::string>> step_node_env(v1::LaunchTasksRequest& req, const v1::LaunchNode& node,
                                               const StepUser& user, const std::string& cwd, const AgentConfig& config,
                                               bool last_use = false);

// The final KEY=VALUE list of one task: the node's, its ranks and its PMI connection. The
// node's list is moved in for a node's last task, copied for the others.
std::vector<std::string> step_task_env(std::vector<std::string> node_env, uint32_t rank, uint32_t local_rank,
                                       const std::vector<std::string>& pmi_env);

}  // namespace corral::node
