// The step manager's placement and launch: StepSpec -> StepRequest, waiting steps
// started in FIFO order, and the signed LaunchTasksRequest for the root of a step's tree.

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "job/eventlog.h"
#include "job/hmac_key.h"
#include "job/mpi_kind.h"
#include "job/step_cred.h"
#include "job/step_id.h"
#include "node/exec/task_env.h"
#include "node/pmi/pmi_server.h"
#include "node/steps/fanout.h"
#include "node/steps/step_manager.h"

#include "node/steps/step_manager_state.h"
#include "node/steps/step_tasks.h"
#include "util/hostlist.h"

namespace corral::node {

namespace {

using EnvList = google::protobuf::RepeatedPtrField<std::string>;

// The step's own CORRAL_STEPID, CORRAL_STEPMGR and CORRAL_MPI_PORTS replace any the
// client's environment has (a `corral run` inside a step inherits the outer step's).
void set_step_variables(EnvList& env, const std::string& stepid, const std::string& stepmgr,
                        const std::optional<job::PortRange>& ports) {
  auto ours = [](const std::string& kv) {  // most names are none of them from their first byte on
    return !kv.empty() && kv[0] == 'C' &&
           (env_names(kv, "CORRAL_STEPID") || env_names(kv, "CORRAL_STEPMGR") || env_names(kv, job::kMpiPortsVar));
  };
  env.erase(std::remove_if(env.begin(), env.end(), ours), env.end());
  *env.Add() = "CORRAL_STEPID=" + stepid;
  *env.Add() = "CORRAL_STEPMGR=" + stepmgr;
  if (ports) *env.Add() = std::string(job::kMpiPortsVar) + "=" + ports->encode();
}

// What Linux's execve takes: one string of at most 32 pages (MAX_ARG_STRLEN), and all of
// them at most 3/4 of the 8 MiB stack limit (with an unlimited stack). A larger
// environment could never start; it is refused with the reason instead.
constexpr size_t kMaxEnvEntry = 128 << 10;
constexpr size_t kMaxEnvTotal = 6 << 20;

// Every entry is NAME=VALUE with a name, and no NUL (execve would cut the list there).
Status check_env(const EnvList& env) {
  size_t total = 0;
  for (const auto& kv : env) {
    const size_t eq = kv.find('=');
    if (eq == 0 || eq == std::string::npos)
      return invalid(fmt::format("environment entry '{}' is not NAME=VALUE", kv.substr(0, 64)));
    const std::string_view name = std::string_view(kv).substr(0, std::min<size_t>(eq, 64));
    if (kv.find('\0') != std::string::npos)
      return invalid(fmt::format("environment variable {} holds a NUL byte", name));
    if (kv.size() >= kMaxEnvEntry)
      return invalid(fmt::format("environment variable {} is {} bytes; a program can be given at most {}", name,
                                 kv.size() + 1, kMaxEnvEntry));
    total += kv.size() + 1 + sizeof(char*);  // as execve counts it
    if (total > kMaxEnvTotal)
      return invalid(
          fmt::format("the environment is over {} MiB, more than a program can be started with", kMaxEnvTotal >> 20));
  }
  return {};
}

}  // namespace

Result<StepRequest> StepManager::to_request(const Job& job, const v1::StepSpec& spec) const {
  if (auto st = check_env(spec.env()); !st) return st.error();
  StepRequest r;
  r.cores_per_task = spec.cores_per_task() > 0 ? spec.cores_per_task() : 1;
  r.gpus_per_task = spec.gpus_per_task();
  if (spec.interactive()) {
    // One task on the job's first node, next to whatever else runs there.
    r.nnodes = 1;
    r.ntasks = 1;
    r.nodelist = job.allocator->nodes().front().name;
    r.overlap = true;
    return r;
  }
  if (!spec.mpi().empty())
    if (auto mpi = job::check_mpi_name(spec.mpi(), "--mpi"); !mpi) return mpi.error();
  r.nnodes = spec.nnodes();
  r.ntasks = spec.ntasks() > 0 ? spec.ntasks() : (spec.nnodes() > 0 ? spec.nnodes() : 1);
  if (r.nnodes > r.ntasks)
    return invalid(fmt::format("{} node(s) requested for {} task(s): every node needs a task", r.nnodes, r.ntasks));
  r.nodelist = spec.nodelist();
  r.overlap = spec.overlap();
  return r;
}

void StepManager::start_ready(Job& job) {
  if (job.ending) return;
  if (job.starting) {  // a launch inside the loop below ended a step: look again after it
    job.start_again = true;
    return;
  }
  job.starting = true;
  do {
    job.start_again = false;
    for (auto& ready : job.allocator->ready()) {
      auto it = job.steps.find(ready.id);
      if (it == job.steps.end() || it->second.state != Step::State::pending) {
        job.allocator->release(ready.id);
        continue;
      }
      it->second.share = std::move(ready.share);
      launch(job, it->second);
    }
  } while (job.start_again);
  job.starting = false;
}

void StepManager::launch(Job& job, Step& step) {
  step.state = Step::State::running;
  step.t_start = job::now();
  Hostlist hosts;
  for (const auto& n : step.share.nodes) {
    hosts.append(n.name);
    step.ncores += static_cast<uint32_t>(n.cores.count());
  }
  step.nodelist = hosts.encode();
  step.nnodes = static_cast<uint32_t>(step.share.nodes.size());
  step.ntasks = step.share.ntasks();
  step.exits.resize(step.ntasks);
  step.exited.assign(step.ntasks, false);

  v1::StepServerMessage created;
  if (job.ports && job.ports_per_step > 0) {
    if (auto p = job.ports->take(job.ports_per_step); p) {
      step.ports = *p;
    } else {
      auto* out = created.add_output();
      out->set_jobid(job.id);
      out->set_stderr(true);
      out->set_data(
          fmt::format("corral: step {}.{}: no MPI ports left in the job's share {}: CORRAL_MPI_PORTS is not set\n",
                      job.id, job::step_name(step.id), job.ports->range().encode()));
    }
  }
  job::StepCred cred;
  auto req = build_launch(job, step, cred);
  if (!req) {
    step.add_error(req.message());
    for (uint32_t r = 0; r < step.ntasks; ++r) {
      step.exited[r] = true;
      step.exits[r].set_rank(r);
      step.exits[r].set_waitstatus(1 << 8);
    }
    step.nexited = step.ntasks;
    finish(job, step.id);
    return;
  }
  auto* c = created.mutable_created();
  c->set_stepid(step.id);
  c->set_nodelist(step.nodelist);
  c->set_ntasks(step.ntasks);
  if (step.ports) c->set_mpi_ports(step.ports->encode());
  hold_created(job, step, std::move(created));

  const uint64_t jobid = job.id, serial = step.serial;
  const uint32_t stepid = step.id;
  auto id = launcher_.launch(
      std::move(*req),
      [this, jobid, stepid, serial](v1::LaunchUp&& up) { on_up(jobid, stepid, serial, std::move(up)); },
      [this, jobid, stepid, serial](const std::string& error) { on_done(jobid, stepid, serial, error); }, cred);
  Step* s = find_step(jobid, stepid, serial);
  if (s == nullptr || s->state != Step::State::running) return;  // it ended inside launch()
  s->launch_id = id;
  std::vector<v1::LaunchDown> held;
  held.swap(s->held);
  for (const auto& down : held) launcher_.deliver(id, down);
}

// --mpi=cray-pals: PMI_CONTROL_PORT from the step's MPI ports (Cray PMI needs them to
// reach its other nodes), a secret of the step's own, and the apinfo file's CPUs a rank.
Status StepManager::add_pals_fields(const Job& job, const Step& step, v1::LaunchTasksRequest& req) {
  if (step.share.nodes.size() > 1 && !step.ports)
    return invalid(fmt::format(
        "--mpi=cray-pals on {} nodes needs MPI ports for PMI_CONTROL_PORT, and step {}.{} has none{}: the site "
        "sets [steps] mpi-ports (docs/admin.md)",
        step.share.nodes.size(), job.id, job::step_name(step.id), job.ports ? " left" : ""));
  if (step.ports) req.set_pals_control_ports(job::pals_control_ports(*step.ports));
  auto secret = job::pals_secret();
  if (!secret) return secret.error();
  req.set_pals_secret(std::move(*secret));
  uint32_t cpus = 0;
  for (const auto& share : step.share.nodes) {
    uint32_t each =
        share.ntasks == 0 ? 1 : std::max<uint32_t>(1, static_cast<uint32_t>(share.cores.count()) / share.ntasks);
    cpus = cpus == 0 ? each : std::min(cpus, each);
  }
  req.set_pals_cpus_per_task(std::max<uint32_t>(cpus, 1));
  return {};
}

Result<v1::LaunchTasksRequest> StepManager::build_launch(Job& job, Step& step, job::StepCred& cred) {
  cred.jobid = job.id;
  cred.stepid = step.id;
  cred.uid = job.uid;
  cred.gid = job.gid;
  cred.nodes = step.nodelist;
  for (const auto& n : step.share.nodes) cred.cores.emplace(n.name, n.cores);
  cred.issued = job::now();
  cred.expires = cred.issued + config_.cred_lifetime;

  v1::LaunchTasksRequest req;
  req.set_jobid(job.id);
  req.set_stepid(step.id);
  v1::StepSpec& spec = step.spec;
  req.mutable_argv()->Swap(spec.mutable_argv());
  auto& env = *req.mutable_env();
  if (spec.env().empty())
    env = job.env;
  else
    env.Swap(spec.mutable_env());
  set_step_variables(env, job::step_name(step.id), job.stepmgr, step.ports);
  *req.mutable_extra_env() = job.extra_env;
  req.set_cwd(spec.cwd());
  req.set_total_tasks(step.ntasks);
  req.set_step_nodelist(step.nodelist);
  req.set_total_nodes(step.nnodes);

  std::vector<int> tasks_per_node;
  uint32_t first_rank = 0, index = 0;
  bool all_here = true;
  for (const auto& share : step.share.nodes) {
    auto* n = req.add_nodes();
    n->set_name(share.name);
    n->set_node_index(index++);
    n->set_first_rank(first_rank);
    n->set_ntasks(share.ntasks);
    n->set_cores(share.cores.encode());
    n->set_gpus(share.gpus.encode());
    first_rank += share.ntasks;
    tasks_per_node.push_back(static_cast<int>(share.ntasks));
    if (auto it = job.node_index.find(share.name); it != job.node_index.end()) {
      n->set_agent(job.nodes[it->second].agent());
      *n->mutable_env() = job.nodes[it->second].env();
    }
    if (n->agent().empty()) n->set_agent(config_.self_uri);
    all_here = all_here && n->agent() == config_.self_uri;
  }
  req.set_fanout_width(job.fanout_width >= 2 ? job.fanout_width : kDefaultFanoutWidth);
  req.set_pmi_mapping(pmi_block_process_mapping(tasks_per_node));
  // The interactive step is a shell: what its MPI programs need comes with their own steps.
  // (The step's --mpi was checked when it was asked for: to_request.)
  std::string mpi = job.mpi;
  if (spec.interactive())
    mpi = "auto";
  else if (auto asked = job::check_mpi_name(spec.mpi(), "--mpi"); asked)
    mpi = std::move(*asked);
  req.set_mpi(mpi);
  const job::MpiService service = job::mpi_service(mpi);
  if (service == job::MpiService::pmix) {
    auto nspace = job::pmix_namespace_name(std::to_string(job.id) + "." + std::to_string(step.id));
    if (!nspace) return nspace.error();
    req.set_pmix_namespace(std::move(*nspace));
  }
  if (service == job::MpiService::pmix || service == job::MpiService::cray_pals) {
    for (const auto& share : step.share.nodes) {
      req.add_layout_nodes(share.name);
      req.add_layout_tasks(share.ntasks);
    }
  }
  if (service == job::MpiService::cray_pals)
    if (auto st = add_pals_fields(job, step, req); !st) return st.error();
  req.set_kvsname(step_kvsname(job.id, step.id));
  req.set_pty(spec.pty());
  req.set_stdin_open(spec.stdin_open());
  *req.mutable_rlimits() = spec.rlimits();
  req.set_input(spec.input());
  req.set_output(spec.output());
  req.set_error(spec.error());
  req.set_job_name(job.name);
  req.set_gid(job.gid);
  req.set_stepmgr(job.stepmgr);
  // A step on this agent's nodes only goes to its launcher in process with `cred` as it
  // is: signing is for requests that travel to other agents, which check them.
  if (all_here) return req;
  auto nonce = job::random_nonce();
  if (!nonce) return nonce.error();
  cred.nonce = *nonce;
  // Signed last: the credential covers what the request runs.
  cred.launch_digest = launch_digest(req);
  req.set_cred(job::sign_step_cred(cred, job.step_key));
  return req;
}

}  // namespace corral::node
