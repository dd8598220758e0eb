// One job of a listing as plain values, whether it came as a JobInfo (show, wait) or as
// row i of a column-by-column JobTable (queue), so state codes, times and JSON are
// written once for both.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "client.pb.h"

namespace corral::cli {

struct JobRow {
  uint64_t id = 0;
  uint32_t userid = 0;
  std::string_view username, name, state, result, reason;
  uint32_t urgency = 0;
  int64_t priority = 0;
  double t_submit = 0, t_run = 0, t_cleanup = 0, t_inactive = 0;
  std::string_view nodelist;
  uint32_t nnodes = 0, ntasks = 0, ncores = 0, ngpus = 0;
  std::string_view partition;
  double duration = 0;
  int32_t waitstatus = -1;
  std::string_view exception_type, exception_note, cwd;
  std::string_view dependencies;  // comma separated
};

// The views point into `j` / `t`, which must outlive the row.
JobRow row_of(const corral::v1::JobInfo& j, std::string& deps_buffer);
JobRow row_at(const corral::v1::JobTable& t, int i);
// Whether every column of `t` has one entry per job and every text index is valid.
bool table_is_consistent(const corral::v1::JobTable& t);

// squeue's codes: PD pending, R running, CG completing, CD completed, F failed,
// CA canceled, TO timeout.
std::string_view short_state(const JobRow& job);
// Seconds the job has run (so far, or in all once it ended); 0 if it never started.
double run_time(const JobRow& job, double now);

// Appends the job as a JSON object (the keys `corral queue --json` and `show --json`
// document), pretty-printed with two-space indentation starting at `indent` spaces.
void append_job_json(std::string& out, const JobRow& job, int indent);

}  // namespace corral::cli
