#include "einsumdb/db/store.hpp"

#include <sqlite3.h>
#include <xxhash.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <istream>
#include <map>
#include <ostream>
#include <set>
#include <thread>
#include <unordered_map>

#include "einsumdb/canon/enum_names.hpp"
#include "einsumdb/canon/error.hpp"
#include "einsumdb/canon/metrics.hpp"
#include "einsumdb/canon/parse.hpp"
#include "einsumdb/db/sqlite.hpp"

#ifndef EINSUMDB_VERSION
#define EINSUMDB_VERSION "0"
#endif

namespace einsumdb {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

constexpr std::int64_t kApplicationId = 0x45534442;  // "ESDB"

constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE machines(
  id INTEGER PRIMARY KEY,
  fingerprint TEXT NOT NULL UNIQUE,
  cpu_model TEXT NOT NULL,
  cores INTEGER NOT NULL,
  isa TEXT NOT NULL,
  blas TEXT NOT NULL,
  description TEXT NOT NULL,
  first_seen TEXT NOT NULL);
CREATE TABLE workloads(
  id INTEGER PRIMARY KEY,
  hash TEXT NOT NULL UNIQUE,
  key TEXT NOT NULL,
  structure_hash TEXT NOT NULL,
  structure_lengths TEXT NOT NULL,
  structure_map TEXT NOT NULL,
  spec TEXT NOT NULL,
  flops REAL,
  footprint_bytes REAL,
  created_at TEXT NOT NULL);
CREATE INDEX workloads_by_structure ON workloads(structure_hash);
CREATE TABLE transforms(
  id INTEGER PRIMARY KEY,
  strategy TEXT NOT NULL,
  params TEXT NOT NULL,
  UNIQUE(strategy, params));
CREATE TABLE runs(
  id INTEGER PRIMARY KEY,
  machine_id INTEGER NOT NULL REFERENCES machines(id),
  label TEXT NOT NULL,
  command TEXT NOT NULL,
  tool_version TEXT NOT NULL,
  started_at TEXT NOT NULL);
CREATE TABLE measurements(
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  workload_id INTEGER NOT NULL REFERENCES workloads(id),
  transform_id INTEGER NOT NULL REFERENCES transforms(id),
  machine_id INTEGER NOT NULL REFERENCES machines(id),
  -- ORs, not IN (...): SQLite builds an ephemeral table for an IN list on every insert.
  status TEXT NOT NULL CHECK(status = 'ok' OR status = 'invalid' OR status = 'failed' OR
                             status = 'timeout'),
  repetitions INTEGER NOT NULL,
  median_s REAL, min_s REAL, mean_s REAL, stddev_s REAL,
  gflops REAL, bytes_moved REAL, max_rel_err REAL,
  samples TEXT NOT NULL,
  recorded_at TEXT NOT NULL,
  digest BLOB NOT NULL);
-- One index serves both recording and best(): the digest determines every other column of a
-- measurement, so this tuple is unique exactly when the measurement is (idempotent recording),
-- and its prefix finds a workload's verified measurements on a machine. One index, not two,
-- keeps recording fast.
CREATE UNIQUE INDEX measurements_by_workload ON measurements(
  workload_id, machine_id, status, transform_id, digest);
CREATE TABLE partitionings(
  id INTEGER PRIMARY KEY,
  run_id INTEGER REFERENCES runs(id),
  machine_id INTEGER REFERENCES machines(id),
  graph_key TEXT NOT NULL,
  procs INTEGER NOT NULL,
  vectors TEXT NOT NULL,
  predicted_bytes REAL, measured_bytes REAL, measured_seconds REAL,
  recorded_at TEXT NOT NULL);
CREATE INDEX partitionings_by_graph ON partitionings(graph_key, procs);
)sql";

// Version 2: the machine's roofline, per dtype (peak per core from a measured GEMM, bandwidth
// from a measured stream).
constexpr const char* kSchemaV2 = R"sql(
CREATE TABLE rooflines(
  id INTEGER PRIMARY KEY,
  machine_id INTEGER NOT NULL REFERENCES machines(id),
  dtype TEXT NOT NULL,
  peak_gflops REAL NOT NULL,
  bandwidth_gbs REAL NOT NULL,
  measured_at TEXT NOT NULL,
  UNIQUE(machine_id, dtype));
)sql";

// Migrations: kMigrations[v] brings a database from version v to v + 1.
constexpr const char* kMigrations[] = {kSchemaV1, kSchemaV2};
static_assert(std::size(kMigrations) == Store::kSchemaVersion);

constexpr std::array<std::string_view, 4> kStatusNames{"ok", "invalid", "failed", "timeout"};

// The shortest text that reads back as exactly v.
std::string format_double(double v) {
  char buf[32];
  const auto result = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, result.ptr);
}

ojson lengths_json(const std::vector<Length>& lengths) {
  ojson out = ojson::array();
  for (const auto& l : lengths) {
    if (l.symbolic())
      out.push_back(l.symbol);
    else
      out.push_back(l.value);
  }
  return out;
}

// Canonical names -> structure names of one workload.
ojson structure_map_json(const Canonical& c) {
  ojson index = ojson::object(), array = ojson::object();
  const NameMap input_to_structure = to_canonical_names(c.structure_sigma);
  for (const auto& [canonical, input] : c.sigma.index)
    index[std::string(1, canonical)] = input_to_structure.index.at(std::string(1, input));
  for (const auto& [canonical, input] : c.sigma.array)
    array[canonical] = input_to_structure.array.at(input);
  return {{"index", index}, {"array", array}};
}

NameMap name_map_from_json(const json& j) {
  NameMap m;
  for (const auto& [k, v] : j.at("index").items()) m.index.emplace(k, v.get<std::string>());
  for (const auto& [k, v] : j.at("array").items()) m.array.emplace(k, v.get<std::string>());
  return m;
}

}  // namespace

std::string_view to_string(Outcome s) {
  return enum_name(kStatusNames, s);
}
std::optional<Outcome> parse_outcome(std::string_view s) {
  return enum_from_name<Outcome>(kStatusNames, s);
}

Summary summarize(const std::vector<double>& seconds) {
  Summary s;
  s.repetitions = static_cast<int>(seconds.size());
  if (seconds.empty()) return s;
  s.median_s = median(seconds);
  s.min_s = *std::min_element(seconds.begin(), seconds.end());
  double sum = 0;
  for (double t : seconds) sum += t;
  s.mean_s = sum / static_cast<double>(seconds.size());
  if (seconds.size() > 1) {
    double ss = 0;
    for (double t : seconds) ss += (t - s.mean_s) * (t - s.mean_s);
    s.stddev_s = std::sqrt(ss / static_cast<double>(seconds.size() - 1));
  }
  return s;
}

std::string now_iso8601() {
  const auto now = std::chrono::system_clock::now();
  const auto t = std::chrono::system_clock::to_time_t(now);
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() %
      1000000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[64];
  std::snprintf(out, sizeof out, "%s.%06lldZ", buf, static_cast<long long>(micros));
  return out;
}

struct Store::Impl {
  sql::Connection conn;
  bool read_only;
  int transaction_depth = 0;
  // Ids cached for speed; cleared whenever a transaction rolls back.
  std::map<std::string, std::int64_t> machine_ids;
  std::map<std::int64_t, std::string> machine_fingerprints;
  struct WorkloadInfo {
    std::int64_t id;
    std::string hash;
    std::optional<double> flops, footprint;
  };
  std::map<std::string, WorkloadInfo> workloads_by_hash;
  std::map<std::int64_t, WorkloadInfo> workloads_by_id;
  std::map<std::pair<std::string, std::string>, std::int64_t> transform_ids;
  std::map<std::int64_t, Transform> transforms_by_id;
  std::set<std::int64_t> known_runs;
  std::string batch_time;  // set by record_run: one time for the measurements it commits together
  // Keyed by the address of the SQL literal: every caller passes a string literal.
  std::unordered_map<const char*, std::unique_ptr<sql::Statement>> statements;

  Impl(sql::Connection c, bool ro) : conn(std::move(c)), read_only(ro) {}

  // A scoped use of the cached statement for `text` (see sql::Use).
  sql::Use stmt(const char* text) {
    auto& s = statements[text];
    if (!s) s = std::make_unique<sql::Statement>(conn, text);
    return sql::Use(*s);
  }

  void clear_caches() {
    machine_ids.clear();
    machine_fingerprints.clear();
    workloads_by_hash.clear();
    workloads_by_id.clear();
    transform_ids.clear();
    transforms_by_id.clear();
    known_runs.clear();
  }

  const WorkloadInfo& workload(std::int64_t id) {
    const auto it = workloads_by_id.find(id);
    if (it != workloads_by_id.end()) return it->second;
    auto s = stmt("SELECT hash, flops, footprint_bytes FROM workloads WHERE id = ?");
    s.bind(1, id);
    if (!s.step()) throw DatabaseError("no workload with id " + std::to_string(id));
    WorkloadInfo info{id, s.column_text(0), s.column_optional_double(1),
                      s.column_optional_double(2)};
    workloads_by_hash[info.hash] = info;
    return workloads_by_id[id] = info;
  }

  const std::string& machine_fingerprint(std::int64_t id) {
    const auto it = machine_fingerprints.find(id);
    if (it != machine_fingerprints.end()) return it->second;
    auto s = stmt("SELECT fingerprint FROM machines WHERE id = ?");
    s.bind(1, id);
    if (!s.step()) throw DatabaseError("no machine with id " + std::to_string(id));
    return machine_fingerprints[id] = s.column_text(0);
  }

  void require_run(std::int64_t id) {
    if (known_runs.count(id)) return;
    auto s = stmt("SELECT 1 FROM runs WHERE id = ?");
    s.bind(1, id);
    if (!s.step())
      throw DatabaseError("no run with id " + std::to_string(id) + " in '" + conn.path() + "'");
    known_runs.insert(id);
  }

  const Transform& transform(std::int64_t id) {
    const auto it = transforms_by_id.find(id);
    if (it != transforms_by_id.end()) return it->second;
    auto s = stmt("SELECT strategy, params FROM transforms WHERE id = ?");
    s.bind(1, id);
    if (!s.step()) throw DatabaseError("no transform with id " + std::to_string(id));
    return transforms_by_id[id] = Transform{s.column_text(0), json::parse(s.column_text(1))};
  }

  std::int64_t transform_id(const Transform& t, std::string params_text) {
    auto key = std::make_pair(t.name, std::move(params_text));
    const auto it = transform_ids.find(key);
    if (it != transform_ids.end()) return it->second;
    auto ins = stmt("INSERT OR IGNORE INTO transforms(strategy, params) VALUES(?, ?)");
    ins.bind(1, key.first).bind(2, key.second).run();
    auto sel = stmt("SELECT id FROM transforms WHERE strategy = ? AND params = ?");
    sel.bind(1, key.first).bind(2, key.second);
    sel.step();
    return transform_ids[std::move(key)] = sel.column_int(0);
  }

  // Runs `f` in a transaction unless one is open already.
  template <class F>
  auto write(F&& f) {
    if (read_only) throw DatabaseError("database '" + conn.path() + "' is open read-only");
    if (transaction_depth > 0) return f();
    sql::Transaction tx(conn);
    ++transaction_depth;
    try {
      auto result = f();
      --transaction_depth;
      tx.commit();
      return result;
    } catch (...) {
      --transaction_depth;
      clear_caches();
      throw;
    }
  }
};

Store::Store(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;
Store::~Store() = default;

Store Store::open(const std::string& path, const Options& options) {
  sql::Connection conn(path, options.read_only, !options.read_only, options.vfs);
  conn.busy_timeout(options.busy_timeout_ms);
  // Identify the file before changing anything in it.
  std::int64_t app_id = 0, version = 0, objects = 0;
  try {
    // One read transaction, one snapshot: another process may be creating the schema.
    conn.exec_waiting("BEGIN");
    app_id = conn.query_int("PRAGMA application_id");
    version = conn.query_int("PRAGMA user_version");
    objects = conn.query_int("SELECT count(*) FROM sqlite_master");
    conn.exec("COMMIT");
  } catch (const DatabaseError& e) {
    sqlite3_exec(conn.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
    throw DatabaseError("'" + path + "' is not an einsumdb database (" + e.what() + ")");
  }
  if (app_id != kApplicationId && (app_id != 0 || objects != 0))
    throw DatabaseError("'" + path + "' is not an einsumdb database (application id " +
                        std::to_string(app_id) + ", " + std::to_string(objects) +
                        " schema objects); refusing to touch it");
  if (version > kSchemaVersion)
    throw DatabaseError("database '" + path + "' has schema version " + std::to_string(version) +
                        ", newer than this einsumdb supports (" + std::to_string(kSchemaVersion) +
                        "); upgrade einsumdb to use it");
  if (options.read_only) {
    if (app_id != kApplicationId)
      throw DatabaseError("'" + path + "' is empty: no einsumdb database there yet");
    if (version < kSchemaVersion)
      throw DatabaseError("database '" + path + "' has schema version " + std::to_string(version) +
                          " and needs a migration; open it for writing once");
  } else {
    // Switching a new file to WAL takes an exclusive lock for which SQLite does not wait.
    std::optional<std::string> mode;
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(options.busy_timeout_ms);
    for (auto pause = std::chrono::milliseconds(1);;
         pause = std::min(pause * 2, std::chrono::milliseconds(50))) {
      try {
        mode = conn.query_text("PRAGMA journal_mode=WAL");
        break;
      } catch (const DatabaseError&) {
        if (std::chrono::steady_clock::now() >= deadline) throw;
        std::this_thread::sleep_for(pause);
      }
    }
    if (!mode || *mode != "wal")
      throw DatabaseError("cannot use write-ahead logging for '" + path +
                          "' (journal mode stays '" + mode.value_or("?") +
                          "'); einsumdb needs a local filesystem with shared memory, not NFS");
    conn.exec("PRAGMA synchronous=NORMAL");
    sql::Transaction tx(conn);
    // Re-read inside the write lock: another process may have created the schema meanwhile.
    const auto current = conn.query_int("PRAGMA user_version");
    for (auto v = current; v < kSchemaVersion; ++v) conn.exec(kMigrations[v]);
    if (current < kSchemaVersion) {
      conn.exec(("PRAGMA application_id=" + std::to_string(kApplicationId)).c_str());
      conn.exec(("PRAGMA user_version=" + std::to_string(kSchemaVersion)).c_str());
    }
    tx.commit();
  }
  // Foreign keys are declared (db check verifies them) but not enforced per row, which costs a
  // fifth of the recording rate: every id written comes from this store and record() looks up
  // its run, workload and machine before inserting.
  conn.exec(("PRAGMA cache_size=-" + std::to_string(options.cache_mib * 1024)).c_str());
  conn.exec(("PRAGMA mmap_size=" + std::to_string(options.mmap_mib * 1024 * 1024)).c_str());
  return Store(std::make_unique<Impl>(std::move(conn), options.read_only));
}

int Store::schema_version() {
  return static_cast<int>(impl_->conn.query_int("PRAGMA user_version"));
}
const std::string& Store::path() const {
  return impl_->conn.path();
}

namespace {
sql::Connection& writable(Store::Impl& impl);
}  // namespace

Store::Transaction::Transaction(Store& store)
    : store_(store), tx_(std::make_unique<sql::Transaction>(writable(*store.impl_))) {
  ++store_.impl_->transaction_depth;
}

Store::Transaction::~Transaction() {
  if (done_) return;
  --store_.impl_->transaction_depth;
  store_.impl_->clear_caches();  // ids cached inside the transaction may be rolled back
}

void Store::Transaction::commit() {
  tx_->commit();
  --store_.impl_->transaction_depth;
  done_ = true;
}

namespace {
sql::Connection& writable(Store::Impl& impl) {
  if (impl.read_only) throw DatabaseError("database '" + impl.conn.path() + "' is open read-only");
  return impl.conn;
}
}  // namespace

MachineId Store::machine_id(const Machine& m) {
  const std::string fp = m.fingerprint();
  if (const auto it = impl_->machine_ids.find(fp); it != impl_->machine_ids.end())
    return MachineId{it->second};
  return impl_->write([&] {
    auto ins = impl_->stmt(
        "INSERT OR IGNORE INTO machines(fingerprint, cpu_model, cores, isa, blas, description, "
        "first_seen) VALUES(?, ?, ?, ?, ?, ?, ?)");
    ins.bind(1, fp).bind(2, m.cpu_model).bind(3, m.cores).bind(4, m.isa).bind(5, m.blas);
    ins.bind(6, m.description.dump()).bind(7, now_iso8601()).run();
    auto sel = impl_->stmt("SELECT id FROM machines WHERE fingerprint = ?");
    sel.bind(1, fp);
    sel.step();
    const auto id = sel.column_int(0);
    impl_->machine_fingerprints[id] = fp;
    return MachineId{impl_->machine_ids[fp] = id};
  });
}

std::optional<MachineId> Store::find_machine(const std::string& fingerprint) {
  if (const auto it = impl_->machine_ids.find(fingerprint); it != impl_->machine_ids.end())
    return MachineId{it->second};
  auto s = impl_->stmt("SELECT id FROM machines WHERE fingerprint = ?");
  s.bind(1, fingerprint);
  if (!s.step()) return std::nullopt;
  impl_->machine_fingerprints[s.column_int(0)] = fingerprint;
  return MachineId{impl_->machine_ids[fingerprint] = s.column_int(0)};
}

WorkloadId Store::workload_id(const Canonical& c) {
  if (const auto it = impl_->workloads_by_hash.find(c.hash); it != impl_->workloads_by_hash.end())
    return WorkloadId{it->second.id};
  EINSUMDB_ASSERT(!c.structure_hash.empty(), "workloads need the structure key");
  return impl_->write([&] {
    const auto flops = flop_count(c.form);
    const auto footprint = footprint_bytes(c.form);
    auto ins = impl_->stmt(
        "INSERT OR IGNORE INTO workloads(hash, key, structure_hash, structure_lengths, "
        "structure_map, spec, flops, footprint_bytes, created_at) VALUES(?, ?, ?, ?, ?, ?, ?, ?, "
        "?)");
    ins.bind(1, c.hash).bind(2, c.key).bind(3, c.structure_hash);
    ins.bind(4, lengths_json(c.structure_lengths).dump()).bind(5, structure_map_json(c).dump());
    ins.bind(6, to_json(c.form).dump()).bind(7, flops).bind(8, footprint).bind(9, now_iso8601());
    ins.run();
    auto sel = impl_->stmt("SELECT id, key FROM workloads WHERE hash = ?");
    sel.bind(1, c.hash);
    sel.step();
    if (sel.column_text(1) != c.key)
      throw DatabaseError("hash collision in '" + path() + "': workload " + c.hash +
                          " is stored with key '" + sel.column_text(1) + "', not '" + c.key + "'");
    Impl::WorkloadInfo info{sel.column_int(0), c.hash, flops, footprint};
    impl_->workloads_by_id[info.id] = info;
    impl_->workloads_by_hash[c.hash] = info;
    return WorkloadId{info.id};
  });
}

std::optional<WorkloadId> Store::find_workload(const std::string& hash) {
  if (const auto it = impl_->workloads_by_hash.find(hash); it != impl_->workloads_by_hash.end())
    return WorkloadId{it->second.id};
  auto s = impl_->stmt("SELECT id FROM workloads WHERE hash = ?");
  s.bind(1, hash);
  if (!s.step()) return std::nullopt;
  return WorkloadId{s.column_int(0)};
}

RunId Store::begin_run(const RunInfo& run, MachineId machine_key) {
  const std::int64_t machine = id_value(machine_key);
  return impl_->write([&] {
    auto s = impl_->stmt(
        "INSERT INTO runs(machine_id, label, command, tool_version, started_at) "
        "VALUES(?, ?, ?, ?, ?)");
    impl_->machine_fingerprint(machine);  // the machine must exist
    s.bind(1, machine).bind(2, run.label).bind(3, run.command);
    s.bind(4, run.tool_version.empty() ? std::string(EINSUMDB_VERSION) : run.tool_version);
    s.bind(5, run.started_at.empty() ? now_iso8601() : run.started_at).run();
    const auto id = impl_->conn.last_insert_rowid();
    impl_->known_runs.insert(id);
    return RunId{id};
  });
}

void check_measurement(const Measurement& m) {
  for (double t : m.seconds)
    if (!std::isfinite(t) || t < 0)
      throw SpecError("measurement of '" + m.transform.name + "': time " + format_double(t) +
                      " is not a finite, non-negative number of seconds");
  if (m.status == Outcome::ok) {
    if (m.seconds.empty())
      throw SpecError("measurement of '" + m.transform.name + "' has status ok but no times");
    if (!m.max_rel_err || !std::isfinite(*m.max_rel_err) || *m.max_rel_err < 0)
      throw SpecError("measurement of '" + m.transform.name +
                      "' has status ok but no max_rel_err: only verified results may be recorded "
                      "as ok");
  }
  if (m.transform.name.empty()) throw SpecError("measurement has no transform name");
}

Measurement measurement_from_json(const json& j) {
  Measurement m;
  const json& t = j.at("transform");
  if (!t.is_object() || !t.contains("name"))
    throw SpecError("'transform' must be {\"name\": ..., \"params\": {...}}");
  for (const auto& [k, v] : t.items()) {
    (void)v;
    if (k != "name" && k != "params") throw SpecError("transform: unknown key '" + k + "'");
  }
  m.transform.name = t.at("name").get<std::string>();
  m.transform.params = t.value("params", json::object());
  const std::string status = j.value("status", "ok");
  const auto s = parse_outcome(status);
  if (!s) throw SpecError("unknown status '" + status + "'; expected ok, invalid, failed, timeout");
  m.status = *s;
  if (j.contains("seconds")) m.seconds = j.at("seconds").get<std::vector<double>>();
  if (j.contains("max_rel_err") && !j.at("max_rel_err").is_null())
    m.max_rel_err = j.at("max_rel_err").get<double>();
  if (j.contains("bytes_moved") && !j.at("bytes_moved").is_null())
    m.bytes_moved = j.at("bytes_moved").get<double>();
  check_measurement(m);
  return m;
}

bool Store::record(RunId run_key, WorkloadId workload_key, MachineId machine_key,
                   const Measurement& m) {
  const std::int64_t run = id_value(run_key), workload = id_value(workload_key),
                     machine = id_value(machine_key);
  check_measurement(m);
  return impl_->write([&] {
    impl_->require_run(run);
    const auto& w = impl_->workload(workload);
    const std::string& fp = impl_->machine_fingerprint(machine);
    const std::string params = m.transform.params_text();
    const std::int64_t transform = impl_->transform_id(m.transform, params);
    const Summary s = summarize(m.seconds);
    const auto bytes = m.bytes_moved ? m.bytes_moved : w.footprint;
    std::optional<double> gflops;
    if (m.status == Outcome::ok && w.flops && s.median_s > 0) gflops = *w.flops / s.median_s * 1e-9;

    std::string samples = "[", digest_text = w.hash + "\n" + m.transform.name + "\n" + params +
                                             "\n" + fp + "\n" + std::string(to_string(m.status)) +
                                             "\n";
    for (std::size_t i = 0; i < m.seconds.size(); ++i) {
      if (i) samples += ',';
      samples += format_double(m.seconds[i]);
    }
    samples += ']';
    digest_text += samples + "\n" + (m.max_rel_err ? format_double(*m.max_rel_err) : "-") + "\n" +
                   (m.bytes_moved ? format_double(*m.bytes_moved) : "-");

    auto ins = impl_->stmt(
        "INSERT OR IGNORE INTO measurements(run_id, workload_id, transform_id, machine_id, status, "
        "repetitions, median_s, min_s, mean_s, stddev_s, gflops, bytes_moved, max_rel_err, "
        "samples, recorded_at, digest) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    ins.bind(1, run).bind(2, workload).bind(3, transform).bind(4, machine);
    ins.bind(5, to_string(m.status)).bind(6, s.repetitions);
    const bool timed = s.repetitions > 0;
    ins.bind(7, timed ? std::optional(s.median_s) : std::nullopt);
    ins.bind(8, timed ? std::optional(s.min_s) : std::nullopt);
    ins.bind(9, timed ? std::optional(s.mean_s) : std::nullopt);
    ins.bind(10, timed ? std::optional(s.stddev_s) : std::nullopt);
    ins.bind(11, gflops).bind(12, bytes).bind(13, m.max_rel_err).bind(14, samples);
    ins.bind(15, !m.recorded_at.empty()       ? m.recorded_at
                 : !impl_->batch_time.empty() ? impl_->batch_time
                                              : now_iso8601());
    const XXH128_hash_t digest = XXH3_128bits(digest_text.data(), digest_text.size());
    XXH128_canonical_t digest_bytes;
    XXH128_canonicalFromHash(&digest_bytes, digest);
    ins.bind_blob(16, digest_bytes.digest, sizeof digest_bytes.digest).run();
    return impl_->conn.changes() == 1;
  });
}

Store::RunResult Store::record_run(
    const RunInfo& run, const Machine& machine,
    const std::vector<std::pair<const Canonical*, Measurement>>& measurements) {
  Transaction tx(*this);
  impl_->batch_time = run.started_at.empty() ? now_iso8601() : run.started_at;
  struct ClearTime {
    std::string& t;
    ~ClearTime() { t.clear(); }
  } clear_time{impl_->batch_time};
  RunResult r;
  const auto mid = machine_id(machine);
  const RunId run_id = begin_run(run, mid);
  r.run = id_value(run_id);
  for (const auto& [canonical, m] : measurements) {
    if (record(run_id, workload_id(*canonical), mid, m))
      ++r.inserted;
    else
      ++r.duplicates;
  }
  tx.commit();
  return r;
}

std::vector<Fact> Store::top_k(const std::string& workload_hash, const std::string& machine,
                               std::size_t k) {
  const auto mid = find_machine(machine);
  if (!mid) return {};
  auto w = impl_->stmt("SELECT id, key, flops FROM workloads WHERE hash = ?");
  w.bind(1, workload_hash);
  if (!w.step()) return {};
  const std::int64_t wid = w.column_int(0);
  const std::string key = w.column_text(1);
  const std::optional<double> flops = w.column_optional_double(2);
  auto s = impl_->stmt(
      "SELECT transform_id, median_s, min_s, repetitions FROM measurements WHERE workload_id = ? "
      "AND machine_id = ? AND status = 'ok' AND max_rel_err IS NOT NULL");
  s.bind(1, wid).bind(2, id_value(*mid));
  struct Group {
    Fact fact;
    std::vector<double> medians;
  };
  std::map<std::int64_t, Group> groups;
  while (s.step()) {
    auto& g = groups[s.column_int(0)];
    if (g.medians.empty()) g.fact.min_s = s.column_double(2);
    g.medians.push_back(s.column_double(1));
    g.fact.min_s = std::min(g.fact.min_s, s.column_double(2));
    g.fact.repetitions += static_cast<int>(s.column_int(3));
  }
  for (auto& [tid, g] : groups) g.fact.transform = impl_->transform(tid);
  std::vector<Fact> facts;
  for (auto& [id, g] : groups) {
    g.fact.workload_hash = workload_hash;
    g.fact.workload_key = key;
    g.fact.machine = machine;
    g.fact.measurements = static_cast<int>(g.medians.size());
    g.fact.median_s = median(g.medians);
    if (flops && g.fact.median_s > 0) g.fact.gflops = *flops / g.fact.median_s * 1e-9;
    facts.push_back(std::move(g.fact));
  }
  // Fastest median first; ties broken by strategy and parameters, so answers are deterministic.
  std::sort(facts.begin(), facts.end(), [](const Fact& a, const Fact& b) {
    if (a.median_s != b.median_s) return a.median_s < b.median_s;
    if (a.transform.name != b.transform.name) return a.transform.name < b.transform.name;
    return a.transform.params_text() < b.transform.params_text();
  });
  if (k && facts.size() > k) facts.resize(k);
  return facts;
}

std::optional<Fact> Store::best(const std::string& workload_hash, const std::string& machine) {
  auto facts = top_k(workload_hash, machine, 1);
  if (facts.empty()) return std::nullopt;
  return std::move(facts.front());
}

std::optional<Store::Nearest> Store::nearest(const Canonical& query, const std::string& machine) {
  auto s = impl_->stmt(
      "SELECT w.hash, w.structure_lengths, w.structure_map FROM workloads w "
      "WHERE w.structure_hash = ? AND w.hash <> ? AND EXISTS (SELECT 1 FROM measurements m "
      "JOIN machines mc ON mc.id = m.machine_id WHERE m.workload_id = w.id AND "
      "mc.fingerprint = ? AND m.status = 'ok')");
  s.bind(1, query.structure_hash).bind(2, query.hash).bind(3, machine);
  std::optional<std::tuple<double, std::string, std::string>> found;  // distance, hash, map
  while (s.step()) {
    const json lengths = json::parse(s.column_text(1));
    if (lengths.size() != query.structure_lengths.size()) continue;
    double d2 = 0;
    for (std::size_t k = 0; k < lengths.size(); ++k) {
      const Length& q = query.structure_lengths[k];
      const bool symbolic = lengths[k].is_string();
      if (symbolic != q.symbolic()) {
        d2 += 1.0;  // a symbol against a number: a fixed penalty of one e-fold
      } else if (!symbolic) {
        const double r = std::log(static_cast<double>(q.value) / lengths[k].get<double>());
        d2 += r * r;
      }
    }
    const double d = std::sqrt(d2);
    const std::string hash = s.column_text(0);
    if (!found || d < std::get<0>(*found) ||
        (d == std::get<0>(*found) && hash < std::get<1>(*found)))
      found = std::make_tuple(d, hash, s.column_text(2));
  }
  if (!found) return std::nullopt;
  auto fact = best(std::get<1>(*found), machine);
  if (!fact) return std::nullopt;
  return Nearest{std::move(*fact), std::get<0>(*found),
                 name_map_from_json(json::parse(std::get<2>(*found)))};
}

std::vector<WorkloadSummary> Store::list(const ListFilter& f) {
  auto s = impl_->stmt(
      "SELECT w.hash, w.key, count(m.id), sum(m.status = 'ok'), "
      "max(CASE WHEN m.status = 'ok' THEN m.gflops END), max(m.recorded_at), "
      "(SELECT t2.strategy FROM measurements m2 JOIN transforms t2 ON t2.id = m2.transform_id "
      " JOIN machines c2 ON c2.id = m2.machine_id WHERE m2.workload_id = w.id AND m2.status = 'ok' "
      " AND (?1 = '' OR c2.fingerprint LIKE ?1 || '%') AND (?2 = '' OR t2.strategy = ?2) "
      " AND (?3 = '' OR m2.recorded_at >= ?3) ORDER BY m2.median_s LIMIT 1) "
      "FROM workloads w JOIN measurements m ON m.workload_id = w.id "
      "JOIN machines mc ON mc.id = m.machine_id JOIN transforms t ON t.id = m.transform_id "
      "WHERE (?1 = '' OR mc.fingerprint LIKE ?1 || '%') AND (?2 = '' OR t.strategy = ?2) "
      "AND (?3 = '' OR m.recorded_at >= ?3) GROUP BY w.id ORDER BY w.key LIMIT ?4");
  s.bind(1, f.machine).bind(2, f.strategy).bind(3, f.since);
  s.bind(4, f.limit ? static_cast<std::int64_t>(f.limit) : std::int64_t{-1});
  std::vector<WorkloadSummary> rows;
  while (s.step())
    rows.push_back({s.column_text(0), s.column_text(1), static_cast<int>(s.column_int(2)),
                    static_cast<int>(s.column_int(3)), s.column_optional_double(4),
                    s.column_text(6), s.column_text(5)});
  return rows;
}

namespace {

constexpr const char* kExportColumns =
    "SELECT w.hash, w.key, w.spec, t.strategy, t.params, mc.fingerprint, mc.cpu_model, mc.cores, "
    "mc.isa, mc.blas, mc.description, r.id, r.label, r.command, r.tool_version, r.started_at, "
    "m.status, m.samples, m.repetitions, m.median_s, m.min_s, m.mean_s, m.stddev_s, m.gflops, "
    "m.bytes_moved, m.max_rel_err, m.recorded_at "
    "FROM measurements m JOIN workloads w ON w.id = m.workload_id "
    "JOIN transforms t ON t.id = m.transform_id JOIN machines mc ON mc.id = m.machine_id "
    "JOIN runs r ON r.id = m.run_id ";

ojson export_row(sql::Statement& s) {
  auto opt = [&](int col) -> ojson {
    if (s.is_null(col)) return nullptr;
    return s.column_double(col);
  };
  return {{"workload",
           {{"hash", s.column_text(0)},
            {"key", s.column_text(1)},
            {"spec", ojson::parse(s.column_text(2))}}},
          {"transform", {{"name", s.column_text(3)}, {"params", ojson::parse(s.column_text(4))}}},
          {"machine",
           {{"fingerprint", s.column_text(5)},
            {"cpu_model", s.column_text(6)},
            {"cores", s.column_int(7)},
            {"isa", s.column_text(8)},
            {"blas", s.column_text(9)},
            {"description", ojson::parse(s.column_text(10))}}},
          {"run",
           {{"id", s.column_int(11)},
            {"label", s.column_text(12)},
            {"command", s.column_text(13)},
            {"tool_version", s.column_text(14)},
            {"started_at", s.column_text(15)}}},
          {"status", s.column_text(16)},
          {"seconds", ojson::parse(s.column_text(17))},
          {"repetitions", s.column_int(18)},
          {"median_s", opt(19)},
          {"min_s", opt(20)},
          {"mean_s", opt(21)},
          {"stddev_s", opt(22)},
          {"gflops", opt(23)},
          {"bytes_moved", opt(24)},
          {"max_rel_err", opt(25)},
          {"recorded_at", s.column_text(26)}};
}

}  // namespace

std::vector<ojson> Store::show(const std::string& workload_hash) {
  sql::Statement s(impl_->conn, std::string(kExportColumns) +
                                    "WHERE w.hash = ? ORDER BY mc.fingerprint, m.status <> 'ok', "
                                    "m.median_s, m.id");
  s.bind(1, workload_hash);
  std::vector<ojson> rows;
  while (s.step()) rows.push_back(export_row(s));
  return rows;
}

std::size_t Store::export_jsonl(std::ostream& out, const ListFilter& f) {
  sql::Statement s(impl_->conn,
                   std::string(kExportColumns) +
                       "WHERE (?1 = '' OR mc.fingerprint LIKE ?1 || '%') AND "
                       "(?2 = '' OR t.strategy = ?2) AND (?3 = '' OR m.recorded_at >= ?3) "
                       "ORDER BY m.id");
  s.bind(1, f.machine).bind(2, f.strategy).bind(3, f.since);
  std::size_t n = 0;
  while (s.step()) {
    out << export_row(s).dump() << '\n';
    ++n;
  }
  return n;
}

Store::ImportResult Store::import_jsonl(std::istream& in, const std::string& source) {
  ImportResult result;
  Transaction tx(*this);
  std::map<std::string, RunId> runs;            // source run -> local run
  std::map<std::string, Canonical> canonicals;  // spec JSON text -> its canonical form
  std::string line;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = source + ":" + std::to_string(number);
    try {
      const json j = json::parse(line);
      check_json_depth(j, "line");
      const json& w = j.at("workload");
      const std::string hash = w.at("hash").get<std::string>();
      // Cached by the spec itself, and every line's stated hash checked against it.
      const std::string spec_text = w.at("spec").dump();
      auto it = canonicals.find(spec_text);
      if (it == canonicals.end())
        it = canonicals.emplace(spec_text, canonicalize(parse_spec_json(w.at("spec")))).first;
      if (it->second.hash != hash)
        throw SpecError("workload " + hash + " does not match its spec (which canonicalizes to " +
                        it->second.hash + ")");
      const Machine machine = machine_from_json(j.at("machine"));
      const auto mid = machine_id(machine);
      const json& r = j.at("run");
      const std::string run_key = machine.fingerprint() + "\n" + r.at("started_at").dump() + "\n" +
                                  r.at("label").dump() + "\n" + r.at("command").dump();
      auto run = runs.find(run_key);
      if (run == runs.end()) {
        auto find = impl_->stmt(
            "SELECT id FROM runs WHERE machine_id = ? AND started_at = ? AND label = ? AND "
            "command = ? AND tool_version = ?");
        find.bind(1, id_value(mid)).bind(2, r.at("started_at").get<std::string>());
        find.bind(3, r.at("label").get<std::string>()).bind(4, r.at("command").get<std::string>());
        find.bind(5, r.at("tool_version").get<std::string>());
        RunId id;
        if (find.step()) {
          id = RunId{find.column_int(0)};
        } else {
          id = begin_run({r.at("label"), r.at("command"), r.at("tool_version"), r.at("started_at")},
                         mid);
          ++result.runs;
        }
        run = runs.emplace(run_key, id).first;
      }
      Measurement m;
      m.transform = {j.at("transform").at("name").get<std::string>(),
                     j.at("transform").at("params")};
      const auto status = parse_outcome(j.at("status").get<std::string>());
      if (!status) throw SpecError("unknown status '" + j.at("status").get<std::string>() + "'");
      m.status = *status;
      m.seconds = j.at("seconds").get<std::vector<double>>();
      if (!j.at("max_rel_err").is_null()) m.max_rel_err = j.at("max_rel_err").get<double>();
      if (!j.at("bytes_moved").is_null()) m.bytes_moved = j.at("bytes_moved").get<double>();
      m.recorded_at = j.at("recorded_at").get<std::string>();
      if (record(run->second, workload_id(it->second), mid, m))
        ++result.inserted;
      else
        ++result.duplicates;
    } catch (const json::exception& e) {
      throw SpecError(where + ": not an export line: " + e.what());
    } catch (const SpecError& e) {
      throw SpecError(where + ": " + e.what());
    }
  }
  tx.commit();
  return result;
}

ojson Store::stats() {
  auto& c = impl_->conn;
  ojson by_status = ojson::object();
  for (auto status : kStatusNames) by_status[std::string(status)] = 0;
  {
    sql::Statement s(c, "SELECT status, count(*) FROM measurements GROUP BY status");
    while (s.step()) by_status[s.column_text(0)] = s.column_int(1);
  }
  ojson machines = ojson::array();
  {
    sql::Statement s(c,
                     "SELECT mc.fingerprint, mc.cpu_model, mc.cores, mc.blas, count(m.id) FROM "
                     "machines mc LEFT JOIN measurements m ON m.machine_id = mc.id GROUP BY mc.id "
                     "ORDER BY mc.fingerprint");
    while (s.step())
      machines.push_back({{"fingerprint", s.column_text(0)},
                          {"cpu_model", s.column_text(1)},
                          {"cores", s.column_int(2)},
                          {"blas", s.column_text(3)},
                          {"measurements", s.column_int(4)}});
  }
  return {
      {"path", path()},
      {"schema_version", schema_version()},
      {"bytes", c.query_int("PRAGMA page_count") * c.query_int("PRAGMA page_size")},
      {"machines", c.query_int("SELECT count(*) FROM machines")},
      {"workloads", c.query_int("SELECT count(*) FROM workloads")},
      {"structures", c.query_int("SELECT count(DISTINCT structure_hash) FROM workloads")},
      {"transforms", c.query_int("SELECT count(*) FROM transforms")},
      {"strategies", c.query_int("SELECT count(DISTINCT strategy) FROM transforms")},
      {"runs", c.query_int("SELECT count(*) FROM runs")},
      {"measurements", c.query_int("SELECT count(*) FROM measurements")},
      {"measurements_by_status", by_status},
      {"partitionings", c.query_int("SELECT count(*) FROM partitionings")},
      {"first_recorded", c.query_text("SELECT min(recorded_at) FROM measurements").value_or("")},
      {"last_recorded", c.query_text("SELECT max(recorded_at) FROM measurements").value_or("")},
      {"by_machine", machines}};
}

ojson Store::check() {
  auto& c = impl_->conn;
  ojson problems = ojson::array();
  {
    sql::Statement s(c, "PRAGMA integrity_check");
    while (s.step())
      if (s.column_text(0) != "ok") problems.push_back("integrity: " + s.column_text(0));
  }
  {
    sql::Statement s(c, "PRAGMA foreign_key_check");
    while (s.step())
      problems.push_back("foreign key: table " + s.column_text(0) + " row " +
                         std::to_string(s.column_int(1)));
  }
  std::int64_t workloads = 0;
  {
    sql::Statement s(c, "SELECT hash, key, spec FROM workloads");
    while (s.step()) {
      ++workloads;
      const std::string hash = s.column_text(0), key = s.column_text(1);
      if (hash_text(key) != hash)
        problems.push_back("workload " + hash + ": key does not hash to it");
      try {
        if (canonicalize(parse_spec_text(s.column_text(2))).key != key)
          problems.push_back("workload " + hash + ": spec does not canonicalize to its key");
      } catch (const Error& e) {
        problems.push_back("workload " + hash + ": spec unreadable: " + e.what());
      }
    }
  }
  return {{"path", path()},
          {"schema_version", schema_version()},
          {"supported_schema_version", kSchemaVersion},
          {"journal_mode", c.query_text("PRAGMA journal_mode").value_or("?")},
          {"workloads_checked", workloads},
          {"ok", problems.empty()},
          {"problems", problems}};
}

void Store::record_partitioning(RunId run_key, const Partitioning& p) {
  const std::int64_t run = id_value(run_key);
  impl_->write([&] {
    const auto machine = find_machine(p.machine);
    auto s = impl_->stmt(
        "INSERT INTO partitionings(run_id, machine_id, graph_key, procs, vectors, predicted_bytes, "
        "measured_bytes, measured_seconds, recorded_at) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)");
    s.bind(1, run);
    if (machine)
      s.bind(2, id_value(*machine));
    else
      s.bind_null(2);
    s.bind(3, p.graph_key).bind(4, p.procs).bind(5, p.vectors.dump()).bind(6, p.predicted_bytes);
    s.bind(7, p.measured_bytes).bind(8, p.measured_seconds).bind(9, now_iso8601()).run();
    return 0;
  });
}

namespace {
#define EINSUMDB_PARTITIONING_COLUMNS                                                         \
  "SELECT p.graph_key, p.procs, p.vectors, p.predicted_bytes, p.measured_bytes, "             \
  "p.measured_seconds, coalesce(mc.fingerprint, '') FROM partitionings p LEFT JOIN machines " \
  "mc ON mc.id = p.machine_id "

template <typename S>
std::vector<Store::Partitioning> read_partitionings(S& s) {
  std::vector<Store::Partitioning> out;
  while (s.step())
    out.push_back({s.column_text(0), static_cast<int>(s.column_int(1)),
                   json::parse(s.column_text(2)), s.column_optional_double(3),
                   s.column_optional_double(4), s.column_optional_double(5), s.column_text(6)});
  return out;
}
}  // namespace

std::vector<Store::Partitioning> Store::partitionings(const std::string& graph_key, int procs) {
  auto s = impl_->stmt(EINSUMDB_PARTITIONING_COLUMNS
                       "WHERE p.graph_key = ? AND p.procs = ? ORDER BY p.id");
  s.bind(1, graph_key).bind(2, procs);
  return read_partitionings(s);
}

std::vector<Store::Partitioning> Store::measured_partitionings(const std::string& machine,
                                                               int procs) {
  auto s = impl_->stmt(EINSUMDB_PARTITIONING_COLUMNS
                       "WHERE mc.fingerprint = ? AND p.procs = ? AND p.measured_seconds IS NOT "
                       "NULL ORDER BY p.id");
  s.bind(1, machine).bind(2, procs);
  return read_partitionings(s);
}

void Store::record_roofline(MachineId machine_key, const Roofline& r) {
  const std::int64_t machine = id_value(machine_key);
  if (!(r.peak_gflops > 0) || !(r.bandwidth_gbs > 0) || !std::isfinite(r.peak_gflops) ||
      !std::isfinite(r.bandwidth_gbs))
    throw SpecError("roofline for " + r.dtype + ": peak and bandwidth must be positive");
  impl_->write([&] {
    impl_->machine_fingerprint(machine);  // the machine must exist
    auto s = impl_->stmt(
        "INSERT OR REPLACE INTO rooflines(machine_id, dtype, peak_gflops, bandwidth_gbs, "
        "measured_at) VALUES(?, ?, ?, ?, ?)");
    s.bind(1, machine).bind(2, r.dtype).bind(3, r.peak_gflops).bind(4, r.bandwidth_gbs);
    s.bind(5, r.measured_at.empty() ? now_iso8601() : r.measured_at).run();
    return 0;
  });
}

std::optional<Store::Roofline> Store::roofline(const std::string& machine,
                                               const std::string& dtype) {
  auto s = impl_->stmt(
      "SELECT r.dtype, r.peak_gflops, r.bandwidth_gbs, r.measured_at FROM rooflines r JOIN "
      "machines m ON m.id = r.machine_id WHERE m.fingerprint = ? AND r.dtype = ?");
  s.bind(1, machine).bind(2, dtype);
  if (!s.step()) return std::nullopt;
  return Roofline{s.column_text(0), s.column_double(1), s.column_double(2), s.column_text(3)};
}

}  // namespace einsumdb
