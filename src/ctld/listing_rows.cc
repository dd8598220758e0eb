#include "ctld/listing_rows.h"

#include <algorithm>

namespace corral::ctld {

using job::JobState;

TextPool::TextPool() {
  text_.emplace_back();
  refs_.push_back(1);
  index_.emplace(text_.front(), 0);
}

uint32_t TextPool::add(std::string_view s) {
  if (s.empty()) return 0;
  if (auto it = index_.find(s); it != index_.end()) {
    ++refs_[it->second];
    return it->second;
  }
  uint32_t i;
  if (!free_.empty()) {
    i = free_.back();
    free_.pop_back();
    text_[i] = s;
    refs_[i] = 1;
  } else {
    i = static_cast<uint32_t>(text_.size());
    text_.emplace_back(s);
    refs_.push_back(1);
  }
  index_.emplace(text_[i], i);
  return i;
}

void TextPool::release(uint32_t i) {
  if (i == 0 || --refs_[i] > 0) return;
  index_.erase(text_[i]);
  std::string().swap(text_[i]);
  free_.push_back(i);
}

bool TextPool::find(std::string_view s, uint32_t* i) const {
  auto it = index_.find(s);
  if (it == index_.end()) return false;
  *i = it->second;
  return true;
}

void ListingRows::changed(uint64_t id, const Jobs& jobs) {
  const auto at = pos_.find(id);
  if (!jobs.count(id)) {
    if (at == pos_.end()) return;
    ListingRow& row = rows_[at->second];
    release(row);
    row.live = false;
    ++dead_;
    pos_.erase(at);
    // Jobs end all the time, listed or not: dead rows go once they outnumber the live.
    if (dead_ > 1024 && dead_ > pos_.size()) compact();
    return;
  }
  if (at != pos_.end()) {
    ListingRow& row = rows_[at->second];
    if (!row.stale) {
      row.stale = true;
      stale_.push_back(id);
    }
    return;
  }
  if (!rows_.empty() && rows_.back().id > id) sorted_ = false;
  pos_.emplace(id, static_cast<uint32_t>(rows_.size()));
  ListingRow row;
  row.id = id;
  rows_.push_back(row);
  stale_.push_back(id);
}

void ListingRows::sync(const Jobs& jobs) {
  for (uint64_t id : stale_) {
    auto at = pos_.find(id);
    auto job = jobs.find(id);
    if (at == pos_.end() || job == jobs.end()) continue;  // gone: changed() dropped it
    build(rows_[at->second], *job->second);
  }
  stale_.clear();
  if (pos_.size() != jobs.size()) {
    rebuild(jobs);
    return;
  }
  if (!sorted_ || (dead_ > 1024 && dead_ > pos_.size() / 2)) compact();
}

void ListingRows::build(ListingRow& row, const JobRecord& job) {
  release(row);
  const auto& st = job.status;
  const auto& spec = *job.spec;
  row.stale = false;
  row.userid = job.userid;
  row.state = st.state;
  row.name = text_.add(spec.name);
  row.result = st.state == JobState::INACTIVE ? text_.add(job::job_result(st)) : 0;
  // Pending jobs show their own reason, or (Controller::pending_reason) the scheduler's.
  const bool pending = st.state < JobState::RUN && st.state != JobState::NEW;
  row.reason = pending ? text_.add(job.reason) : 0;
  row.ask_scheduler = pending && job.reason.empty() && job.in_scheduler;
  row.urgency = st.urgency;
  row.priority = st.priority;
  row.t_submit = st.t_submit;
  row.t_run = st.t_run;
  row.t_cleanup = st.t_cleanup;
  row.t_inactive = st.t_inactive;
  if (job.R) {
    row.nodelist = text_.add(job.R->nodelist());
    row.nnodes = static_cast<uint32_t>(job.R->nodes.size());
    row.ncores = job.R->ncores();
    row.ngpus = job.R->ngpus();
  } else {
    row.nodelist = 0;
    row.nnodes = std::max(1u, spec.nnodes);  // at least one node, as squeue shows
    row.ncores = spec.ntasks * spec.cores_per_task;
    row.ngpus = spec.ntasks * spec.gpus_per_task;
  }
  row.ntasks = spec.ntasks;
  row.partition = text_.add(job.partition);
  row.duration = spec.duration;
  row.waitstatus = st.finished ? st.waitstatus : -1;
  row.exception_type = text_.add(st.exception_type);
  row.exception_note = text_.add(st.exception_note);
  row.cwd = text_.add(spec.cwd);
  std::string deps;
  for (const auto& d : spec.dependencies) deps += (deps.empty() ? "" : ",") + d;
  row.dependencies = text_.add(deps);
}

// Drops the row's hold on its text (all indices are 0 in a row never built).
void ListingRows::release(ListingRow& row) {
  for (uint32_t* i : {&row.name, &row.result, &row.reason, &row.nodelist, &row.partition, &row.exception_type,
                      &row.exception_note, &row.cwd, &row.dependencies}) {
    text_.release(*i);
    *i = 0;
  }
}

void ListingRows::compact() {
  std::erase_if(rows_, [](const ListingRow& r) { return !r.live; });
  if (!sorted_)
    std::sort(rows_.begin(), rows_.end(), [](const ListingRow& a, const ListingRow& b) { return a.id < b.id; });
  // After a burst of jobs the arrays shrink again (bench/memory counts what stays).
  if (rows_.capacity() > 2 * rows_.size() + 1024) rows_.shrink_to_fit();
  pos_ = {};
  pos_.reserve(rows_.size());
  stale_.clear();
  for (size_t i = 0; i < rows_.size(); ++i) {
    pos_.emplace(rows_[i].id, static_cast<uint32_t>(i));
    if (rows_[i].stale) stale_.push_back(rows_[i].id);
  }
  if (stale_.capacity() > 2 * stale_.size() + 1024) stale_.shrink_to_fit();
  dead_ = 0;
  sorted_ = true;
}

void ListingRows::rebuild(const Jobs& jobs) {
  for (auto& row : rows_) release(row);
  rows_.clear();
  pos_.clear();
  dead_ = 0;
  rows_.reserve(jobs.size());
  for (const auto& [id, job] : jobs) {
    ListingRow row;
    row.id = id;
    build(row, *job);
    rows_.push_back(row);
  }
  sorted_ = false;
  compact();
}

}  // namespace corral::ctld
