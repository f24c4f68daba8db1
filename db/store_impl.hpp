// Internal to the store (not installed): the connection, its cached statements and ids, and
// the helpers its files share. store.cpp opens, migrates, checks and writes ids;
// measurements.cpp records and queries measurements; store_jsonl.cpp exports and imports;
// partitionings.cpp keeps partitionings and rooflines.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <memory_resource>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "einsumdb/canon/parse.hpp"
#include "einsumdb/db/error.hpp"
#include "einsumdb/db/sql.hpp"
#include "einsumdb/db/store.hpp"
#include "einsumdb/version.hpp"

namespace einsumdb {
namespace store_detail {

// A fact's group: (workload id, machine id, transform id).
using FactKey = std::array<std::int64_t, 3>;
// A row of the facts table (see facts.cpp): the summary of a group's verified measurements.
struct FactRow {
  bool rated = false;  // every measurement knows its work
  double cost = 0;     // median seconds per FLOP when rated, else median seconds
  double median_s = 0, min_s = 0;
  std::optional<double> flops, gflops;
  std::int64_t measurements = 0, repetitions = 0;
  std::string bindings;  // JSON array of the distinct bindings, in text order; empty: none
  std::string origin;    // JSON of the origin of the cheapest measurement; empty: measured here
};
// Accumulates a group's verified measurements (in digest order) into its FactRow.
class FactSummariser {
 public:
  void add(double median_s, double min_s, std::int64_t repetitions, std::optional<double> flops,
           const std::string* binding, const std::string* origin);
  // Columns col ... col + 5: median_s, min_s, repetitions, flops, binding, origin.
  template <class S>
  void add(const S& s, int col) {
    const bool has_binding = !s.is_null(col + 4), has_origin = !s.is_null(col + 5);
    const std::string binding = has_binding ? s.column_text(col + 4) : std::string();
    const std::string origin = has_origin ? s.column_text(col + 5) : std::string();
    add(s.column_double(col), s.column_double(col + 1), s.column_int(col + 2),
        s.column_optional_double(col + 3), has_binding ? &binding : nullptr,
        has_origin ? &origin : nullptr);
  }
  FactRow finish() const;

 private:
  std::vector<double> medians_, costs_, flops_;
  double min_s_ = 0, best_cost_ = 0;
  std::int64_t repetitions_ = 0;
  std::set<std::string> bindings_;
  std::string origin_;
};
// Recomputes the facts of impl.pending_facts from their measurements (and clears it).
void refresh_facts(Store::Impl& impl);
// Recomputes the whole facts table (migrations).
void build_facts(sql::Connection& conn);
// What in the facts table differs from its measurements (check()).
std::vector<std::string> check_facts(sql::Connection& conn);
// A fact's numbers as a Fact (transform, workload and machine left to the caller).
Fact fact_from_row(const FactRow& row);
// A concrete workload as a point of the sizes R*Tree (SQLite; on a server, a GiST index of cubes),
// where nearest() looks for the measured size nearest to a query's: its structure as a number
// (the first 24 bits of the structure hash, exact in the tree's 32-bit coordinates; two
// structures may share it) and the natural logarithms of its structure lengths (0 for axes it
// does not have; the axes beyond the tree's combined into its last coordinate, see
// size_point()).
inline constexpr std::size_t kSizeAxes = 4;
struct SizePoint {
  double structure = 0;
  std::array<double, kSizeAxes> x{};
  std::size_t axes = 0;  // coordinates of x that hold axes: min(the structure's axes, kSizeAxes)
};
SizePoint size_point(const std::string& structure_hash, const std::vector<Length>& lengths);
// "INSERT INTO sizes ..." for one workload (11 parameters: id, then each axis' bounds).
// The R*Tree puts an entry where it grows the boxes it might join least in volume. Within one
// structure the structure number and the axes the structure lacks are constant, so as points
// every box would have no volume and every choice would tie, leaving the tree ordered by
// insertion rather than by size. So an entry spans one structure number, [s, s + 1] (the query
// matches its lower bound exactly; numbers below 2^24 are exact in the tree's 32-bit floats), and
// one unit on each axis its structure lacks, [0, 1] (where every query of the structure is 0),
// which leaves the volumes to the axes that vary.
extern const char* const kInsertSize;
template <class S>
void bind_size(S& s, std::int64_t workload_id, const SizePoint& p) {
  s.bind(1, workload_id).bind(2, p.structure).bind(3, p.structure + 1);
  for (std::size_t k = 0; k < kSizeAxes; ++k)
    s.bind(static_cast<int>(4 + 2 * k), p.x[k])
        .bind(static_cast<int>(5 + 2 * k), k < p.axes ? p.x[k] : p.x[k] + 1);
}
// The same point in a server store's sizes (kPostgresV7): the structure number in a column of its
// own, and the axes the structure has as a cube of that many dimensions, as its text.
std::string server_point(const SizePoint& p);
// "INSERT INTO sizes ..." on a server (3 parameters: id, structure number, server_point()).
extern const char* const kInsertServerSize;
template <class S>
void bind_server_size(S& s, std::int64_t workload_id, const SizePoint& p) {
  s.bind(1, workload_id).bind(2, static_cast<std::int64_t>(p.structure)).bind(3, server_point(p));
}
// Puts every concrete workload into the sizes tree (migrations).
void build_sizes(sql::Connection& conn);
// Registers the sizes tree's nearest-first query on a SQLite connection:
//   SELECT ... FROM sizes WHERE workload_id MATCH einsumdb_near(structure, x0, x1, x2, x3)
// yields the workloads of that structure number nearest first (see facts.cpp).
void register_near_query(sql::Connection& conn);
// A server's groups are refreshed in chunks of 1, 2, 4, ... 2^(kFactChunks - 1): a run of 10,000
// measurements in about 20 chunks of three statements each (the largest upsert binds 512 * 13
// parameters, within PostgreSQL's 65,535).
inline constexpr std::size_t kFactChunks = 10;

}  // namespace store_detail

struct Store::Impl {
  sql::Connection conn;
  bool read_only;
  int transaction_depth = 0;
  bool reading = false;  // a ReadTransaction is open (a write in it fails to begin)
  // Ids cached for speed; cleared whenever a transaction rolls back.
  std::map<std::string, std::int64_t> machine_ids;
  std::map<std::int64_t, std::string> machine_fingerprints;
  // A symbolic workload's canonical symbols (N0, N1, ...) and form, which recording binds.
  struct SymbolicForm {
    std::vector<std::string> symbols;
    BatchedEinsum form;
  };
  // What recording asks of a measurement's workload.
  struct WorkloadInfo {
    std::int64_t id;
    std::string hash;
    std::optional<double> flops, footprint;  // nullopt for a symbolic workload
    const SymbolicForm* symbolic;            // null for a concrete workload
  };
  // The workloads this connection has met, so that recording asks no statement for them. A
  // store of a million facts meets some 100,000 workloads, met batch by batch among each
  // batch's short-lived allocations. So an entry is of fixed size (a hash is 32 hex digits,
  // kept inline) and entries come from a pool of their own: as a node and a string apiece on
  // the common heap, interleaved with the batches' freed memory, they left that heap a
  // patchwork in which every later allocation of the process searched for room.
  using HashKey = std::array<char, 32>;
  struct HashKeyHash {
    std::size_t operator()(const HashKey& k) const noexcept {
      return std::hash<std::string_view>{}(std::string_view(k.data(), k.size()));
    }
  };
  struct KnownWorkload {
    HashKey hash;
    std::optional<double> flops, footprint;
  };
  std::pmr::unsynchronized_pool_resource workload_pool;
  std::pmr::unordered_map<HashKey, std::int64_t, HashKeyHash> workload_ids{&workload_pool};
  std::pmr::unordered_map<std::int64_t, KnownWorkload> known_workloads{&workload_pool};
  std::map<std::int64_t, SymbolicForm> symbolic_forms;  // few
  // Symbolic workloads met by symbolic_workloads(), by id: structure lengths and names parsed, and
  // form and key once one was read.
  std::map<std::int64_t, Store::SymbolicWorkload> symbolic_by_id;
  std::map<std::pair<std::string, std::string>, std::int64_t> transform_ids;
  std::map<std::int64_t, Transform> transforms_by_id;
  std::set<std::int64_t> known_runs;
  std::string batch_time;  // set by record_run: one time for the measurements it commits together
  // Keyed by the address of the SQL literal: every caller passes a string literal.
  std::unordered_map<const char*, std::unique_ptr<sql::Statement>> statements;
  // A server's multi-row measurement inserts (record_run): a full group, and the last one.
  std::unique_ptr<sql::Statement> multi_insert, partial_insert;
  // Groups whose facts the open transaction changed, refreshed before it commits, and the
  // statements that refresh them (one per chunk size).
  std::set<store_detail::FactKey> pending_facts;
  std::array<std::unique_ptr<sql::Statement>, store_detail::kFactChunks> fact_locks, fact_reads,
      fact_writes;

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
    workload_ids.clear();
    known_workloads.clear();
    symbolic_forms.clear();
    symbolic_by_id.clear();
    transform_ids.clear();
    transforms_by_id.clear();
    known_runs.clear();
    pending_facts.clear();
  }

  // The key of a workload hash, if it has the form of one.
  static std::optional<HashKey> hash_key(std::string_view hash) {
    HashKey k;
    if (hash.size() != k.size()) return std::nullopt;
    std::copy(hash.begin(), hash.end(), k.begin());
    return k;
  }

  std::optional<std::int64_t> known_workload_id(std::string_view hash) const {
    const auto k = hash_key(hash);
    if (!k) return std::nullopt;
    const auto it = workload_ids.find(*k);
    if (it == workload_ids.end()) return std::nullopt;
    return it->second;
  }

  // Remembers a workload met (`symbolic` for one of symbolic lengths).
  void remember_workload(std::int64_t id, std::string_view hash, std::optional<double> flops,
                         std::optional<double> footprint, std::optional<SymbolicForm> symbolic) {
    if (symbolic) symbolic_forms[id] = std::move(*symbolic);
    const auto k = hash_key(hash);
    if (!k) return;  // not of a hash's form: asked of the store each time
    workload_ids[*k] = id;
    known_workloads[id] = {*k, flops, footprint};
  }

  WorkloadInfo workload(std::int64_t id) {
    if (const auto it = known_workloads.find(id); it != known_workloads.end()) {
      const auto form = symbolic_forms.find(id);
      return {id, std::string(it->second.hash.data(), it->second.hash.size()), it->second.flops,
              it->second.footprint, form == symbolic_forms.end() ? nullptr : &form->second};
    }
    auto s = stmt("SELECT hash, flops, footprint_bytes, symbols, spec FROM workloads WHERE id = ?");
    s.bind(1, id);
    if (!s.step()) throw DatabaseError("no workload with id " + std::to_string(id));
    const std::string hash = s.column_text(0);
    const auto flops = s.column_optional_double(1), footprint = s.column_optional_double(2);
    std::optional<SymbolicForm> symbolic;
    if (s.column_int(3) > 0) {
      BatchedEinsum form = parse_spec_text(s.column_text(4));
      symbolic = SymbolicForm{symbols(form), std::move(form)};
    }
    const bool concrete = !symbolic;
    remember_workload(id, hash, flops, footprint, std::move(symbolic));
    return {id, hash, flops, footprint, concrete ? nullptr : &symbolic_forms.at(id)};
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
    return transforms_by_id[id] =
               Transform{s.column_text(0), nlohmann::json::parse(s.column_text(1))};
  }

  std::int64_t transform_id(const Transform& t, std::string params_text) {
    auto key = std::make_pair(t.name, std::move(params_text));
    const auto it = transform_ids.find(key);
    if (it != transform_ids.end()) return it->second;
    auto ins = stmt(
        "INSERT INTO transforms(strategy, params) VALUES(?, ?) ON CONFLICT DO NOTHING RETURNING "
        "id");
    ins.bind(1, key.first).bind(2, key.second);
    if (ins.step()) return transform_ids[std::move(key)] = ins.column_int(0);
    auto sel = stmt("SELECT id FROM transforms WHERE strategy = ? AND params = ?");
    sel.bind(1, key.first).bind(2, key.second);
    if (!sel.step()) throw DatabaseError("transform " + key.first + " vanished");
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
      store_detail::refresh_facts(*this);
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

namespace store_detail {

// The shortest text that reads back as exactly v.
std::string format_double(double v);
nlohmann::ordered_json lengths_json(const std::vector<Length>& lengths);
// Canonical names -> structure names of one workload.
nlohmann::ordered_json structure_map_json(const Canonical& c);
NameMap name_map_from_json(const nlohmann::json& j);
// SELECT … FROM measurements joined with their workload, transform, machine and run, and one
// such row as an export line (show() and export_jsonl()).
extern const char* const kExportColumns;
inline constexpr int kExportColumnCount = 30;  // the row id follows them in kExportPageSql
// The export columns and the row id of the measurements after ?4 in id order, at most ?5,
// filtered by EINSUMDB_FILTER_TERMS.
extern const char* const kExportPageSql;
nlohmann::ordered_json export_row(sql::Statement& s);
// The identity of a measurement (its digest column): XXH3-128 over every value that makes it this
// measurement, each as stored (bytes and work resolved to their defaults), so that a measurement
// has one digest whichever way it arrives: recorded, tuned, imported or migrated.
struct DigestInput {
  std::string_view workload_hash, strategy, params, machine, status, samples;
  std::optional<double> max_rel_err, bytes_moved, flops;
  std::string_view binding;  // JSON text; empty: none
};
std::array<unsigned char, 16> measurement_digest(const DigestInput& d);
// LIMIT with this is no limit (PostgreSQL refuses SQLite's -1).
inline constexpr std::int64_t kNoLimit = std::numeric_limits<std::int64_t>::max();
// The WHERE terms of a ListFilter over measurements m, machines mc and transforms t (a string
// literal, to be joined to a statement's text); bind_filter() binds its values.
#define EINSUMDB_FILTER_TERMS                                                                 \
  "(?1 = '' OR mc.fingerprint LIKE ?1 || '%') AND (?2 = '' OR t.strategy = ?2) AND (?3 = '' " \
  "OR m.recorded_at >= ?3)"
// Binds ?1 machine prefix, ?2 strategy, ?3 since, and ?4 the limit (the largest integer: none)
// when `limit`.
template <class S>
void bind_filter(S& s, const ListFilter& f, bool limit = true) {
  s.bind(1, f.machine).bind(2, f.strategy).bind(3, f.since);
  if (limit) s.bind(4, f.limit ? static_cast<std::int64_t>(f.limit) : kNoLimit);
}
// The connection, refusing a read-only store.
sql::Connection& writable(Store::Impl& impl);

}  // namespace store_detail
}  // namespace einsumdb
