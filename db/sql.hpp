// A thin RAII layer over the two SQL engines the store runs on: SQLite (an embedded file) and
// PostgreSQL (a server, through libpq). A move-only connection and prepared statements with typed
// binding, the same for both; every failure is translated into DatabaseError naming the
// database (a file, or the server's address without its password) and the engine's message.
// Not thread-safe: one Connection per thread.
//
// Statements are written once, in the SQL both engines accept: `?` and `?N` placeholders (the
// PostgreSQL backend rewrites them to `$n`), `INSERT ... ON CONFLICT ... DO NOTHING/UPDATE`,
// `RETURNING`. Values are sent as text and typed by the server from their context, so a
// statement needs no casts. What differs (the schema's types, pragmas, catalog queries) asks
// dialect().
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "einsumdb/db/error.hpp"

namespace einsumdb::sql {

enum class Dialect { sqlite, postgres };

// A failure that goes away when the transaction is run again (PostgreSQL detected a deadlock or
// a serialization conflict between concurrent writers).
class RetryableError : public DatabaseError {
 public:
  using DatabaseError::DatabaseError;
};

// Runs `transaction` (a whole transaction whose input is all in memory) and runs it again when
// the server aborts it for a deadlock or a serialization conflict: at most `attempts` times, a
// few jittered milliseconds apart (so that two writers that collided do not collide again). The
// last RetryableError is thrown, saying how many attempts were made.
template <class F>
auto retrying(F&& transaction, int attempts = 10) -> decltype(transaction()) {
  thread_local std::minstd_rand jitter(std::random_device{}());
  for (int attempt = 1;; ++attempt) {
    try {
      return transaction();
    } catch (const RetryableError& e) {
      if (attempt >= attempts)
        throw RetryableError(std::string(e.what()) + " (" + std::to_string(attempts) +
                             " attempts)");
      std::this_thread::sleep_for(
          std::chrono::milliseconds(1 + static_cast<int>(jitter() % (10u * attempt))));
    }
  }
}

// A database that holds no einsumdb store yet (opened for reading): nothing is known there.
class NoStoreError : public DatabaseError {
 public:
  using DatabaseError::DatabaseError;
};

// What one engine implements; Connection and Statement forward to it.
class StatementBackend {
 public:
  virtual ~StatementBackend() = default;
  virtual void bind_int(int i, std::int64_t v) = 0;
  virtual void bind_double(int i, double v) = 0;
  virtual void bind_text(int i, std::string_view v) = 0;
  virtual void bind_blob(int i, const void* data, std::size_t size) = 0;
  virtual void bind_null(int i) = 0;
  virtual bool step() = 0;
  virtual void finish() = 0;  // ends the execution, keeps the bindings
  virtual void reset() = 0;   // ends the execution, clears the bindings
  virtual bool is_null(int col) const = 0;
  virtual std::int64_t column_int(int col) const = 0;
  virtual double column_double(int col) const = 0;
  virtual std::string column_text(int col) const = 0;
};

class ConnectionBackend {
 public:
  virtual ~ConnectionBackend() = default;
  virtual Dialect dialect() const = 0;
  virtual const std::string& name() const = 0;
  virtual void exec(const char* sql) = 0;
  virtual void exec_waiting(const char* sql) = 0;
  virtual std::unique_ptr<StatementBackend> prepare(std::string_view sql) = 0;
  virtual int changes() const = 0;
  virtual void busy_timeout(int ms) = 0;
  virtual int busy_timeout_ms() const = 0;
  virtual void begin() = 0;              // a write transaction
  virtual void rollback() noexcept = 0;  // of the open transaction, if any
  // A read transaction: the statements up to end_read() see one snapshot. Ended without waiting
  // where the engine allows it (nothing was written, so it cannot fail in a way that matters).
  virtual void begin_read() = 0;
  virtual void end_read() noexcept = 0;
  // The sqlite3* of a SQLite connection (to register functions on it); nullptr for a server.
  virtual void* sqlite_handle() const { return nullptr; }
};

class Statement;

class Connection {
 public:
  // Opens the SQLite file `path` (a filename or a file: URI). Throws DatabaseError.
  Connection(const std::string& path, bool read_only, bool create, const char* vfs = nullptr);
  // Connects to the PostgreSQL server a postgresql:// URI (or libpq connection string) names,
  // waiting at most `connect_timeout_s` for it. Throws DatabaseError naming the server.
  static Connection postgres(const std::string& uri, int connect_timeout_s = 10);
  explicit Connection(std::unique_ptr<ConnectionBackend> backend) : b_(std::move(backend)) {}
  Connection(Connection&&) noexcept = default;
  Connection& operator=(Connection&&) noexcept = default;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection() = default;

  Dialect dialect() const { return b_->dialect(); }
  // Runs statements without results (or ignoring them). Throws DatabaseError.
  void exec(const char* sql) { b_->exec(sql); }
  // exec(), retried while SQLite answers SQLITE_BUSY without waiting (it does so for some lock
  // upgrades, e.g. while another process converts the file to WAL), up to the busy timeout.
  void exec_waiting(const char* sql) { b_->exec_waiting(sql); }
  // A statement prepared for repeated use.
  Statement prepare(std::string_view sql) const;
  // The first column of the first row as text or integer (nullopt, 0 when there is no row).
  std::optional<std::string> query_text(const char* sql);
  std::int64_t query_int(const char* sql);
  // Rows changed by the last INSERT, UPDATE or DELETE.
  int changes() const { return b_->changes(); }
  void busy_timeout(int ms) { b_->busy_timeout(ms); }
  int busy_timeout_ms() const { return b_->busy_timeout_ms(); }
  void begin() { b_->begin(); }
  void rollback() noexcept { b_->rollback(); }
  void begin_read() { b_->begin_read(); }
  void end_read() noexcept { b_->end_read(); }

  // The file, or the server as user@host:port/dbname (never the password).
  const std::string& path() const { return b_->name(); }
  ConnectionBackend& backend() const { return *b_; }

 private:
  std::unique_ptr<ConnectionBackend> b_;
};

class Statement {
 public:
  Statement(const Connection& conn, std::string_view sql) : s_(conn.backend().prepare(sql)) {}
  Statement(Statement&&) noexcept = default;
  Statement& operator=(Statement&&) noexcept = default;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement() = default;

  // Binding is 1-based, like SQLite's. Text is copied.
  Statement& bind(int i, std::int64_t v) { return s_->bind_int(i, v), *this; }
  Statement& bind(int i, int v) { return bind(i, static_cast<std::int64_t>(v)); }
  Statement& bind(int i, double v) { return s_->bind_double(i, v), *this; }
  Statement& bind(int i, std::string_view v) { return s_->bind_text(i, v), *this; }
  Statement& bind(int i, const char* v) { return bind(i, std::string_view(v)); }
  Statement& bind(int i, const std::string& v) { return bind(i, std::string_view(v)); }
  Statement& bind(int i, std::optional<double> v) { return v ? bind(i, *v) : bind_null(i); }
  Statement& bind_null(int i) { return s_->bind_null(i), *this; }
  Statement& bind_blob(int i, const void* data, std::size_t size) {
    return s_->bind_blob(i, data, size), *this;
  }

  // Advances: true while there is a row. Throws DatabaseError.
  bool step() { return s_->step(); }
  // Steps to completion (for statements without rows).
  void run() {
    while (step()) {
    }
  }
  // Ready for new bindings and a new execution.
  void reset() { s_->reset(); }
  // Ends the current execution (and its read transaction), keeping the bindings.
  void finish() { s_->finish(); }

  bool is_null(int col) const { return s_->is_null(col); }
  std::int64_t column_int(int col) const { return s_->column_int(col); }
  double column_double(int col) const { return s_->column_double(col); }
  std::optional<double> column_optional_double(int col) const {
    if (is_null(col)) return std::nullopt;
    return column_double(col);
  }
  std::string column_text(int col) const { return s_->column_text(col); }

 private:
  std::unique_ptr<StatementBackend> s_;
};

// One use of a cached prepared statement: fresh bindings at the start, and the execution ended
// when the use goes out of scope. A SQLite statement that returned a row and was never reset
// keeps its read snapshot, which hides other processes' commits and makes the next BEGIN
// IMMEDIATE fail with SQLITE_BUSY; scoping every use rules that out.
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

// A write transaction (SQLite: BEGIN IMMEDIATE), rolled back if not committed (an exception, a
// return).
class Transaction {
 public:
  explicit Transaction(Connection& conn) : conn_(conn) { conn_.begin(); }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction() {
    if (!done_) conn_.rollback();
  }
  void commit() {
    conn_.exec("COMMIT");
    done_ = true;
  }

 private:
  Connection& conn_;
  bool done_ = false;
};

// A server's URI without its password (user:secret@ becomes user@, password=... is dropped).
std::string redacted(const std::string& uri);

// Whether `location` names a PostgreSQL server (postgresql:// or postgres://) rather than a file.
bool is_server_uri(std::string_view location);

}  // namespace einsumdb::sql
