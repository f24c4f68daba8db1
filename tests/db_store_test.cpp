// The performance database: round trips, σ translation, verified-only answers, nearest-size
// retrieval, names stored verbatim, and refusing files that are not ours, without touching them.
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>

#include "einsumdb/canon/parse.hpp"
#include "einsumdb/core/error.hpp"
#include "einsumdb/db/error.hpp"
#include "einsumdb/db/location.hpp"
#include "einsumdb/db/record_lines.hpp"
#include "einsumdb/db/retrieve.hpp"
#include "einsumdb/db/sql.hpp"
#include "einsumdb/db/store.hpp"
#include "einsumdb/db/sync.hpp"
#include "einsumdb/tests/support/temp_dir.hpp"

namespace einsumdb {
namespace {

using json = nlohmann::json;

std::string file_bytes(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void expect_error(const std::function<void()>& f, const std::string& fragment) {
  try {
    f();
    FAIL() << "no error; expected one mentioning: " << fragment;
  } catch (const DatabaseError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

class StoreTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return dir_.path(name); }
  static Machine machine(const std::string& cpu = "Test CPU") {
    Machine m;
    m.cpu_model = cpu;
    m.cores = 2;
    m.isa = "avx2 fma";
    m.blas = "OpenBLAS 0.3.21";
    m.description = {{"note", "test machine"}};
    return m;
  }

  static Measurement ok(const char* name, json params, std::vector<double> seconds) {
    Measurement m;
    m.transform = {name, std::move(params)};
    m.seconds = std::move(seconds);
    m.max_rel_err = 1e-15;
    return m;
  }

  testing::TempDir dir_{"store"};
};

Canonical canon(const char* json_spec) {
  return canonicalize(parse_spec_text(json_spec));
}

const char* kMatmul =
    R"({"einsum":"ik,kj->ij","batch":[["A","B"]],"shapes":{"A":[64,32],"B":[32,48]}})";
// The paper's respelling of the same product (Example 5.2): σ = {p->i, q->j, r->k}, {Y->A, X->B}.
const char* kMatmulRespelled =
    R"({"einsum":"rq,pr->pq","batch":[["X","Y"]],"shapes":{"X":[32,48],"Y":[64,32]}})";

TEST_F(StoreTest, RecordBestExportImportRoundTrip) {
  const Canonical c = canon(kMatmul);
  const Machine m = machine();
  {
    Store store = Store::open(path("a.sqlite"));
    const json params = {{"m", {{"index", "i"}}}, {"lhs", {{"array", "A"}}}};
    store.record_run({"run one", "test", "", ""}, m,
                     {{&c, to_canonical(c, ok("ttgt", params, {2e-5, 2.2e-5, 2.1e-5}))},
                      {&c, to_canonical(c, ok("loop_nest", {{"order", "ijk"}}, {5e-5, 6e-5}))},
                      {&c, to_canonical(c, ok("ttgt", params, {1.9e-5, 2.0e-5}))}});
    std::ostringstream out;
    EXPECT_EQ(store.export_jsonl(out), 3u);
    std::ofstream(path("export.jsonl")) << out.str();
  }
  Store a = Store::open(path("a.sqlite"));
  Store b = Store::open(path("b.sqlite"));
  std::ifstream in(path("export.jsonl"));
  const auto imported = b.import_jsonl(in, "export.jsonl");
  EXPECT_EQ(imported.inserted, 3u);
  EXPECT_EQ(imported.runs, 1u);

  const auto fa = a.top_k(c.hash, m.fingerprint(), 10), fb = b.top_k(c.hash, m.fingerprint(), 10);
  ASSERT_EQ(fa.size(), 2u);
  ASSERT_EQ(fb.size(), fa.size());
  for (std::size_t k = 0; k < fa.size(); ++k) {
    EXPECT_EQ(fa[k].transform, fb[k].transform);
    EXPECT_DOUBLE_EQ(fa[k].median_s, fb[k].median_s);
    EXPECT_EQ(fa[k].measurements, fb[k].measurements);
  }
  EXPECT_EQ(fa[0].transform.name, "ttgt");  // median over both ttgt measurements
  EXPECT_EQ(fa[0].measurements, 2);
  EXPECT_EQ(a.stats()["measurements"], b.stats()["measurements"]);

  // Importing again adds nothing; a second export is identical line for line but for run ids.
  std::ifstream again(path("export.jsonl"));
  const auto twice = b.import_jsonl(again, "export.jsonl");
  EXPECT_EQ(twice.inserted, 0u);
  EXPECT_EQ(twice.duplicates, 3u);
  EXPECT_EQ(b.check()["ok"], true);
}

TEST_F(StoreTest, ParametersComeBackInTheCallersNames) {
  Store store = Store::open(path("s.sqlite"));
  const Canonical c = canon(kMatmul);
  const json params = {{"m", {{"index", "i"}}},
                       {"n", {{"index", "j"}}},
                       {"k", {{"index", "k"}}},
                       {"layout", {{"lhs", {{"array", "A"}}}, {"rhs", {{"array", "B"}}}}},
                       {"block", json::array({{{"index", "k"}}, 32})}};
  store.record_run({}, machine(), {{&c, to_canonical(c, ok("ttgt", params, {1e-5}))}});

  const Canonical q = canon(kMatmulRespelled);
  ASSERT_EQ(q.hash, c.hash);
  const auto a = best_for(store, q, machine().fingerprint());
  ASSERT_TRUE(a);
  EXPECT_FALSE(a->approximate);
  const json expected = {{"m", {{"index", "p"}}},
                         {"n", {{"index", "q"}}},
                         {"k", {{"index", "r"}}},
                         {"layout", {{"lhs", {{"array", "Y"}}}, {"rhs", {{"array", "X"}}}}},
                         {"block", json::array({{{"index", "r"}}, 32})}};
  EXPECT_EQ(a->params, expected);
  // The stored parameters are in canonical names, not in either spelling's.
  EXPECT_NE(a->fact.transform.params, params);
  EXPECT_NE(a->fact.transform.params, expected);
  // The transposed product is another computation: another key, no answer.
  const Canonical t =
      canon(R"({"einsum":"qp,rq->pr","batch":[["X","Y"]],"shapes":{"X":[32,48],"Y":[64,32]}})");
  EXPECT_NE(t.hash, c.hash);
  EXPECT_FALSE(best_for(store, t, machine().fingerprint()));
}

TEST_F(StoreTest, NamesAreStoredVerbatim) {
  Store store = Store::open(path("n.sqlite"));
  const char* spec =
      R"({"einsum":"ij,j->i","batch":[["A\"; DROP TABLE measurements;--","naïve Ω₁"]],
          "shapes":{"A\"; DROP TABLE measurements;--":[8,4],"naïve Ω₁":[4]}})";
  const Canonical c = canon(spec);
  const json params = {{"matrix", {{"array", "A\"; DROP TABLE measurements;--"}}},
                       {"vector", {{"array", "naïve Ω₁"}}},
                       {"note", "it's; \"quoted\" — ünïcödé"}};
  const std::string label = "run'); DELETE FROM runs; -- ✓";
  store.record_run({label, "cmd with 'quotes'", "", ""}, machine(),
                   {{&c, to_canonical(c, ok("gemv", params, {1e-6}))}});
  const auto a = best_for(store, c, machine().fingerprint());
  ASSERT_TRUE(a);
  EXPECT_EQ(a->params, params);
  const auto rows = store.show(c.hash);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["run"]["label"], label);
  EXPECT_EQ(rows[0]["transform"]["params"]["note"], "it's; \"quoted\" — ünïcödé");
  EXPECT_EQ(store.stats()["measurements"], 1);
}

TEST_F(StoreTest, OnlyVerifiedMeasurementsAreEverBest) {
  Store store = Store::open(path("v.sqlite"));
  const Canonical c = canon(kMatmul);
  Measurement wrong = ok("fast_but_wrong", json::object(), {1e-9});
  wrong.status = Outcome::invalid;
  wrong.max_rel_err = 0.7;
  Measurement failed;
  failed.transform = {"crashed", json::object()};
  failed.status = Outcome::failed;
  store.record_run({}, machine(),
                   {{&c, wrong}, {&c, failed}, {&c, ok("slow_but_right", json::object(), {1e-3})}});
  const auto best = store.best(c.hash, machine().fingerprint());
  ASSERT_TRUE(best);
  EXPECT_EQ(best->transform.name, "slow_but_right");
  EXPECT_EQ(store.top_k(c.hash, machine().fingerprint(), 10).size(), 1u);
  // A result that was never checked cannot be recorded as ok.
  Measurement unverified = ok("unchecked", json::object(), {1e-6});
  unverified.max_rel_err.reset();
  EXPECT_THROW(store.record_run({}, machine(), {{&c, unverified}}), SpecError);
  Measurement negative = ok("negative", json::object(), {-1.0});
  EXPECT_THROW(store.record_run({}, machine(), {{&c, negative}}), SpecError);
  EXPECT_EQ(store.stats()["measurements"], 3);  // the failed attempts left nothing behind
}

TEST_F(StoreTest, RecordingIsIdempotentAndOtherMachinesAreApart) {
  Store store = Store::open(path("i.sqlite"));
  const Canonical c = canon(kMatmul);
  const Measurement m = ok("ttgt", json::object(), {1e-5, 2e-5});
  EXPECT_EQ(store.record_run({}, machine(), {{&c, m}}).inserted, 1u);
  const auto again = store.record_run({}, machine(), {{&c, m}});
  EXPECT_EQ(again.inserted, 0u);
  EXPECT_EQ(again.duplicates, 1u);
  // The same numbers on another machine are another fact, invisible from this one.
  store.record_run({}, machine("Other CPU"), {{&c, ok("other", json::object(), {1e-7})}});
  EXPECT_EQ(store.best(c.hash, machine().fingerprint())->transform.name, "ttgt");
  EXPECT_EQ(store.best(c.hash, machine("Other CPU").fingerprint())->transform.name, "other");
  EXPECT_FALSE(store.best(c.hash, machine("Unknown CPU").fingerprint()));
}

// Lines of a measurement file go into one run per (label, machine), in the order each pair first
// comes; a bad line is refused whole, naming what is wrong, and leaves nothing behind.
TEST_F(StoreTest, RecordLinesGoIntoARunPerLabelAndMachine) {
  const auto line = [](const char* name, const std::string& extra) {
    return std::string(R"({"spec":)") + kMatmul + R"(,"transform":{"name":")" + name +
           R"(","params":{}},"seconds":[1e-5],"status":"ok","max_rel_err":1e-15)" + extra + "}";
  };
  const std::string other = ",\"machine\":" + to_json(machine("Other CPU")).dump();
  RecordLines lines("default", machine());
  lines.add(line("a", ""));
  lines.add(line("b", R"(,"run":"second")"));
  lines.add(line("c", other));
  lines.add(line("d", ""));
  lines.add(line("e", R"(,"run":"second")"));
  std::string deep = "1";
  for (int i = 0; i < 70; ++i) deep = "[" + deep + "]";
  for (const auto& [bad, why] : std::vector<std::pair<std::string, std::string>>{
           {line("f", R"(,"speed":1)"), "unknown key 'speed'"},
           {line("f", R"(,"x":)" + deep), "nested deeper than 64"},
           {R"({"spec":)", "parse error"},
           {line("f", R"(,"run":7)"), "type must be string"}}) {
    try {
      lines.add(bad);
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const SpecError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(lines.size(), 5u);
  Store store = Store::open(path("lines.sqlite"));
  const auto runs = lines.record(store, "test");
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].label, "default");
  EXPECT_EQ(runs[0].machine, machine().fingerprint());
  EXPECT_EQ(runs[0].inserted, 2u);  // a and d
  EXPECT_EQ(runs[1].label, "second");
  EXPECT_EQ(runs[1].inserted, 2u);  // b and e
  EXPECT_EQ(runs[2].label, "default");
  EXPECT_EQ(runs[2].machine, machine("Other CPU").fingerprint());
  EXPECT_EQ(runs[2].inserted, 1u);
  EXPECT_NE(runs[0].id, runs[1].id);
  // Recorded again: nothing new, and no run is made.
  for (const auto& r : lines.record(store, "test")) {
    EXPECT_EQ(r.id, 0);
    EXPECT_EQ(r.inserted, 0u);
  }
}

TEST_F(StoreTest, NearestSizeIsApproximateAndTranslated) {
  Store store = Store::open(path("near.sqlite"));
  auto spec = [](int m, int k, int n) {
    return R"({"einsum":"ik,kj->ij","batch":[["A","B"]],"shapes":{"A":[)" + std::to_string(m) +
           "," + std::to_string(k) + R"(],"B":[)" + std::to_string(k) + "," + std::to_string(n) +
           "]}}";
  };
  const Canonical small = canon(spec(16, 16, 16).c_str()),
                  large = canon(spec(1024, 1024, 1024).c_str());
  store.record_run(
      {}, machine(),
      {{&small, to_canonical(small, ok("small_kernel", {{"inner", {{"index", "k"}}}}, {1e-6}))},
       {&large, to_canonical(large, ok("large_kernel", {{"inner", {{"index", "k"}}}}, {1e-1}))}});
  // 900x1000x1100 is nearer to 1024^3 than to 16^3, in another spelling.
  const Canonical q = canon(
      R"({"einsum":"ab,bc->ac","batch":[["P","Q"]],"shapes":{"P":[900,1000],"Q":[1000,1100]}})");
  const auto a = best_for(store, q, machine().fingerprint());
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->approximate);
  EXPECT_EQ(a->fact.transform.name, "large_kernel");
  EXPECT_GT(a->distance, 0.0);
  EXPECT_EQ(a->params, (json{{"inner", {{"index", "b"}}}}));
  EXPECT_FALSE(best_for(store, q, machine().fingerprint(), /*nearest=*/false));
  EXPECT_TRUE(to_json(*a)["approximate"].get<bool>());
}

TEST_F(StoreTest, ForeignCorruptedNewerAndReadOnlyFilesAreRefusedUntouched) {
  // Another program's SQLite database.
  {
    sqlite3* db;
    ASSERT_EQ(sqlite3_open(path("foreign.sqlite").c_str(), &db), SQLITE_OK);
    sqlite3_exec(db, "CREATE TABLE t(x); INSERT INTO t VALUES (1);", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  const std::string foreign = file_bytes(path("foreign.sqlite"));
  expect_error([&] { Store::open(path("foreign.sqlite")); }, "is not an einsumdb database");
  EXPECT_EQ(file_bytes(path("foreign.sqlite")), foreign);

  // Not a database at all.
  std::ofstream(path("garbage.sqlite")) << std::string(8192, '\x5a');
  const std::string garbage = file_bytes(path("garbage.sqlite"));
  expect_error([&] { Store::open(path("garbage.sqlite")); }, "is not an einsumdb database");
  EXPECT_EQ(file_bytes(path("garbage.sqlite")), garbage);

  // A schema from a newer einsumdb.
  { Store::open(path("newer.sqlite")); }
  {
    sqlite3* db;
    ASSERT_EQ(sqlite3_open(path("newer.sqlite").c_str(), &db), SQLITE_OK);
    sqlite3_exec(db, "PRAGMA user_version=99", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  expect_error([&] { Store::open(path("newer.sqlite")); }, "newer than this einsumdb supports");

  // Read-only: reads work, writes fail clearly.
  {
    Store w = Store::open(path("ro.sqlite"));
    const Canonical c = canon(kMatmul);
    w.record_run({}, machine(), {{&c, ok("ttgt", json::object(), {1e-5})}});
  }
  Store::Options ro;
  ro.read_only = true;
  Store r = Store::open(path("ro.sqlite"), ro);
  EXPECT_TRUE(r.best(canon(kMatmul).hash, machine().fingerprint()));
  expect_error([&] { r.machine_id(machine("New CPU")); }, "read-only");
  expect_error([&] { Store::open(path("missing.sqlite"), ro); }, "cannot open database");
  // A file of schema 5 (version 6 changed a server's schema only) reads as it is, a file of 4
  // needs its migration first; the first writing open brings either to the current version.
  static_assert(Store::kFileSchemaVersion == 5);
  for (const int version : {5, 4}) {
    const std::string file = path("v" + std::to_string(version) + ".sqlite");
    std::filesystem::copy_file(path("ro.sqlite"), file);
    sqlite3* db;
    ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
    sqlite3_exec(db, ("PRAGMA user_version=" + std::to_string(version)).c_str(), nullptr, nullptr,
                 nullptr);
    sqlite3_close(db);
    if (version == 5) {
      Store old = Store::open(file, ro);
      EXPECT_TRUE(old.best(canon(kMatmul).hash, machine().fingerprint()));
      EXPECT_EQ(old.schema_version(), 5);
    } else {
      expect_error([&] { Store::open(file, ro); }, "needs a migration");
    }
  }
  EXPECT_EQ(Store::open(path("v5.sqlite")).schema_version(), Store::kSchemaVersion);

  // A filesystem (here: a VFS) where write-ahead logging cannot work.
  Store::Options dotfile;
  dotfile.vfs = "unix-dotfile";
  expect_error([&] { Store::open(path("nowal.sqlite"), dotfile); }, "write-ahead logging");
}

TEST_F(StoreTest, ImportRefusesAKeyThatDoesNotMatchItsSpecAndImportsNothing) {
  const Canonical c = canon(kMatmul);
  std::ostringstream out;
  {
    Store store = Store::open(path("a.sqlite"));
    store.record_run(
        {}, machine(),
        {{&c, ok("ttgt", json::object(), {1e-5})}, {&c, ok("other", json::object(), {2e-5})}});
    store.export_jsonl(out);
  }
  // The second line's spec no longer canonicalizes to the hash it claims.
  std::istringstream lines(out.str());
  std::string first, second;
  std::getline(lines, first);
  std::getline(lines, second);
  json tampered = json::parse(second);
  // A valid spec of another size: the multiplication's inner length 32 becomes 49.
  const std::string spec = tampered["workload"]["spec"].dump();
  ASSERT_NE(spec.find("32"), std::string::npos);
  tampered["workload"]["spec"] = json::parse(std::regex_replace(spec, std::regex("32"), "49"));
  ASSERT_NO_THROW(parse_spec_json(tampered["workload"]["spec"]));
  std::istringstream in(first + "\n" + tampered.dump() + "\n");
  Store b = Store::open(path("b.sqlite"));
  try {
    b.import_jsonl(in, "tampered.jsonl");
    FAIL() << "imported a line whose key does not match its spec";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("tampered.jsonl:2: workload"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("does not match its spec"), std::string::npos) << e.what();
  }
  EXPECT_EQ(b.stats()["measurements"], 0);  // one transaction: the good first line is gone too
}

TEST_F(StoreTest, CheckFindsATamperedKey) {
  {
    Store store = Store::open(path("t.sqlite"));
    const Canonical c = canon(kMatmul);
    store.record_run({}, machine(), {{&c, ok("ttgt", json::object(), {1e-5})}});
    EXPECT_EQ(store.check()["ok"], true);
  }
  sqlite3* db;
  ASSERT_EQ(sqlite3_open(path("t.sqlite").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE workloads SET key = 'ab->a;mul,sum;A0;A0:f64[2,2]'", nullptr,
                         nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  Store store = Store::open(path("t.sqlite"));
  const auto check = store.check();
  EXPECT_EQ(check["ok"], false);
  EXPECT_NE(check["problems"].dump().find("key does not hash to it"), std::string::npos)
      << check.dump();
  EXPECT_NE(check["problems"].dump().find("spec does not canonicalize to its key"),
            std::string::npos);
}

TEST_F(StoreTest, RecordNeedsKnownRunWorkloadAndMachine) {
  Store store = Store::open(path("r.sqlite"));
  const Canonical c = canon(kMatmul);
  const auto mid = store.machine_id(machine());
  const auto wid = store.workload_id(c);
  const auto run = store.begin_run({}, mid);
  const Measurement m = ok("ttgt", json::object(), {1e-5});
  expect_error([&] { store.record(RunId{id_value(run) + 100}, wid, mid, m); }, "no run with id");
  expect_error([&] { store.record(run, WorkloadId{id_value(wid) + 100}, mid, m); },
               "no workload with id");
  expect_error([&] { store.record(run, wid, MachineId{id_value(mid) + 100}, m); },
               "no machine with id");
  EXPECT_TRUE(store.record(run, wid, mid, m));
  EXPECT_EQ(store.check()["ok"], true);
}

TEST_F(StoreTest, PartitioningsRoundTrip) {
  Store store = Store::open(path("p.sqlite"));
  const auto mid = store.machine_id(machine());
  const auto run = store.begin_run({"plan", "einsumdb plan", "", ""}, mid);
  Store::Partitioning in;
  in.graph_key = "graph-key";
  in.procs = 4;
  in.vector = {{"a", 2}, {"b", 2}, {"c", 1}};
  in.predicted_bytes = 320.0;
  in.machine = machine().fingerprint();
  in.step = "T1";
  store.record_partitioning(run, in);
  const auto p = store.partitionings("graph-key", 4);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].vector, in.vector);
  EXPECT_EQ(p[0].step, "T1");
  EXPECT_TRUE(p[0].measured.is_null());
  in.vector["a"] = 0;
  EXPECT_THROW(store.record_partitioning(run, in), SpecError);
  EXPECT_EQ(p[0].predicted_bytes, 320.0);
  EXPECT_FALSE(p[0].measured_seconds);
  EXPECT_EQ(p[0].machine, machine().fingerprint());
}

// A network measured from a machine comes back as the latest of its measurements, and moves with
// the machine when stores are synced; a version 4 store gains the table when opened for writing.
TEST_F(StoreTest, NetworksRoundTripTheLatestIsUsedAndSyncMovesIt) {
  Store store = Store::open(path("n.sqlite"));
  const auto mid = store.machine_id(machine());
  EXPECT_FALSE(store.latest_network(machine().fingerprint()));
  Store::NetworkRecord n;
  n.hosts = {"h0", "h0", "h1", "h1"};
  n.latency_s = 2e-5, n.bandwidth_gbs = 0.12, n.local_latency_s = 1e-6;
  n.local_bandwidth_gbs = 5, n.ranks_per_host = 2, n.source = "measured";
  n.measured_at = "2026-01-01T00:00:00Z";
  store.record_network(mid, n);
  Store::NetworkRecord later = n;
  later.bandwidth_gbs = 1.2, later.measured_at = "2026-02-01T00:00:00Z";
  store.record_network(mid, later);
  EXPECT_EQ(store.latest_network(machine().fingerprint()), later);
  EXPECT_FALSE(store.latest_network(machine("Other CPU").fingerprint()));
  Store::NetworkRecord bad = n;
  bad.bandwidth_gbs = 0;
  EXPECT_THROW(store.record_network(mid, bad), SpecError);
  bad = n;
  bad.ranks_per_host = 0;
  EXPECT_THROW(store.record_network(mid, bad), SpecError);
  EXPECT_TRUE(store.check()["ok"].get<bool>()) << store.check().dump();

  Store copy = Store::open(path("copy.sqlite"));
  const SyncResult r = sync_stores(store, copy);
  EXPECT_EQ(r.networks, 1u);
  EXPECT_EQ(copy.latest_network(machine().fingerprint()), later);
  EXPECT_EQ(sync_stores(store, copy).networks, 0u);  // already there
}

}  // namespace
// A transaction the server aborted for a deadlock is run again, a bounded number of times; any
// other failure is not.
TEST(Sql, RetryingRunsAnAbortedTransactionAgain) {
  int calls = 0;
  EXPECT_EQ(sql::retrying([&] {
              if (++calls < 3) throw sql::RetryableError("deadlock detected");
              return 7;
            }),
            7);
  EXPECT_EQ(calls, 3);
  calls = 0;
  try {
    sql::retrying(
        [&]() -> int {
          ++calls;
          throw sql::RetryableError("deadlock detected");
        },
        4);
    ADD_FAILURE() << "no error after 4 attempts";
  } catch (const sql::RetryableError& e) {
    EXPECT_NE(std::string(e.what()).find("(4 attempts)"), std::string::npos) << e.what();
  }
  EXPECT_EQ(calls, 4);
  calls = 0;
  EXPECT_THROW(sql::retrying([&]() -> int {
                 ++calls;
                 throw DatabaseError("disk full");
               }),
               DatabaseError);
  EXPECT_EQ(calls, 1);
}

// A server's address is shown (messages, stats, path()) without its password, however given.
TEST(Sql, ServerAddressesAreShownWithoutTheirPassword) {
  using sql::redacted;
  EXPECT_EQ(redacted("postgresql://alice:s3cret@db.example:5432/team"),
            "postgresql://alice@db.example:5432/team");
  EXPECT_EQ(redacted("postgres://alice:s3cret@db/team?sslmode=require"),
            "postgres://alice@db/team?sslmode=require");
  EXPECT_EQ(redacted("postgresql://alice@db/team?password=s3cret"), "postgresql://alice@db/team");
  EXPECT_EQ(redacted("postgresql://alice@db/team?password=s3cret&sslmode=require"),
            "postgresql://alice@db/team?sslmode=require");
  EXPECT_EQ(redacted("postgresql://alice@db/team?sslmode=require&password=s3cret&port=5"),
            "postgresql://alice@db/team?sslmode=require&port=5");
  EXPECT_EQ(redacted("postgresql://db/team"), "postgresql://db/team");
  EXPECT_TRUE(sql::is_server_uri("postgresql://db/team"));
  EXPECT_TRUE(sql::is_server_uri("postgres://db/team"));
  EXPECT_FALSE(sql::is_server_uri("postgresql.sqlite"));
  EXPECT_EQ(store_display_name("postgresql://a:b@h/d"), "postgresql://a@h/d");
  EXPECT_EQ(store_display_name("/tmp/x:y@z.sqlite"), "/tmp/x:y@z.sqlite");
}

}  // namespace einsumdb
