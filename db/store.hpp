// The performance database: measured transforms and partitionings of batched einsums, keyed by
// their canonical form, per machine, with statistics and provenance. One interface, two
// engines: a SQLite file (the embedded default) or a PostgreSQL server (a team's shared store,
// written from many nodes); the rest of einsumdb does not know which it talks to.
//
// A Store owns one connection and is move-only and not thread-safe (open one per thread or
// process; any number of processes may share the file or the server). A SQLite file is in WAL
// mode with a busy timeout, so concurrent writers wait for each other instead of failing; on a
// server, writers wait for each other's row locks and a transaction the server aborts for a
// deadlock is run again. Every write happens in a short transaction, and record_run() commits
// one tuning run's measurements atomically: a process killed mid-run, or a server lost
// mid-run, leaves the run wholly absent. The schema carries an application id and a version
// (SQLite's header; the server's einsumdb_meta table) with migrations; a database that is not
// an einsumdb store, or whose schema is newer than this program, is refused without being
// touched.
//
// Everything in the store is in canonical names: a workload is a canonical form, a transform's
// parameters are written in that form's names. Translating from and to a user's names goes
// through the σ maps (see retrieve.hpp).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "einsumdb/canon/canonicalize.hpp"
#include "einsumdb/db/error.hpp"
#include "einsumdb/db/machine.hpp"
#include "einsumdb/db/transform.hpp"

namespace einsumdb {
namespace sql {
class Transaction;
}

// Row ids of the store, of distinct types so that a run, a workload and a machine cannot be
// passed in each other's place. id_value() gives the number (as printed and stored).
enum class MachineId : std::int64_t {};
enum class WorkloadId : std::int64_t {};
enum class RunId : std::int64_t {};
template <typename Id>
constexpr std::int64_t id_value(Id id) {
  return static_cast<std::int64_t>(id);
}

// How a measured candidate turned out: verified (ok), a wrong result (invalid), an exception
// (failed), or far slower than the best (timeout). Stored as its name in the "status" column.
enum class Outcome : std::uint8_t { ok, invalid, failed, timeout };
std::string_view to_string(Outcome s);
std::optional<Outcome> parse_outcome(std::string_view s);

// One measured candidate as a tuner reports it, parameters in canonical names.
//
// A measurement of a symbolic workload (an axis of length "Ne") was timed at some length of each
// symbol: `binding` says which (in the workload's symbol names; canonical N0, N1, ... in the
// store), and `flops` is the work at that binding. Either one is required for a verified
// measurement of a symbolic workload, so that its rate is known: facts of one key timed at
// different bindings are ranked by rate, never by seconds.
struct Measurement {
  Transform transform;
  Outcome status = Outcome::ok;
  std::vector<double> seconds;        // the timed repetitions (empty for failed/timeout)
  std::optional<double> max_rel_err;  // against the reference; required for status ok
  std::optional<double> bytes_moved;  // default: the workload's footprint (at the binding)
  Binding binding;                    // empty for a concrete workload, or when not known
  std::optional<double> flops;        // work of one run; default: the workload's, at the binding
  std::string recorded_at;            // ISO 8601 UTC; empty: now
  // Where a measurement taken elsewhere came from, as a JSON object ({"source": "feinsum",
  // "row": 17, ...}); null for one measured by einsumdb. Provenance: not part of its identity.
  nlohmann::json origin;
};

// Statistics of a measurement's repetitions.
struct Summary {
  int repetitions = 0;
  double median_s = 0, min_s = 0, mean_s = 0, stddev_s = 0;
};
Summary summarize(const std::vector<double>& seconds);

// Throws SpecError when `m` is not sound: status ok without times or without a finite
// max_rel_err (only verified results may be ok), a negative or non-finite time, no transform
// name. Store::record() applies it; a reader of measurement files may apply it before writing.
void check_measurement(const Measurement& m);

// A measurement in the JSON of a record line ({"transform": {"name", "params"}, "status",
// "seconds", "max_rel_err", "bytes_moved", "binding", "flops"}), parameters and symbols as
// written. Throws SpecError naming the key that is wrong, and what check_measurement() refuses.
Measurement measurement_from_json(const nlohmann::json& j);

// The keys of a line of a measurement file (`einsumdb record`, Store.record in Python): those of
// measurement_from_json() plus "spec", and optionally "run" (a label) and "machine". Throws
// SpecError naming a key that is none of them.
void check_record_line_keys(const nlohmann::json& line);

struct RunInfo {
  std::string label;         // free text, stored verbatim
  std::string command;       // the command line that produced the run
  std::string tool_version;  // default: this einsumdb's version
  std::string started_at;    // ISO 8601 UTC; empty: now
};

// A transform known for a workload on a machine: the median over its verified measurements.
//
// Facts are ranked by rate: the median over the measurements of their seconds per unit of work
// (seconds / FLOPs at the measurement's binding). For a concrete workload every measurement has
// the same work, so this is the order of the median seconds; for a symbolic one it compares
// measurements taken at different lengths of a symbol fairly.
struct Fact {
  Transform transform;  // in the canonical names of `workload_hash`
  std::string workload_hash;
  std::string workload_key;
  std::string machine;  // fingerprint
  double median_s = 0;  // median of the measurements' medians (at their own bindings)
  double min_s = 0;
  std::optional<double> gflops;   // median rate
  std::optional<double> flops;    // work of one run (the median, when bindings differ)
  int measurements = 0;           // verified measurements of this transform
  int repetitions = 0;            // timed repetitions behind them
  std::vector<Binding> bindings;  // the distinct bindings timed (canonical symbols); none: concrete
  nlohmann::json origin;          // the origin of its fastest measurement (null: measured here)

  bool operator==(const Fact&) const = default;
};

// "N0=100000,N1=8" (empty for an empty binding).
std::string to_string(const Binding& b);

// A row of list(): one workload with what is known about it.
struct WorkloadSummary {
  std::string hash, key;
  int measurements = 0, ok = 0;
  std::optional<double> best_gflops;
  std::string best_strategy;
  std::string last_recorded_at;
};

// {"hash", "key", "measurements", "ok", "best_gflops", "best_strategy", "last_recorded"}
nlohmann::ordered_json to_json(const WorkloadSummary& w);

struct ListFilter {
  std::string machine;    // fingerprint prefix; empty: all
  std::string strategy;   // only measurements of this strategy; empty: all
  std::string since;      // recorded at or after this ISO 8601 time; empty: all
  std::size_t limit = 0;  // 0: no limit
};

class Store {
 public:
  struct Options {
    bool read_only = false;        // inspection only; any write fails with DatabaseError
    int busy_timeout_ms = 60000;   // how long a writer waits for another before failing
    const char* vfs = nullptr;     // SQLite VFS name (tests)
    std::int64_t cache_mib = 64;   // SQLite page cache of this connection, MiB
    std::int64_t mmap_mib = 1024;  // memory-mapped reads, MiB of address space (0: off)
    int connect_timeout_s = 10;    // a server store: how long to wait for the server
  };

  // Opens (creating if needed and not read-only) and checks or migrates the schema. `path` is a
  // SQLite file, or a PostgreSQL server's URI (postgresql://user@host/dbname, with libpq's
  // parameters). Throws DatabaseError: not an einsumdb database, a newer schema, WAL
  // unavailable, cannot open or connect.
  static Store open(const std::string& path, const Options& options);
  static Store open(const std::string& path) { return open(path, Options{}); }
  Store(Store&&) noexcept;
  Store& operator=(Store&&) noexcept;
  ~Store();

  static constexpr int kSchemaVersion = 8;
  // The oldest version of a SQLite file that is read as it is (later versions changed a server's
  // schema, or rebuilt a file's sizes tree, whose earlier entries answer alike); an older one
  // needs a writing open first.
  static constexpr int kFileSchemaVersion = 5;
  static constexpr std::int64_t kApplicationId = 0x45534442;  // "ESDB", PRAGMA application_id
  int schema_version();
  const std::string& path() const;

  // --- writing (each call is its own transaction unless inside transaction())
  MachineId machine_id(const Machine& m);      // inserted if new
  WorkloadId workload_id(const Canonical& c);  // inserted if new
  RunId begin_run(const RunInfo& run, MachineId machine);
  // Inserts unless an identical measurement (same workload, transform, machine, status,
  // samples, error, bytes, binding and work, whichever way it arrives: recorded, tuned or
  // imported) is already stored; returns whether it inserted. Throws SpecError for a
  // measurement that is not sound (status ok without max_rel_err, negative times, a binding that
  // does not bind the workload's symbols, a verified measurement of a symbolic workload with
  // neither binding nor flops, ...).
  bool record(RunId run, WorkloadId workload, MachineId machine, const Measurement& m);

  struct RunResult {
    std::int64_t run = 0;  // 0: every measurement was stored already, and no run was created
    std::size_t inserted = 0, duplicates = 0;
  };
  // One run, all of its measurements, one transaction. A run that would hold no new
  // measurement is not created.
  RunResult record_run(const RunInfo& run, const Machine& machine,
                       const std::vector<std::pair<const Canonical*, Measurement>>& measurements);

  // BEGIN IMMEDIATE ... COMMIT around several calls; rolled back unless committed.
  class Transaction {
   public:
    explicit Transaction(Store& store);
    Transaction(const Transaction&) = delete;
    Transaction& operator=(const Transaction&) = delete;
    ~Transaction();
    void commit();

   private:
    Store& store_;
    std::unique_ptr<sql::Transaction> tx_;  // rolls back unless committed
    bool done_ = false;
  };
  // A read transaction (see reading()); inside a write transaction it does nothing.
  class ReadTransaction {
   public:
    explicit ReadTransaction(Store& store);
    ReadTransaction(const ReadTransaction&) = delete;
    ReadTransaction& operator=(const ReadTransaction&) = delete;
    ~ReadTransaction();

   private:
    Store& store_;
    bool open_ = false;
  };

  // --- reading
  std::optional<MachineId> find_machine(const std::string& fingerprint);
  // Every machine of the store, by fingerprint.
  std::vector<Machine> machines();
  std::optional<WorkloadId> find_workload(const std::string& hash);
  // The fingerprints of the machines a selector names: a fingerprint or a prefix of it (the 12
  // digits the tables print), or "model=NAME" for every machine of that CPU model or device,
  // whatever its cores, ISA or BLAS/driver. Throws SpecError when nothing matches, or when a
  // prefix matches more than one machine (listing them).
  std::vector<std::string> machines_matching(const std::string& selector);
  // The full hash of the workload a hash or hash prefix names (at least 4 digits). Throws
  // SpecError when none or several match.
  std::string resolve_workload(const std::string& hash_or_prefix);
  // The k fastest transforms of a workload on a machine, verified measurements only, ranked by
  // rate (see Fact). With several machines, a transform measured on two is two facts.
  std::vector<Fact> top_k(const std::string& workload_hash, const std::string& machine,
                          std::size_t k);
  // `workload_key`, when the caller knows it (the key of workload_hash), saves reading it.
  std::vector<Fact> top_k(const std::string& workload_hash,
                          const std::vector<std::string>& machines, std::size_t k,
                          const std::string& workload_key = {});
  // top_k() of many workloads (hashes, each with its key) at once: a statement per thousand of
  // them (on a server, one round trip), in the order given; no facts, an empty list.
  std::vector<std::vector<Fact>> top_k_many(const std::vector<std::string>& hashes,
                                            const std::vector<std::string>& keys,
                                            const std::vector<std::string>& machines,
                                            std::size_t k);
  std::optional<Fact> best(const std::string& workload_hash, const std::string& machine);
  // top_k() computed from the measurements themselves instead of the facts the store keeps
  // for them: the same answer, slower (check() and the tests compare the two).
  std::vector<Fact> top_k_measured(const std::string& workload_hash,
                                   const std::vector<std::string>& machines, std::size_t k);
  // Runs `f` in one read transaction: every query in it sees one snapshot of the store, and
  // SQLite takes its read lock once instead of once per statement.
  template <class F>
  auto reading(F&& f) {
    ReadTransaction tx(*this);
    return f();
  }
  // Whether a read transaction around a single statement costs nothing: on SQLite the statement
  // takes the same read lock either way; a server's BEGIN and ROLLBACK are work of their own.
  bool free_read_transactions() const;
  // The symbolic workloads of a structure (an axis of symbolic length) with a verified
  // measurement on one of the machines: candidates for generalising a concrete workload. Given
  // that workload's structure lengths, only those whose numbers are all among them (binding a
  // symbol cannot change a number).
  struct SymbolicWorkload {
    std::string hash, key;
    BatchedEinsum form;  // canonical
    // The length of each structure-canonical index (symbols in the form's names), and the form's
    // names -> structure names, as recorded.
    std::vector<Length> structure_lengths;
    NameMap to_structure;
  };
  std::vector<SymbolicWorkload> symbolic_workloads(const std::string& structure_hash,
                                                   const std::vector<std::string>& machines,
                                                   const std::vector<Length>& lengths = {});
  // For a workload never measured: the measured workload of the same structure whose axis
  // lengths are nearest in log-ratio distance, and its best fact. `translation` receives the
  // map from that workload's canonical names to its structure names.
  struct Nearest {
    Fact fact;
    double distance = 0;  // sqrt(Σ log²(length ratio)) over structure-corresponding indices
    NameMap to_structure;
  };
  std::optional<Nearest> nearest(const Canonical& query, const std::string& machine);
  std::optional<Nearest> nearest(const Canonical& query, const std::vector<std::string>& machines);
  // nearest() by reading every measured workload of the structure instead of the sizes:
  // the same answer, slower (the tests compare the two).
  std::optional<Nearest> nearest_scanned(const Canonical& query,
                                         const std::vector<std::string>& machines);

  std::vector<WorkloadSummary> list(const ListFilter& filter);
  // Every measurement of a workload (all machines, all statuses), as export rows: per machine,
  // verified first, highest rate first.
  std::vector<nlohmann::ordered_json> show(const std::string& workload_hash);
  nlohmann::ordered_json stats();

  // JSON lines: one measurement per line with its workload, transform, machine and run, in the
  // order they were stored (read in pages, so a server store streams).
  std::size_t export_jsonl(std::ostream& out, const ListFilter& filter = {});
  // One page of export_jsonl(): at most `limit` measurements stored after row `after` (0: from
  // the first). Returns the row of the last one written (`after` when none); *written counts.
  std::int64_t export_page(std::ostream& out, const ListFilter& filter, std::int64_t after,
                           std::size_t limit, std::size_t* written);
  struct ImportResult {
    std::size_t inserted = 0, duplicates = 0, runs = 0;
  };
  // Merges lines written by export_jsonl, in one transaction. A measurement already present
  // (same content) is skipped, a different one for the same key, transform and machine is
  // kept beside it; nothing is overwritten; a run is created only for new measurements. Throws
  // SpecError naming the line on bad input, in which case nothing is imported.
  ImportResult import_jsonl(std::istream& in, const std::string& source_name);

  // integrity_check, foreign keys, schema, every fact against its measurements, and every
  // workload's key against its hash and spec.
  nlohmann::ordered_json check();

  // --- partitionings (written by the planner and the distributed executor)
  // The partition vector of one step: how many pieces along each index, in the canonical index
  // names of the step's einsum ("a" -> 2, "b" -> 1, ...).
  using PartitionVector = std::map<std::string, std::int64_t>;
  struct Partitioning {
    std::string graph_key;  // the step's canonical hash
    int procs = 0;
    PartitionVector vector;
    std::optional<double> predicted_bytes, measured_bytes, measured_seconds;
    std::string machine;               // fingerprint
    std::string step, einsum, method;  // the step's name and einsum in its graph; the planner
    nlohmann::json measured;           // what a run measured per rank (null: a plan only)
    std::string recorded_at;           // ISO 8601 UTC; empty when recording: now
  };
  void record_partitioning(RunId run, const Partitioning& p);
  // Every partitioning, plans and measured ones, in the order recorded.
  std::vector<Partitioning> all_partitionings();
  // Records a partitioning copied from another store (no run; its machine must be known here)
  // unless an identical one (same step, P, vector, figures, machine and time) is stored already;
  // returns whether it inserted.
  bool import_partitioning(const Partitioning& p);
  std::vector<Partitioning> partitionings(const std::string& graph_key, int procs);
  // Every partitioning with a measured time on a machine (fingerprint) at P ranks.
  std::vector<Partitioning> measured_partitionings(const std::string& machine, int procs);
  // The most recent `limit` (0: all) partitionings with a measured time, on any machine,
  // recorded at or after `since` (empty: any time).
  std::vector<Partitioning> measured_partitionings(const std::string& since, std::size_t limit);

  // --- aggregates for reports
  // Per workload and machine, its verified measurement of highest rate, with the work and bytes
  // it was taken at: a point of the machine's roofline. Filtered like list() (machine prefix,
  // strategy, since); `limit` caps the rows (0: all).
  struct BestPoint {
    std::string workload_hash, workload_key, machine, strategy, params;
    double gflops = 0;
    std::optional<double> flops, bytes;
    std::string binding;  // JSON text; empty: none
  };
  std::vector<BestPoint> best_points(const ListFilter& filter);
  // The same per workload, machine and strategy: every strategy's best point (how far each
  // strategy is from the roof, not only where it wins).
  std::vector<BestPoint> strategy_points(const ListFilter& filter);
  // Facts that got slower: per workload, machine and transform, its latest verified measurement
  // against the one before it, where the median grew by more than the two spreads (median −
  // fastest repetition of each) and 1 %. Slowest-grown first; filtered like list(), `limit`
  // caps the rows (0: all).
  struct RateChange {
    struct Side {
      std::string run_label, recorded_at;
      double median_s = 0, min_s = 0;
    };
    std::string workload_hash, workload_key, machine, strategy, params;
    Side before, after;
  };
  std::vector<RateChange> slowdowns(const ListFilter& filter);
  // The hashes of the workloads with the most measurements under the filter, most first.
  std::vector<std::string> most_measured(const ListFilter& filter, std::size_t k);

  // --- the machine's roofline: min(peak, intensity × bandwidth), per dtype
  struct Roofline {
    std::string dtype;         // "f32", "f64"
    double peak_gflops = 0;    // per core, from a measured GEMM on one thread
    double bandwidth_gbs = 0;  // from a measured stream (one thread)
    std::string measured_at;   // ISO 8601 UTC; empty: now
    // The attainable rate of `flops` over `bytes` moved on `threads` cores: min(threads ×
    // peak, flops / bytes × bandwidth); the compute peak when bytes are unknown (≤ 0).
    double attainable_gflops(double flops, double bytes, int threads = 1) const {
      const double compute = peak_gflops * (threads > 1 ? threads : 1);
      if (bytes <= 0) return compute;
      const double memory = flops / bytes * bandwidth_gbs;
      return memory < compute ? memory : compute;
    }
  };
  // Replaces the machine's roofline for the dtype. Throws SpecError for non-positive figures.
  void record_roofline(MachineId machine, const Roofline& r);
  std::optional<Roofline> roofline(const std::string& machine, const std::string& dtype);

  // --- networks measured between the hosts of an MPI job (`einsumdb bench network --record`),
  // recorded under the machine of the job's rank 0
  struct NetworkRecord {
    std::vector<std::string> hosts;                       // the host of each rank
    double latency_s = 0, bandwidth_gbs = 0;              // between hosts
    double local_latency_s = 0, local_bandwidth_gbs = 0;  // between ranks of one host
    std::int64_t ranks_per_host = 1;
    std::string source;       // how it was measured
    std::string measured_at;  // ISO 8601 UTC; empty: now
    bool operator==(const NetworkRecord&) const = default;
  };
  // Adds a measurement. Throws SpecError for figures that are not positive and finite.
  void record_network(MachineId machine, const NetworkRecord& n);
  // The network last measured from `machine` (a fingerprint), if any.
  std::optional<NetworkRecord> latest_network(const std::string& machine);

  struct Impl;

 private:
  explicit Store(std::unique_ptr<Impl> impl);
  std::optional<Nearest> nearest(const Canonical& query, const std::vector<std::string>& machines,
                                 bool use_sizes);
  std::vector<BestPoint> best_points_grouped(const ListFilter& filter, bool per_strategy);
  std::unique_ptr<Impl> impl_;
};

// Whether `s` may be a hash or a prefix of one as the tables print them: 4 to 32 lowercase hex
// digits (a machine fingerprint or a workload hash).
bool is_hash_prefix(std::string_view s);

// The current time as ISO 8601 UTC with microseconds ("2026-11-22T05:15:16.123456Z").
std::string now_iso8601();

}  // namespace einsumdb
