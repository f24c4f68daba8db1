// Symbolic workloads in the store and exact answers: ranking by rate across bindings, concrete
// workloads finding their symbolic forms (never another computation's), export/import and
// re-recording that add nothing, machine and hash prefixes, and migration of a version-2 store.
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <gtest/gtest.h>

#include "einsumdb/canon/metrics.hpp"
#include "einsumdb/canon/parse.hpp"
#include "einsumdb/core/error.hpp"
#include "einsumdb/db/error.hpp"
#include "einsumdb/db/location.hpp"
#include "einsumdb/db/retrieve.hpp"
#include "einsumdb/db/store.hpp"
#include "einsumdb/tests/support/einsum_oracle.hpp"
#include "einsumdb/tests/support/temp_dir.hpp"

namespace einsumdb {
namespace {

using json = nlohmann::json;

struct InputFileForTest {
  explicit InputFileForTest(const std::string& path) : stream(path) {
    EXPECT_TRUE(stream.good()) << path;
  }
  std::ifstream stream;
};

Machine machine(const std::string& cpu = "Test CPU", const std::string& blas = "OpenBLAS 0.3.21") {
  Machine m;
  m.cpu_model = cpu;
  m.cores = 2;
  m.isa = "avx2 fma";
  m.blas = blas;
  return m;
}

Measurement ok(const char* name, json params, std::vector<double> seconds, Binding b = {}) {
  Measurement m;
  m.transform = {name, std::move(params)};
  m.seconds = std::move(seconds);
  m.max_rel_err = 1e-15;
  m.binding = std::move(b);
  return m;
}

// Two rows sharing B: C_r[i,k] = Σ_j A_r[i,j] B[j,k], with i of length `ne`.
BatchedEinsum two_products(const Length& ne) {
  BatchedEinsum e;
  e.inputs = {"ij", "jk"};
  e.output = "ik";
  e.batch = {{"A", "B"}, {"C", "B"}};
  e.arrays = {{"A", {{ne, Length::of(3)}, Dtype::f64}},
              {"C", {{ne, Length::of(3)}, Dtype::f64}},
              {"B", {{Length::of(3), Length::of(4)}, Dtype::f64}}};
  return e;
}

// Records one measurement of `e` (spec names) and returns the run's result.
Store::RunResult record(Store& store, const BatchedEinsum& e, Measurement m,
                        const Machine& on = machine()) {
  const Canonical c = canonicalize(e);
  return store.record_run({"test", "", "", ""}, on, {{&c, to_canonical(c, std::move(m))}});
}

class SymbolicTest : public ::testing::Test {
 protected:
  testing::TempDir dir_{"symbolic"};
  Store store_ = Store::open(dir_.path("db.sqlite"));
  const BatchedEinsum symbolic_ = two_products(Length::named("Ne"));
  // Parameters that name an index and an array, so that their translation shows.
  const json params_ = {{"axis", {{"index", "i"}}}, {"shared", {{"array", "B"}}}};
};

TEST_F(SymbolicTest, FactsOfOneKeyRankByRateNotBySecondsAcrossBindings) {
  // 24·Ne FLOPs per row pair... whatever the count, per FLOP "big" is faster: 100× the work in
  // 20× the time.
  record(store_, symbolic_, ok("small", params_, {1e-3}, {{"Ne", 1000}}));
  record(store_, symbolic_, ok("big", params_, {2e-2}, {{"Ne", 100000}}));
  const Canonical c = canonicalize(symbolic_);
  const auto facts = store_.top_k(c.hash, machine().fingerprint(), 0);
  ASSERT_EQ(facts.size(), 2u);
  EXPECT_EQ(facts[0].transform.name, "big");
  EXPECT_EQ(facts[1].transform.name, "small");
  const double flops_small = *flop_count(bind_symbols(symbolic_, {{"Ne", 1000}}));
  EXPECT_NEAR(*facts[1].gflops, flops_small / 1e-3 * 1e-9, 1e-12);
  EXPECT_NEAR(*facts[0].flops, 100 * flops_small, 1e-6);
  ASSERT_EQ(facts[0].bindings.size(), 1u);
  EXPECT_EQ(facts[0].bindings[0], (Binding{{"N0", 100000}}));  // canonical symbol names
  EXPECT_EQ(to_string(facts[0].bindings[0]), "N0=100000");
  // show() says at which binding each was timed, and its work there.
  const auto rows = store_.show(c.hash);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["transform"]["name"], "big");  // highest rate first, as best() ranks
  for (const auto& r : rows) {
    EXPECT_TRUE(r["binding"].is_object());
    EXPECT_GT(r["flops"].get<double>(), 0);
  }
}

TEST_F(SymbolicTest, ASymbolicMeasurementNeedsItsBindingOrItsWork) {
  const Canonical c = canonicalize(symbolic_);
  auto record_canonical = [&](Measurement m) {
    return store_.record_run({"test", "", "", ""}, machine(), {{&c, std::move(m)}});
  };
  EXPECT_THROW(record_canonical(ok("t", {}, {1e-3})), SpecError);               // neither
  EXPECT_THROW(record_canonical(ok("t", {}, {1e-3}, {{"N7", 5}})), SpecError);  // unknown symbol
  EXPECT_THROW(to_canonical(c, ok("t", {}, {1e-3}, {{"Nq", 5}})), SpecError);
  EXPECT_THROW(record(store_, two_products(Length::of(5)), ok("t", {}, {1e-3}, {{"Ne", 5}})),
               SpecError);  // a concrete workload has nothing to bind
  Measurement with_work = ok("t", {}, {1e-3});
  with_work.flops = 1e6;  // what an importer knows when the source kept the work, not the lengths
  EXPECT_EQ(record_canonical(with_work).inserted, 1u);
  EXPECT_EQ(store_.stats()["measurements"], 1);
}

TEST_F(SymbolicTest, AWorkloadIsRecordedAlikeMetOrReadFromTheFile) {
  // store_ meets both workloads as it records them; `other` reads them from the file by id.
  const BatchedEinsum concrete = two_products(Length::of(7));
  record(store_, symbolic_, ok("t", params_, {1e-3}, {{"Ne", 1000}}));
  record(store_, concrete, ok("t", params_, {1e-3}));
  Store other = Store::open(dir_.path("db.sqlite"));
  const MachineId on = other.machine_id(machine());
  const RunId run = other.begin_run({"other", "", "", ""}, on);
  const Canonical cs = canonicalize(symbolic_), cc = canonicalize(concrete);
  const auto symbolic_id = other.find_workload(cs.hash), concrete_id = other.find_workload(cc.hash);
  ASSERT_TRUE(symbolic_id && concrete_id);
  EXPECT_THROW(other.record(run, *symbolic_id, on, to_canonical(cs, ok("u", params_, {1e-3}))),
               SpecError);  // neither binding nor work
  EXPECT_THROW(
      other.record(run, *concrete_id, on, to_canonical(cc, ok("u", params_, {1e-3}, {{"Ne", 5}}))),
      SpecError);  // a concrete workload binds nothing
  EXPECT_TRUE(other.record(run, *symbolic_id, on,
                           to_canonical(cs, ok("u", params_, {2e-3}, {{"Ne", 1000}}))));
  EXPECT_TRUE(other.record(run, *concrete_id, on, to_canonical(cc, ok("u", params_, {2e-3}))));
  // The work of each is the one store_ recorded: the binding's, and the concrete workload's own.
  for (const Canonical* c : {&cs, &cc}) {
    const auto facts = other.top_k(c->hash, machine().fingerprint(), 0);
    ASSERT_EQ(facts.size(), 2u) << c->key;
    EXPECT_EQ(facts[0].transform.name, "t");
    EXPECT_NEAR(*facts[1].flops, *facts[0].flops, 1e-9 * *facts[0].flops) << c->key;
  }
}

TEST_F(SymbolicTest, AConcreteWorkloadFindsItsSymbolicFormInAnySpelling) {
  record(store_, symbolic_, ok("tuned", params_, {1e-3}, {{"Ne", 1000}}));
  std::mt19937_64 rng(7);
  for (std::int64_t ne : {1, 3, 777, 100000}) {
    for (int spelling = 0; spelling < 8; ++spelling) {
      const BatchedEinsum q =
          testing::random_respelling(bind_symbols(symbolic_, {{"Ne", ne}}), rng);
      const auto a = best_for(store_, canonicalize(q), machine().fingerprint(), false);
      ASSERT_TRUE(a) << "Ne = " << ne;
      EXPECT_EQ(a->match, Match::symbolic);
      EXPECT_FALSE(a->approximate);
      EXPECT_EQ(a->binding, (Binding{{"N0", ne}}));
      EXPECT_EQ(a->fact.transform.name, "tuned");
      // In the query's names: B is the array read by both rows; i is the index of the rows'
      // own arrays that is not B's.
      std::map<std::string, int> uses;
      for (const auto& row : q.batch)
        for (const auto& name : row) ++uses[name];
      std::string shared;
      for (const auto& [name, n] : uses)
        if (n == 2) shared = name;
      EXPECT_EQ(a->params["shared"]["array"], shared);
      std::size_t own = 0;
      while (q.batch[0][own] == shared) ++own;
      const std::string shared_indices = q.inputs[1 - own];
      const char i = q.inputs[own][0] == shared_indices[0] || q.inputs[own][0] == shared_indices[1]
                         ? q.inputs[own][1]
                         : q.inputs[own][0];
      EXPECT_EQ(a->params["axis"]["index"], std::string(1, i));
      EXPECT_EQ(to_json(*a)["match"], "symbolic");
    }
  }
  // The symbolic spec itself, respelled with another symbol name: its exact key.
  const auto exact = best_for(store_, canonicalize(testing::random_respelling(symbolic_, rng)),
                              machine().fingerprint(), false);
  ASSERT_TRUE(exact);
  EXPECT_EQ(exact->match, Match::exact);
}

TEST_F(SymbolicTest, NeverAFactOfAnotherComputation) {
  record(store_, symbolic_, ok("tuned", params_, {1e-3}, {{"Ne", 1000}}));
  const std::string m = machine().fingerprint();
  auto answer = [&](const BatchedEinsum& e) { return best_for(store_, canonicalize(e), m, false); };
  // Another length of a concrete axis.
  BatchedEinsum other = two_products(Length::of(50));
  other.arrays.at("B").shape = {Length::of(3), Length::of(5)};
  EXPECT_FALSE(answer(other));
  // One row instead of two.
  BatchedEinsum one = two_products(Length::of(50));
  one.batch.pop_back();
  one.arrays.erase("C");
  EXPECT_FALSE(answer(one));
  // Rows that do not share B.
  BatchedEinsum apart = two_products(Length::of(50));
  apart.batch[1][1] = "D";
  apart.arrays.emplace("D", apart.arrays.at("B"));
  EXPECT_FALSE(answer(apart));
  // The transposed product (output ki).
  BatchedEinsum transposed = two_products(Length::of(50));
  transposed.output = "ki";
  EXPECT_FALSE(answer(transposed));
  // A shared symbol binds equal lengths only.
  BatchedEinsum square;
  square.inputs = {"ij", "jk"};
  square.output = "ik";
  square.batch = {{"A", "B"}};
  square.arrays = {{"A", {{Length::named("N"), Length::named("N")}, Dtype::f64}},
                   {"B", {{Length::named("N"), Length::of(4)}, Dtype::f64}}};
  record(store_, square, ok("square", {}, {1e-3}, {{"N", 64}}));
  EXPECT_TRUE(answer(bind_symbols(square, {{"N", 9}})));
  BatchedEinsum oblong = bind_symbols(square, {{"N", 9}});
  oblong.arrays.at("A").shape[1] = Length::of(8);
  oblong.arrays.at("B").shape[0] = Length::of(8);
  EXPECT_FALSE(answer(oblong));
  // Two symbols may take one length, and the match says which.
  BatchedEinsum two_symbols = square;
  two_symbols.arrays.at("A").shape = {Length::named("M"), Length::named("K")};
  two_symbols.arrays.at("B").shape = {Length::named("K"), Length::of(4)};
  record(store_, two_symbols, ok("general", {}, {1e-3}, {{"M", 64}, {"K", 32}}));
  const auto a = answer(oblong);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->fact.transform.name, "general");
  EXPECT_EQ(a->binding.size(), 2u);
}

TEST_F(SymbolicTest, AnExactConcreteFactComesBeforeTheSymbolicOne) {
  record(store_, symbolic_, ok("symbolic", params_, {1e-6}, {{"Ne", 1000}}));
  const BatchedEinsum concrete = two_products(Length::of(777));
  record(store_, concrete, ok("concrete", params_, {1.0}));
  const auto a = best_for(store_, canonicalize(concrete), machine().fingerprint());
  ASSERT_TRUE(a);
  EXPECT_EQ(a->match, Match::exact);
  EXPECT_EQ(a->fact.transform.name, "concrete");
}

TEST_F(SymbolicTest, ExportImportAndRecordingAgainAddNothing) {
  // Recorded without bytes_moved (the store fills in the footprint), symbolic and concrete.
  record(store_, symbolic_, ok("s", params_, {1e-3, 2e-3}, {{"Ne", 1000}}));
  record(store_, two_products(Length::of(7)), ok("c", params_, {1e-3}));
  Measurement with_bytes = ok("c", params_, {5e-3});
  with_bytes.bytes_moved = 1234;
  record(store_, two_products(Length::of(7)), with_bytes);
  const auto runs = store_.stats()["runs"].get<int>();
  EXPECT_EQ(runs, 3);

  // Recording the same again: nothing inserted, no run.
  const auto again = record(store_, two_products(Length::of(7)), ok("c", params_, {1e-3}));
  EXPECT_EQ(again.inserted, 0u);
  EXPECT_EQ(again.run, 0);
  EXPECT_EQ(store_.stats()["runs"], runs);

  std::stringstream exported;
  EXPECT_EQ(store_.export_jsonl(exported), 3u);
  const std::string text = exported.str();
  // Into the same store: nothing new.
  std::stringstream in_same(text);
  const auto same = store_.import_jsonl(in_same, "export");
  EXPECT_EQ(same.inserted, 0u);
  EXPECT_EQ(same.duplicates, 3u);
  EXPECT_EQ(same.runs, 0u);
  EXPECT_EQ(store_.stats()["measurements"], 3);
  EXPECT_EQ(store_.stats()["runs"], runs);
  // Into a fresh store: everything, and its export imports back into the first as nothing.
  Store fresh = Store::open(dir_.path("fresh.sqlite"));
  std::stringstream in_fresh(text);
  EXPECT_EQ(fresh.import_jsonl(in_fresh, "export").inserted, 3u);
  std::stringstream round;
  fresh.export_jsonl(round);
  EXPECT_EQ(store_.import_jsonl(round, "fresh").inserted, 0u);
  // And answers agree.
  const Canonical q = canonicalize(two_products(Length::of(7)));
  EXPECT_EQ(to_json(*best_for(store_, q, machine().fingerprint())).dump(),
            to_json(*best_for(fresh, q, machine().fingerprint())).dump());
}

TEST_F(SymbolicTest, MachinesAndWorkloadsByPrefix) {
  record(store_, two_products(Length::of(7)), ok("c", {}, {1e-3}), machine("CPU A"));
  record(store_, two_products(Length::of(7)), ok("c", {}, {2e-3}), machine("CPU A", "BLIS 1"));
  const std::string fa = machine("CPU A").fingerprint();
  EXPECT_EQ(store_.machines_matching(fa.substr(0, 12)), std::vector<std::string>{fa});
  EXPECT_EQ(store_.machines_matching(fa), std::vector<std::string>{fa});
  EXPECT_EQ(store_.machines_matching("model=CPU A").size(), 2u);
  EXPECT_THROW(store_.machines_matching("model=CPU B"), SpecError);
  EXPECT_THROW(store_.machines_matching("ffffffffffff"), SpecError);
  EXPECT_THROW(store_.machines_matching("zz"), SpecError);
  // Ambiguous: two machines whose fingerprints share their first four digits (found by trying
  // BLAS names), both recorded; the shared prefix names neither.
  std::map<std::string, std::string> by_prefix;
  std::string blas_a, blas_b;
  for (int n = 0; blas_b.empty(); ++n) {
    const std::string blas = "BLAS " + std::to_string(n);
    const auto [it, added] =
        by_prefix.emplace(machine("CPU C", blas).fingerprint().substr(0, 4), blas);
    if (!added) blas_a = it->second, blas_b = blas;
  }
  record(store_, two_products(Length::of(7)), ok("c", {}, {1e-3}), machine("CPU C", blas_a));
  record(store_, two_products(Length::of(7)), ok("c", {}, {1e-3}), machine("CPU C", blas_b));
  const std::string shared = machine("CPU C", blas_a).fingerprint().substr(0, 4);
  try {
    store_.machines_matching(shared);
    FAIL() << "an ambiguous prefix named one machine";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("ambiguous"), std::string::npos) << e.what();
  }
  // A fact on either machine of the model: one per machine.
  const Canonical q = canonicalize(two_products(Length::of(7)));
  const auto facts = store_.top_k(q.hash, store_.machines_matching("model=CPU A"), 0);
  EXPECT_EQ(store_.machines_matching("model=CPU C").size(), 2u);
  ASSERT_EQ(facts.size(), 2u);
  EXPECT_EQ(facts[0].machine, fa);
  EXPECT_EQ(store_.resolve_workload(q.hash.substr(0, 12)), q.hash);
  EXPECT_THROW(store_.resolve_workload("0000000000ff"), SpecError);
  EXPECT_THROW(store_.resolve_workload("xyz"), SpecError);
}

TEST(Migration, AVersion2StoreGetsOneDigestPerMeasurementAndKeepsItsAnswers) {
  testing::TempDir dir("migration");
  const std::string fixture = std::string(EINSUMDB_TEST_DATA) + "/store_v2/";
  const std::string path = dir.path("store.sqlite");
  std::filesystem::copy_file(fixture + "store.sqlite", path);
  // Read-only first: refused (a read-only store is never changed) ...
  Store::Options read_only;
  read_only.read_only = true;
  EXPECT_THROW(Store::open(path, read_only), DatabaseError);
  // ... the reading entry point migrates what it may write, then reads.
  auto store = open_store_for_reading(path);
  ASSERT_TRUE(store);
  EXPECT_EQ(store->schema_version(), Store::kSchemaVersion);
  // The three duplicates that schema 2 let in are gone; the four measurements remain.
  EXPECT_EQ(store->stats()["measurements"], 4);
  EXPECT_TRUE(store->check()["ok"].get<bool>()) << store->check().dump();
  store.reset();
  Store writable = Store::open(path);
  // Its own old export and the original file add nothing now.
  InputFileForTest in(fixture + "export.jsonl");
  const auto r = writable.import_jsonl(in.stream, "export.jsonl");
  EXPECT_EQ(r.inserted, 0u);
  EXPECT_EQ(r.duplicates, 4u);
  const Canonical q = canonicalize(parse_spec_text(
      R"({"einsum":"ik,kj->ij","batch":[["A","B"]],"shapes":{"A":[64,32],"B":[32,48]}})"));
  Machine m;
  m.cpu_model = "Fixture CPU";
  m.cores = 2;
  m.isa = "avx2 fma";
  m.blas = "OpenBLAS 0.3.21";
  const auto facts = writable.top_k(q.hash, m.fingerprint(), 0);
  ASSERT_EQ(facts.size(), 2u);
  EXPECT_EQ(facts[0].transform.name, "ttgt");
  EXPECT_EQ(facts[0].measurements, 2);  // two different ttgt measurements, each once
  EXPECT_TRUE(facts[0].gflops);
}

TEST(Machines, DescriptionsWithUnknownKeysOrNoCoresAreRefused) {
  const json good = to_json(machine());
  EXPECT_EQ(machine_from_json(good).fingerprint(), machine().fingerprint());
  json extra = good;
  extra["gpu"] = "yes";
  EXPECT_THROW(machine_from_json(extra), SpecError);
  json zero = good;
  zero.erase("fingerprint");
  zero["cores"] = 0;
  EXPECT_THROW(machine_from_json(zero), SpecError);
  zero["cores"] = -2;
  EXPECT_THROW(machine_from_json(zero), SpecError);
  json description = good;
  description["description"] = "a string";
  EXPECT_THROW(machine_from_json(description), SpecError);
}

}  // namespace
}  // namespace einsumdb
