#include "node/steps/step_tasks.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <bitset>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "job/hmac_key.h"
#include "job/step_id.h"
#include "util/hostlist.h"
#include "util/idset.h"

namespace corral::node {

namespace {

// The uid the token claims, read before verification only so the policy can name it: the
// signature check covers it, so a changed uid is refused as an altered credential.
uint32_t claimed_uid(std::string_view token) {
  auto dot = token.find('.');
  if (dot == std::string_view::npos) return 0;
  auto payload = job::base64url_decode(token.substr(0, dot));
  if (!payload) return 0;
  auto j = nlohmann::json::parse(*payload, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return 0;
  auto it = j.find("uid");
  if (it == j.end() || !it->is_number_unsigned()) return 0;
  return it->get<uint32_t>();
}

Status check_cores(const v1::LaunchNode& node, const job::StepCred& cred) {
  auto wanted = IdSet::parse(node.cores());
  if (!wanted)
    return invalid("the launch request's cores '" + node.cores() + "' for node " + node.name() +
                   " are not an idset: " + wanted.message());
  IdSet granted = cred.cores_on(node.name());
  IdSet extra = wanted->minus(granted);
  if (!extra.empty())
    return denied("cores " + extra.encode() + " of node " + node.name() +
                  " are not granted by the step credential (it grants '" + granted.encode() + "')");
  return {};
}

}  // namespace

namespace {
// Length-prefixed, so no two different requests serialize alike.
void put(std::string& out, std::string_view s) {
  out += std::to_string(s.size());
  out += ':';
  out += s;
}
void put_map(std::string& out, const google::protobuf::Map<std::string, std::string>& m) {
  std::vector<std::pair<std::string_view, std::string_view>> kv(m.begin(), m.end());
  std::sort(kv.begin(), kv.end());
  put(out, std::to_string(kv.size()));
  for (const auto& [k, v] : kv) {
    put(out, k);
    put(out, v);
  }
}
}  // namespace

std::string launch_digest(const v1::LaunchTasksRequest& req) {
  std::string s = "corral-launch-v1";
  put(s, std::to_string(req.argv_size()));
  for (const auto& a : req.argv()) put(s, a);
  put(s, std::to_string(req.env_size()));
  for (const auto& kv : req.env()) put(s, kv);
  put_map(s, req.extra_env());
  for (const auto* f : {&req.cwd(), &req.input(), &req.output(), &req.error(), &req.job_name()}) put(s, *f);
  put(s, std::to_string(req.gid()));
  put(s, req.pty() ? "pty" : "-");
  put(s, req.mpi());
  put(s, req.pmix_namespace());
  put(s, std::to_string(req.layout_nodes_size()));
  for (const auto& n : req.layout_nodes()) put(s, n);
  for (uint32_t t : req.layout_tasks()) put(s, std::to_string(t));
  put(s, req.pals_control_ports());
  put(s, req.pals_secret());
  put(s, std::to_string(req.pals_cpus_per_task()));
  put(s, req.stdin_open() ? "stdin" : "-");
  std::vector<std::pair<std::string_view, int64_t>> limits(req.rlimits().begin(), req.rlimits().end());
  std::sort(limits.begin(), limits.end());
  put(s, std::to_string(limits.size()));
  for (const auto& [name, value] : limits) {
    put(s, name);
    put(s, std::to_string(value));
  }
  return job::sha256_hex(s);
}

namespace {
// What every check of a request's credential asks: its job, step and user, on this clock.
job::VerifyPolicy request_policy(const v1::LaunchTasksRequest& req, const StepCredCheck& check) {
  job::VerifyPolicy policy;
  policy.now = check.now;
  policy.uid = claimed_uid(req.cred());
  policy.clock_skew = check.clock_skew;
  policy.jobid = req.jobid();
  policy.stepid = req.stepid();
  return policy;
}
}  // namespace

// With the cluster key the job's key is derived here; without it, it is the one the
// controller sent for the job (policy.jobid is the request's job either way).
Result<job::StepCred> verify(const v1::LaunchTasksRequest& req, const StepCredCheck& check,
                             const job::VerifyPolicy& policy) {
  if (!check.cluster_key.empty()) return job::verify_step_cred_with_cluster_key(req.cred(), check.cluster_key, policy);
  if (check.job_key == nullptr)
    return denied("this agent has no key for job " + std::to_string(req.jobid()) +
                  " (the controller sends it to the job's nodes when the job starts; is the job running here?)");
  return job::verify_step_cred(req.cred(), *check.job_key, policy);
}

Result<job::StepCred> check_request_cred(const v1::LaunchTasksRequest& req, const StepCredCheck& check) {
  job::VerifyPolicy policy = request_policy(req, check);
  policy.launch_digest = launch_digest(req);
  return verify(req, check, policy);
}

Result<job::StepCred> check_node_cred(const v1::LaunchTasksRequest& req, const v1::LaunchNode& node,
                                      const StepCredCheck& check) {
  job::VerifyPolicy policy = request_policy(req, check);
  policy.node = node.name();
  auto cred = verify(req, check, policy);
  if (!cred) return cred.error();
  if (auto st = check_node_claims(*cred, node, check); !st) return st.error();
  return cred;
}

Status check_node_claims(const job::StepCred& cred, const v1::LaunchNode& node, const StepCredCheck& check) {
  auto nodes = Hostlist::parse(cred.nodes);
  if (!nodes || !nodes->contains(node.name()))
    return denied("step credential does not include node " + node.name() + " (it covers " + cred.nodes + ")");
  if (auto st = check_cores(node, cred); !st) return st;
  if (!check.can_switch_user && cred.uid != ::getuid())
    return denied("the step credential is for uid " + std::to_string(cred.uid) + " but this agent runs as uid " +
                  std::to_string(::getuid()) +
                  " and cannot start tasks as another user (that needs an agent running as root with corral-imp)");
  return {};
}

StepUser lookup_step_user(uint32_t uid, uint32_t gid) {
  StepUser user{uid, gid, std::to_string(uid), {}};
  struct passwd pw {};
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr) {
    user.name = pw.pw_name;
    user.home = pw.pw_dir;
  }
  return user;
}

std::string step_cwd(const v1::LaunchTasksRequest& req, const StepUser& user) {
  if (!req.cwd().empty()) return req.cwd();
  return user.home.empty() ? "/" : user.home;
}

Result<std::vector<std::string>> step_node_env(v1::LaunchTasksRequest& req, const v1::LaunchNode& node,
                                               const StepUser& user, const std::string& cwd, const AgentConfig& config,
                                               bool last_use) {
  JobNodeEnv je = agent_node_env(config);
  je.jobid = req.jobid();
  je.job_name = req.job_name();
  je.node_name = node.name();
  je.node_index = node.node_index();
  je.nodelist = req.step_nodelist();
  je.total_nodes = req.total_nodes();
  je.total_tasks = req.total_tasks();
  je.cores = node.cores();
  je.gpus = node.gpus();
  je.cwd = cwd;
  je.user_name = user.name;
  je.home = user.home;
  // The submitted variables, read where the request has them (KEY=VALUE, checked by the
  // step manager): a client sends its whole environment with every step.
  struct Submitted {
    std::string_view key, value;
    int index;  // in req.env()
  };
  std::vector<Submitted> submit;
  submit.reserve(static_cast<size_t>(req.env_size()));
  for (int i = 0; i < req.env_size(); ++i) {
    const std::string& kv = req.env(i);
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    const std::string_view key(kv.data(), eq), value(kv.data() + eq + 1, kv.size() - eq - 1);
    if (!is_pmi_variable(key) && !is_task_variable(key)) submit.push_back({key, value, i});
  }
  auto submitted = [&submit](std::string_view key) {
    return std::any_of(submit.begin(), submit.end(), [&key](const Submitted& kv) { return kv.key == key; });
  };
  EnvMap extra(req.extra_env().begin(), req.extra_env().end());
  for (const auto& [k, v] : node.env()) extra[k] = v;  // this node's own values win
  // Corral's variables, then the controller's (which win over them), then the step's own.
  std::vector<EnvEntry> over;
  over.reserve(24 + extra.size());
  append_node_env(je, submitted, over);
  for (const auto& [k, v] : extra) set_env_entry(over, k, v);
  set_env_entry(over, "CORRAL_STEPID", job::step_name(req.stepid()));
  if (!req.stepmgr().empty()) set_env_entry(over, "CORRAL_STEPMGR", req.stepmgr());

  std::vector<std::string> out;
  if (config.hooks->task_env_applies(node.name(), user.uid, extra)) {
    // A hook reads and changes the whole environment.
    EnvMap env;
    for (const auto& kv : submit) env.emplace(kv.key, kv.value);
    for (const auto& e : over) env[std::string(e.name())] = e.value();
    if (auto st = config.hooks->task_env(node.name(), user.uid, extra, env); !st) return st.error();
    out.reserve(env.size() + 2);
    for (const auto& [k, v] : env)
      if (!is_task_variable(k)) add_env_entry(out, k, v);
    return out;
  }
  // Otherwise in the client's order (both values of a name sent twice go to the task,
  // whose getenv finds the first), then corral's over them.
  std::bitset<256> first;  // the first bytes of corral's names: most submitted names are none of them
  for (const auto& e : over)
    if (e.name_len > 0) first.set(static_cast<unsigned char>(e.kv[0]));
  auto is_replaced = [&](std::string_view key) {
    return !key.empty() && first.test(static_cast<unsigned char>(key[0])) &&
           std::any_of(over.begin(), over.end(), [key](const EnvEntry& e) { return e.name() == key; });
  };
  // The request's own KEY=VALUE strings are the task's: moved out of it when no other node
  // here reads them (the views into an entry are not used once it has moved).
  out.reserve(submit.size() + over.size() + 2);
  for (const auto& kv : submit) {
    if (is_replaced(kv.key)) continue;
    if (last_use)
      out.push_back(std::move(*req.mutable_env(kv.index)));
    else
      out.push_back(req.env(kv.index));
  }
  for (auto& e : over) out.push_back(std::move(e.kv));
  return out;
}

std::vector<std::string> step_task_env(std::vector<std::string> node_env, uint32_t rank, uint32_t local_rank,
                                       const std::vector<std::string>& pmi_env) {
  node_env.reserve(node_env.size() + 2 + pmi_env.size());
  node_env.push_back("CORRAL_TASK_RANK=" + std::to_string(rank));
  node_env.push_back("CORRAL_LOCAL_RANK=" + std::to_string(local_rank));
  node_env.insert(node_env.end(), pmi_env.begin(), pmi_env.end());
  return node_env;
}

}  // namespace corral::node
