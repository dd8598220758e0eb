// The controller half of Rabbit storage (docs/admin.md "Rabbit storage (DWS)"): the `dws`
// hook drives one DWS Workflow per job that asks for `#DW` storage through its seven
// states, holding the job where the states need it:
//   validate: the workflow is created (Proposal); dependency `dws-create` until Proposal
//             completes;
//   alloc:    prolog `dws-setup`; Servers and Computes are filled from the job's nodes and
//             the rabbits that serve them, then Setup, DataIn, PreRun; PreRun's DW_JOB_*
//             variables go to every task (event `dws_environment`) and release the prolog;
//   release:  epilog `dws-epilog` through PostRun, DataOut and Teardown (straight to
//             Teardown when the job never ran or storage failed); then the workflow
//             is deleted and its finalizer removed.
// Every completed state posts `dws-timing` with its elapsed time. An Error, a
// TransientCondition longer than tc-timeout, a [rabbit] timeout or the workflow's deletion
// by someone else raises an exception and goes to Teardown. The API server is read through
// one watch per kind (Workflow, Storage, DWDirectiveRule) and written off the controller's
// lock (kube_writers.h); after a restart the hook lists the workflows, adopts those of its
// live jobs and tears down and deletes every other one of its own.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hook/hook.h"
#include "hook/settings.h"
#include "storage/dws/directive_rules.h"
#include "storage/dws/kube_watch.h"
#include "storage/dws/kube_writers.h"
#include "storage/dws/rabbit_config.h"

namespace corral::storage::dws {

// The hook from its [rabbit] section: nullptr when `enabled` is false.
Result<std::unique_ptr<hook::JobHook>> make_dws_hook(const hook::Settings& settings, const hook::HookSetup& setup);

class DwsHook final : public hook::JobHook {
 public:
  DwsHook(RabbitConfig cfg, std::shared_ptr<const KubeConfig> kube);
  ~DwsHook() override;

  std::string_view name() const override { return "dws"; }
  void attach(hook::HookRunner& runner) override;
  void stop() override;
  Status validate(hook::HookContext&, const job::Jobspec& spec, uint32_t userid) override;
  void on_event(hook::HookContext& ctx, const hook::JobView& job, const job::Event& ev) override;
  void on_restart(hook::HookContext& ctx, const hook::JobView& job) override;
  Result<std::string> query(hook::HookContext& ctx, const hook::HookQuery& q) override;
  void describe_job(const hook::JobView& job, std::map<std::string, std::string>& out) const override;

 private:
  // One job's workflow as the hook knows it.
  struct Flow {
    uint64_t jobid = 0;
    uint32_t uid = 0, gid = 0;
    std::string name;
    std::vector<std::string> directives;
    std::vector<std::string> nodes;  // the job's nodes, from its allocation
    std::string desired;             // the desiredState last asked for
    double asked = 0;                // when
    bool exists = false;             // seen in the API server
    bool create_failed = false;
    std::string state, status, message;
    bool ready = false;
    // What later steps need of the object's status (not all of it: its drivers list grows
    // with every state, and a copy per update is what the hook would spend its time on).
    nlohmann::json breakdowns, computes, env;
    nlohmann::json meta;   // finalizers and resourceVersion, for the deletion
    std::string timed;     // the last state whose time was posted
    double tc_since = -1;  // in TransientCondition since
    bool prolog = false, epilog = false, ran = false, failed = false, raised = false;
    bool setup_sent = false, deleting = false, restored = false, aborted = false;
    uint64_t generation = 0;  // bumps with each asked state: older timers are stale
    double ready_at = 0;      // the API server's status.readyChange of the state, epoch seconds
    double prerun_ready_at = 0;
  };

  // The last kSamples values of a latency, for `corral dws stats`.
  struct Samples {
    static constexpr size_t kSamples = 1 << 16;
    std::vector<double> values;
    size_t next = 0;
    uint64_t count = 0;
    void add(double v);
    nlohmann::json summary() const;
  };

  // dws_hook.cc: the job's side.
  Flow* new_flow(hook::HookContext& ctx, const hook::JobView& job);
  void start_flow(hook::HookContext& ctx, const hook::JobView& job);
  void on_alloc(hook::HookContext& ctx, const hook::JobView& job);
  void on_release(hook::HookContext& ctx, const hook::JobView& job);
  void on_fatal(hook::HookContext& ctx, const hook::JobView& job);
  void drive(hook::HookContext& ctx, Flow& f);
  void completed(hook::HookContext& ctx, Flow& f);
  void fail(hook::HookContext& ctx, Flow& f, const std::string& type, const std::string& note);
  void to_teardown(hook::HookContext& ctx, Flow& f);
  void finish_epilog(hook::HookContext& ctx, Flow& f, int status);
  void release_environment(hook::HookContext& ctx, Flow& f);
  void arm_timer(hook::HookContext& ctx, Flow& f, double seconds, const std::string& why);
  void timer_fired(hook::HookContext& ctx, uint64_t jobid, uint64_t generation, const std::string& why);
  void check_tc(hook::HookContext& ctx, uint64_t jobid, double since);
  Flow* flow_of(uint64_t jobid);

  // dws_hook_writes.cc: writes, off the lock.
  std::string collection(const std::string& plural, const std::string& ns) const;
  std::string workflow_path(const std::string& name) const;
  void post_create(hook::HookContext& ctx, const Flow& f);
  void ask(hook::HookContext& ctx, Flow& f, const std::string& state);
  void post_setup(hook::HookContext& ctx, Flow& f);
  void post_delete(hook::HookContext& ctx, const std::string& name, uint64_t jobid, const nlohmann::json& seen);
  void post_abort(hook::HookContext& ctx, Flow& f);
  // Hands `op` to the writers once the job's record that leads to it is durable, so that
  // after a crash the workflow is never further on than the job's eventlog says.
  void send(hook::HookContext& ctx, const std::string& key, KubeWriters::Op op);
  // Runs `fn` under the controller's lock from the writers' thread.
  void back(std::function<void(hook::HookContext&)> fn);

  // dws_hook_watch.cc: reads.
  void start_watches();
  void workflows_listed(hook::HookContext& ctx, std::vector<nlohmann::json>& items);
  void workflow_changed(hook::HookContext& ctx, const std::string& type, const nlohmann::json& obj);
  void take_object(Flow& f, const nlohmann::json& obj);
  void orphan(hook::HookContext& ctx, const nlohmann::json& obj);
  void storages_changed(std::vector<nlohmann::json>& objs, bool full);
  void rules_changed(std::vector<nlohmann::json>& objs, bool full);
  uint64_t jobid_of(const std::string& name) const;

  // dws_query.cc
  Result<std::string> query_workflows(hook::HookContext& ctx, const hook::HookQuery& q) const;
  Result<std::string> query_teardown(hook::HookContext& ctx, const hook::HookQuery& q);
  Result<std::string> query_stats() const;

  struct Rabbit {
    std::string status = "Ready", state = "Enabled";
    std::vector<std::string> computes;
  };

  RabbitConfig cfg_;
  std::shared_ptr<const KubeConfig> kube_;
  hook::HookRunner* runner_ = nullptr;
  std::unique_ptr<KubeWriters> writers_;
  std::vector<std::unique_ptr<KubeWatch>> watches_;

  // Under the controller's lock (JobHook calls and runner functions):
  std::map<uint64_t, Flow> flows_;
  // Workflows of ours no live job owns, being torn down: name -> being deleted.
  std::map<std::string, bool> orphans_;
  bool synced_ = false;  // the first workflow list arrived
  std::map<std::string, Rabbit> rabbits_;
  std::map<std::string, std::string> rabbit_of_;  // compute -> rabbit
  std::map<std::string, nlohmann::json> rule_objects_;
  std::shared_ptr<const DirectiveRules> rules_;
  // From a state's readyChange in the API server to the hook acting on it (the watch's
  // lag), and from PreRun's to the job's start (storage ready to tasks launched).
  Samples watch_lag_, prerun_to_start_;
};

}  // namespace corral::storage::dws
