// What `corral queue` shows of each active job, kept in one id-ordered array of small
// rows so a listing of 100,000 jobs reads contiguous memory instead of chasing 100,000
// scattered job records. Rows are marked stale when their job changes (cheap: the
// scheduling path pays a hash lookup) and rebuilt from the record when next listed.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ctld/job_record.h"

namespace corral::ctld {

// Interned text with reference counts, so rows hold 4-byte indices and text that no
// row uses any more is dropped. Index 0 is "" and is never released.
class TextPool {
 public:
  TextPool();
  uint32_t add(std::string_view s);
  void release(uint32_t i);
  std::string_view at(uint32_t i) const { return text_[i]; }
  // The index of `s` if some row holds it.
  bool find(std::string_view s, uint32_t* i) const;
  size_t size() const { return text_.size(); }

 private:
  std::deque<std::string> text_;  // a deque: the index's views must not move
  std::vector<uint32_t> refs_;
  std::vector<uint32_t> free_;
  std::unordered_map<std::string_view, uint32_t> index_;
};

struct ListingRow {
  uint64_t id = 0;
  uint32_t userid = 0;
  job::JobState state = job::JobState::NEW;
  bool live = true;            // false once the job is gone (removed at the next compaction)
  bool stale = true;           // the job changed since this row was built
  bool ask_scheduler = false;  // pending, no reason of its own, in the scheduler
  uint32_t urgency = 0;
  int64_t priority = 0;
  double t_submit = 0, t_run = 0, t_cleanup = 0, t_inactive = 0, duration = 0;
  uint32_t nnodes = 0, ntasks = 0, ncores = 0, ngpus = 0;
  int32_t waitstatus = -1;
  // TextPool indices.
  uint32_t name = 0, result = 0, reason = 0, nodelist = 0, partition = 0, exception_type = 0, exception_note = 0,
           cwd = 0, dependencies = 0;
};

class ListingRows {
 public:
  using Jobs = std::unordered_map<uint64_t, std::unique_ptr<JobRecord>>;

  // Job `id` may have changed, started or ended (ended: `jobs` no longer holds it).
  void changed(uint64_t id, const Jobs& jobs);
  // Rebuilds the stale rows and puts the rows in id order; starts over from `jobs` if
  // the rows disagree with it (a job added without a change being reported).
  void sync(const Jobs& jobs);
  // After sync: the rows in id order, some possibly not live.
  const std::vector<ListingRow>& rows() const { return rows_; }
  const TextPool& text() const { return text_; }

 private:
  void build(ListingRow& row, const JobRecord& job);
  void release(ListingRow& row);
  void compact();
  void rebuild(const Jobs& jobs);

  std::vector<ListingRow> rows_;
  std::unordered_map<uint64_t, uint32_t> pos_;  // id -> index in rows_ (live rows)
  std::vector<uint64_t> stale_;                 // ids whose row turned stale
  size_t dead_ = 0;
  bool sorted_ = true;
  TextPool text_;
};

}  // namespace corral::ctld
