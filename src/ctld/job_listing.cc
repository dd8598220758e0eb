// Job listings: which jobs a ListJobs request selects, as JobInfo messages or as one
// column-by-column JobTable (what `corral queue` asks for: 100,000 pending jobs answer in
// tens of milliseconds instead of building and serializing 100,000 messages). Active jobs
// go into the table from the listing rows (listing_rows.h), not from their records.
#include <algorithm>
#include <bit>
#include <map>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "ctld/controller.h"
#include "ctld/job_summary.h"
#include "ctld/listing_rows.h"

namespace corral::ctld {

using job::JobState;

namespace {

constexpr uint32_t kActiveMask = 0x3f;  // every state but INACTIVE

// Appends rows to a JobTable, interning repeated text.
class TableBuilder {
 public:
  explicit TableBuilder(v1::JobTable* t) : t_(t) {
    t_->add_strings("");
    index_.emplace("", 0);
    for (auto& l : last_) l.second = kNone;
  }

  void add(const v1::JobInfo& j) {
    t_->add_id(j.id());
    t_->add_userid(j.userid());
    t_->add_username(intern(kUser, j.username()));
    t_->add_name(intern(kName, j.name()));
    t_->add_state(intern(kState, j.state()));
    t_->add_result(intern(kResult, j.result()));
    t_->add_reason(intern(kReason, j.reason()));
    t_->add_urgency(j.urgency());
    t_->add_priority(j.priority());
    t_->add_t_submit(j.t_submit());
    t_->add_t_run(j.t_run());
    t_->add_t_cleanup(j.t_cleanup());
    t_->add_t_inactive(j.t_inactive());
    t_->add_nodelist(intern(kNodelist, j.nodelist()));
    t_->add_nnodes(j.nnodes());
    t_->add_ntasks(j.ntasks());
    t_->add_ncores(j.ncores());
    t_->add_ngpus(j.ngpus());
    t_->add_partition(intern(kPartition, j.partition()));
    t_->add_duration(j.duration());
    t_->add_waitstatus(j.waitstatus());
    t_->add_exception_type(intern(kExceptionType, j.exception_type()));
    t_->add_exception_note(intern(kExceptionNote, j.exception_note()));
    t_->add_cwd(intern(kCwd, j.cwd()));
    deps_.clear();
    for (const auto& d : j.dependencies()) deps_ += (deps_.empty() ? "" : ",") + d;
    t_->add_dependencies(intern(kDeps, deps_));
  }

 private:
  enum Column {
    kUser,
    kName,
    kState,
    kResult,
    kReason,
    kNodelist,
    kPartition,
    kExceptionType,
    kExceptionNote,
    kCwd,
    kDeps,
    kColumns
  };

  // Neighbouring jobs mostly repeat a column's value (one submission's jobs), so the
  // previous value of the same column is checked before the dictionary.
  uint32_t intern(Column c, const std::string& s) {
    auto& [last, last_index] = last_[c];
    if (last_index != kNone && s == last) return last_index;
    uint32_t i;
    if (auto it = index_.find(s); it != index_.end()) {
      i = it->second;
    } else {
      i = static_cast<uint32_t>(t_->strings_size());
      t_->add_strings(s);
      index_.emplace(s, i);
    }
    last = s;
    last_index = i;
    return i;
  }

  static constexpr uint32_t kNone = ~0u;
  std::pair<std::string, uint32_t> last_[kColumns];
  v1::JobTable* t_;
  std::unordered_map<std::string, uint32_t> index_;
  std::string deps_;
};

// Writes listing rows into a JobTable: pool text is copied into the table the first time
// a row uses it, so the table holds only the text of the jobs listed.
class RowTableBuilder {
 public:
  explicit RowTableBuilder(v1::JobTable* t) : t_(t) { t_->add_strings(""); }

  // The lock was released since the last rows: the pool may have grown, and an index it
  // released may now hold other text.
  void new_slice(const TextPool& pool) {
    pool_ = &pool;
    remap_.assign(pool.size(), kNone);
  }

  void reserve(size_t rows) {
    const int n = static_cast<int>(rows);
    t_->mutable_id()->Reserve(n);
    for (auto* c :
         {t_->mutable_userid(), t_->mutable_username(), t_->mutable_name(), t_->mutable_state(), t_->mutable_result(),
          t_->mutable_reason(), t_->mutable_urgency(), t_->mutable_nodelist(), t_->mutable_nnodes(),
          t_->mutable_ntasks(), t_->mutable_ncores(), t_->mutable_ngpus(), t_->mutable_partition(),
          t_->mutable_exception_type(), t_->mutable_exception_note(), t_->mutable_cwd(), t_->mutable_dependencies()})
      c->Reserve(n);
    t_->mutable_priority()->Reserve(n);
    for (auto* c : {t_->mutable_t_submit(), t_->mutable_t_run(), t_->mutable_t_cleanup(), t_->mutable_t_inactive(),
                    t_->mutable_duration()})
      c->Reserve(n);
    t_->mutable_waitstatus()->Reserve(n);
  }

  template <class UserName>
  // `details`: the caller may see the job's working directory (privacy.h).
  void add(const ListingRow& r, const UserName& username, std::string_view sched_reason, bool details) {
    t_->add_id(r.id);
    t_->add_userid(r.userid);
    t_->add_username(user(r.userid, username));
    t_->add_name(text(r.name));
    t_->add_state(state(r.state));
    t_->add_result(text(r.result));
    t_->add_reason(sched_reason.empty() ? text(r.reason) : other(sched_reason));
    t_->add_urgency(r.urgency);
    t_->add_priority(r.priority);
    t_->add_t_submit(r.t_submit);
    t_->add_t_run(r.t_run);
    t_->add_t_cleanup(r.t_cleanup);
    t_->add_t_inactive(r.t_inactive);
    t_->add_nodelist(text(r.nodelist));
    t_->add_nnodes(r.nnodes);
    t_->add_ntasks(r.ntasks);
    t_->add_ncores(r.ncores);
    t_->add_ngpus(r.ngpus);
    t_->add_partition(text(r.partition));
    t_->add_duration(r.duration);
    t_->add_waitstatus(r.waitstatus);
    t_->add_exception_type(text(r.exception_type));
    t_->add_exception_note(text(r.exception_note));
    t_->add_cwd(details ? text(r.cwd) : 0);
    t_->add_dependencies(text(r.dependencies));
  }

 private:
  static constexpr uint32_t kNone = ~0u;

  uint32_t text(uint32_t pool_index) {
    uint32_t& i = remap_[pool_index];
    if (pool_index == 0) return 0;
    if (i == kNone) i = append(pool_->at(pool_index));
    return i;
  }
  // Text not from the pool (user and state names, the scheduler's reasons).
  uint32_t other(std::string_view s) {
    if (s.empty()) return 0;
    auto it = other_.find(s);
    if (it != other_.end()) return it->second;
    const uint32_t i = append(s);
    other_.emplace(std::string(s), i);
    return i;
  }
  template <class UserName>
  uint32_t user(uint32_t uid, const UserName& username) {
    if (uid == last_uid_ && last_user_ != kNone) return last_user_;
    last_uid_ = uid;
    return last_user_ = other(username(uid));
  }
  uint32_t state(JobState s) {
    const auto bit = static_cast<size_t>(std::countr_zero(static_cast<uint32_t>(s)));
    uint32_t& i = states_[bit % std::size(states_)];
    if (i == kNone) i = other(job::state_name(s));
    return i;
  }
  uint32_t append(std::string_view s) {
    t_->add_strings(std::string(s));
    return static_cast<uint32_t>(t_->strings_size() - 1);
  }

  v1::JobTable* t_;
  const TextPool* pool_ = nullptr;
  std::vector<uint32_t> remap_;  // pool index -> table index
  std::map<std::string, uint32_t, std::less<>> other_;
  uint32_t states_[8] = {kNone, kNone, kNone, kNone, kNone, kNone, kNone, kNone};
  uint32_t last_uid_ = 0, last_user_ = kNone;
};

}  // namespace

Result<uint32_t> listing_state_mask(const google::protobuf::RepeatedPtrField<std::string>& names) {
  if (names.empty()) return kActiveMask;
  uint32_t mask = 0;
  for (const auto& n : names) {
    auto m = job::parse_state_mask(n);
    if (!m) return m.error();
    mask |= *m;
  }
  return mask;
}

Status Controller::for_each_listed(const Viewer& v, const v1::ListJobsRequest& req,
                                   const std::function<void(const v1::JobInfo&)>& emit) {
  auto mask = listing_state_mask(req.states());
  if (!mask) return mask.error();
  const std::set<uint32_t> users(req.userids().begin(), req.userids().end());
  const std::set<uint64_t> ids(req.jobids().begin(), req.jobids().end());
  auto wanted = [&](uint64_t id, uint32_t userid, const std::string& partition) {
    return v.sees_job(userid) && (users.empty() || users.count(userid)) && (ids.empty() || ids.count(id)) &&
           (req.partition().empty() || partition == req.partition());
  };
  const size_t limit = req.max_entries() ? req.max_entries() : SIZE_MAX;
  // One JobInfo is reused for the active jobs so its strings keep their buffers.
  v1::JobInfo info;
  std::vector<v1::JobInfo> active;
  size_t n = 0;
  const bool with_inactive = *mask & static_cast<uint32_t>(JobState::INACTIVE);
  // The matching ids first (one cheap pass under the lock), then the listing itself in
  // slices, the lock taken per slice: a listing of every job never holds the controller
  // for long, whatever the queue's size. A job that ends between slices is skipped
  // (with --all it is read from the store below).
  std::vector<uint64_t> sel;
  {
    MutexLock lk(mu_);
    sel.reserve(jobs_.size());
    for (const auto& [id, job] : jobs_)
      if ((static_cast<uint32_t>(job->state()) & *mask) && wanted(id, job->userid, job->partition)) sel.push_back(id);
  }
  std::sort(sel.begin(), sel.end());
  for (size_t first = 0; first < sel.size(); first += kListingSlice) {
    MutexLock lk(mu_);
    const size_t last = std::min(sel.size(), first + kListingSlice);
    for (size_t k = first; k < last; ++k) {
      auto it = jobs_.find(sel[k]);
      if (it == jobs_.end()) continue;
      const JobRecord& job = *it->second;
      if (!with_inactive && n++ == limit) return {};
      info.Clear();
      fill_info(job, &info);
      if (!v.sees_details(job.userid)) redact(info);
      if (with_inactive)
        active.push_back(info);
      else
        emit(info);
    }
  }
  if (!with_inactive) return {};
  // Finished jobs come from the store (newest `limit` of them), read after the scan above so
  // a job retired meanwhile is committed by now; merged in id order, and a job seen both
  // active and finished is shown finished.
  (void)store_->flush();
  auto sums = store_->inactive_summaries(req.max_entries());
  if (!sums) return sums.error();
  std::vector<v1::JobInfo> done;
  for (const auto& s : *sums) {
    info.Clear();
    if (summary_from_json(s, &info) && wanted(info.id(), info.userid(), info.partition())) {
      if (!v.sees_details(info.userid())) redact(info);
      done.push_back(info);
    }
  }
  {
    // Retired but not yet durable (the disk is full): shown as the store will have them.
    std::lock_guard lk(retired_mu_);
    std::unordered_set<uint64_t> stored;
    if (!retired_unsaved_.empty())
      for (const auto& d : done) stored.insert(d.id());
    for (const auto& [id, j] : retired_unsaved_) {
      if (!wanted(id, j.userid(), j.partition()) || stored.count(id)) continue;
      done.push_back(j);
      if (!v.sees_details(j.userid())) redact(done.back());
    }
  }
  std::sort(done.begin(), done.end(), [](auto& a, auto& b) { return a.id() < b.id(); });
  size_t d = 0;
  for (const auto& job : active) {
    for (; d < done.size() && done[d].id() <= job.id() && n < limit; ++d, ++n) emit(done[d]);
    if (n >= limit) return {};
    if (d > 0 && done[d - 1].id() == job.id()) continue;
    emit(job);
    ++n;
  }
  for (; d < done.size() && n < limit; ++d, ++n) emit(done[d]);
  return {};
}

Status Controller::list_jobs(const Caller& c, const v1::ListJobsRequest& req, v1::ListJobsReply* rep) {
  rep->set_warning(store_warning());
  return for_each_listed(viewer(c), req, [rep](const v1::JobInfo& j) { *rep->add_jobs() = j; });
}

Status Controller::list_job_table(const Caller& c, const v1::ListJobsRequest& req, v1::JobTable* rep) {
  rep->set_warning(store_warning());
  const Viewer v = viewer(c);
  auto mask = listing_state_mask(req.states());
  if (!mask) return mask.error();
  if (*mask & static_cast<uint32_t>(JobState::INACTIVE)) {
    // Finished jobs come from the store, merged with the active ones as JobInfo.
    TableBuilder table(rep);
    return for_each_listed(v, req, [&table](const v1::JobInfo& j) { table.add(j); });
  }
  const std::set<uint32_t> users(req.userids().begin(), req.userids().end());
  const std::set<uint64_t> ids(req.jobids().begin(), req.jobids().end());
  const size_t limit = req.max_entries() ? req.max_entries() : SIZE_MAX;
  RowTableBuilder table(rep);
  // In slices of rows, the lock released between them, so that listing 100,000 jobs
  // does not hold up heartbeats and other users' requests; each slice goes on from the
  // next job id (jobs that ended meanwhile are left out, as a later listing would).
  size_t n = 0;
  for (uint64_t next = 0;;) {
    MutexLock lk(mu_);
    for (uint64_t id : dirty_) listing_.changed(id, jobs_);  // touched, not yet advanced
    listing_.sync(jobs_);
    const TextPool& pool = listing_.text();
    uint32_t partition = 0;
    const bool no_partition = !req.partition().empty() && !pool.find(req.partition(), &partition);
    if (no_partition) return {};  // no active job is in that partition
    table.new_slice(pool);
    if (next == 0) table.reserve(std::min(limit, jobs_.size()));
    const auto& rows = listing_.rows();
    auto row =
        std::lower_bound(rows.begin(), rows.end(), next, [](const ListingRow& r, uint64_t id) { return r.id < id; });
    for (size_t scanned = 0; row != rows.end() && scanned < kListingScanSlice; ++row, ++scanned) {
      if (!row->live || !(static_cast<uint32_t>(row->state) & *mask)) continue;
      if (!v.sees_job(row->userid) || (!users.empty() && !users.count(row->userid)) ||
          (!ids.empty() && !ids.count(row->id)) || (!req.partition().empty() && row->partition != partition))
        continue;
      if (n++ == limit) return {};
      // A row's own reason is in the text pool; only the others are worked out here.
      std::string reason =
          row->reason == 0 ? pending_reason(row->id, row->state, {}, row->ask_scheduler) : std::string();
      table.add(
          *row,
          [this](uint32_t uid) {
            mu_.assert_held();  // called right here
            return username(uid);
          },
          reason, v.sees_details(row->userid));
    }
    if (row == rows.end()) return {};
    next = row->id;
  }
}

}  // namespace corral::ctld
