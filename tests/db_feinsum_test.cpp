// Feinsum's real fact database (tests/data/feinsum, MIT licensed): every row imported as a
// verified measurement, one key per Feinsum workload (no merge, no split), idempotent, and for
// every workload the answer on a respelled spec is the fact Feinsum's own retrieve picks (the
// highest GFLOP/s per key and device).
#include <sqlite3.h>

#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "einsumdb/core/error.hpp"
#include "einsumdb/db/error.hpp"
#include "einsumdb/db/feinsum.hpp"
#include "einsumdb/db/retrieve.hpp"
#include "einsumdb/tests/support/einsum_oracle.hpp"
#include "einsumdb/tests/support/temp_dir.hpp"

namespace einsumdb {
namespace {

using json = nlohmann::json;

const std::string kFile = std::string(EINSUMDB_TEST_DATA) + "/feinsum/transform_archive_v6.sqlite";

struct Row {
  std::int64_t id;
  std::string subscripts, lengths, args, dtypes, device, transform, params, driver, ops;
  double runtime;
  double gflops() const {
    double giga = 0;
    const json parsed = json::parse(ops);
    for (const auto& [dtype, v] : parsed.items()) giga += v.get<double>();
    return giga / runtime;
  }
  std::string workload() const { return subscripts + "\n" + lengths + "\n" + args + "\n" + dtypes; }
};

// The rows, read with SQLite directly (not through the importer).
std::vector<Row> feinsum_rows() {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(kFile.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  sqlite3_prepare_v2(db,
                     "SELECT ID, subscripts, index_to_length, args, arg_to_dtype, device_name, "
                     "transform_id, transform_params, compiler_version, giga_op_info, "
                     "runtime_in_sec FROM FEINSUM_TIMING_FACTS ORDER BY ID",
                     -1, &s, nullptr);
  std::vector<Row> rows;
  auto text = [&](int c) {
    return std::string(reinterpret_cast<const char*>(sqlite3_column_text(s, c)));
  };
  while (sqlite3_step(s) == SQLITE_ROW)
    rows.push_back({sqlite3_column_int64(s, 0), text(1), text(2), text(3), text(4), text(5),
                    text(6), text(7), text(8), text(9), sqlite3_column_double(s, 10)});
  sqlite3_finalize(s);
  sqlite3_close(db);
  return rows;
}

TEST(Feinsum, EveryFactImportedOnceUnderOneKeyPerWorkloadAndBestIsFeinsumsRetrieve) {
  testing::TempDir dir("feinsum");
  Store store = Store::open(dir.path("db.sqlite"));
  const FeinsumImport first = import_feinsum(store, kFile);
  EXPECT_EQ(first.rows, 9036u);
  EXPECT_EQ(first.inserted, 9036u);
  EXPECT_EQ(first.duplicates, 0u);
  EXPECT_EQ(first.workloads, 144u);
  EXPECT_EQ(store.stats()["workloads"], 144);
  EXPECT_EQ(store.stats()["measurements_by_status"]["ok"], 9036);

  // Idempotent: nothing added, not even a run.
  const auto runs = store.stats()["runs"].get<int>();
  const FeinsumImport again = import_feinsum(store, kFile);
  EXPECT_EQ(again.inserted, 0u);
  EXPECT_EQ(again.duplicates, 9036u);
  EXPECT_EQ(again.runs, 0u);
  EXPECT_EQ(store.stats()["runs"], runs);
  EXPECT_EQ(store.stats()["measurements"], 9036);

  // Feinsum's retrieve: per workload and device, the row of highest GFLOP/s.
  const auto rows = feinsum_rows();
  ASSERT_EQ(rows.size(), 9036u);
  std::map<std::string, const Row*> best;   // workload -> its best row
  std::map<std::string, std::string> hash;  // workload -> its key's hash
  std::set<std::string> devices;
  for (const auto& r : rows) {
    devices.insert(r.device);
    const Row*& b = best[r.workload()];
    if (!b || r.gflops() > b->gflops()) b = &r;
  }
  ASSERT_EQ(devices.size(), 1u);  // one device: NVIDIA_TITAN_V, under nine drivers
  const auto machines = store.machines_matching("model=" + *devices.begin());
  EXPECT_EQ(machines.size(), 9u);

  std::mt19937_64 rng(2026);
  std::set<std::string> keys;
  for (const auto& [workload, row] : best) {
    const BatchedEinsum e = feinsum_einsum(row->subscripts, json::parse(row->lengths),
                                           json::parse(row->args), json::parse(row->dtypes));
    const std::string h = canonicalize(e).hash;
    EXPECT_TRUE(keys.insert(h).second) << "two Feinsum workloads share the key " << h;
    // A respelling: indices, arrays, symbols renamed, operands and rows permuted.
    const Canonical query = canonicalize(testing::random_respelling(e, rng));
    ASSERT_EQ(query.hash, h);
    const auto answers = top_k_for(store, query, machines, 1, /*nearest=*/false);
    ASSERT_EQ(answers.size(), 1u) << row->subscripts;
    const Answer& a = answers.front();
    EXPECT_EQ(a.match, Match::exact);
    EXPECT_EQ(a.fact.transform.name, row->transform) << row->subscripts << " " << row->lengths;
    EXPECT_EQ(a.params, json::parse(row->params)) << row->subscripts << " " << row->lengths;
    ASSERT_TRUE(a.fact.gflops);
    EXPECT_NEAR(*a.fact.gflops, row->gflops(), 1e-9 * row->gflops());
    EXPECT_EQ(a.fact.origin["source"], "feinsum");
    EXPECT_EQ(a.fact.origin["row"], row->id);
    EXPECT_EQ(a.fact.machine, feinsum_machine(row->device, row->driver).fingerprint());
    // Positions in Feinsum's axis order are kept verbatim, and said to be.
    const bool positional = json::parse(row->params).contains("log2_t_redns");
    EXPECT_EQ(a.fact.origin.contains("positional_params"), positional) << row->params;
    if (positional) {
      EXPECT_EQ(a.fact.origin["subscripts"], row->subscripts);
      EXPECT_NE(a.fact.origin["note"].get<std::string>().find("not renamed"), std::string::npos);
    }
  }
  EXPECT_EQ(keys.size(), 144u);  // no merge (above) and no split (the store holds 144)
}

TEST(Feinsum, RowsBecomeEinsumsMachinesAndTimes) {
  const BatchedEinsum e = feinsum_einsum(
      "lk,ilj,lkj -> ki", json::parse(R"({"i": 4, "j": 3, "l": 4})"),
      json::parse(R"([["a4", "a5", "a0"], ["a4", "a5", "a1"]])"),
      json::parse(R"({"a0": "float64", "a1": "float64", "a4": "float64", "a5": "float64"})"));
  EXPECT_EQ(e.einsum_string(), "lk,ilj,lkj->ki");
  EXPECT_EQ(e.arrays.at("a4").shape, (std::vector<Length>{Length::of(4), Length::named("K")}));
  EXPECT_EQ(e.arrays.at("a0").shape,
            (std::vector<Length>{Length::of(4), Length::named("K"), Length::of(3)}));
  // Two absent indices are two symbols, not one.
  const BatchedEinsum two =
      feinsum_einsum("ij,jk -> ik", json::parse(R"({"j": 3})"), json::parse(R"([["A", "B"]])"),
                     json::parse(R"({"A": "float32", "B": "float32"})"));
  EXPECT_EQ(symbols(two), (std::vector<std::string>{"I", "K"}));
  EXPECT_THROW(feinsum_einsum("ij -> i", json::parse(R"({"i": 0})"), json::parse(R"([["A"]])"),
                              json::parse(R"({"A": "float64"})")),
               SpecError);
  EXPECT_THROW(feinsum_einsum("ij -> i", json::parse("{}"), json::parse(R"([["A"]])"),
                              json::parse(R"({"A": "float128"})")),
               SpecError);
  // Central time: CST (UTC-6) in winter, CDT (UTC-5) from the second Sunday of March.
  EXPECT_EQ(feinsum_time_utc("2023_02_06_115445"), "2023-02-06T17:54:45.000000Z");
  EXPECT_EQ(feinsum_time_utc("2025_12_07_213255"), "2025-12-08T03:32:55.000000Z");
  EXPECT_EQ(feinsum_time_utc("2024_03_10_015959"), "2024-03-10T07:59:59.000000Z");
  EXPECT_EQ(feinsum_time_utc("2024_03_10_030000"), "2024-03-10T08:00:00.000000Z");
  EXPECT_EQ(feinsum_time_utc("2024_07_01_120000"), "2024-07-01T17:00:00.000000Z");
  EXPECT_EQ(feinsum_time_utc("2024_11_03_020000"), "2024-11-03T08:00:00.000000Z");
  EXPECT_THROW(feinsum_time_utc("2024-07-01 12:00"), SpecError);
  EXPECT_THROW(feinsum_time_utc("2024_02_30_120000"), SpecError);
  const Machine m = feinsum_machine("NVIDIA_TITAN_V", "NVIDIA Corporation-550.163.01");
  EXPECT_EQ(m.cpu_model, "NVIDIA_TITAN_V");
  EXPECT_EQ(m.cores, 1);
  EXPECT_NE(m.fingerprint(),
            feinsum_machine("NVIDIA_TITAN_V", "NVIDIA Corporation-4.0").fingerprint());
}

TEST(Feinsum, AFileThatIsNotFeinsumsIsRefusedAndNothingIsWritten) {
  testing::TempDir dir("feinsum");
  Store store = Store::open(dir.path("db.sqlite"));
  EXPECT_THROW(import_feinsum(store, dir.path("db.sqlite")), DatabaseError);
  EXPECT_THROW(import_feinsum(store, dir.path("absent.sqlite")), DatabaseError);
  // A bad row: named by its ID, nothing imported.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(dir.path("bad.sqlite").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "CREATE TABLE FEINSUM_TIMING_FACTS(ID INTEGER PRIMARY KEY, subscripts, "
                         "index_to_length, args, arg_to_dtype, device_name, transform_id, "
                         "transform_params, runtime_in_sec, compiler_version, giga_op_info, "
                         "timestamp);"
                         "INSERT INTO FEINSUM_TIMING_FACTS VALUES(1, 'ij -> i', '{\"i\": 4}', "
                         "'[[\"A\"]]', '{\"A\": \"float64\"}', 'GPU', 't.py', '{}', 0.001, 'd-1', "
                         "'{\"float64\": 0.5}', '2024_01_01_000000');"
                         "INSERT INTO FEINSUM_TIMING_FACTS VALUES(2, 'ij -> i', '{\"i\": 4}', "
                         "'[[\"A\"]]', '{\"A\": \"float64\"}', 'GPU', 't.py', '{}', 0.001, 'd-1', "
                         "'{\"float64\": 0}', '2024_01_01_000000');",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  try {
    import_feinsum(store, dir.path("bad.sqlite"));
    FAIL() << "a row without a positive op count was imported";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("row ID 2"), std::string::npos) << e.what();
  }
  EXPECT_EQ(store.stats()["measurements"], 0);
  EXPECT_EQ(store.stats()["runs"], 0);
}

}  // namespace
}  // namespace einsumdb
