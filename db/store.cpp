// The store: opening, the schema and its migrations, transactions, the ids of machines,
// workloads and runs, stats and the integrity check.
#include "einsumdb/db/store.hpp"

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
#include "einsumdb/canon/metrics.hpp"
#include "einsumdb/canon/parse.hpp"
#include "einsumdb/core/error.hpp"
#include "einsumdb/db/error.hpp"
#include "einsumdb/db/store_impl.hpp"

namespace einsumdb {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

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

// Version 3: symbolic workloads. A measurement keeps the binding its times were taken at and its
// work (FLOPs) there, and where it came from when imported from another tool; a workload knows
// how many symbols it has (to find the symbolic generalisations of a concrete one). The digest
// now covers the measurement as stored (bytes and work resolved), so a measurement has one
// digest however it arrives; migrate_to_v3() recomputes every digest and drops the duplicates
// that the earlier digest let in (an export imported back into its own store).
constexpr const char* kSchemaV3 = R"sql(
ALTER TABLE measurements ADD COLUMN binding TEXT;
ALTER TABLE measurements ADD COLUMN flops REAL;
ALTER TABLE measurements ADD COLUMN origin TEXT;
ALTER TABLE workloads ADD COLUMN symbols INTEGER NOT NULL DEFAULT 0;
UPDATE workloads SET symbols = (SELECT count(DISTINCT value) FROM json_each(structure_lengths)
                                WHERE type = 'text');
UPDATE measurements SET flops = (SELECT flops FROM workloads w WHERE w.id = measurements.workload_id);
DROP INDEX measurements_by_workload;
CREATE INDEX workloads_with_symbols ON workloads(structure_hash) WHERE symbols > 0;
)sql";

void migrate_to_v3(sql::Connection& c) {
  c.exec(kSchemaV3);
  std::vector<std::pair<std::int64_t, std::array<unsigned char, 16>>> digests;
  {
    sql::Statement s(
        c,
        "SELECT m.id, w.hash, t.strategy, t.params, mc.fingerprint, m.status, "
        "m.samples, m.max_rel_err, m.bytes_moved, m.flops, m.binding FROM measurements "
        "m JOIN workloads w ON w.id = m.workload_id JOIN transforms t ON t.id = "
        "m.transform_id JOIN machines mc ON mc.id = m.machine_id");
    while (s.step()) {
      const std::string hash = s.column_text(1), strategy = s.column_text(2),
                        params = s.column_text(3), machine = s.column_text(4),
                        status = s.column_text(5), samples = s.column_text(6);
      const std::string binding = s.is_null(10) ? std::string() : s.column_text(10);
      digests.emplace_back(
          s.column_int(0),
          store_detail::measurement_digest(
              {hash, strategy, params, machine, status, samples, s.column_optional_double(7),
               s.column_optional_double(8), s.column_optional_double(9), binding}));
    }
  }
  sql::Statement update(c, "UPDATE measurements SET digest = ? WHERE id = ?");
  for (const auto& [id, digest] : digests) {
    update.reset();
    update.bind_blob(1, digest.data(), digest.size()).bind(2, id).run();
  }
  c.exec(R"sql(
DELETE FROM measurements WHERE id NOT IN (SELECT min(id) FROM measurements
  GROUP BY workload_id, machine_id, status, transform_id, digest);
CREATE UNIQUE INDEX measurements_by_workload ON measurements(
  workload_id, machine_id, status, transform_id, digest);
)sql");
}

// Version 4: facts, one row per transform of a workload on a machine with the summary of its
// verified measurements (facts.cpp keeps them), so that a retrieval reads a workload's few facts,
// stored side by side, and ranks them in SQL instead of aggregating its measurements. Ordered by
// their key alone: an index in rank order would be a second B-tree to write per measurement, and
// a workload has a handful of facts to sort. And sizes, every concrete workload as a point of an
// R*Tree (see SizePoint) for the nearest size. Built from what is stored.
constexpr const char* kSchemaV4 = R"sql(
CREATE TABLE facts(
  workload_id INTEGER NOT NULL REFERENCES workloads(id),
  machine_id INTEGER NOT NULL REFERENCES machines(id),
  unrated INTEGER NOT NULL,
  cost REAL NOT NULL,
  transform_id INTEGER NOT NULL REFERENCES transforms(id),
  median_s REAL NOT NULL,
  min_s REAL NOT NULL,
  flops REAL,
  gflops REAL,
  measurements INTEGER NOT NULL,
  repetitions INTEGER NOT NULL,
  bindings TEXT,
  origin TEXT,
  PRIMARY KEY(workload_id, machine_id, transform_id)) WITHOUT ROWID;
CREATE VIRTUAL TABLE sizes USING rtree(workload_id, structure_lo, structure_hi, x0_lo, x0_hi,
  x1_lo, x1_hi, x2_lo, x2_hi, x3_lo, x3_hi);
)sql";

// Version 5: networks measured between the hosts of an MPI job (`einsumdb bench network
// --record`), under the machine of the job's rank 0, for the planner's time model.
constexpr const char* kSchemaV5 = R"sql(
CREATE TABLE networks(
  id INTEGER PRIMARY KEY,
  machine_id INTEGER NOT NULL REFERENCES machines(id),
  hosts TEXT NOT NULL,
  latency_s REAL NOT NULL,
  bandwidth_gbs REAL NOT NULL,
  local_latency_s REAL NOT NULL,
  local_bandwidth_gbs REAL NOT NULL,
  ranks_per_host INTEGER NOT NULL,
  source TEXT NOT NULL,
  measured_at TEXT NOT NULL);
CREATE INDEX networks_by_machine ON networks(machine_id, measured_at);
)sql";

// Migrations: kMigrations[v] brings a database from version v to v + 1. Versions 6 and 7 gave a
// server store its sizes (kPostgresV7); a SQLite file has had its R*Tree of sizes since version 4,
// and nothing changes in it (Store::kFileSchemaVersion). Version 8 rebuilds a file's tree with
// entries that span their structure number and the axes their structure lacks (bind_size); the
// points of earlier versions answer alike, from a tree that searches more of itself.
using Migration = void (*)(sql::Connection&);
constexpr Migration kMigrations[] = {
    [](sql::Connection& c) { c.exec(kSchemaV1); },
    [](sql::Connection& c) { c.exec(kSchemaV2); },
    migrate_to_v3,
    [](sql::Connection& c) {
      c.exec(kSchemaV4);
      store_detail::build_facts(c);
      store_detail::build_sizes(c);
    },
    [](sql::Connection& c) { c.exec(kSchemaV5); },
    [](sql::Connection&) {},
    [](sql::Connection&) {},
    store_detail::build_sizes,
};
static_assert(std::size(kMigrations) == Store::kSchemaVersion);

// The same schema on a PostgreSQL server, created at the current version (no server store
// predates it). Types say what SQLite's affinities meant (64-bit ids and integers, doubles,
// bytes). As in the SQLite file, the references between tables are not enforced per row (a
// server checks a foreign key by a trigger per row and reference, an index lookup each: four for
// every measurement, beside the one insert that records it); every id written comes from the
// same transaction or an earlier committed one, and `db check` verifies them. einsumdb_meta holds
// what SQLite keeps in its header: the application id and schema version.
constexpr const char* kPostgresSchema = R"sql(
CREATE TABLE einsumdb_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE machines(
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  fingerprint TEXT NOT NULL UNIQUE,
  cpu_model TEXT NOT NULL,
  cores BIGINT NOT NULL,
  isa TEXT NOT NULL,
  blas TEXT NOT NULL,
  description TEXT NOT NULL,
  first_seen TEXT NOT NULL);
CREATE TABLE workloads(
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  hash TEXT NOT NULL UNIQUE,
  key TEXT NOT NULL,
  structure_hash TEXT NOT NULL,
  structure_lengths TEXT NOT NULL,
  structure_map TEXT NOT NULL,
  spec TEXT NOT NULL,
  flops DOUBLE PRECISION,
  footprint_bytes DOUBLE PRECISION,
  created_at TEXT NOT NULL,
  symbols BIGINT NOT NULL DEFAULT 0);
CREATE INDEX workloads_by_structure ON workloads(structure_hash);
CREATE INDEX workloads_with_symbols ON workloads(structure_hash) WHERE symbols > 0;
CREATE TABLE transforms(
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  strategy TEXT NOT NULL,
  params TEXT NOT NULL,
  UNIQUE(strategy, params));
CREATE TABLE runs(
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  machine_id BIGINT NOT NULL,
  label TEXT NOT NULL,
  command TEXT NOT NULL,
  tool_version TEXT NOT NULL,
  started_at TEXT NOT NULL);
CREATE TABLE measurements(
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  run_id BIGINT NOT NULL,
  workload_id BIGINT NOT NULL,
  transform_id BIGINT NOT NULL,
  machine_id BIGINT NOT NULL,
  status TEXT NOT NULL CHECK(status IN ('ok', 'invalid', 'failed', 'timeout')),
  repetitions BIGINT NOT NULL,
  median_s DOUBLE PRECISION, min_s DOUBLE PRECISION, mean_s DOUBLE PRECISION,
  stddev_s DOUBLE PRECISION, gflops DOUBLE PRECISION, bytes_moved DOUBLE PRECISION,
  max_rel_err DOUBLE PRECISION,
  samples TEXT NOT NULL,
  recorded_at TEXT NOT NULL,
  digest BYTEA NOT NULL,
  binding TEXT,
  flops DOUBLE PRECISION,
  origin TEXT);
CREATE UNIQUE INDEX measurements_by_workload ON measurements(
  workload_id, machine_id, status, transform_id, digest);
CREATE INDEX measurements_by_run ON measurements(run_id);
CREATE TABLE partitionings(
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  run_id BIGINT,
  machine_id BIGINT,
  graph_key TEXT NOT NULL,
  procs BIGINT NOT NULL,
  vectors TEXT NOT NULL,
  predicted_bytes DOUBLE PRECISION, measured_bytes DOUBLE PRECISION,
  measured_seconds DOUBLE PRECISION,
  recorded_at TEXT NOT NULL);
CREATE INDEX partitionings_by_graph ON partitionings(graph_key, procs);
CREATE TABLE rooflines(
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  machine_id BIGINT NOT NULL,
  dtype TEXT NOT NULL,
  peak_gflops DOUBLE PRECISION NOT NULL,
  bandwidth_gbs DOUBLE PRECISION NOT NULL,
  measured_at TEXT NOT NULL,
  UNIQUE(machine_id, dtype));
)sql";

// Version 5 on a server (see kSchemaV5).
constexpr const char* kPostgresV5 = R"sql(
CREATE TABLE networks(
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  machine_id BIGINT NOT NULL,
  hosts TEXT NOT NULL,
  latency_s DOUBLE PRECISION NOT NULL,
  bandwidth_gbs DOUBLE PRECISION NOT NULL,
  local_latency_s DOUBLE PRECISION NOT NULL,
  local_bandwidth_gbs DOUBLE PRECISION NOT NULL,
  ranks_per_host BIGINT NOT NULL,
  source TEXT NOT NULL,
  measured_at TEXT NOT NULL);
CREATE INDEX networks_by_machine ON networks(machine_id, measured_at);
)sql";

// Version 7 on a server: every concrete workload as a point (store_detail::size_point) in a GiST
// index of PostgreSQL's cube extension, which finds the nearest points first (ORDER BY point <->
// query), as the R*Tree does in a SQLite file; the structure number is the index's first column
// (btree_gist), so that a search stays among the structure's points. Version 6 had the structure
// number as one more axis of the cube: constant within a structure, it left every box of the
// structure without volume, and the index without a way to place them. Both extensions are
// PostgreSQL contrib modules, trusted: a database owner may create them.
constexpr const char* kPostgresV7 = R"sql(
CREATE EXTENSION IF NOT EXISTS cube;
CREATE EXTENSION IF NOT EXISTS btree_gist;
DROP TABLE IF EXISTS sizes;
CREATE TABLE sizes(workload_id BIGINT PRIMARY KEY, structure BIGINT NOT NULL, point cube NOT NULL);
CREATE INDEX sizes_by_point ON sizes USING gist (structure, point);
)sql";

// Version 4 on a server (see kSchemaV4); a version 3 server store is migrated to it.
constexpr const char* kPostgresV4 = R"sql(
CREATE TABLE facts(
  workload_id BIGINT NOT NULL,
  machine_id BIGINT NOT NULL,
  unrated BIGINT NOT NULL,
  cost DOUBLE PRECISION NOT NULL,
  transform_id BIGINT NOT NULL,
  median_s DOUBLE PRECISION NOT NULL,
  min_s DOUBLE PRECISION NOT NULL,
  flops DOUBLE PRECISION,
  gflops DOUBLE PRECISION,
  measurements BIGINT NOT NULL,
  repetitions BIGINT NOT NULL,
  bindings TEXT,
  origin TEXT,
  PRIMARY KEY(workload_id, machine_id, transform_id));
)sql";

constexpr std::array<std::string_view, 4> kStatusNames{"ok", "invalid", "failed", "timeout"};

}  // namespace

namespace store_detail {

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

std::array<unsigned char, 16> measurement_digest(const DigestInput& d) {
  auto optional = [](const std::optional<double>& v) { return v ? format_double(*v) : "-"; };
  std::string text;
  text.reserve(256 + d.samples.size());
  for (std::string_view part :
       {d.workload_hash, d.strategy, d.params, d.machine, d.status, d.samples}) {
    text += part;
    text += '\n';
  }
  text +=
      optional(d.max_rel_err) + "\n" + optional(d.bytes_moved) + "\n" + optional(d.flops) + "\n";
  text += d.binding.empty() ? std::string_view("-") : d.binding;
  XXH128_canonical_t bytes;
  XXH128_canonicalFromHash(&bytes, XXH3_128bits(text.data(), text.size()));
  std::array<unsigned char, 16> out;
  std::copy(std::begin(bytes.digest), std::end(bytes.digest), out.begin());
  return out;
}

sql::Connection& writable(Store::Impl& impl) {
  if (impl.read_only) throw DatabaseError("database '" + impl.conn.path() + "' is open read-only");
  return impl.conn;
}
}  // namespace store_detail

using namespace store_detail;

std::string_view to_string(Outcome s) {
  return enum_name(kStatusNames, s);
}
std::optional<Outcome> parse_outcome(std::string_view s) {
  return enum_from_name<Outcome>(kStatusNames, s);
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

Store::Store(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;
Store::~Store() = default;

namespace {

// kPostgresV7, or an error that says what the server lacks.
void create_server_sizes(sql::Connection& conn, const std::string& name) {
  try {
    conn.exec(kPostgresV7);
  } catch (const DatabaseError& e) {
    throw DatabaseError("PostgreSQL database '" + name +
                        "' cannot hold einsumdb's sizes (the cube extension and btree_gist, from "
                        "PostgreSQL's contrib modules, for nearest-size answers): " +
                        e.what() +
                        "; install the contrib modules on the server, or have the database owner "
                        "run CREATE EXTENSION cube; CREATE EXTENSION btree_gist");
  }
}

// A server store: identify the database before changing anything in it, then create the schema
// in one transaction under an advisory lock (another process may be creating it meanwhile).
sql::Connection open_postgres(const std::string& uri, const Store::Options& options) {
  sql::Connection conn = sql::Connection::postgres(uri, options.connect_timeout_s);
  const std::string& name = conn.path();
  conn.busy_timeout(options.busy_timeout_ms);
  conn.exec("SET client_min_messages = warning");
  conn.begin();
  try {
    conn.exec(
        ("SELECT pg_advisory_xact_lock(" + std::to_string(Store::kApplicationId) + ")").c_str());
    const bool has_meta = conn.query_int(
                              "SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = "
                              "current_schema() AND tablename = 'einsumdb_meta'") > 0;
    const std::int64_t tables = conn.query_int(
        "SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = current_schema()");
    if (!has_meta && tables > 0)
      throw DatabaseError("PostgreSQL database '" + name + "' is not an einsumdb database (" +
                          std::to_string(tables) + " tables of another application in schema " +
                          conn.query_text("SELECT current_schema()").value_or("?") +
                          ", no einsumdb_meta); refusing to touch it");
    if (has_meta) {
      const auto app =
          conn.query_text("SELECT value FROM einsumdb_meta WHERE key = 'application_id'");
      const auto version =
          conn.query_text("SELECT value FROM einsumdb_meta WHERE key = 'schema_version'");
      if (!app || *app != std::to_string(Store::kApplicationId) || !version)
        throw DatabaseError("PostgreSQL database '" + name +
                            "' is not an einsumdb database (its einsumdb_meta does not say so); "
                            "refusing to touch it");
      const long v = std::strtol(version->c_str(), nullptr, 10);
      if (v > Store::kSchemaVersion)
        throw DatabaseError("PostgreSQL database '" + name + "' has schema version " + *version +
                            ", newer than this einsumdb supports (" +
                            std::to_string(Store::kSchemaVersion) +
                            "); upgrade einsumdb to use it");
      if (v >= 3 && v < Store::kSchemaVersion && options.read_only)
        throw DatabaseError("PostgreSQL database '" + name + "' has schema version " + *version +
                            " and needs a migration; open it for writing once");
      if (v >= 3 && v < Store::kSchemaVersion) {
        if (v == 3) {
          conn.exec(kPostgresV4);
          store_detail::build_facts(conn);
        }
        if (v <= 4) conn.exec(kPostgresV5);
        if (v < 7) {  // version 8 changed only a file's sizes
          create_server_sizes(conn, name);
          store_detail::build_sizes(conn);
        }
        conn.exec(("UPDATE einsumdb_meta SET value = '" + std::to_string(Store::kSchemaVersion) +
                   "' WHERE key = 'schema_version'")
                      .c_str());
      } else if (v < Store::kSchemaVersion) {
        throw DatabaseError("PostgreSQL database '" + name + "' has schema version " + *version +
                            ", which no einsumdb wrote on a server");
      }
    } else if (options.read_only) {
      throw sql::NoStoreError("PostgreSQL database '" + name +
                              "' is empty: no einsumdb store there yet");
    } else {
      conn.exec(kPostgresSchema);
      conn.exec(kPostgresV4);
      conn.exec(kPostgresV5);
      create_server_sizes(conn, name);
      conn.exec(("INSERT INTO einsumdb_meta VALUES ('application_id', '" +
                 std::to_string(Store::kApplicationId) + "'), ('schema_version', '" +
                 std::to_string(Store::kSchemaVersion) + "')")
                    .c_str());
    }
    conn.exec("COMMIT");
  } catch (...) {
    conn.rollback();
    throw;
  }
  if (options.read_only) conn.exec("SET default_transaction_read_only = on");
  return conn;
}

}  // namespace

Store Store::open(const std::string& path, const Options& options) {
  if (sql::is_server_uri(path))
    return Store(std::make_unique<Impl>(open_postgres(path, options), options.read_only));
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
    conn.rollback();
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
    if (version < kFileSchemaVersion)
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
    for (auto v = current; v < kSchemaVersion; ++v) kMigrations[v](conn);
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
  store_detail::register_near_query(conn);
  return Store(std::make_unique<Impl>(std::move(conn), options.read_only));
}

int Store::schema_version() {
  // A kept statement, as every question the store is asked again and again: the cheapest
  // question there is, so the floor under any answer (on a server, one round trip).
  auto s = impl_->stmt(impl_->conn.dialect() == sql::Dialect::postgres
                           ? "SELECT CAST(value AS BIGINT) FROM einsumdb_meta WHERE key = "
                             "'schema_version'"
                           : "PRAGMA user_version");
  return s.step() ? static_cast<int>(s.column_int(0)) : 0;
}
const std::string& Store::path() const {
  return impl_->conn.path();
}

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
  store_detail::refresh_facts(*store_.impl_);
  tx_->commit();
  --store_.impl_->transaction_depth;
  done_ = true;
}

bool Store::free_read_transactions() const {
  return impl_->conn.dialect() == sql::Dialect::sqlite;
}

Store::ReadTransaction::ReadTransaction(Store& store) : store_(store) {
  if (store_.impl_->transaction_depth > 0 || store_.impl_->reading) return;
  store_.impl_->conn.begin_read();
  store_.impl_->reading = open_ = true;
}

Store::ReadTransaction::~ReadTransaction() {
  if (!open_) return;
  store_.impl_->reading = false;
  store_.impl_->conn.end_read();
}

MachineId Store::machine_id(const Machine& m) {
  const std::string fp = m.fingerprint();
  if (const auto it = impl_->machine_ids.find(fp); it != impl_->machine_ids.end())
    return MachineId{it->second};
  return impl_->write([&] {
    auto ins = impl_->stmt(
        "INSERT INTO machines(fingerprint, cpu_model, cores, isa, blas, description, first_seen) "
        "VALUES(?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING");
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

std::vector<Machine> Store::machines() {
  auto s = impl_->stmt(
      "SELECT cpu_model, cores, isa, blas, description FROM machines ORDER BY fingerprint");
  std::vector<Machine> out;
  while (s.step())
    out.push_back({s.column_text(0), static_cast<int>(s.column_int(1)), s.column_text(2),
                   s.column_text(3), nlohmann::ordered_json::parse(s.column_text(4))});
  return out;
}

WorkloadId Store::workload_id(const Canonical& c) {
  if (const auto id = impl_->known_workload_id(c.hash)) return WorkloadId{*id};
  EINSUMDB_ASSERT(!c.structure_hash.empty(), "workloads need the structure key");
  return impl_->write([&] {
    const auto flops = flop_count(c.form);
    const auto footprint = footprint_bytes(c.form);
    const auto symbol_names = symbols(c.form);
    auto ins = impl_->stmt(
        "INSERT INTO workloads(hash, key, structure_hash, structure_lengths, structure_map, spec, "
        "flops, footprint_bytes, created_at, symbols) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON "
        "CONFLICT DO NOTHING RETURNING id");
    ins.bind(1, c.hash).bind(2, c.key).bind(3, c.structure_hash);
    ins.bind(4, lengths_json(c.structure_lengths).dump()).bind(5, structure_map_json(c).dump());
    ins.bind(6, to_json(c.form).dump()).bind(7, flops).bind(8, footprint).bind(9, now_iso8601());
    ins.bind(10, static_cast<std::int64_t>(symbol_names.size()));
    std::int64_t id = 0;
    if (ins.step()) {
      id = ins.column_int(0);
      if (symbol_names.empty()) {
        const SizePoint p = size_point(c.structure_hash, c.structure_lengths);
        if (impl_->conn.dialect() == sql::Dialect::sqlite) {
          auto size = impl_->stmt(kInsertSize);
          bind_size(size, id, p);
          size.run();
        } else {
          auto size = impl_->stmt(kInsertServerSize);
          bind_server_size(size, id, p);
          size.run();
        }
      }
    } else {  // stored already (by another process, perhaps): check its key
      auto sel = impl_->stmt("SELECT id, key FROM workloads WHERE hash = ?");
      sel.bind(1, c.hash);
      if (!sel.step())
        throw DatabaseError("workload " + c.hash + " vanished from '" + path() + "'");
      if (sel.column_text(1) != c.key)
        throw DatabaseError("hash collision in '" + path() + "': workload " + c.hash +
                            " is stored with key '" + sel.column_text(1) + "', not '" + c.key +
                            "'");
      id = sel.column_int(0);
    }
    std::optional<Impl::SymbolicForm> symbolic;
    if (!symbol_names.empty()) symbolic = Impl::SymbolicForm{symbol_names, c.form};
    impl_->remember_workload(id, c.hash, flops, footprint, std::move(symbolic));
    return WorkloadId{id};
  });
}

std::optional<WorkloadId> Store::find_workload(const std::string& hash) {
  if (const auto id = impl_->known_workload_id(hash)) return WorkloadId{*id};
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
        "VALUES(?, ?, ?, ?, ?) RETURNING id");
    impl_->machine_fingerprint(machine);  // the machine must exist
    s.bind(1, machine).bind(2, run.label).bind(3, run.command);
    s.bind(4, run.tool_version.empty() ? std::string(kVersion) : run.tool_version);
    s.bind(5, run.started_at.empty() ? now_iso8601() : run.started_at);
    if (!s.step()) throw DatabaseError("database '" + path() + "': no id for the new run");
    const auto id = s.column_int(0);
    impl_->known_runs.insert(id);
    return RunId{id};
  });
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
      {"bytes", c.dialect() == sql::Dialect::postgres
                    ? c.query_int("SELECT pg_database_size(current_database())")
                    : c.query_int("PRAGMA page_count") * c.query_int("PRAGMA page_size")},
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
  const bool server = c.dialect() == sql::Dialect::postgres;
  if (!server) {
    {
      sql::Statement s(c, "PRAGMA integrity_check");
      while (s.step())
        if (s.column_text(0) != "ok") problems.push_back("integrity: " + s.column_text(0));
    }
    sql::Statement s(c, "PRAGMA foreign_key_check");
    while (s.step())
      problems.push_back("foreign key: table " + s.column_text(0) + " row " +
                         std::to_string(s.column_int(1)));
  }
  if (server) {
    // The server checks its own pages; the references between tables are checked here.
    static constexpr const char* kReferences[][3] = {{"runs", "machine_id", "machines"},
                                                     {"measurements", "run_id", "runs"},
                                                     {"measurements", "workload_id", "workloads"},
                                                     {"measurements", "transform_id", "transforms"},
                                                     {"measurements", "machine_id", "machines"},
                                                     {"partitionings", "run_id", "runs"},
                                                     {"partitionings", "machine_id", "machines"},
                                                     {"rooflines", "machine_id", "machines"},
                                                     {"networks", "machine_id", "machines"}};
    for (const auto& [table, column, parent] : kReferences) {
      const std::string q = std::string("SELECT count(*) FROM ") + table + " c WHERE c." + column +
                            " IS NOT NULL AND NOT EXISTS (SELECT 1 FROM " + parent +
                            " p WHERE p.id = c." + column + ")";
      if (const auto n = c.query_int(q.c_str()))
        problems.push_back("foreign key: " + std::to_string(n) + " row(s) of table " + table +
                           " name a missing " + parent + " row (" + column + ")");
    }
  }
  for (auto& p : store_detail::check_facts(c)) problems.push_back(std::move(p));
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
          {"journal_mode",
           server ? std::string("server") : c.query_text("PRAGMA journal_mode").value_or("?")},
          {"workloads_checked", workloads},
          {"ok", problems.empty()},
          {"problems", problems}};
}

}  // namespace einsumdb
