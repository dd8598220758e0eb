#include "store/store.h"

#include <pthread.h>
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <variant>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "store/sqlite_db.h"
#include "store/step_table.h"

namespace corral::store {
namespace {

constexpr int64_t kSchemaVersion = 1;
using Clock = std::chrono::steady_clock;

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS jobspecs(
  id INTEGER PRIMARY KEY,
  text TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs(
  id INTEGER PRIMARY KEY,
  userid INTEGER NOT NULL,
  spec_id INTEGER NOT NULL REFERENCES jobspecs(id),
  active INTEGER NOT NULL DEFAULT 1,
  summary TEXT);
CREATE INDEX IF NOT EXISTS jobs_active ON jobs(id) WHERE active = 1;
CREATE INDEX IF NOT EXISTS jobs_inactive ON jobs(id) WHERE active = 0;
CREATE TABLE IF NOT EXISTS events(
  jobid INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  timestamp REAL NOT NULL,
  name TEXT NOT NULL,
  context TEXT NOT NULL,
  PRIMARY KEY(jobid, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS nodes(
  name TEXT PRIMARY KEY,
  cores INTEGER NOT NULL,
  gpus INTEGER NOT NULL,
  memory_mb INTEGER NOT NULL,
  drained INTEGER NOT NULL,
  reason TEXT NOT NULL,
  reason_time REAL NOT NULL,
  reason_userid INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS hook_state(
  hook TEXT NOT NULL,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY(hook, key)) WITHOUT ROWID;
INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', 1), ('next_jobid', 1);
)sql";

// SQLite integers are signed 64-bit; ids are stored bit for bit.
int64_t sql_id(uint64_t id) { return static_cast<int64_t>(id); }
uint64_t from_sql_id(int64_t id) { return static_cast<uint64_t>(id); }

struct InsertJob {
  uint64_t id;
  uint32_t userid;
  std::shared_ptr<const std::string> jobspec;
};
struct AppendEvent {
  uint64_t jobid;
  job::Event ev;
};
struct FinishJob {
  uint64_t jobid;
  std::string summary;
};
struct PutNode {
  NodeRecord node;
};
struct PutHookState {
  std::string hook, key, value;
  bool erase = false;
};
struct PutStep {
  StepRecord step;
};
struct DiscardJob {
  uint64_t jobid;
};
// A callback told of a failure that may pass at once, rather than when the retry commits.
struct FailFast {
  Store::Done fn;
};
// A callback that does not hurry the commit (Store::on_durable_soon).
struct Soon {
  Store::Done fn;
};
using Op = std::variant<InsertJob, AppendEvent, FinishJob, PutNode, PutHookState, PutStep, DiscardJob, Store::Done,
                        FailFast, Soon>;

// Whether someone waits for this op's commit: only then does it start at once.
bool hurries(const Op& op) { return std::holds_alternative<Store::Done>(op) || std::holds_alternative<FailFast>(op); }

// Statements of the writer connection, prepared once.
struct WriteStmts {
  Stmt begin, commit, rollback;
  Stmt insert_jobspec, insert_job, bump_next_jobid, next_seq, insert_event, finish_job, put_node;
  Stmt put_hook_state, erase_hook_state, put_step;
  Stmt discard_spec, discard_events, discard_job;
};

// Statements of the read connection, prepared once.
struct ReadStmts {
  Stmt begin, end;
  Stmt next_jobid, max_id, active_jobs, active_events, nodes, hook_state;
  Stmt eventlog, job, summaries, count_inactive;
};

Status prepare_all(Db& db, std::initializer_list<std::pair<Stmt*, const char*>> list) {
  for (auto& [stmt, sql] : list) {
    auto s = db.prepare(sql);
    if (!s) return s.error();
    *stmt = std::move(s.value());
  }
  return {};
}

Status prepare_writes(Db& db, WriteStmts& w) {
  return prepare_all(db,
                     {
                         {&w.begin, "BEGIN IMMEDIATE"},
                         {&w.commit, "COMMIT"},
                         {&w.rollback, "ROLLBACK"},
                         {&w.insert_jobspec, "INSERT INTO jobspecs(text) VALUES(?1)"},
                         {&w.insert_job, "INSERT INTO jobs(id, userid, spec_id, active) VALUES(?1, ?2, ?3, 1)"},
                         {&w.bump_next_jobid,
                          "INSERT INTO meta(key, value) VALUES('next_jobid', ?1) "
                          "ON CONFLICT(key) DO UPDATE SET value = max(value, excluded.value)"},
                         {&w.next_seq, "SELECT COALESCE(MAX(seq) + 1, 0) FROM events WHERE jobid = ?1"},
                         {&w.insert_event,
                          "INSERT INTO events(jobid, seq, timestamp, name, context) "
                          "VALUES(?1, ?2, ?3, ?4, ?5)"},
                         {&w.finish_job, "UPDATE jobs SET active = 0, summary = ?2 WHERE id = ?1"},
                         {&w.put_node,
                          "INSERT OR REPLACE INTO nodes(name, cores, gpus, memory_mb, drained, reason, "
                          "reason_time, reason_userid) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"},
                         {&w.put_hook_state, "INSERT OR REPLACE INTO hook_state(hook, key, value) VALUES(?1, ?2, ?3)"},
                         {&w.erase_hook_state, "DELETE FROM hook_state WHERE hook = ?1 AND key = ?2"},
                         {&w.discard_spec,
                          "DELETE FROM jobspecs WHERE id = (SELECT spec_id FROM jobs WHERE id = ?1) AND NOT EXISTS "
                          "(SELECT 1 FROM jobs j WHERE j.spec_id = jobspecs.id AND j.id != ?1)"},
                         {&w.discard_events, "DELETE FROM events WHERE jobid = ?1"},
                         {&w.discard_job, "DELETE FROM jobs WHERE id = ?1"},
                         {&w.put_step, kPutStepSql},
                     });
}

Status prepare_reads(Db& db, ReadStmts& r) {
  return prepare_all(db, {
                             {&r.begin, "BEGIN"},
                             {&r.end, "COMMIT"},
                             {&r.next_jobid, "SELECT value FROM meta WHERE key = 'next_jobid'"},
                             {&r.max_id, "SELECT MAX(id) FROM jobs"},
                             {&r.active_jobs,
                              "SELECT j.id, j.userid, s.text FROM jobs j JOIN jobspecs s ON s.id = j.spec_id "
                              "WHERE j.active = 1 ORDER BY j.id"},
                             {&r.active_events,
                              "SELECT e.jobid, e.timestamp, e.name, e.context FROM jobs j "
                              "JOIN events e ON e.jobid = j.id WHERE j.active = 1 ORDER BY j.id, e.seq"},
                             {&r.nodes,
                              "SELECT name, cores, gpus, memory_mb, drained, reason, reason_time, reason_userid "
                              "FROM nodes ORDER BY name"},
                             {&r.hook_state, "SELECT hook, key, value FROM hook_state ORDER BY hook, key"},
                             {&r.eventlog, "SELECT timestamp, name, context FROM events WHERE jobid = ?1 ORDER BY seq"},
                             {&r.job,
                              "SELECT s.text, j.active, j.summary FROM jobs j JOIN jobspecs s "
                              "ON s.id = j.spec_id WHERE j.id = ?1"},
                             {&r.summaries, "SELECT summary FROM jobs WHERE active = 0 ORDER BY id DESC LIMIT ?1"},
                             {&r.count_inactive, "SELECT count(*) FROM jobs WHERE active = 0"},
                         });
}

// Runs a statement that returns no rows we need; the error says what was being done.
Status exec_stmt(Db& db, Stmt& s, const std::string& what) {
  int rc = s.step();
  Status st;
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) st = db.error(what, rc);
  s.reset();
  return st;
}

// The first row's first column as an integer, or `fallback` when there is none / NULL.
Result<int64_t> scalar(Db& db, Stmt& s, int64_t fallback, const std::string& what) {
  StmtScope scope(s);
  int rc = s.step();
  if (rc == SQLITE_ROW) return s.is_null(0) ? fallback : s.int64(0);
  if (rc == SQLITE_DONE) return fallback;
  return db.error(what, rc);
}

Status configure_writer(Db& db, const StoreOptions& opts) {
  // journal_mode answers with the mode in effect: some filesystems refuse WAL.
  auto mode = db.prepare("PRAGMA journal_mode=WAL");
  if (!mode) return mode.error();
  int rc = mode->step();
  if (rc != SQLITE_ROW) return db.error("enabling WAL journal mode", rc);
  if (mode->text(0) != "wal")
    return io_error("state database " + db.path() + ": the filesystem does not support " +
                    "SQLite's WAL mode (journal mode is " + mode->text(0) + ")");
  mode->reset();
  std::string sync = opts.synchronous_full ? "FULL" : "NORMAL";
  if (auto st = db.exec("PRAGMA synchronous=" + sync + "; PRAGMA busy_timeout=5000;"); !st) return st;
  if (auto st = db.exec("BEGIN IMMEDIATE;" + std::string(kSchema) + kStepsSchema + "COMMIT;"); !st) {
    if (db.in_transaction()) (void)db.exec("ROLLBACK");
    return st;
  }
  auto version = db.prepare("SELECT value FROM meta WHERE key = 'schema_version'");
  if (!version) return version.error();
  auto v = scalar(db, *version, 0, "reading the schema version");
  if (!v) return v.error();
  if (*v > kSchemaVersion)
    return io_error("state database " + db.path() + " has schema version " + std::to_string(*v) +
                    ", newer than this corral understands (" + std::to_string(kSchemaVersion) +
                    "); use a newer corrald");
  return {};
}

}  // namespace

struct Store::Impl {
  StoreOptions opts;
  Db wdb, rdb;
  WriteStmts w;  // writer thread only (after open)
  ReadStmts r;   // under read_mu
  std::mutex read_mu;

  std::mutex mu;  // guards queue, hurry, oldest and stopping
  std::condition_variable cv;
  std::vector<Op> queue;
  bool hurry = false;          // the queue holds a callback someone waits for
  Clock::time_point oldest{};  // when the queue last became non-empty
  bool stopping = false;
  std::thread writer;

  // Next event sequence number of jobs written since start (writer thread only). Finished
  // jobs are dropped so the map stays the size of the active set.
  std::unordered_map<uint64_t, int64_t> next_seq;
  std::shared_ptr<const std::string> last_spec;  // the jobspec row written last
  int64_t last_spec_id = 0;
  Status unreported;  // a failure no callback has been told about yet (writer thread only)
  // Writes (and their callbacks) of commits that failed for a reason that may pass,
  // retried first, in order, before anything queued later (writer thread only).
  std::vector<Op> backlog;
  mutable std::mutex health_mu;
  Status held;  // why writes are held (OK: none are); under health_mu
  Clock::time_point held_since;

  ~Impl() { stop(); }

  // The writer wakes for the first write (to start its clock) and for the first callback
  // that someone waits for.
  void push(Op op) {
    bool wake;
    {
      std::lock_guard lock(mu);
      const bool was_empty = queue.empty();
      if (was_empty) oldest = Clock::now();
      wake = was_empty || (!hurry && hurries(op));
      hurry = hurry || hurries(op);
      queue.push_back(std::move(op));
    }
    if (wake) cv.notify_one();
  }

  void stop() {
    if (!writer.joinable()) return;
    {
      std::lock_guard lock(mu);
      stopping = true;
    }
    cv.notify_one();
    writer.join();
  }

  // --- writer thread ---

  void writer_loop() {
    std::vector<Op> chunk;
    while (wait_for_work(chunk)) commit_group(chunk);
  }

  bool wait_for_work(std::vector<Op>& chunk) {
    std::unique_lock lock(mu);
    if (!backlog.empty()) {
      // Held writes are retried at an interval, not at every new write: a full disk
      // must not turn into a busy loop.
      cv.wait_for(lock, std::chrono::duration<double>(opts.retry_interval), [&] { return stopping; });
      hurry = false;
      chunk.swap(queue);
      return true;
    }
    cv.wait(lock, [&] { return stopping || !queue.empty(); });
    if (queue.empty()) return false;  // stopping, and everything is written
    // Writes nobody waits for yet gather until someone does, or for commit_interval at
    // most: a job's `start`, say, then shares the commit of the next submission.
    cv.wait_until(lock, oldest + interval(), [&] { return stopping || hurry; });
    hurry = false;
    chunk.swap(queue);
    return true;
  }

  Clock::duration interval() const {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opts.commit_interval));
  }

  bool is_stopping() {
    std::lock_guard lock(mu);
    return stopping;
  }

  bool take_more(std::vector<Op>& chunk) {
    std::lock_guard lock(mu);
    if (queue.empty()) return false;
    hurry = false;  // whoever waited is in this group now
    chunk.swap(queue);
    return true;
  }

  // One transaction absorbs what arrives while it applies writes, until the queue is empty
  // or commit_interval has passed since the group started. An empty queue commits at once:
  // nobody should wait for a write that may never come, and while this commit syncs, the
  // next group gathers by itself. (Lingering a fraction of the last commit's duration for
  // more writes was tried; it showed no measurable gain and adds latency when idle.)
  void commit_group(std::vector<Op>& chunk) {
    auto deadline = Clock::now() + interval();
    std::vector<Op> group;  // everything in this transaction, in order: kept for a retry
    group.swap(backlog);
    Status st = exec_stmt(wdb, w.begin, "starting a transaction");
    size_t applied = 0;
    for (;;) {
      std::move(chunk.begin(), chunk.end(), std::back_inserter(group));
      chunk.clear();
      for (; applied < group.size() && st.ok(); ++applied) st = apply_op(group[applied]);
      if (!st.ok() || Clock::now() >= deadline || !take_more(chunk)) break;
    }
    st = end_transaction(std::move(st));
    if (!st.ok() && st.error().code == Errc::unavailable && !is_stopping()) {
      hold(std::move(group), st);
      return;
    }
    if (st.ok()) resume(group.size());
    report(group, st);
  }

  Status apply_op(Op& op) {
    return std::visit(
        [&](auto& o) -> Status {
          using T = std::decay_t<decltype(o)>;
          if constexpr (std::is_same_v<T, Done> || std::is_same_v<T, FailFast> || std::is_same_v<T, Soon>)
            return {};
          else
            return apply(o);
        },
        op);
  }

  // A commit failed for a reason that may pass: its writes wait for the next attempt.
  // Fail-fast callbacks learn of it now (once); the others wait with the writes.
  // The health says so before any callback runs: whoever is told asks and sees it.
  void hold(std::vector<Op> group, const Status& st) {
    std::vector<Store::Done> told;
    std::erase_if(group, [&told](Op& op) {  // the predicate runs once per element, in order
      auto* f = std::get_if<FailFast>(&op);
      if (f != nullptr && f->fn) told.push_back(std::move(f->fn));
      return f != nullptr;
    });
    backlog = std::move(group);
    {
      std::lock_guard lock(health_mu);
      if (held.ok()) {
        held_since = Clock::now();
        spdlog::error("{}; {} writes are kept in memory and retried every {} s", st.message(), backlog.size(),
                      opts.retry_interval);
      }
      held = st;
    }
    for (auto& fn : told) fn(st);
  }

  void resume(size_t writes) {
    std::lock_guard lock(health_mu);
    if (held.ok()) return;
    spdlog::warn("state database writable again after {:.0f} s: {} held writes committed",
                 std::chrono::duration<double>(Clock::now() - held_since).count(), writes);
    held = Status();
  }

  // Every callback of the group gets its status. Writes lost after the group's last
  // callback are reported to the next callback, whichever group it is in, so that no
  // callback says "durable" after a write queued before it was rolled back.
  void report(std::vector<Op>& group, const Status& st) {
    bool told = false, writes_after_last_done = false;
    for (auto& op : group) {
      Done* fn = std::get_if<Done>(&op);
      if (auto* f = std::get_if<FailFast>(&op); f != nullptr) fn = &f->fn;
      if (auto* f = std::get_if<Soon>(&op); f != nullptr) fn = &f->fn;
      if (fn == nullptr) {
        writes_after_last_done = true;
        continue;
      }
      writes_after_last_done = false;
      if (!*fn) continue;
      (*fn)(!told && !unreported.ok() ? unreported : st);
      told = true;
    }
    if (told) unreported = Status();
    if (!st.ok() && writes_after_last_done && unreported.ok()) unreported = st;
  }

  Status end_transaction(Status st) {
    if (st.ok()) st = exec_stmt(wdb, w.commit, "committing");
    if (!st.ok()) {
      if (wdb.in_transaction()) (void)exec_stmt(wdb, w.rollback, "rolling back");
      next_seq.clear();   // the cached numbers may include rolled-back events
      last_spec.reset();  // and the cached jobspec row may be rolled back too
    }
    return st;
  }

  Status apply(const InsertJob& op) {
    std::string what = "recording new job " + std::to_string(op.id);
    w.insert_job.bind(1, sql_id(op.id));
    w.insert_job.bind(2, static_cast<int64_t>(op.userid));
    // Consecutive jobs with the same jobspec (a --cc submission) share one row.
    if (op.jobspec != last_spec && (!last_spec || *op.jobspec != *last_spec)) {
      w.insert_jobspec.bind(1, *op.jobspec);
      if (auto st = exec_stmt(wdb, w.insert_jobspec, what); !st) return st;
      last_spec = op.jobspec;
      last_spec_id = wdb.last_insert_rowid();
    }
    w.insert_job.bind(3, last_spec_id);
    if (auto st = exec_stmt(wdb, w.insert_job, what); !st) return st;
    // Ids are never reused, even after the highest job is purged from the table.
    w.bump_next_jobid.bind(1, sql_id(op.id + 1));
    if (auto st = exec_stmt(wdb, w.bump_next_jobid, what); !st) return st;
    next_seq[op.id] = 0;
    return {};
  }

  Status apply(const AppendEvent& op) {
    std::string_view what = "appending an event";
    auto it = next_seq.find(op.jobid);
    if (it == next_seq.end()) {
      w.next_seq.bind(1, sql_id(op.jobid));
      auto seq = scalar(wdb, w.next_seq, 0, std::string(what));
      if (!seq) return seq.error();
      it = next_seq.emplace(op.jobid, *seq).first;
    }
    w.insert_event.bind(1, sql_id(op.jobid));
    w.insert_event.bind(2, it->second);
    w.insert_event.bind(3, op.ev.timestamp);
    w.insert_event.bind(4, op.ev.name);
    w.insert_event.bind(5, op.ev.context);
    int rc = w.insert_event.step();
    Status st;
    if (rc != SQLITE_DONE) st = wdb.error("appending event " + op.ev.name + " to job " + std::to_string(op.jobid), rc);
    w.insert_event.reset();
    if (st.ok()) ++it->second;
    return st;
  }

  Status apply(const FinishJob& op) {
    std::string what = "marking job " + std::to_string(op.jobid) + " inactive";
    w.finish_job.bind(1, sql_id(op.jobid));
    w.finish_job.bind(2, op.summary);
    if (auto st = exec_stmt(wdb, w.finish_job, what); !st) return st;
    if (wdb.changes() == 0)
      return not_found("state database " + wdb.path() + ": " + what + ": the job was never recorded");
    next_seq.erase(op.jobid);
    return {};
  }

  Status apply(const PutNode& op) {
    const NodeRecord& n = op.node;
    w.put_node.bind(1, n.name);
    w.put_node.bind(2, static_cast<int64_t>(n.cores));
    w.put_node.bind(3, static_cast<int64_t>(n.gpus));
    w.put_node.bind(4, static_cast<int64_t>(n.memory_mb));
    w.put_node.bind(5, static_cast<int64_t>(n.drained));
    w.put_node.bind(6, n.reason);
    w.put_node.bind(7, n.reason_time);
    w.put_node.bind(8, static_cast<int64_t>(n.reason_userid));
    return exec_stmt(wdb, w.put_node, "recording node " + n.name);
  }

  Status apply(const PutHookState& op) {
    Stmt& s = op.erase ? w.erase_hook_state : w.put_hook_state;
    s.bind(1, op.hook);
    s.bind(2, op.key);
    if (!op.erase) s.bind(3, op.value);
    return exec_stmt(wdb, s, "recording state of hook " + op.hook);
  }

  Status apply(const PutStep& op) { return write_step(wdb, w.put_step, op.step); }

  Status apply(const DiscardJob& op) {
    const std::string what = "discarding job " + std::to_string(op.jobid);
    for (Stmt* s : {&w.discard_spec, &w.discard_events, &w.discard_job}) {
      s->bind(1, sql_id(op.jobid));
      if (auto st = exec_stmt(wdb, *s, what); !st) return st;
    }
    next_seq.erase(op.jobid);
    last_spec.reset();  // its jobspec row may be gone
    return {};
  }

  // --- readers (hold read_mu) ---

  // A read transaction so that everything read together is one consistent snapshot.
  class ReadTxn {
   public:
    explicit ReadTxn(Impl& impl) : impl_(impl) {
      ok_ = exec_stmt(impl_.rdb, impl_.r.begin, "starting a read transaction");
    }
    ~ReadTxn() {
      if (ok_.ok()) (void)exec_stmt(impl_.rdb, impl_.r.end, "ending a read transaction");
    }
    ReadTxn(const ReadTxn&) = delete;
    ReadTxn& operator=(const ReadTxn&) = delete;
    const Status& status() const { return ok_; }

   private:
    Impl& impl_;
    Status ok_;
  };

  Result<std::vector<job::Event>> events_of(uint64_t jobid) {
    Stmt& s = r.eventlog;
    StmtScope scope(s);
    s.bind(1, sql_id(jobid));
    std::vector<job::Event> out;
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) out.push_back({s.real(0), s.text(1), s.text(2)});
    if (rc != SQLITE_DONE) return rdb.error("reading the eventlog of job " + std::to_string(jobid), rc);
    return out;
  }

  struct JobRow {
    std::string jobspec;
    bool active = false;
    std::string summary;
  };
  Result<JobRow> job_row(uint64_t jobid) {
    Stmt& s = r.job;
    StmtScope scope(s);
    s.bind(1, sql_id(jobid));
    int rc = s.step();
    if (rc == SQLITE_ROW) return JobRow{s.text(0), s.int64(1) != 0, s.text(2)};
    if (rc == SQLITE_DONE) return not_found("job " + std::to_string(jobid) + " is not in state database " + rdb.path());
    return rdb.error("reading job " + std::to_string(jobid), rc);
  }

  Status read_active(Snapshot& snap) {
    {
      Stmt& s = r.active_jobs;
      StmtScope scope(s);
      int rc;
      while ((rc = s.step()) == SQLITE_ROW)
        snap.active.push_back({from_sql_id(s.int64(0)), static_cast<uint32_t>(s.int64(1)), s.text(2), {}});
      if (rc != SQLITE_DONE) return rdb.error("reading the active jobs", rc);
    }
    // Both queries are ordered by job id, so the events are merged in one pass.
    Stmt& s = r.active_events;
    StmtScope scope(s);
    size_t j = 0;
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
      uint64_t id = from_sql_id(s.int64(0));
      while (j < snap.active.size() && snap.active[j].id != id) ++j;
      if (j == snap.active.size()) return rdb.error("reading the active eventlogs: out of order");
      snap.active[j].events.push_back({s.real(1), s.text(2), s.text(3)});
    }
    if (rc != SQLITE_DONE) return rdb.error("reading the active eventlogs", rc);
    return {};
  }

  Status read_nodes(Snapshot& snap) {
    Stmt& s = r.nodes;
    StmtScope scope(s);
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
      NodeRecord n;
      n.name = s.text(0);
      n.cores = static_cast<uint32_t>(s.int64(1));
      n.gpus = static_cast<uint32_t>(s.int64(2));
      n.memory_mb = static_cast<uint64_t>(s.int64(3));
      n.drained = s.int64(4) != 0;
      n.reason = s.text(5);
      n.reason_time = s.real(6);
      n.reason_userid = static_cast<uint32_t>(s.int64(7));
      snap.nodes.push_back(std::move(n));
    }
    if (rc != SQLITE_DONE) return rdb.error("reading the nodes", rc);
    return {};
  }

  Status read_hook_state(Snapshot& snap) {
    Stmt& s = r.hook_state;
    StmtScope scope(s);
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) snap.hook_state[s.text(0)].emplace_back(s.text(1), s.text(2));
    if (rc != SQLITE_DONE) return rdb.error("reading the hooks' saved state", rc);
    return {};
  }

  Result<Snapshot> read_snapshot() {
    Snapshot snap;
    auto meta_next = scalar(rdb, r.next_jobid, 1, "reading the next job id");
    if (!meta_next) return meta_next.error();
    auto max_id = scalar(rdb, r.max_id, 0, "reading the highest job id");
    if (!max_id) return max_id.error();
    snap.next_jobid = std::max(from_sql_id(*meta_next), from_sql_id(*max_id) + 1);
    if (auto st = read_active(snap); !st) return st.error();
    if (auto st = read_nodes(snap); !st) return st.error();
    if (auto st = read_hook_state(snap); !st) return st.error();
    return snap;
  }
};

Result<std::unique_ptr<Store>> Store::open(const std::string& path, StoreOptions opts) {
  auto impl = std::make_unique<Impl>();
  impl->opts = opts;
  auto wdb = Db::open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX);
  if (!wdb) return wdb.error();
  impl->wdb = std::move(wdb.value());
  if (auto st = configure_writer(impl->wdb, opts); !st) return st.error();
  if (auto st = prepare_writes(impl->wdb, impl->w); !st) return st.error();

  auto rdb = Db::open(path, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX);
  if (!rdb) return rdb.error();
  impl->rdb = std::move(rdb.value());
  if (auto st = impl->rdb.exec("PRAGMA busy_timeout=5000"); !st) return st.error();
  if (auto st = prepare_reads(impl->rdb, impl->r); !st) return st.error();

  Impl& ref = *impl;
  impl->writer = std::thread([&ref] {
    pthread_setname_np(pthread_self(), "store-writer");
    ref.writer_loop();
  });
  // The constructor is private, so make_unique cannot reach it.
  return std::unique_ptr<Store>(new Store(std::move(impl)));
}

Store::Store(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Store::~Store() { impl_->stop(); }

void Store::insert_job(uint64_t id, uint32_t userid, const std::string& jobspec) {
  insert_job(id, userid, std::make_shared<const std::string>(jobspec));
}

void Store::insert_job(uint64_t id, uint32_t userid, std::shared_ptr<const std::string> jobspec) {
  impl_->push(InsertJob{id, userid, std::move(jobspec)});
}

void Store::append_event(uint64_t jobid, const job::Event& ev) { impl_->push(AppendEvent{jobid, ev}); }

void Store::finish_job(uint64_t jobid, const std::string& summary_json) { impl_->push(FinishJob{jobid, summary_json}); }

void Store::put_node(const NodeRecord& node) { impl_->push(PutNode{node}); }

void Store::put_hook_state(const std::string& hook, const std::string& key, const std::string& value) {
  impl_->push(PutHookState{hook, key, value, false});
}

void Store::erase_hook_state(const std::string& hook, const std::string& key) {
  impl_->push(PutHookState{hook, key, {}, true});
}

void Store::put_step(const StepRecord& step) { impl_->push(PutStep{step}); }

void Store::on_durable(Done done, bool fail_fast) {
  if (fail_fast)
    impl_->push(FailFast{std::move(done)});
  else
    impl_->push(std::move(done));
}

void Store::on_durable_soon(Done done) { impl_->push(Soon{std::move(done)}); }

void Store::discard_job(uint64_t jobid) { impl_->push(DiscardJob{jobid}); }

Status Store::health() const {
  std::lock_guard lock(impl_->health_mu);
  if (impl_->held.ok()) return {};
  const double secs = std::chrono::duration<double>(Clock::now() - impl_->held_since).count();
  return Error{Errc::unavailable, fmt::format("{} (writes held for {:.0f} s)", impl_->held.message(), secs)};
}

Status Store::flush() {
  if (std::this_thread::get_id() == impl_->writer.get_id())
    return Error{Errc::internal, "Store::flush called from an on_durable callback: it would wait for itself"};
  // While writes are held (disk full) nobody waits for them: readers read what is there.
  if (auto held = health(); !held.ok()) return held;
  std::promise<Status> promise;
  auto done = promise.get_future();
  on_durable([&promise](const Status& st) { promise.set_value(st); }, true);
  return done.get();
}

Result<Snapshot> Store::load() {
  if (auto st = flush(); !st) return st.error();
  std::lock_guard lock(impl_->read_mu);
  Impl::ReadTxn txn(*impl_);
  if (!txn.status()) return txn.status().error();
  return impl_->read_snapshot();
}

Result<std::vector<job::Event>> Store::read_eventlog(uint64_t jobid) {
  std::lock_guard lock(impl_->read_mu);
  Impl::ReadTxn txn(*impl_);
  if (!txn.status()) return txn.status().error();
  auto events = impl_->events_of(jobid);
  if (events && events->empty()) {
    // An empty eventlog is only an answer if the job exists.
    if (auto row = impl_->job_row(jobid); !row) return row.error();
  }
  return events;
}

Result<std::string> Store::read_jobspec(uint64_t jobid) {
  std::lock_guard lock(impl_->read_mu);
  auto row = impl_->job_row(jobid);
  if (!row) return row.error();
  return std::move(row->jobspec);
}

Result<std::vector<std::string>> Store::inactive_summaries(size_t max) {
  std::lock_guard lock(impl_->read_mu);
  Stmt& s = impl_->r.summaries;
  StmtScope scope(s);
  s.bind(1, max == 0 ? int64_t{-1} : static_cast<int64_t>(max));  // LIMIT -1: no limit
  std::vector<std::string> out;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) out.push_back(s.text(0));
  if (rc != SQLITE_DONE) return impl_->rdb.error("reading inactive job summaries", rc);
  return out;
}

Result<std::string> Store::inactive_summary(uint64_t jobid) {
  std::lock_guard lock(impl_->read_mu);
  auto row = impl_->job_row(jobid);
  if (!row) return row.error();
  if (row->active) return not_found("job " + std::to_string(jobid) + " is still active: it has no summary yet");
  return std::move(row->summary);
}

Result<uint64_t> Store::count_inactive() {
  std::lock_guard lock(impl_->read_mu);
  auto n = scalar(impl_->rdb, impl_->r.count_inactive, 0, "counting inactive jobs");
  if (!n) return n.error();
  return static_cast<uint64_t>(*n);
}

Result<std::vector<StepRecord>> Store::read_steps(uint64_t jobid, std::optional<uint32_t> userid) {
  std::lock_guard lock(impl_->read_mu);
  return query_steps(impl_->rdb, jobid, userid);
}

Result<std::vector<HistoryEntry>> Store::history(const HistoryQuery& q) {
  std::lock_guard lock(impl_->read_mu);
  Impl::ReadTxn txn(*impl_);  // the jobs and their steps from one snapshot
  if (!txn.status()) return txn.status().error();
  return query_history(impl_->rdb, q);
}

}  // namespace corral::store
