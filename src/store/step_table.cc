#include "store/step_table.h"

#include <sqlite3.h>

#include <algorithm>
#include <string>
#include <unordered_map>
#include <variant>

#include <nlohmann/json.hpp>

#include "job/step_id.h"

namespace corral::store {

const char* const kStepsSchema = R"sql(
CREATE TABLE IF NOT EXISTS steps(
  jobid INTEGER NOT NULL,
  step TEXT NOT NULL,
  userid INTEGER NOT NULL,
  name TEXT NOT NULL,
  state TEXT NOT NULL,
  nodelist TEXT NOT NULL,
  nnodes INTEGER NOT NULL,
  ntasks INTEGER NOT NULL,
  ncores INTEGER NOT NULL,
  t_submit REAL NOT NULL,
  t_start REAL NOT NULL,
  t_end REAL NOT NULL,
  waitstatus INTEGER NOT NULL,
  cpu_seconds REAL NOT NULL,
  command TEXT NOT NULL,
  PRIMARY KEY(jobid, step)) WITHOUT ROWID;
)sql";

const char* const kPutStepSql =
    "INSERT OR REPLACE INTO steps(jobid, step, userid, name, state, nodelist, nnodes, ntasks, "
    "ncores, t_submit, t_start, t_end, waitstatus, cpu_seconds, command) "
    "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)";

namespace {

constexpr const char* kStepColumns =
    "jobid, step, userid, name, state, nodelist, nnodes, ntasks, ncores, t_submit, t_start, "
    "t_end, waitstatus, cpu_seconds, command";
// Rows come in primary key order (as text: "10" before "2"); numbering them in SQL would
// sort every row of a large history in a temporary B-tree, so each job's few steps are
// put in step number order here. Named steps carry reserved numbers above every
// numbered one (job::kInteractiveStep, then job::kBatchStep).
constexpr const char* kStepOrder = "jobid, step";

uint64_t step_number(const std::string& step) {
  auto n = job::parse_step_name(step);
  return n ? *n : uint64_t{1} << 32;  // unreadable names last
}

// Sorts a run of one job's steps by step number.
void sort_steps(std::vector<StepRecord>::iterator first, std::vector<StepRecord>::iterator last) {
  std::stable_sort(first, last,
                   [](const StepRecord& a, const StepRecord& b) { return step_number(a.step) < step_number(b.step); });
}

void sort_each_jobs_steps(std::vector<StepRecord>& steps) {
  auto begin = steps.begin();
  while (begin != steps.end()) {
    auto end = std::find_if(begin, steps.end(), [&](const StepRecord& r) { return r.jobid != begin->jobid; });
    sort_steps(begin, end);
    begin = end;
  }
}

StepRecord step_row(const Stmt& s) {
  StepRecord r;
  r.jobid = static_cast<uint64_t>(s.int64(0));
  r.step = s.text(1);
  r.userid = static_cast<uint32_t>(s.int64(2));
  r.name = s.text(3);
  r.state = s.text(4);
  r.nodelist = s.text(5);
  r.nnodes = static_cast<uint32_t>(s.int64(6));
  r.ntasks = static_cast<uint32_t>(s.int64(7));
  r.ncores = static_cast<uint32_t>(s.int64(8));
  r.t_submit = s.real(9);
  r.t_start = s.real(10);
  r.t_end = s.real(11);
  r.waitstatus = static_cast<int32_t>(s.int64(12));
  r.cpu_seconds = s.real(13);
  r.command = s.text(14);
  return r;
}

// A list filter as one bound JSON array (json_each), however long the list is.
template <class T>
std::string json_list(const std::vector<T>& values) {
  return nlohmann::json(values).dump();
}

// The jobs query of a history request, with its parameters in binding order.
struct HistorySql {
  std::string sql = "SELECT id, summary FROM jobs WHERE active = 0";
  std::vector<std::variant<std::string, double>> params;

  void add(const std::string& condition_before, std::variant<std::string, double> value,
           const std::string& condition_after = "") {
    params.push_back(std::move(value));
    sql += " AND " + condition_before + "?" + std::to_string(params.size()) + condition_after;
  }
  void bind(Stmt& s) const {
    for (size_t i = 0; i < params.size(); ++i)
      std::visit([&](const auto& v) { s.bind(static_cast<int>(i + 1), v); }, params[i]);
  }
};

HistorySql history_sql(const HistoryQuery& q) {
  HistorySql h;
  const std::string in_list = " IN (SELECT value FROM json_each(";
  if (!q.userids.empty()) h.add("userid" + in_list, json_list(q.userids), "))");
  if (!q.jobids.empty()) h.add("id" + in_list, json_list(q.jobids), "))");
  // Result and end time live in the summary only: one JSON lookup per row each.
  if (!q.results.empty()) h.add("json_extract(summary, '$.result')" + in_list, json_list(q.results), "))");
  if (q.since > 0) h.add("json_extract(summary, '$.t_inactive') >= ", q.since);
  if (q.until > 0) h.add("json_extract(summary, '$.t_inactive') <= ", q.until);
  h.sql += q.max > 0 ? " ORDER BY id DESC LIMIT " + std::to_string(q.max) : " ORDER BY id";
  return h;
}

}  // namespace

Status write_step(Db& db, Stmt& s, const StepRecord& r) {
  s.bind(1, static_cast<int64_t>(r.jobid));
  s.bind(2, r.step);
  s.bind(3, static_cast<int64_t>(r.userid));
  s.bind(4, r.name);
  s.bind(5, r.state);
  s.bind(6, r.nodelist);
  s.bind(7, static_cast<int64_t>(r.nnodes));
  s.bind(8, static_cast<int64_t>(r.ntasks));
  s.bind(9, static_cast<int64_t>(r.ncores));
  s.bind(10, r.t_submit);
  s.bind(11, r.t_start);
  s.bind(12, r.t_end);
  s.bind(13, static_cast<int64_t>(r.waitstatus));
  s.bind(14, r.cpu_seconds);
  s.bind(15, r.command);
  int rc = s.step();
  s.reset();
  if (rc != SQLITE_DONE) return db.error("recording step " + std::to_string(r.jobid) + "." + r.step, rc);
  return {};
}

Result<std::vector<StepRecord>> query_steps(Db& db, uint64_t jobid, std::optional<uint32_t> userid) {
  // Only the conditions asked for, so that one job's steps are a primary key range.
  std::string sql = std::string("SELECT ") + kStepColumns + " FROM steps WHERE 1";
  if (jobid != 0) sql += " AND jobid = ?1";
  if (userid) sql += " AND userid = ?2";
  auto s = db.prepare(sql + " ORDER BY " + kStepOrder);
  if (!s) return s.error();
  if (jobid != 0) s->bind(1, static_cast<int64_t>(jobid));
  if (userid) s->bind(2, static_cast<int64_t>(*userid));
  std::vector<StepRecord> out;
  int rc;
  while ((rc = s->step()) == SQLITE_ROW) out.push_back(step_row(*s));
  if (rc != SQLITE_DONE)
    return db.error(
        jobid ? "reading the steps of job " + std::to_string(jobid) : std::string("reading the stored steps"), rc);
  sort_each_jobs_steps(out);
  return out;
}

Result<std::vector<HistoryEntry>> query_history(Db& db, const HistoryQuery& q) {
  const HistorySql h = history_sql(q);
  auto jobs = db.prepare(h.sql);
  if (!jobs) return jobs.error();
  h.bind(*jobs);
  std::vector<HistoryEntry> out;
  std::unordered_map<uint64_t, size_t> index;
  std::vector<uint64_t> ids;
  int rc;
  while ((rc = jobs->step()) == SQLITE_ROW) {
    uint64_t id = static_cast<uint64_t>(jobs->int64(0));
    index.emplace(id, out.size());
    ids.push_back(id);
    out.push_back({id, jobs->text(1), {}});
  }
  if (rc != SQLITE_DONE) return db.error("reading finished jobs", rc);
  if (out.empty()) return out;
  // Named jobs: look each up. Otherwise the selection is usually most of an id range,
  // which is read in order in one pass (and what was not selected skipped).
  auto [lo, hi] = std::minmax_element(ids.begin(), ids.end());
  auto steps =
      db.prepare(std::string("SELECT ") + kStepColumns + " FROM steps WHERE " +
                 (q.jobids.empty() ? "jobid BETWEEN ?2 AND ?3" : "jobid IN (SELECT value FROM json_each(?1))") +
                 " ORDER BY " + kStepOrder);
  if (!steps) return steps.error();
  if (q.jobids.empty()) {
    steps->bind(2, static_cast<int64_t>(*lo));
    steps->bind(3, static_cast<int64_t>(*hi));
  } else {
    steps->bind(1, json_list(ids));
  }
  while ((rc = steps->step()) == SQLITE_ROW) {
    uint64_t jobid = static_cast<uint64_t>(steps->int64(0));
    if (auto it = index.find(jobid); it != index.end()) out[it->second].steps.push_back(step_row(*steps));
  }
  if (rc != SQLITE_DONE) return db.error("reading the steps of finished jobs", rc);
  for (auto& e : out) sort_steps(e.steps.begin(), e.steps.end());
  return out;
}

}  // namespace corral::store
