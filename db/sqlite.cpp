#include "einsumdb/db/sqlite.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "einsumdb/canon/error.hpp"

namespace einsumdb::sql {

Connection::Connection(const std::string& path, bool read_only, bool create, const char* vfs)
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

Connection::Connection(Connection&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)),
      path_(std::move(other.path_)),
      busy_timeout_ms_(other.busy_timeout_ms_) {}

Connection& Connection::operator=(Connection&& other) noexcept {
  if (this != &other) {
    sqlite3_close(db_);
    db_ = std::exchange(other.db_, nullptr);
    path_ = std::move(other.path_);
    busy_timeout_ms_ = other.busy_timeout_ms_;
  }
  return *this;
}

Connection::~Connection() {
  sqlite3_close(db_);
}

void Connection::fail(int code, std::string_view what) const {
  std::string message = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(code);
  throw DatabaseError("database '" + path_ + "': " + std::string(what) + ": " + message +
                      " (SQLite code " + std::to_string(code) + ")");
}

void Connection::exec(const char* sql) {
  char* err = nullptr;
  const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    const std::string message = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    throw DatabaseError("database '" + path_ + "': " + message + " (SQLite code " +
                        std::to_string(rc) + ", running '" + std::string(sql).substr(0, 40) + "')");
  }
}

void Connection::exec_waiting(const char* sql) {
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

std::int64_t Connection::last_insert_rowid() const {
  return sqlite3_last_insert_rowid(db_);
}
int Connection::changes() const {
  return sqlite3_changes(db_);
}
void Connection::busy_timeout(int ms) {
  sqlite3_busy_timeout(db_, ms);
}

Statement::Statement(const Connection& conn, std::string_view sql)
    : conn_(&conn), sql_(sql.substr(0, 60)) {
  const int rc = sqlite3_prepare_v3(conn.handle(), sql.data(), static_cast<int>(sql.size()),
                                    SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr);
  if (rc != SQLITE_OK) conn.fail(rc, "cannot prepare '" + std::string(sql.substr(0, 60)) + "'");
}

Statement::Statement(Statement&& other) noexcept
    : conn_(other.conn_), stmt_(std::exchange(other.stmt_, nullptr)), sql_(std::move(other.sql_)) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    sqlite3_finalize(stmt_);
    conn_ = other.conn_;
    stmt_ = std::exchange(other.stmt_, nullptr);
    sql_ = std::move(other.sql_);
  }
  return *this;
}

Statement::~Statement() {
  sqlite3_finalize(stmt_);
}

Statement& Statement::bind(int i, std::int64_t v) {
  const int rc = sqlite3_bind_int64(stmt_, i, v);
  if (rc != SQLITE_OK) conn_->fail(rc, "bind");
  return *this;
}

Statement& Statement::bind(int i, double v) {
  const int rc = sqlite3_bind_double(stmt_, i, v);
  if (rc != SQLITE_OK) conn_->fail(rc, "bind");
  return *this;
}

Statement& Statement::bind(int i, std::string_view v) {
  const int rc = sqlite3_bind_text64(stmt_, i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  if (rc != SQLITE_OK) conn_->fail(rc, "bind");
  return *this;
}

Statement& Statement::bind(int i, std::optional<double> v) {
  return v ? bind(i, *v) : bind_null(i);
}

Statement& Statement::bind_blob(int i, const void* data, std::size_t size) {
  const int rc = sqlite3_bind_blob64(stmt_, i, data, size, SQLITE_TRANSIENT);
  if (rc != SQLITE_OK) conn_->fail(rc, "bind");
  return *this;
}

Statement& Statement::bind_null(int i) {
  const int rc = sqlite3_bind_null(stmt_, i);
  if (rc != SQLITE_OK) conn_->fail(rc, "bind");
  return *this;
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  sqlite3_reset(stmt_);
  conn_->fail(rc, "'" + sql_ + "' failed");
}

void Statement::run() {
  while (step()) {
  }
}

void Statement::finish() {
  sqlite3_reset(stmt_);
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

bool Statement::is_null(int col) const {
  return sqlite3_column_type(stmt_, col) == SQLITE_NULL;
}
std::int64_t Statement::column_int(int col) const {
  return sqlite3_column_int64(stmt_, col);
}
double Statement::column_double(int col) const {
  return sqlite3_column_double(stmt_, col);
}

std::optional<double> Statement::column_optional_double(int col) const {
  if (is_null(col)) return std::nullopt;
  return column_double(col);
}

std::string Statement::column_text(int col) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
  return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col))) : "";
}

Transaction::Transaction(Connection& conn) : conn_(conn) {
  conn_.exec("BEGIN IMMEDIATE");
}

Transaction::~Transaction() {
  if (!done_) sqlite3_exec(conn_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  conn_.exec("COMMIT");
  done_ = true;
}

}  // namespace einsumdb::sql
