// A thin RAII layer over the SQLite C API: a connection that closes itself, prepared
// statements that finalize themselves, and a guard that resets a statement after use so
// a reader never keeps a read transaction (and with it the WAL) pinned.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "util/result.h"

struct sqlite3;
struct sqlite3_stmt;

namespace corral::store {

class Stmt {
 public:
  Stmt() = default;
  explicit Stmt(sqlite3_stmt* s) : s_(s) {}

  // Binding indexes start at 1, as in SQLite.
  void bind(int i, int64_t v);
  void bind(int i, double v);
  void bind(int i, std::string_view v);  // copied by SQLite (SQLITE_TRANSIENT)

  // SQLITE_ROW, SQLITE_DONE or an error code.
  int step();
  void reset();  // also clears the bindings

  int64_t int64(int col) const;
  double real(int col) const;
  std::string text(int col) const;
  bool is_null(int col) const;

  sqlite3_stmt* get() const { return s_.get(); }

 private:
  struct Finalizer {
    void operator()(sqlite3_stmt* s) const;
  };
  std::unique_ptr<sqlite3_stmt, Finalizer> s_;
};

// Resets the statement when the scope ends, whatever path leaves it.
class StmtScope {
 public:
  explicit StmtScope(Stmt& s) : s_(s) {}
  ~StmtScope() { s_.reset(); }
  StmtScope(const StmtScope&) = delete;
  StmtScope& operator=(const StmtScope&) = delete;

 private:
  Stmt& s_;
};

class Db {
 public:
  // `flags` are SQLITE_OPEN_* flags. The error names the path and SQLite's reason.
  static Result<Db> open(const std::string& path, int flags);

  Db() = default;
  Db(Db&&) = default;
  Db& operator=(Db&&) = default;

  // Runs one or more statements that return no rows we need.
  Status exec(const std::string& sql);
  Result<Stmt> prepare(std::string_view sql);

  // "state database PATH: WHAT: sqlite's message"
  Error error(std::string_view what) const;
  Error error(std::string_view what, int rc) const;
  bool in_transaction() const;
  int64_t changes() const;
  int64_t last_insert_rowid() const;
  const std::string& path() const { return path_; }
  sqlite3* get() const { return db_.get(); }

 private:
  struct Closer {
    void operator()(sqlite3* db) const;
  };
  std::unique_ptr<sqlite3, Closer> db_;
  std::string path_;
};

}  // namespace corral::store
