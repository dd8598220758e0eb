// Controller construction, restart from the store, the scheduling/timer loop, and the
// client API entry points.
#include "ctld/controller.h"

#include <malloc.h>
#include <pthread.h>
#include <unistd.h>

#include <chrono>
#include <future>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

namespace corral::ctld {

using job::JobState;
using nlohmann::json;

// Blocks until everything queued in the store so far is durable.
Status wait_durable(store::Store& store, bool fail_fast) {
  auto p = std::make_shared<std::promise<Status>>();
  auto f = p->get_future();
  store.on_durable([p](const Status& st) { p->set_value(st); }, fail_fast);
  return f.get();
}

Controller::Controller(Config cfg, std::unique_ptr<store::Store> store)
    : cfg_(std::move(cfg)),
      store_(std::move(store)),
      outbox_(*store_),
      sched_(topology::make_flat_placer()),
      owner_uid_(::getuid()) {}

Controller::~Controller() { stop(); }

void Controller::add_hook(std::unique_ptr<JobHook> hook) { hooks_.push_back(std::move(hook)); }

Status Controller::start() {
  {
    MutexLock lk(mu_);  // no other thread yet: held for the analysis, and costs nothing
    if (auto st = steps_.load_key(cfg_.key_file); !st) return st;
    auto routing = TopologyRouting::configure(cfg_.topology_file, cfg_.partitions, sched_);
    if (!routing) return routing.error();
    routing_ = std::move(*routing);
    auto snap = store_->load();
    if (!snap) return snap.error();
    start_time_ = now();
    restore(std::move(*snap));
  }
  loop_thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "ctld-loop");  // top -H tells the threads apart
    loop();
  });
  return {};
}

void Controller::stop() {
  {
    MutexLock lk(mu_);
    if (stopping_) return;
    stopping_ = true;
    for (auto& [id, link] : links_) link->close();
  }
  cv_.notify_all();
  for (auto& h : hooks_) h->stop();  // without the lock: their threads may be waiting for it
  if (loop_thread_.joinable()) loop_thread_.join();
  hub_.close_all();
  (void)store_->flush();
}

void Controller::restore(store::Snapshot snap) {
  next_id_ = snap.next_jobid;
  for (const auto& r : snap.nodes) {
    v1::NodeResources res;
    res.set_name(r.name);
    res.set_cores(r.cores);
    res.set_gpus(r.gpus);
    res.set_memory_mb(r.memory_mb);
    NodeEntry& n = ensure_node(res);
    n.drained = r.drained;
    n.reason = r.reason;
    n.reason_time = r.reason_time;
    n.reason_userid = r.reason_userid;
    n.down_reason = "not reconnected since corrald restarted";
  }
  // Jobs submitted together share one jobspec: parse each distinct text once.
  std::unordered_map<std::string, std::pair<std::shared_ptr<const std::string>, std::shared_ptr<const job::Jobspec>>>
      parsed;
  for (auto& rec : snap.active) {
    auto pit = parsed.find(rec.jobspec);
    if (pit == parsed.end()) {
      auto spec = job::parse_jobspec(rec.jobspec);
      if (!spec) {
        spdlog::error("job {}: stored jobspec no longer parses ({}); skipping it", rec.id, spec.message());
        continue;
      }
      pit = parsed
                .emplace(rec.jobspec, std::make_pair(std::make_shared<const std::string>(rec.jobspec),
                                                     std::make_shared<const job::Jobspec>(std::move(*spec))))
                .first;
    }
    auto job = std::make_unique<JobRecord>();
    job->id = rec.id;
    job->userid = rec.userid;
    job->jobspec_text = pit->second.first;
    job->spec = pit->second.second;
    for (auto& ev : rec.events) {
      if (auto st = job::apply_event(job->status, ev); !st.ok()) {
        spdlog::warn("job {}: replay: {}", rec.id, st.message());
        continue;
      }
      if (ev.name == "submit") {
        auto ctx = json::parse(ev.context, nullptr, false);
        if (ctx.is_object()) job->groupid = ctx.value("groupid", 0u);
      }
      absorb(*job, ev);
      job->events.push_back(std::move(ev));
    }
    job->partition = partition_of(*job->spec);
    job->interactive = job->spec->output.path.empty();
    const auto& st = job->status;
    if (job->R && st.state >= JobState::RUN) {  // allocated before the restart
      job->counts_as_running = true;
      user_limits_.run_added(job->userid);
    }
    if (job->R && (st.state == JobState::RUN || st.state == JobState::CLEANUP) && !st.freed) {
      sched_.allocate(job->id, job->alloc, job->R->expiration);
      for (const auto& sh : job->alloc.shares) nodes_.at(sh.node).jobs.insert(job->id);
      restart_grace_pending_ = true;
    }
    if (st.started) job->exec_tasks = plan_exec(*job);
    if (st.finished)
      for (const auto& [node, n] : job->exec_tasks) job->exited.insert(node);
    uint64_t id = job->id;
    user_limits_.job_added(job->userid);
    jobs_.emplace(id, std::move(job));
  }
  steps_.rebuild_pool();  // before any job can start below
  for (auto& h : hooks_) h->attach(runner_);
  for (auto& h : hooks_) {
    auto saved = snap.hook_state.find(std::string(h->name()));
    h->on_load(*this, saved == snap.hook_state.end() ? SavedState{} : saved->second);
  }
  for (auto& [id, job] : jobs_) {
    for (auto& h : hooks_) h->on_restart(*this, *job);
    touch(*job);
  }
  spdlog::info("restored {} active job(s) and {} node(s); next job id {}", jobs_.size(), nodes_.size(), next_id_);
  drain_posts();
  outbox_.seal();
}

void Controller::poke_scheduler() {
  sched_dirty_ = true;
  cv_.notify_one();
}

void Controller::loop() {
  MutexLock lk(mu_);
  while (!stopping_) {
    double t = now();
    while (!timers_.empty() && timers_.top().when <= t) {
      auto fn = timers_.top().fn;
      timers_.pop();
      fn();
    }
    if (t >= next_heartbeat_check_) {
      check_heartbeats();
      next_heartbeat_check_ = t + std::min(1.0, cfg_.heartbeat_interval);
    }
    if (sched_dirty_) run_schedule();
    drain_posts();
    outbox_.seal();
    // glibc keeps the memory of many freed jobs; give it back once a wave has passed.
    if (retired_since_trim_ >= 1000 && jobs_.size() < retired_since_trim_) {
      retired_since_trim_ = 0;
      malloc_trim(0);
    }
    double wake = next_heartbeat_check_;
    if (!timers_.empty()) wake = std::min(wake, timers_.top().when);
    auto delay = std::chrono::duration<double>(std::max(0.0, wake - now()));
    cv_.wait_for(lk.native(), delay, [&] {
      mu_.assert_held();  // the wait calls it with the lock taken back
      return stopping_ || sched_dirty_ || (!timers_.empty() && timers_.top().when <= now());
    });
  }
}

Status Controller::submit(const Caller& c, const v1::SubmitRequest& req, v1::SubmitReply* rep) {
  unsigned urgency = req.has_urgency() ? req.urgency() : 16;
  if (urgency > 31) return Error{Errc::invalid_argument, fmt::format("urgency {} is out of range (0-31)", urgency)};
  if (urgency > 16 && !is_admin(c))
    return Error{Errc::permission_denied, "only the instance owner may raise urgency above the default of 16"};
  // A non-root instance runs every task as its owner, so only the owner may submit.
  if (owner_uid_ != 0 && c.uid != owner_uid_)
    return Error{Errc::permission_denied,
                 fmt::format("this corral instance runs as uid {} and runs jobs only for that user; "
                             "run corrald as root to serve other users",
                             owner_uid_)};
  // A full state directory: refused before anything exists, so nothing of it can run.
  if (auto health = store_->health(); !health.ok())
    return Error{Errc::unavailable, "corrald cannot save new jobs now: " + health.message() +
                                        ". Running jobs go on; submit again once the state "
                                        "directory has room"};
  auto specs = parse_submission(req);
  if (!specs) return specs.error();
  {
    MutexLock lk(mu_);
    if (stopping_) return Error{Errc::unavailable, "corrald is shutting down"};
    if (auto st = user_limits_.admit(c.uid, specs->size(), now()); !st.ok()) return st.error();
    const nlohmann::json* last_admitted = nullptr;
    for (size_t i = 0; i < specs->size(); ++i) {
      const auto& spec = *(*specs)[i];
      // Copies of one jobspec (--cc) share their document and are admitted once.
      if (last_admitted == spec.document.get()) continue;
      if (auto st = admit(c, spec); !st.ok()) {
        auto msg = specs->size() == 1 ? st.message() : fmt::format("job {}: {}", i, st.message());
        return Error{st.error().code, msg};
      }
      last_admitted = spec.document.get();
    }
    user_limits_.jobs_added(c.uid, specs->size());  // counted now: later slices are this user's
  }
  // Created in slices, the lock released between them, so a million-copy --cc does not
  // stall heartbeats and other users' requests for seconds.
  rep->mutable_jobids()->Reserve(static_cast<int>(specs->size()));
  for (size_t first = 0; first < specs->size(); first += kSubmitSlice) {
    MutexLock lk(mu_);
    const size_t last = std::min(specs->size(), first + kSubmitSlice);
    for (size_t i = first; i < last; ++i) rep->add_jobids(create_job(c, (*specs)[i], urgency));
    drain_posts();
    outbox_.seal();
  }
  const auto& ids = rep->jobids();
  const Status saved = wait_durable(*store_, true);
  // Scheduled only now that they are durable; or, if they could not be saved, gone
  // without a trace: the store drops their rows once it can write again.
  for (int first = 0; first < ids.size(); first += static_cast<int>(kSubmitSlice)) {
    MutexLock lk(mu_);
    const int last = std::min(ids.size(), first + static_cast<int>(kSubmitSlice));
    for (int i = first; i < last; ++i) saved.ok() ? saved_job(ids[i]) : unsaved_job(ids[i]);
    drain_posts();
    outbox_.seal();
  }
  if (!saved.ok() && saved.error().code == Errc::unavailable) {
    rep->clear_jobids();
    return Error{Errc::unavailable, "corrald could not save the job, so it was not submitted: " + saved.message() +
                                        ". Running jobs go on; submit again once the "
                                        "state directory has room"};
  }
  if (!saved.ok()) return Error{Errc::internal, "could not store the job: " + saved.message()};
  return {};
}

std::string Controller::store_warning() const {
  const Status health = store_->health();
  if (health.ok()) return {};
  return "corrald cannot write its state database: " + health.message() +
         ". New jobs are refused; running jobs go on and are saved when there is room again";
}

void Controller::saved_job(uint64_t id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || !it->second->unsaved) return;
  it->second->unsaved = false;
  advance(*it->second);
}

void Controller::unsaved_job(uint64_t id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  JobRecord& job = *it->second;
  if (!job.unsaved) return;  // (never scheduled while unsaved: nothing of it ran)
  store_->discard_job(id);
  user_limits_.job_removed(job.userid);
  jobs_.erase(it);
  listing_.changed(id, jobs_);  // its row in `corral queue` goes too
}

}  // namespace corral::ctld
