// The PostgreSQL backend of the SQL layer (sql.hpp), on libpq: prepared statements with values
// sent as text (typed by the server from their context; blobs as binary) and results read as
// text.
#include <libpq-fe.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <utility>
#include <vector>

#include "einsumdb/db/error.hpp"
#include "einsumdb/db/sql.hpp"

namespace einsumdb::sql {
namespace {

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// SQLite's placeholders (`?`, `?N`) as PostgreSQL's (`$n`), outside literals; *count receives
// the highest parameter number.
std::string to_postgres_placeholders(std::string_view sql, int* count) {
  std::string out;
  out.reserve(sql.size() + 16);
  int highest = 0;
  char quote = 0;
  for (std::size_t i = 0; i < sql.size(); ++i) {
    const char c = sql[i];
    if (quote) {
      out += c;
      if (c == quote) quote = 0;  // a doubled quote closes and reopens: same result
      continue;
    }
    if (c == '\'' || c == '"') {
      quote = c;
      out += c;
      continue;
    }
    if (c != '?') {
      out += c;
      continue;
    }
    std::size_t j = i + 1;
    int n = 0;
    while (j < sql.size() && sql[j] >= '0' && sql[j] <= '9') n = n * 10 + (sql[j++] - '0');
    if (j == i + 1) n = highest + 1;
    highest = std::max(highest, n);
    out += '$' + std::to_string(n);
    i = j - 1;
  }
  *count = highest;
  return out;
}

class PgConnection final : public ConnectionBackend {
 public:
  PgConnection(const std::string& uri, int connect_timeout_s) {
    const std::string timeout = std::to_string(connect_timeout_s);
    // Given before the URI, which may override them; the URI is expanded (expand_dbname).
    const char* keys[] = {"connect_timeout", "application_name", "dbname", nullptr};
    const char* values[] = {timeout.c_str(), "einsumdb", uri.c_str(), nullptr};
    conn_ = PQconnectdbParams(keys, values, 1);
    name_ = redacted(uri);
    if (!conn_ || PQstatus(conn_) != CONNECTION_OK) {
      const std::string message = conn_ ? trim(PQerrorMessage(conn_)) : "out of memory";
      PQfinish(conn_);
      conn_ = nullptr;
      throw DatabaseError("cannot connect to the PostgreSQL server of '" + name_ + "': " + message);
    }
    PQsetNoticeProcessor(
        conn_, [](void*, const char*) {}, nullptr);
  }
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;
  ~PgConnection() override { PQfinish(conn_); }

  Dialect dialect() const override { return Dialect::postgres; }
  const std::string& name() const override { return name_; }

  // Throws for a failed result (cleared here): RetryableError for a deadlock or serialization
  // conflict, DatabaseError naming the server otherwise, and saying so when the connection is
  // gone.
  [[noreturn]] void fail(PGresult* r, std::string_view what) const {
    const char* state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
    const std::string sqlstate = state ? state : "";
    std::string message = r ? PQresultErrorMessage(r) : "";
    if (message.empty()) message = PQerrorMessage(conn_);
    message = trim(message);
    PQclear(r);
    if (PQstatus(conn_) == CONNECTION_BAD || sqlstate.rfind("57P", 0) == 0 ||
        sqlstate.rfind("08", 0) == 0)
      throw DatabaseError("lost the connection to the PostgreSQL server of '" + name_ + "' (" +
                          std::string(what) + "): " + message);
    const std::string text = "PostgreSQL database '" + name_ + "': " + std::string(what) + ": " +
                             message + (sqlstate.empty() ? "" : " (SQLSTATE " + sqlstate + ")");
    if (sqlstate == "40P01" || sqlstate == "40001") throw RetryableError(text);
    throw DatabaseError(text);
  }

  void exec(const char* sql) override {
    settle();
    if (begin_pending_) {
      begin_pending_ = false;
      exec(kBeginRead);
    }
    PGresult* r = PQexec(conn_, sql);
    const auto status = PQresultStatus(r);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)
      fail(r, "running '" + std::string(sql).substr(0, 40) + "'");
    note_changes(r);
    PQclear(r);
  }
  void exec_waiting(const char* sql) override { exec(sql); }
  std::unique_ptr<StatementBackend> prepare(std::string_view sql) override;
  int changes() const override { return changes_; }
  // The longest a statement waits for another transaction's lock, like SQLite's busy timeout.
  void busy_timeout(int ms) override {
    busy_timeout_ms_ = ms;
    exec(("SET lock_timeout = " + std::to_string(ms)).c_str());
  }
  int busy_timeout_ms() const override { return busy_timeout_ms_; }
  void begin() override { exec("BEGIN"); }
  void rollback() noexcept override {
    begin_pending_ = false;
    settle();
    if (PQstatus(conn_) != CONNECTION_OK) return;
    const auto t = PQtransactionStatus(conn_);
    if (t == PQTRANS_INTRANS || t == PQTRANS_INERROR) PQclear(PQexec(conn_, "ROLLBACK"));
  }
  // A read transaction costs no round trip of its own: BEGIN goes out with its first statement
  // (run_prepared), and ROLLBACK is sent without waiting for its answer, which the next command
  // collects (settle) long after it arrived. Statements on one connection run in order, so that
  // next command already sees a fresh snapshot.
  void begin_read() override {
    settle();
    begin_pending_ = true;
  }
  void end_read() noexcept override {
    if (std::exchange(begin_pending_, false)) return;  // no statement ran: nothing was begun
    settle();
    if (PQstatus(conn_) != CONNECTION_OK) return;
    const auto t = PQtransactionStatus(conn_);
    if (t != PQTRANS_INTRANS && t != PQTRANS_INERROR) return;
    if (PQsendQuery(conn_, "ROLLBACK")) {
      awaiting_ = true;
    } else {
      rollback();
    }
  }
  // Collects the answer to a command sent without waiting (end_read's ROLLBACK).
  void settle() noexcept {
    while (awaiting_) {
      PGresult* r = PQgetResult(conn_);
      if (!r) awaiting_ = false;
      PQclear(r);
    }
  }

  // PQexecPrepared, preceded in the same round trip by the BEGIN of a read transaction begun
  // since the last command (libpq's pipeline mode: both sent, then one sync).
  PGresult* run_prepared(const char* name, int count, const char* const* values, const int* lengths,
                         const int* formats) {
    settle();
    if (!std::exchange(begin_pending_, false))
      return PQexecPrepared(conn_, name, count, values, lengths, formats, 0);
    if (!PQenterPipelineMode(conn_)) fail(nullptr, "entering pipeline mode");
    const bool sent =
        PQsendQueryParams(conn_, kBeginRead, 0, nullptr, nullptr, nullptr, nullptr, 0) &&
        PQsendQueryPrepared(conn_, name, count, values, lengths, formats, 0) &&
        PQpipelineSync(conn_);
    // Every result up to the sync point is read, whatever failed, so that the connection leaves
    // pipeline mode idle: each command's result then a null, then the sync's.
    PGresult* results[2] = {nullptr, nullptr};
    bool synced = false;
    for (int k = 0; sent && k < 2; ++k) {
      results[k] = PQgetResult(conn_);
      if (!results[k]) break;  // the connection failed
      while (PGresult* extra = PQgetResult(conn_)) PQclear(extra);
    }
    if (sent && results[1]) {
      PGresult* sync = PQgetResult(conn_);
      synced = PQresultStatus(sync) == PGRES_PIPELINE_SYNC;
      PQclear(sync);
    }
    PQexitPipelineMode(conn_);
    if (!sent || !synced || PQresultStatus(results[0]) != PGRES_COMMAND_OK) {
      PQclear(results[1]);
      fail(results[0], "beginning a read transaction");
    }
    PQclear(results[0]);
    return results[1];
  }

  void note_changes(PGresult* r) {
    const char* n = PQcmdTuples(r);
    if (n && *n) changes_ = std::atoi(n);
  }
  PGconn* handle() const { return conn_; }
  std::string next_name() { return "einsumdb_" + std::to_string(++statements_); }

 private:
  PGconn* conn_ = nullptr;
  std::string name_;
  int changes_ = 0;
  int busy_timeout_ms_ = 0;
  std::int64_t statements_ = 0;
  bool begin_pending_ = false;  // begin_read() was called; BEGIN not yet sent
  bool awaiting_ = false;       // a command was sent whose answer is not yet read
  static constexpr const char* kBeginRead = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY";
};

class PgStatement final : public StatementBackend {
 public:
  PgStatement(PgConnection& conn, std::string_view sql)
      : conn_(&conn), name_(conn.next_name()), sql_(sql.substr(0, 60)) {
    int count = 0;
    const std::string text = to_postgres_placeholders(sql, &count);
    conn.settle();
    PGresult* r = PQprepare(conn.handle(), name_.c_str(), text.c_str(), count, nullptr);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) conn.fail(r, "cannot prepare '" + sql_ + "'");
    PQclear(r);
    values_.resize(static_cast<std::size_t>(count));
    null_.assign(values_.size(), 1);
    formats_.assign(values_.size(), 0);
    lengths_.assign(values_.size(), 0);
  }
  PgStatement(const PgStatement&) = delete;
  PgStatement& operator=(const PgStatement&) = delete;
  ~PgStatement() override {
    PQclear(result_);
    PGconn* c = conn_->handle();
    conn_->settle();
    if (PQstatus(c) == CONNECTION_OK && PQtransactionStatus(c) != PQTRANS_INERROR)
      PQclear(PQexec(c, ("DEALLOCATE " + name_).c_str()));
  }

  std::size_t slot(int i) {
    if (i < 1 || static_cast<std::size_t>(i) > values_.size())
      throw DatabaseError("PostgreSQL database '" + conn_->name() + "': parameter " +
                          std::to_string(i) + " out of range in '" + sql_ + "'");
    return static_cast<std::size_t>(i - 1);
  }
  void set(int i, std::string v, int format = 0) {
    const auto k = slot(i);
    values_[k] = std::move(v);
    null_[k] = 0;
    formats_[k] = format;
    lengths_[k] = static_cast<int>(values_[k].size());
  }
  void bind_int(int i, std::int64_t v) override { set(i, std::to_string(v)); }
  void bind_double(int i, double v) override {
    if (std::isnan(v)) return set(i, "NaN");
    if (std::isinf(v)) return set(i, v > 0 ? "Infinity" : "-Infinity");
    char buf[32];
    const auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
    set(i, std::string(buf, end));
  }
  void bind_text(int i, std::string_view v) override {
    if (v.find('\0') != std::string_view::npos)
      throw DatabaseError("PostgreSQL database '" + conn_->name() +
                          "': a text value holds a NUL byte, which PostgreSQL text cannot store");
    set(i, std::string(v));
  }
  void bind_blob(int i, const void* data, std::size_t size) override {
    set(i, std::string(static_cast<const char*>(data), size), 1);
  }
  void bind_null(int i) override { null_[slot(i)] = 1; }

  bool step() override {
    if (!result_) execute();
    return ++row_ < rows_;
  }
  void finish() override {
    PQclear(result_);
    result_ = nullptr;
    row_ = -1;
    rows_ = 0;
  }
  void reset() override {
    finish();
    null_.assign(values_.size(), 1);
  }

  bool is_null(int col) const override { return PQgetisnull(result_, row_, col) != 0; }
  std::int64_t column_int(int col) const override {
    return std::strtoll(PQgetvalue(result_, row_, col), nullptr, 10);
  }
  double column_double(int col) const override {
    return std::strtod(PQgetvalue(result_, row_, col), nullptr);
  }
  std::string column_text(int col) const override {
    return std::string(PQgetvalue(result_, row_, col),
                       static_cast<std::size_t>(PQgetlength(result_, row_, col)));
  }

 private:
  void execute() {
    std::vector<const char*> pointers(values_.size());
    for (std::size_t k = 0; k < values_.size(); ++k)
      pointers[k] = null_[k] ? nullptr : values_[k].data();
    PGresult* r = conn_->run_prepared(name_.c_str(), static_cast<int>(values_.size()),
                                      pointers.data(), lengths_.data(), formats_.data());
    const auto status = PQresultStatus(r);
    if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK)
      conn_->fail(r, "'" + sql_ + "' failed");
    conn_->note_changes(r);
    result_ = r;
    rows_ = PQntuples(r);
    row_ = -1;
  }

  PgConnection* conn_;
  std::string name_, sql_;
  std::vector<std::string> values_;
  std::vector<char> null_;
  std::vector<int> formats_, lengths_;
  PGresult* result_ = nullptr;
  int row_ = -1, rows_ = 0;
};

std::unique_ptr<StatementBackend> PgConnection::prepare(std::string_view sql) {
  return std::make_unique<PgStatement>(*this, sql);
}

}  // namespace

// The URI without its password (user:secret@ -> user@, password=... dropped).
std::string redacted(const std::string& uri) {
  std::string out = uri;
  const auto scheme = out.find("://");
  if (scheme != std::string::npos) {
    const auto at = out.find('@', scheme + 3);
    const auto slash = out.find('/', scheme + 3);
    if (at != std::string::npos && (slash == std::string::npos || at < slash)) {
      const auto colon = out.find(':', scheme + 3);
      if (colon != std::string::npos && colon < at) out.erase(colon, at - colon);
    }
  }
  // A parameter (?password=…&, &password=…) or a keyword (password=… in a connection string).
  for (auto p = out.find("password="); p != std::string::npos; p = out.find("password=", p)) {
    auto end = out.find_first_of("& ", p);
    if (end == std::string::npos) end = out.size();
    if (p > 0 && (out[p - 1] == '&' || out[p - 1] == ' ')) {
      --p;  // with the separator before it
    } else if (end < out.size()) {
      ++end;  // first parameter or keyword: with the separator after it
    }
    out.erase(p, end - p);
  }
  if (!out.empty() && out.back() == '?') out.pop_back();
  return out;
}

Connection Connection::postgres(const std::string& uri, int connect_timeout_s) {
  return Connection(std::make_unique<PgConnection>(uri, connect_timeout_s));
}

}  // namespace einsumdb::sql
