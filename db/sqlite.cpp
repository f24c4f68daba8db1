// The SQLite backend of the SQL layer (sql.hpp).
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "einsumdb/db/error.hpp"
#include "einsumdb/db/sql.hpp"

namespace einsumdb::sql {
namespace {

class SqliteConnection final : public ConnectionBackend {
 public:
  SqliteConnection(const std::string& path, bool read_only, bool create, const char* vfs)
      : path_(path) {
    int flags = SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX;
    flags |= read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE;
    if (create && !read_only) flags |= SQLITE_OPEN_CREATE;
    const int rc = sqlite3_open_v2(path.c_str(), &db_, flags, vfs);
    if (rc != SQLITE_OK) {
      const std::string message = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
      sqlite3_close(db_);
      db_ = nullptr;
      throw DatabaseError("cannot open database '" + path + "': " + message);
    }
    sqlite3_extended_result_codes(db_, 1);
  }
  SqliteConnection(const SqliteConnection&) = delete;
  SqliteConnection& operator=(const SqliteConnection&) = delete;
  ~SqliteConnection() override {
    sqlite3_finalize(begin_read_);
    sqlite3_finalize(end_read_);
    sqlite3_close(db_);
  }

  [[noreturn]] void fail(int code, std::string_view what) const {
    std::string message = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(code);
    throw DatabaseError("database '" + path_ + "': " + std::string(what) + ": " + message +
                        " (SQLite code " + std::to_string(code) + ")");
  }

  Dialect dialect() const override { return Dialect::sqlite; }
  const std::string& name() const override { return path_; }

  void exec(const char* sql) override {
    char* err = nullptr;
    const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &err);
    if (rc != SQLITE_OK) {
      const std::string message = err ? err : sqlite3_errstr(rc);
      sqlite3_free(err);
      throw DatabaseError("database '" + path_ + "': " + message + " (SQLite code " +
                          std::to_string(rc) + ", running '" + std::string(sql).substr(0, 40) +
                          "')");
    }
  }

  void exec_waiting(const char* sql) override {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(busy_timeout_ms_);
    auto pause = std::chrono::microseconds(200);
    while (true) {
      const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
      if (rc == SQLITE_OK) return;
      if ((rc & 0xff) != SQLITE_BUSY || std::chrono::steady_clock::now() >= deadline) {
        exec(sql);  // reports the error as exec does (or succeeds on this last try)
        return;
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(20000));
    }
  }

  std::unique_ptr<StatementBackend> prepare(std::string_view sql) override;

  int changes() const override { return sqlite3_changes(db_); }
  void* sqlite_handle() const override { return db_; }
  void busy_timeout(int ms) override {
    busy_timeout_ms_ = ms;
    sqlite3_busy_timeout(db_, ms);
  }
  int busy_timeout_ms() const override { return busy_timeout_ms_; }
  void begin() override { exec("BEGIN IMMEDIATE"); }
  void rollback() noexcept override {
    if (!sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }

  // BEGIN and ROLLBACK prepared once: sqlite3_exec would parse them on every read.
  void begin_read() override { run_kept(begin_read_, "BEGIN"); }
  void end_read() noexcept override {
    if (sqlite3_get_autocommit(db_)) return;
    try {
      run_kept(end_read_, "ROLLBACK");
    } catch (const DatabaseError&) {
      rollback();
    }
  }

  sqlite3* handle() const { return db_; }

 private:
  void run_kept(sqlite3_stmt*& kept, const char* sql) {
    if (!kept) {
      const int rc = sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &kept, nullptr);
      if (rc != SQLITE_OK) fail(rc, std::string("cannot prepare '") + sql + "'");
    }
    const int rc = sqlite3_step(kept);
    sqlite3_reset(kept);
    if (rc != SQLITE_DONE) fail(rc, std::string("'") + sql + "' failed");
  }

  sqlite3* db_ = nullptr;
  sqlite3_stmt* begin_read_ = nullptr;
  sqlite3_stmt* end_read_ = nullptr;
  std::string path_;
  int busy_timeout_ms_ = 0;
};

class SqliteStatement final : public StatementBackend {
 public:
  SqliteStatement(const SqliteConnection& conn, std::string_view sql)
      : conn_(&conn), sql_(sql.substr(0, 60)) {
    const int rc = sqlite3_prepare_v3(conn.handle(), sql.data(), static_cast<int>(sql.size()),
                                      SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr);
    if (rc != SQLITE_OK) conn.fail(rc, "cannot prepare '" + sql_ + "'");
  }
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;
  ~SqliteStatement() override { sqlite3_finalize(stmt_); }

  void check(int rc) const {
    if (rc != SQLITE_OK) conn_->fail(rc, "bind");
  }
  void bind_int(int i, std::int64_t v) override { check(sqlite3_bind_int64(stmt_, i, v)); }
  void bind_double(int i, double v) override { check(sqlite3_bind_double(stmt_, i, v)); }
  void bind_text(int i, std::string_view v) override {
    check(sqlite3_bind_text64(stmt_, i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8));
  }
  void bind_blob(int i, const void* data, std::size_t size) override {
    check(sqlite3_bind_blob64(stmt_, i, data, size, SQLITE_TRANSIENT));
  }
  void bind_null(int i) override { check(sqlite3_bind_null(stmt_, i)); }

  bool step() override {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    sqlite3_reset(stmt_);
    conn_->fail(rc, "'" + sql_ + "' failed");
  }
  void finish() override { sqlite3_reset(stmt_); }
  void reset() override {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

  bool is_null(int col) const override { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::int64_t column_int(int col) const override { return sqlite3_column_int64(stmt_, col); }
  double column_double(int col) const override { return sqlite3_column_double(stmt_, col); }
  std::string column_text(int col) const override {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
    return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col))) : "";
  }

 private:
  const SqliteConnection* conn_;
  sqlite3_stmt* stmt_ = nullptr;
  std::string sql_;  // the beginning of the statement, for error messages
};

std::unique_ptr<StatementBackend> SqliteConnection::prepare(std::string_view sql) {
  return std::make_unique<SqliteStatement>(*this, sql);
}

}  // namespace

Connection::Connection(const std::string& path, bool read_only, bool create, const char* vfs)
    : b_(std::make_unique<SqliteConnection>(path, read_only, create, vfs)) {}

Statement Connection::prepare(std::string_view sql) const {
  return Statement(*this, sql);
}

std::optional<std::string> Connection::query_text(const char* sql) {
  Statement s(*this, sql);
  if (!s.step() || s.is_null(0)) return std::nullopt;
  return s.column_text(0);
}

std::int64_t Connection::query_int(const char* sql) {
  Statement s(*this, sql);
  return s.step() ? s.column_int(0) : 0;
}

bool is_server_uri(std::string_view location) {
  return location.rfind("postgresql://", 0) == 0 || location.rfind("postgres://", 0) == 0;
}

}  // namespace einsumdb::sql
