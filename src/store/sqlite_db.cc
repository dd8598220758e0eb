#include "store/sqlite_db.h"

#include <sqlite3.h>

namespace corral::store {

void Stmt::Finalizer::operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }

void Stmt::bind(int i, int64_t v) { sqlite3_bind_int64(s_.get(), i, v); }
void Stmt::bind(int i, double v) { sqlite3_bind_double(s_.get(), i, v); }
void Stmt::bind(int i, std::string_view v) {
  sqlite3_bind_text(s_.get(), i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
}

int Stmt::step() { return sqlite3_step(s_.get()); }

void Stmt::reset() {
  if (!s_) return;
  sqlite3_reset(s_.get());
  sqlite3_clear_bindings(s_.get());
}

int64_t Stmt::int64(int col) const { return sqlite3_column_int64(s_.get(), col); }
double Stmt::real(int col) const { return sqlite3_column_double(s_.get(), col); }
std::string Stmt::text(int col) const {
  const auto* p = sqlite3_column_text(s_.get(), col);
  if (!p) return {};
  return std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(s_.get(), col)));
}
bool Stmt::is_null(int col) const { return sqlite3_column_type(s_.get(), col) == SQLITE_NULL; }

int64_t Db::last_insert_rowid() const { return sqlite3_last_insert_rowid(db_.get()); }

void Db::Closer::operator()(sqlite3* db) const { sqlite3_close_v2(db); }

Result<Db> Db::open(const std::string& path, int flags) {
  Db db;
  db.path_ = path;
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  db.db_.reset(raw);  // a handle is returned even on failure and must be closed
  if (rc != SQLITE_OK) {
    std::string reason = raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc);
    return io_error("state database " + path + ": cannot open: " + reason);
  }
  sqlite3_extended_result_codes(raw, 1);
  return db;
}

Status Db::exec(const std::string& sql) {
  char* msg = nullptr;
  int rc = sqlite3_exec(db_.get(), sql.c_str(), nullptr, nullptr, &msg);
  if (rc == SQLITE_OK) return {};
  std::string reason = msg ? msg : sqlite3_errstr(rc);
  sqlite3_free(msg);
  return io_error("state database " + path_ + ": " + reason + " (in: " + sql.substr(0, 60) + ")");
}

Result<Stmt> Db::prepare(std::string_view sql) {
  sqlite3_stmt* s = nullptr;
  int rc =
      sqlite3_prepare_v3(db_.get(), sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &s, nullptr);
  if (rc != SQLITE_OK) return error("preparing \"" + std::string(sql) + "\"");
  return Stmt(s);
}

Error Db::error(std::string_view what) const {
  return io_error("state database " + path_ + ": " + std::string(what) + ": " + sqlite3_errmsg(db_.get()));
}

Error Db::error(std::string_view what, int rc) const {
  // The connection's message may describe a later call; the code is authoritative, but
  // the message often has detail (e.g. which constraint failed), so give both. A full
  // disk, an I/O error or a lock or memory shortage may pass: those are `unavailable`
  // (the store retries them), anything else is a fault of the write itself.
  const int primary = rc & 0xff;
  const bool passing = primary == SQLITE_FULL || primary == SQLITE_IOERR || primary == SQLITE_BUSY ||
                       primary == SQLITE_LOCKED || primary == SQLITE_NOMEM || primary == SQLITE_CANTOPEN;
  return Error{passing ? Errc::unavailable : Errc::io_error, "state database " + path_ + ": " + std::string(what) +
                                                                 ": " + sqlite3_errstr(rc) + " (" +
                                                                 sqlite3_errmsg(db_.get()) + ")"};
}

bool Db::in_transaction() const { return sqlite3_get_autocommit(db_.get()) == 0; }
int64_t Db::changes() const { return sqlite3_changes64(db_.get()); }

}  // namespace corral::store
