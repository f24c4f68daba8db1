// A thin RAII layer over the SQLite C API: a move-only connection and prepared statements with
// typed binding. Every SQLite failure is translated here into DatabaseError naming the database
// file and SQLite's message. Not thread-safe: one Connection per thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

struct sqlite3;
struct sqlite3_stmt;

namespace einsumdb::sql {

class Statement;

class Connection {
 public:
  // Opens `path` (a filename or a file: URI). Throws DatabaseError.
  Connection(const std::string& path, bool read_only, bool create, const char* vfs = nullptr);
  Connection(Connection&& other) noexcept;
  Connection& operator=(Connection&& other) noexcept;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  // Runs statements without results (or ignoring them). Throws DatabaseError.
  void exec(const char* sql);
  // exec(), retried while SQLite answers SQLITE_BUSY without waiting (it does so for some lock
  // upgrades, e.g. while another process converts the file to WAL), up to the busy timeout.
  void exec_waiting(const char* sql);
  // A statement prepared for repeated use.
  Statement prepare(std::string_view sql) const;
  // The first column of the first row as text or integer (nullopt when there is no row).
  std::optional<std::string> query_text(const char* sql);
  std::int64_t query_int(const char* sql);
  std::int64_t last_insert_rowid() const;
  int changes() const;
  void busy_timeout(int ms);
  int busy_timeout_ms() const { return busy_timeout_ms_; }

  sqlite3* handle() const { return db_; }
  const std::string& path() const { return path_; }
  [[noreturn]] void fail(int code, std::string_view what) const;

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
  int busy_timeout_ms_ = 0;
};

class Statement {
 public:
  Statement(const Connection& conn, std::string_view sql);
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  // Binding is 1-based, like SQLite's. Text is copied by SQLite.
  Statement& bind(int i, std::int64_t v);
  Statement& bind(int i, int v) { return bind(i, static_cast<std::int64_t>(v)); }
  Statement& bind(int i, double v);
  Statement& bind(int i, std::string_view v);
  Statement& bind(int i, const char* v) { return bind(i, std::string_view(v)); }
  Statement& bind(int i, const std::string& v) { return bind(i, std::string_view(v)); }
  Statement& bind(int i, std::optional<double> v);
  Statement& bind_null(int i);
  Statement& bind_blob(int i, const void* data, std::size_t size);

  // Advances: true while there is a row. Throws DatabaseError.
  bool step();
  // Steps to completion (for statements without rows).
  void run();
  // Ready for new bindings and a new execution.
  void reset();
  // Ends the current execution (and its read transaction), keeping the bindings.
  void finish();

  bool is_null(int col) const;
  std::int64_t column_int(int col) const;
  double column_double(int col) const;
  std::optional<double> column_optional_double(int col) const;
  std::string column_text(int col) const;

 private:
  const Connection* conn_;
  sqlite3_stmt* stmt_ = nullptr;
  std::string sql_;  // the beginning of the statement, for error messages
};

// One use of a cached prepared statement: fresh bindings at the start, and the execution ended
// (sqlite3_reset) when the use goes out of scope. A statement that returned a row and was never
// reset keeps its read snapshot, which hides other processes' commits and makes the next
// BEGIN IMMEDIATE fail with SQLITE_BUSY; scoping every use rules that out.
class Use {
 public:
  explicit Use(Statement& s) : s_(&s) { s_->reset(); }
  Use(const Use&) = delete;
  Use& operator=(const Use&) = delete;
  ~Use() { s_->finish(); }

  template <class... Args>
  Statement& bind(Args&&... args) {
    return s_->bind(std::forward<Args>(args)...);
  }
  Statement& bind_null(int i) { return s_->bind_null(i); }
  Statement& bind_blob(int i, const void* data, std::size_t size) {
    return s_->bind_blob(i, data, size);
  }
  bool step() { return s_->step(); }
  void run() { s_->run(); }
  bool is_null(int col) const { return s_->is_null(col); }
  std::int64_t column_int(int col) const { return s_->column_int(col); }
  double column_double(int col) const { return s_->column_double(col); }
  std::optional<double> column_optional_double(int col) const {
    return s_->column_optional_double(col);
  }
  std::string column_text(int col) const { return s_->column_text(col); }

 private:
  Statement* s_;
};

// BEGIN IMMEDIATE ... COMMIT, rolled back if not committed (an exception, a return).
class Transaction {
 public:
  explicit Transaction(Connection& conn);
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();
  void commit();

 private:
  Connection& conn_;
  bool done_ = false;
};

}  // namespace einsumdb::sql
