// corrald's core: the job manager (RFC 21 state machine driven by eventlogs), the node
// registry, the scheduler loop and the hook host. One lock guards all of it; the
// durable side effects go out through the Outbox after the store commits.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "ctld/agent_link.h"
#include "ctld/config.h"
#include "ctld/hook_names.h"
#include "ctld/listing_rows.h"
#include "ctld/node_table.h"
#include "ctld/outbox.h"
#include "ctld/privacy.h"
#include "ctld/step_support.h"
#include "ctld/topology_routing.h"
#include "ctld/user_limits.h"
#include "ctld/watch_hub.h"
#include "sched/node_properties.h"
#include "sched/scheduler.h"
#include "store/store.h"
#include "topology/topology.h"
#include "util/thread_annotations.h"

namespace corral::ctld {

// With `fail_fast`, a commit failure that may pass (disk full) is returned at once; the
// writes stay queued and commit later (Store::on_durable).
Status wait_durable(store::Store& store, bool fail_fast = false);

// Jobs of one listing filled under one hold of the controller's lock.
inline constexpr size_t kListingSlice = 2048;
// Rows of the job table (corral queue) scanned under one hold of the controller's lock.
inline constexpr size_t kListingScanSlice = 8192;
// Jobs of one submission created under one hold of the controller's lock.
inline constexpr size_t kSubmitSlice = 4096;

// One Watch names at most this many jobs (each is looked up under the lock).
inline constexpr int kMaxWatchedJobs = 10000;
// Nodes one agent registers over TCP (each name is resolved): a real host is one node.
inline constexpr int kMaxTcpAgentNodes = 64;
// What a node's hooks may report about it (NodeResources.hardware): entries, text per entry.
inline constexpr int kMaxNodeHardwareEntries = 16;
inline constexpr size_t kMaxNodeHardwareText = 8192;
struct Caller {
  Caller() = default;
  Caller(uint32_t u, uint32_t g, std::string from = {}) : uid(u), gid(g), origin(std::move(from)) {}
  uint32_t uid = 0;
  uint32_t gid = 0;
  // Over TCP: the IPv4 address of the host whose munged vouched for the caller (an agent
  // may only register nodes that resolve to it). Empty on the Unix socket (this host).
  std::string origin;
};

// A node that could not start the tasks of this many jobs in a row is drained.
inline constexpr unsigned kMaxLaunchFaults = 3;

// The state mask of a listing's or cancel's state names; none means every active state.
Result<uint32_t> listing_state_mask(const google::protobuf::RepeatedPtrField<std::string>& names);

class Controller final : private HookContext {
 public:
  Controller(Config cfg, std::unique_ptr<store::Store> store);
  ~Controller() override;
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  void add_hook(std::unique_ptr<JobHook> hook);
  // Loads the persisted state, replays eventlogs and starts the scheduling loop.
  Status start();
  void stop();
  void set_shutdown_handler(std::function<void()> fn) { on_shutdown_ = std::move(fn); }

  // Client API (caller identity from the peer's credentials).
  Status submit(const Caller& c, const v1::SubmitRequest& req, v1::SubmitReply* rep);
  Status cancel(const Caller& c, const v1::CancelRequest& req, v1::CancelReply* rep);
  Status list_jobs(const Caller& c, const v1::ListJobsRequest& req, v1::ListJobsReply* rep);
  Status list_job_table(const Caller& c, const v1::ListJobsRequest& req, v1::JobTable* rep);
  Status get_topology(const v1::GetTopologyRequest& req, v1::GetTopologyReply* rep);
  Status hook_query(const Caller& c, const v1::HookQueryRequest& req, v1::HookQueryReply* rep);
  Status get_job(const Caller& c, const v1::GetJobRequest& req, v1::JobInfo* rep);
  Status subscribe(const Caller& c, const v1::WatchRequest& req, std::shared_ptr<Subscriber>* sub);
  Status list_nodes(const v1::ListNodesRequest& req, v1::ListNodesReply* rep);
  Status set_node_state(const Caller& c, const v1::NodeStateRequest& req, v1::NodeStateReply* rep);
  Status ping(const Caller& c, v1::PingReply* rep);
  Status shutdown(const Caller& c);
  // Steps (step_records.cc): finished steps from the store, and `corral history`.
  Status list_steps(const Caller& c, const v1::ListStepsRequest& req, v1::ListStepsReply* rep);
  Status history(const Caller& c, const v1::HistoryRequest& req, v1::HistoryReply* rep);

  // Node agent API.
  Status check_node_claim(const Caller& c, const v1::Register& reg) const;
  // `spooled`: output the agent kept while it could not reach us, taken before the
  // register's exits (a job's output must arrive before it ends).
  // `session_key` wraps the keys this agent is sent (a fresh one when empty); over TCP the
  // caller has already put it in the controller's MUNGE credential.
  // `cancel` ends the agent's stream (AgentLink::close).
  Status agent_register(const Caller& c, const v1::Register& reg, std::function<void()> cancel,
                        std::shared_ptr<AgentLink>* link,
                        const google::protobuf::RepeatedPtrField<v1::TaskOutput>& spooled = {},
                        std::string session_key = {});
  void agent_message(AgentLink& link, const v1::AgentMessage& msg);
  void agent_disconnected(AgentLink& link);
  // Whether `c` may register agents at all (agent_register checks it again).
  bool may_register_agents(const Caller& c) const { return is_admin(c); }

 private:
  // HookContext: what hooks may do, called by them with mu_ held. Private: the rest of
  // corrald reaches the controller only through its client and agent API above.
  double now() const override;
  const JobView* find_job(uint64_t jobid) const override CORRAL_REQUIRES(mu_);
  std::optional<std::string> inactive_result(uint64_t jobid) const override CORRAL_REQUIRES(mu_);
  void post_event(uint64_t jobid, std::string name, std::string context_json) override CORRAL_REQUIRES(mu_);
  void raise_exception(uint64_t jobid, std::string type, int severity, std::string note) override CORRAL_REQUIRES(mu_);
  void add_dependency(uint64_t jobid, std::string description) override CORRAL_REQUIRES(mu_);
  void remove_dependency(uint64_t jobid, std::string description) override CORRAL_REQUIRES(mu_);
  void prolog_start(uint64_t jobid, std::string description) override CORRAL_REQUIRES(mu_);
  void prolog_finish(uint64_t jobid, std::string description, int status) override CORRAL_REQUIRES(mu_);
  void epilog_start(uint64_t jobid, std::string description) override CORRAL_REQUIRES(mu_);
  void epilog_finish(uint64_t jobid, std::string description, int status) override CORRAL_REQUIRES(mu_);
  void set_task_env(uint64_t jobid, std::string key, std::string value) override CORRAL_REQUIRES(mu_);
  void job_note(uint64_t jobid, std::string text) override CORRAL_REQUIRES(mu_);
  Status rewrite_jobspec(uint64_t jobid, const std::string& jobspec_json) override CORRAL_REQUIRES(mu_);
  void run_on_nodes(uint64_t jobid, const std::string& kind, const std::string& command, double timeout,
                    const std::vector<std::string>& nodes, const std::map<std::string, std::string>& env) override
      CORRAL_REQUIRES(mu_);
  void drain_node(const std::string& node, const std::string& reason) override CORRAL_REQUIRES(mu_);
  bool node_drained(const std::string& node) const override CORRAL_REQUIRES(mu_);
  bool node_exists(const std::string& node) const override CORRAL_REQUIRES(mu_);
  void at(double when, std::function<void()> fn) override CORRAL_REQUIRES(mu_);
  void after_durable(std::function<void()> fn) override CORRAL_REQUIRES(mu_);
  void save_state(std::string_view hook, const std::string& key, const std::string& value) override
      CORRAL_REQUIRES(mu_);
  void erase_state(std::string_view hook, const std::string& key) override CORRAL_REQUIRES(mu_);
  Status hook_query_all(const HookQuery& q, v1::HookQueryReply* rep) CORRAL_REQUIRES(mu_);

  // HookRunner: a hook's own thread comes in under the lock (hook_context.cc).
  class Runner final : public HookRunner {
   public:
    explicit Runner(Controller& c) : c_(c) {}
    void run(std::function<void(HookContext&)> fn) override;

   private:
    Controller& c_;
  };

  struct Timer {
    double when;
    uint64_t seq;
    std::function<void()> fn;  // run with mu_ held
    bool operator>(const Timer& o) const { return when != o.when ? when > o.when : seq > o.seq; }
  };

  void out_of_memory(const JobRecord& job, const v1::JobNodeExit& ex) CORRAL_REQUIRES(mu_);
  // A submission's commit: schedules the job, or forgets it when it could not be saved.
  void saved_job(uint64_t id) CORRAL_REQUIRES(mu_);
  void unsaved_job(uint64_t id) CORRAL_REQUIRES(mu_);
  // For listings: why new jobs are refused ("" while the state database is writable).
  std::string store_warning() const CORRAL_EXCLUDES(mu_);

  // job_lifecycle.cc
  void post(uint64_t jobid, job::Event ev) CORRAL_REQUIRES(mu_);
  // A run_on_nodes result to the hooks: on_perilog, or on_perilog_inactive once the job ended.
  void deliver_perilog(uint64_t jobid, const PerilogOutcome& o) CORRAL_REQUIRES(mu_);
  void drain_posts() CORRAL_REQUIRES(mu_);
  void apply_posted(uint64_t jobid, const job::Event& ev) CORRAL_REQUIRES(mu_);
  void absorb(JobRecord& job, const job::Event& ev) CORRAL_REQUIRES(mu_);
  void advance(JobRecord& job) CORRAL_REQUIRES(mu_);
  void advance_cleanup(JobRecord& job) CORRAL_REQUIRES(mu_);
  void start_exec(JobRecord& job) CORRAL_REQUIRES(mu_);
  // Sends StartJob for the job's nodes in `only` (all exec nodes when empty).
  void send_start(const JobRecord& job, const std::set<std::string>& only) CORRAL_REQUIRES(mu_);
  // One StartJob per agent of the job (or of `only`'s nodes), with the node it goes to.
  std::vector<std::pair<std::string, v1::ControllerMessage>> build_starts(const JobRecord& job,
                                                                          const std::set<std::string>& only) const
      CORRAL_REQUIRES(mu_);
  std::map<std::string, unsigned> plan_exec(const JobRecord& job) const CORRAL_REQUIRES(mu_);
  void kill_job(JobRecord& job, int signal, double kill_after) CORRAL_REQUIRES(mu_);
  void free_resources(JobRecord& job) CORRAL_REQUIRES(mu_);
  bool wants_requeue(const JobRecord& job) const CORRAL_REQUIRES(mu_);
  void requeue(JobRecord& job) CORRAL_REQUIRES(mu_);
  void forget_run(JobRecord& job) CORRAL_REQUIRES(mu_);
  void resend_job_keys(const v1::Register& reg) CORRAL_REQUIRES(mu_);
  // The job's step-credential key, wrapped for `link` (empty without a cluster key or link).
  std::string wrapped_job_key(uint64_t jobid, const AgentLink* link) const CORRAL_REQUIRES(mu_);
  void add_job_key(v1::ControllerMessage& msg, uint64_t jobid, const AgentLink* link) const CORRAL_REQUIRES(mu_);
  // A JobKey for the job to every agent of its nodes that gets no StartJob in `starts`.
  void send_job_keys(const JobRecord& job, std::vector<std::pair<std::string, v1::ControllerMessage>>& starts)
      CORRAL_REQUIRES(mu_);
  void retire(JobRecord& job) CORRAL_REQUIRES(mu_);
  void wake_held_by_limit(uint32_t uid) CORRAL_REQUIRES(mu_);
  void handle_exit(const v1::JobNodeExit& ex) CORRAL_REQUIRES(mu_);
  void launch_failed(uint64_t jobid, const v1::JobNodeExit& ex) CORRAL_REQUIRES(mu_);
  void touch(JobRecord& job) CORRAL_REQUIRES(mu_);  // advance it once the posted events are applied
  void node_lost(NodeEntry& node, const std::string& why) CORRAL_REQUIRES(mu_);
  void enqueue(JobRecord& job) CORRAL_REQUIRES(mu_);
  void run_schedule() CORRAL_REQUIRES(mu_);
  // Whether the job runs one task on its first node only (batch script, corral alloc).
  static bool first_node_only(const job::Jobspec& spec);
  // The finish event's context: the largest wait status and the tasks' cpu time.
  std::string finish_context(const JobRecord& job) const CORRAL_REQUIRES(mu_);
  // The step fields of the StartJob going to the step manager's agent.
  void add_step_manager_fields(const JobRecord& job, v1::StartJob& sj) const CORRAL_REQUIRES(mu_);
  void add_pals_fields(const JobRecord& job, v1::StartJob& layout) const CORRAL_REQUIRES(mu_);

  // step_records.cc
  // Stores finished-step records from an agent; the agent hears `steps_stored` once durable.
  void store_steps(const std::string& agent_id, const google::protobuf::RepeatedPtrField<v1::StepInfo>& steps)
      CORRAL_REQUIRES(mu_);
  void cancel_steps(const Caller& c, const v1::CancelRequest& req, v1::CancelReply* rep) CORRAL_REQUIRES(mu_);

  // job_submit.cc
  Status check_sizes(const v1::SubmitRequest& req) const;
  Result<std::vector<std::shared_ptr<const job::Jobspec>>> parse_submission(const v1::SubmitRequest& req) const;
  Status admit(const Caller& c, const job::Jobspec& spec) CORRAL_REQUIRES(mu_);
  uint64_t create_job(const Caller& c, std::shared_ptr<const job::Jobspec> spec, unsigned urgency) CORRAL_REQUIRES(mu_);
  // `jobid` 0: at submit, where a request no node can satisfy is an error; for a queued job it
  // waits instead (nodes register after a restart).
  // `restricted` (when given) learns whether hooks narrowed the nodes by their properties.
  Result<topology::Request> make_request(const job::Jobspec& spec, uint64_t jobid, bool* restricted = nullptr) const
      CORRAL_REQUIRES(mu_);
  Status restrict_to_properties(const job::Jobspec& spec, const std::vector<uint32_t>& members, const std::string& part,
                                topology::Request& r, bool* restricted) const CORRAL_REQUIRES(mu_);
  // No node offers `required`: an error at submit (jobid 0), else the job waits for one.
  Status not_offered(topology::Request& r, const std::string& part, const std::vector<std::string>& required) const;
  std::string partition_of(const job::Jobspec& spec) const CORRAL_REQUIRES(mu_);
  double effective_time_limit(const job::Jobspec& spec) const CORRAL_REQUIRES(mu_);

  // job_info.cc
  void fill_info(const JobRecord& job, v1::JobInfo* info) const CORRAL_REQUIRES(mu_);
  // Why a pending job waits: its own reason (Dependency, BeginTime, JobHeldUser), else the
  // scheduler's, else "Priority" while in SCHED. Shared by fill_info and the listing rows.
  std::string pending_reason(uint64_t id, job::JobState state, std::string_view own, bool in_scheduler) const
      CORRAL_REQUIRES(mu_);
  // The jobs a listing selects, in id order, each passed to `emit` (job_listing.cc).
  Status get_job_unfiltered(const v1::GetJobRequest& req, v1::JobInfo* rep);
  uint32_t inactive_owner(uint64_t jobid);  // UINT32_MAX when unknown
  Status for_each_listed(const Viewer& v, const v1::ListJobsRequest& req,
                         const std::function<void(const v1::JobInfo&)>& emit);
  std::string username(uint32_t uid) const CORRAL_REQUIRES(mu_);
  static std::string lookup_username(uint32_t uid);

  // node_registry.cc
  NodeEntry& ensure_node(const v1::NodeResources& res) CORRAL_REQUIRES(mu_);
  // A publication to watchers hurries the commit only when someone watches.
  Outbox::Urgency publish_urgency() { return hub_.idle() ? Outbox::Urgency::soon : Outbox::Urgency::now; }
  void send_to_node(const std::string& node, const v1::ControllerMessage& msg,
                    Outbox::Urgency urgency = Outbox::Urgency::now) CORRAL_REQUIRES(mu_);
  void update_usable(NodeEntry& node) CORRAL_REQUIRES(mu_);
  // Asks the hooks what `node` offers; pending jobs that need properties are planned again
  // when it changed.
  void update_properties(NodeEntry& node) CORRAL_REQUIRES(mu_);
  void replan_property_jobs() CORRAL_REQUIRES(mu_);
  void persist_node(const NodeEntry& node) CORRAL_REQUIRES(mu_);
  std::string node_state(const NodeEntry& node) const CORRAL_REQUIRES(mu_);
  void check_heartbeats() CORRAL_REQUIRES(mu_);
  void reconcile_agent(const v1::Register& reg) CORRAL_REQUIRES(mu_);
  // Task output from an agent (node_registry.cc): kept for watchers, each numbered entry
  // once; the highest number seen is acknowledged with the agent's heartbeats.
  void take_output(const AgentLink& link, const v1::TaskOutput& out) CORRAL_REQUIRES(mu_);
  void ack_output(AgentLink& link) CORRAL_REQUIRES(mu_);
  void adopt_step_manager(uint64_t jobid, const std::string& node, const std::string& uri) CORRAL_REQUIRES(mu_);
  void reconcile_housekeeping(const v1::Register& reg) CORRAL_REQUIRES(mu_);
  void housekeeping_done(const v1::PerilogResult& result) CORRAL_REQUIRES(mu_);

  // controller.cc
  void loop();
  void restore(store::Snapshot snap) CORRAL_REQUIRES(mu_);
  bool is_admin(const Caller& c) const { return c.uid == 0 || c.uid == owner_uid_; }
  Viewer viewer(const Caller& c) const { return Viewer{c.uid, is_admin(c), cfg_.private_jobs}; }
  void poke_scheduler() CORRAL_REQUIRES(mu_);

  // The one lock of the controller's state: every member below that is marked guarded.
  mutable Mutex mu_;
  Config cfg_;
  std::unique_ptr<store::Store> store_;
  Outbox outbox_;
  WatchHub hub_;
  UserLimits user_limits_ CORRAL_GUARDED_BY(mu_){cfg_.limits};
  // Jobs retired whose summary is not yet durable, for readers (the store has them once it is).
  std::mutex retired_mu_;
  std::unordered_map<uint64_t, v1::JobInfo> retired_unsaved_;  // under retired_mu_
  bool retired_summary(uint64_t id, v1::JobInfo* out);
  // uid -> jobs held by max-running-jobs, oldest first
  std::map<uint32_t, std::set<uint64_t>> held_by_limit_ CORRAL_GUARDED_BY(mu_);
  sched::Scheduler sched_ CORRAL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<JobHook>> hooks_;  // added before start(), called under mu_
  Runner runner_{*this};
  std::function<void()> on_shutdown_;
  uint32_t owner_uid_;
  double start_time_ CORRAL_GUARDED_BY(mu_) = 0;

  std::condition_variable cv_;
  bool stopping_ CORRAL_GUARDED_BY(mu_) = false;
  bool sched_dirty_ CORRAL_GUARDED_BY(mu_) = false;
  std::thread loop_thread_;

  uint64_t next_id_ CORRAL_GUARDED_BY(mu_) = 1;
  std::unordered_map<uint64_t, std::unique_ptr<JobRecord>> jobs_ CORRAL_GUARDED_BY(mu_);
  ListingRows listing_ CORRAL_GUARDED_BY(mu_);  // what `corral queue` shows of jobs_, kept as they change
  NodeTable nodes_ CORRAL_GUARDED_BY(mu_){cfg_.partitions};
  sched::NodeProperties node_props_ CORRAL_GUARDED_BY(mu_);  // what hooks say each node offers
  std::set<uint64_t> property_jobs_ CORRAL_GUARDED_BY(mu_);  // queued jobs whose nodes hooks restrict
  bool properties_changed_ CORRAL_GUARDED_BY(mu_) = false;   // a node's properties changed since the last pass
  std::map<std::string, std::shared_ptr<AgentLink>> links_ CORRAL_GUARDED_BY(mu_);
  // Per agent id, the last output number taken from each of its latest two processes.
  std::map<std::string, std::vector<std::pair<std::string, uint64_t>>> output_seen_ CORRAL_GUARDED_BY(mu_);
  TopologyRouting routing_;  // set in start(), read-only after

  std::deque<std::pair<uint64_t, job::Event>> posts_ CORRAL_GUARDED_BY(mu_);
  std::vector<uint64_t> dirty_ CORRAL_GUARDED_BY(mu_);
  bool draining_ CORRAL_GUARDED_BY(mu_) = false;

  std::priority_queue<Timer, std::vector<Timer>, std::greater<>> timers_ CORRAL_GUARDED_BY(mu_);
  uint64_t timer_seq_ CORRAL_GUARDED_BY(mu_) = 0;
  double next_heartbeat_check_ CORRAL_GUARDED_BY(mu_) = 0;
  bool restart_grace_pending_ CORRAL_GUARDED_BY(mu_) = false;
  bool isolated_ CORRAL_GUARDED_BY(mu_) = false;  // most agents silent at once (check_heartbeats)
  double isolation_ended_ CORRAL_GUARDED_BY(mu_) = 0;
  size_t retired_since_trim_ CORRAL_GUARDED_BY(mu_) = 0;  // finished jobs whose memory glibc may still hold

  StepSupport steps_ CORRAL_GUARDED_BY(mu_){cfg_.steps};

  // Outstanding run_on_nodes: (jobid, kind) -> nodes that have not answered.
  std::map<std::pair<uint64_t, std::string>, std::set<std::string>> perilogs_ CORRAL_GUARDED_BY(mu_);
  // Output of recently finished interactive jobs, for clients that attach late.
  std::map<uint64_t, std::vector<OutputChunk>> recent_output_ CORRAL_GUARDED_BY(mu_);
  mutable std::unordered_map<uint32_t, std::string> usernames_ CORRAL_GUARDED_BY(mu_);
  std::shared_ptr<const nlohmann::json> last_doc_ CORRAL_GUARDED_BY(mu_);  // the last jobspec serialized
  std::shared_ptr<const std::string> last_doc_text_ CORRAL_GUARDED_BY(mu_);
  std::shared_ptr<const job::Jobspec> last_limited_from_, last_limited_ CORRAL_GUARDED_BY(mu_);
};

}  // namespace corral::ctld
