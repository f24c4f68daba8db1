// The facts the store keeps (one summary per transform of a workload on a machine) answer
// exactly as aggregating the measurements at query time does: on a randomized store with ties,
// symbolic workloads, several machines, failed and duplicate measurements, recorded in runs and
// one by one; best_many() answers as best_for() one query at a time; and the sizes tree finds
// the nearest measured size that reading every workload of the structure finds.
#include <sqlite3.h>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "einsumdb/canon/parse.hpp"
#include "einsumdb/core/error.hpp"
#include "einsumdb/db/retrieve.hpp"
#include "einsumdb/db/store.hpp"
#include "einsumdb/tests/support/einsum_oracle.hpp"
#include "einsumdb/tests/support/temp_dir.hpp"

namespace einsumdb {
namespace {

using json = nlohmann::json;

Machine machine(const std::string& cpu) {
  Machine m;
  m.cpu_model = cpu;
  m.cores = 2;
  m.isa = "avx2 fma";
  m.blas = "OpenBLAS 0.3.21";
  return m;
}

// A product of random lengths; every fourth workload symbolic in its first length.
BatchedEinsum random_spec(std::mt19937_64& rng, std::size_t w) {
  auto len = [&] {
    return Length::of(static_cast<std::int64_t>(2 + rng() % 6));
  };  // f32 when w is odd
  BatchedEinsum e;
  e.inputs = {"ik", "kj"};
  e.output = "ij";
  const Length i = w % 4 == 3 ? Length::named("Ni") : len();
  e.arrays["A"] = {{i, len()}, w % 2 ? Dtype::f32 : Dtype::f64};
  e.arrays["B"] = {{e.arrays["A"].shape[1], len()}, e.arrays["A"].dtype};
  e.batch = {{"A", "B"}};
  return e;
}

class FactsTest : public ::testing::Test {
 protected:
  testing::TempDir dir_{"facts"};
};

TEST_F(FactsTest, FactsAnswerAsTheMeasurementsDo) {
  std::mt19937_64 rng(7);
  Store store = Store::open(dir_.path("facts.sqlite"));
  const Machine ma = machine("CPU A"), mb = machine("CPU B");
  std::vector<Canonical> workloads;
  for (std::size_t w = 0; w < 120; ++w) workloads.push_back(canonicalize(random_spec(rng, w)));
  // Few distinct times, so that transforms tie on their medians.
  const double times[] = {1e-3, 2e-3, 3e-3};
  auto measurement = [&](const Canonical& c) {
    Measurement m;
    m.transform = {"strategy" + std::to_string(rng() % 3),
                   {{"tile", 8 << (rng() % 3)}, {"inner", {{"index", "i"}}}}};
    for (std::size_t r = 0, n = 1 + rng() % 3; r < n; ++r) m.seconds.push_back(times[rng() % 3]);
    const auto roll = rng() % 10;
    m.status = roll == 0 ? Outcome::failed : roll == 1 ? Outcome::invalid : Outcome::ok;
    if (m.status != Outcome::failed) m.max_rel_err = 1e-15;
    if (m.status == Outcome::invalid) m.max_rel_err = 1.0;
    if (!symbols(c.form).empty()) m.binding = {{"Ni", static_cast<std::int64_t>(2 + rng() % 3)}};
    if (rng() % 5 == 0) m.origin = {{"source", "test"}, {"n", static_cast<int>(rng() % 4)}};
    return to_canonical(c, std::move(m));
  };
  // Runs of measurements (some repeated: duplicates add nothing) ...
  for (int run = 0; run < 6; ++run) {
    std::vector<std::pair<const Canonical*, Measurement>> batch;
    for (int i = 0; i < 150; ++i) {
      const Canonical& c = workloads[rng() % workloads.size()];
      batch.emplace_back(&c, measurement(c));
      if (i % 10 == 0) batch.push_back(batch.back());
    }
    store.record_run({"run", "test", "", ""}, run % 2 ? mb : ma, batch);
  }
  // ... and measurements one at a time, outside any run's transaction.
  const RunId single = store.begin_run({"single", "test", "", ""}, store.machine_id(ma));
  for (int i = 0; i < 100; ++i) {
    const Canonical& c = workloads[rng() % workloads.size()];
    store.record(single, store.workload_id(c), store.machine_id(ma), measurement(c));
  }
  // A run of nothing new is rolled back whole, the facts it touched with it.
  {
    const Canonical& c = workloads[0];
    const Measurement m = measurement(c);
    store.record_run({"first", "test", "", ""}, ma, {{&c, m}});
    EXPECT_EQ(store.record_run({"again", "test", "", ""}, ma, {{&c, m}}).inserted, 0u);
  }

  const auto check = store.check();
  EXPECT_TRUE(check["ok"].get<bool>()) << check.dump(1);
  const std::vector<std::vector<std::string>> machine_sets = {
      {ma.fingerprint()}, {mb.fingerprint()}, {ma.fingerprint(), mb.fingerprint()}};
  std::size_t answered = 0, tied = 0;
  for (const auto& c : workloads) {
    for (const auto& machines : machine_sets) {
      for (std::size_t k : {0, 1, 2}) {
        const auto kept = store.top_k(c.hash, machines, k);
        const auto measured = store.top_k_measured(c.hash, machines, k);
        ASSERT_EQ(kept, measured) << c.key << " k " << k << " on " << machines.size();
        answered += !kept.empty();
        if (k == 0)
          for (std::size_t i = 1; i < kept.size(); ++i)
            tied += kept[i].gflops == kept[i - 1].gflops;
      }
    }
  }
  EXPECT_GT(answered, 200u);
  EXPECT_GT(tied, 10u);  // the tie-break was exercised

  // The batch lookup answers as top_k one workload at a time, over more workloads than one of
  // its statements takes (each workload asked several times, some never measured).
  std::vector<std::string> hashes, keys;
  for (std::size_t i = 0; i < 2300; ++i) {
    const Canonical& c = workloads[(i * 7) % workloads.size()];
    hashes.push_back(i % 97 == 0 ? std::string(32, 'f') : c.hash);
    keys.push_back(i % 97 == 0 ? "unknown" : c.key);
  }
  for (const auto& machines : machine_sets) {
    for (std::size_t k : {0, 1, 2}) {
      const auto batch = store.top_k_many(hashes, keys, machines, k);
      ASSERT_EQ(batch.size(), hashes.size());
      for (std::size_t i = 0; i < hashes.size(); ++i)
        ASSERT_EQ(batch[i], store.top_k(hashes[i], machines, k)) << i << " k " << k;
    }
  }
  EXPECT_THROW(store.top_k_many({"12\"]"}, {"x"}, machine_sets[0], 1), SpecError);

  // best_many: one snapshot, the answers best_for gives one by one (exact, and for workloads
  // never measured, symbolic or nearest), on one machine and on two.
  std::vector<Canonical> asked = workloads;
  for (std::size_t w = 0; w < 80; ++w) {
    auto e = random_spec(rng, w);
    e.arrays["A"].shape[0] = Length::of(static_cast<std::int64_t>(8 + w % 5));
    asked.push_back(canonicalize(e, kQueryCanon));
  }
  const auto many = best_many(store, asked, ma.fingerprint());
  ASSERT_EQ(many.size(), asked.size());
  std::size_t exact = 0, beyond = 0;
  for (std::size_t i = 0; i < asked.size(); ++i) {
    const auto one = best_for(store, asked[i], ma.fingerprint());
    ASSERT_EQ(many[i].has_value(), one.has_value()) << i;
    if (one) {
      EXPECT_EQ(to_json(*many[i]), to_json(*one)) << i;
      (one->match == Match::exact ? exact : beyond) += 1;
    }
  }
  EXPECT_GT(exact, 0u);
  EXPECT_GT(beyond, 0u);
  std::vector<Canonical> queries;
  for (std::size_t i = 0; i < 1500; ++i) queries.push_back(asked[(i * 11) % asked.size()]);
  const auto both = best_many(store, queries, machine_sets[2]);
  ASSERT_EQ(both.size(), queries.size());
  for (std::size_t i = 0; i < queries.size(); ++i) {
    const auto one = top_k_for(store, queries[i], machine_sets[2], 1);
    ASSERT_EQ(both[i].has_value(), !one.empty()) << i;
    if (!one.empty()) {
      EXPECT_EQ(to_json(*both[i]), to_json(one.front())) << i;
    }
  }
}

// A contraction of six indices (more axes than the sizes tree holds) with random lengths.
BatchedEinsum six_axes(std::mt19937_64& rng) {
  auto len = [&] { return Length::of(static_cast<std::int64_t>(2 + rng() % 5)); };
  BatchedEinsum e;
  e.inputs = {"abcf", "fde"};
  e.output = "abcde";
  e.arrays["A"] = {{len(), len(), len(), len()}, Dtype::f64};
  e.arrays["B"] = {{e.arrays["A"].shape[3], len(), len()}, Dtype::f64};
  e.batch = {{"A", "B"}};
  return e;
}

TEST_F(FactsTest, TheSizesTreeFindsTheNearestSizeAsAScanDoes) {
  std::mt19937_64 rng(11);
  Store store = Store::open(dir_.path("sizes.sqlite"));
  const Machine ma = machine("CPU A"), mb = machine("CPU B");
  auto record = [&](const BatchedEinsum& e, const Machine& m) {
    const Canonical c = canonicalize(e);
    Measurement x;
    x.transform = {"ttgt", json::object()};
    x.seconds = {1e-3 * static_cast<double>(1 + rng() % 5)};
    x.max_rel_err = 1e-15;
    if (!symbols(c.form).empty()) x.binding = {{"Ni", 4}};
    store.record_run({"run", "test", "", ""}, m, {{&c, to_canonical(c, x)}});
  };
  // Products (some symbolic), six-index contractions, on either machine or both; and workloads
  // with only a failed measurement (no fact: never an answer).
  for (std::size_t w = 0; w < 300; ++w) {
    const BatchedEinsum e = w % 3 == 2 ? six_axes(rng) : random_spec(rng, w);
    const auto which = rng() % 4;
    if (which == 3) {
      const Canonical c = canonicalize(e);
      Measurement failed;
      failed.transform = {"ttgt", json::object()};
      failed.status = Outcome::failed;
      store.record_run({"failed", "test", "", ""}, ma, {{&c, to_canonical(c, failed)}});
      continue;
    }
    if (which != 1) record(e, ma);
    if (which != 0) record(e, mb);
  }
  std::size_t found = 0, symbolic_ruled_out = 0;
  for (int q = 0; q < 300; ++q) {
    // Sizes like the stored ones (some measured: the nearest is then another) and, every fifth,
    // twice as large, farther than the first radius the tree tries.
    BatchedEinsum e =
        q % 3 == 2 ? six_axes(rng) : random_spec(rng, static_cast<std::size_t>(q * 4 + 1));
    if (q % 5 == 0)
      for (auto& [name, info] : e.arrays)
        for (auto& l : info.shape)
          if (!l.symbolic()) l = Length::of(l.value * 2);
    const Canonical c = canonicalize(e);
    for (const auto& machines : std::vector<std::vector<std::string>>{
             {ma.fingerprint()}, {mb.fingerprint()}, {ma.fingerprint(), mb.fingerprint()}}) {
      // The symbolic candidates given the query's lengths: those that may become it, and no
      // workload left out that does.
      const auto all = store.symbolic_workloads(c.structure_hash, machines);
      const auto some = store.symbolic_workloads(c.structure_hash, machines, c.structure_lengths);
      std::set<std::string> kept;
      for (const auto& w : some) kept.insert(w.hash);
      for (const auto& w : all) {
        if (!kept.count(w.hash)) {
          EXPECT_FALSE(generalises(w.form, c)) << w.key << " for " << c.key;
        }
      }
      symbolic_ruled_out += all.size() - some.size();
      const auto tree = store.nearest(c, machines), scan = store.nearest_scanned(c, machines);
      ASSERT_EQ(tree.has_value(), scan.has_value()) << c.key;
      if (!tree) continue;
      ++found;
      EXPECT_EQ(tree->fact, scan->fact) << c.key;
      EXPECT_EQ(tree->distance, scan->distance) << c.key;
      EXPECT_EQ(tree->to_structure.index, scan->to_structure.index) << c.key;
      EXPECT_EQ(tree->to_structure.array, scan->to_structure.array) << c.key;
    }
  }
  EXPECT_GT(found, 500u);
  EXPECT_GT(symbolic_ruled_out, 0u);
}

// Sizes as versions 4 to 7 wrote them, points with no extent on the structure number or on the
// axes a structure lacks, answer as a scan does; the first writing open rebuilds them.
TEST_F(FactsTest, SizesOfAnEarlierVersionAnswerAlikeAndAreRebuilt) {
  std::mt19937_64 rng(5);
  const std::string path = dir_.path("v7.sqlite");
  const Machine ma = machine("CPU A");
  std::vector<Canonical> queries;
  {
    Store store = Store::open(path);
    for (std::size_t w = 0; w < 200; ++w) {
      // Products (three axes: the tree's fourth is one they lack) and six-axis contractions.
      const BatchedEinsum e = w % 2 ? six_axes(rng) : random_spec(rng, 4 * w + 1);
      const Canonical c = canonicalize(e);
      Measurement x;
      x.transform = {"ttgt", json::object()};
      x.seconds = {1e-3};
      x.max_rel_err = 1e-15;
      store.record_run({"run", "test", "", ""}, ma, {{&c, to_canonical(c, x)}});
      queries.push_back(canonicalize(w % 2 ? six_axes(rng) : random_spec(rng, 4 * w + 1)));
    }
  }
  auto query = [&](const char* sql) {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* s = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, sql, -1, &s, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    const int rc = sqlite3_step(s);
    EXPECT_TRUE(rc == SQLITE_ROW || rc == SQLITE_DONE) << sqlite3_errmsg(db);
    const std::int64_t value = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
    sqlite3_finalize(s);
    sqlite3_close(db);
    return value;
  };
  const char* const kSpanned = "SELECT count(*) FROM sizes WHERE structure_hi = structure_lo + 1";
  const char* const kLacking = "SELECT count(*) FROM sizes WHERE x3_lo = 0 AND x3_hi = 1";
  // Every workload (a few of the random ones repeat), and the products among them.
  const std::int64_t workloads = query("SELECT count(*) FROM sizes"), products = query(kLacking);
  ASSERT_GT(workloads, 150);
  ASSERT_GT(products, 50);
  ASSERT_EQ(query(kSpanned), workloads);
  query("UPDATE sizes SET x3_hi = 0 WHERE x3_lo = 0 AND x3_hi = 1");
  query("UPDATE sizes SET structure_hi = structure_lo");
  query("PRAGMA user_version = 7");
  ASSERT_EQ(query(kSpanned) + query(kLacking), 0);
  Store::Options read_only;
  read_only.read_only = true;
  {
    Store old = Store::open(path, read_only);
    EXPECT_EQ(old.schema_version(), 7);
    std::size_t found = 0;
    for (const Canonical& c : queries) {
      const auto tree = old.nearest(c, {ma.fingerprint()});
      const auto scan = old.nearest_scanned(c, {ma.fingerprint()});
      ASSERT_EQ(tree.has_value(), scan.has_value()) << c.key;
      if (!tree) continue;
      ++found;
      EXPECT_EQ(tree->fact, scan->fact) << c.key;
      EXPECT_EQ(tree->distance, scan->distance) << c.key;
    }
    EXPECT_GT(found, 150u);
  }
  EXPECT_EQ(Store::open(path).schema_version(), Store::kSchemaVersion);
  EXPECT_EQ(query(kSpanned), workloads);
  EXPECT_EQ(query(kLacking), products);
}

}  // namespace
}  // namespace einsumdb

namespace einsumdb {
namespace {

// The answer as the store gave it before the quick path: the query labeled whole (both
// labelings), the workload's measurements aggregated when asked, symbolic workloads labeled and
// bound forms labeled again, and the nearest size found by reading every workload of the
// structure.
struct Reference {
  std::string transform;
  json params;
  Match match = Match::exact;
  double distance = 0;
  double median_s = 0;
};

std::optional<Reference> reference_best(Store& store, const BatchedEinsum& spec,
                                        const std::vector<std::string>& machines) {
  const Canonical c = canonicalize(spec);
  if (const auto facts = store.top_k_measured(c.hash, machines, 1); !facts.empty())
    return Reference{facts[0].transform.name,
                     translate(facts[0].transform.params, to_input_names(c.sigma)), Match::exact, 0,
                     facts[0].median_s};
  std::optional<Reference> best;
  double best_rate = 0;
  for (const auto& w : store.symbolic_workloads(c.structure_hash, machines)) {
    const auto g = generalises(w.form, c);
    if (!g) continue;
    const auto facts = store.top_k_measured(w.hash, machines, 1);
    if (facts.empty()) continue;
    const double rate = facts[0].gflops.value_or(0);
    if (!best || rate > best_rate) {  // the first of equal rates, in hash order
      best = Reference{facts[0].transform.name, translate(facts[0].transform.params, g->to_query),
                       Match::symbolic, 0, facts[0].median_s};
      best_rate = rate;
    }
  }
  if (best) return best;
  const auto near = store.nearest_scanned(c, machines);
  if (!near) return std::nullopt;
  return Reference{near->fact.transform.name,
                   translate(translate(near->fact.transform.params, near->to_structure),
                             to_input_names(c.structure_sigma)),
                   Match::nearest, near->distance, near->fact.median_s};
}

// Workloads shaped like the benchmark's (a product, two products sharing a factor, a batched
// product, a TCCG contraction, symbolic matrix-vector products), of lengths drawn from a few.
BatchedEinsum bench_like(std::mt19937_64& rng, int shape) {
  const std::int64_t few[] = {2, 3, 4, 6, 8};
  auto len = [&] { return Length::of(few[rng() % 5]); };
  BatchedEinsum e;
  e.batch = {{"A", "B"}};
  switch (shape) {
    case 0:
      e.inputs = {"ik", "kj"}, e.output = "ij";
      e.arrays["A"] = {{len(), len()}, Dtype::f64};
      e.arrays["B"] = {{e.arrays["A"].shape[1], len()}, Dtype::f64};
      break;
    case 1:
      e.inputs = {"ij", "jk"}, e.output = "ik";
      e.arrays["A"] = {{len(), len()}, Dtype::f64};
      e.arrays["B"] = {{e.arrays["A"].shape[1], len()}, Dtype::f64};
      e.arrays["C"] = e.arrays["B"];
      e.batch = {{"A", "B"}, {"A", "C"}};
      break;
    case 2:
      e.inputs = {"bik", "bkj"}, e.output = "bij";
      e.arrays["A"] = {{len(), len(), len()}, Dtype::f32};
      e.arrays["B"] = {{e.arrays["A"].shape[0], e.arrays["A"].shape[2], len()}, Dtype::f32};
      break;
    case 3:
      e.inputs = {"abcd", "ea"}, e.output = "ebcd";
      e.arrays["A"] = {{len(), len(), len(), len()}, Dtype::f64};
      e.arrays["B"] = {{len(), e.arrays["A"].shape[0]}, Dtype::f64};
      break;
    default:  // symbolic rows, or (as a query) a concrete size of them
      e.inputs = {"ij", "j"}, e.output = "i";
      e.arrays["A"] = {{shape == 4 ? Length::named("N") : len(), len()}, Dtype::f64};
      e.arrays["x"] = {{e.arrays["A"].shape[1]}, Dtype::f64};
      e.batch = {{"A", "x"}};
      break;
  }
  return e;
}

// Every answer of the quick path (the query labeled once, facts ranked as read, the structure
// labeled only on a miss, symbolic bindings by the structure, the nearest size nearest first
// from the sizes tree) equals the reference path's, for respellings of stored workloads, sizes
// never measured and concrete sizes of symbolic workloads.
TEST_F(FactsTest, TheQuickPathAnswersAsTheReferencePathDoes) {
  std::mt19937_64 rng(52);
  Store store = Store::open(dir_.path("quick.sqlite"));
  const Machine ma = machine("CPU A"), mb = machine("CPU B");
  const double times[] = {1e-3, 2e-3, 3e-3, 4e-3};  // few, so that transforms tie
  std::vector<BatchedEinsum> stored;
  for (int w = 0; w < 400; ++w) {
    const BatchedEinsum e = bench_like(rng, w % 5);
    const Canonical c = canonicalize(e);
    const auto lengths = e.index_lengths();
    std::vector<std::pair<const Canonical*, Measurement>> run;
    for (int k = 1 + static_cast<int>(rng() % 4); k > 0; --k) {
      // Parameters that name an index and an array of the spec, in its own names.
      auto index = lengths.begin();
      std::advance(index, static_cast<long>(rng() % lengths.size()));
      auto array = e.arrays.begin();
      std::advance(array, static_cast<long>(rng() % e.arrays.size()));
      Measurement m;
      m.transform = {"strategy" + std::to_string(rng() % 3),
                     {{"inner", {{"index", std::string(1, index->first)}}},
                      {"pack", {{"array", array->first}}},
                      {"tile", 8 << (rng() % 3)}}};
      m.seconds = {times[rng() % 4]};
      m.max_rel_err = 1e-15;
      if (!symbols(e).empty()) m.binding = {{"N", static_cast<std::int64_t>(16 << (rng() % 3))}};
      run.emplace_back(&c, to_canonical(c, std::move(m)));
    }
    store.record_run({"run", "test", "", ""}, rng() % 5 ? ma : mb, run);
    stored.push_back(e);
  }
  const std::vector<std::string> machines{ma.fingerprint()};
  std::map<Match, int> answered;
  int none = 0;
  for (int q = 0; q < 600; ++q) {
    // A stored workload respelled, a new size of a stored structure, or a concrete size of the
    // symbolic rows.
    const BatchedEinsum e = testing::random_respelling(
        q % 3 == 0 ? stored[rng() % stored.size()] : bench_like(rng, q % 3 == 1 ? q / 3 % 4 : 5),
        rng);
    const auto reference = reference_best(store, e, machines);
    const auto quick = best_for(store, canonicalize(e, {.structure = false}), machines.front());
    ASSERT_EQ(quick.has_value(), reference.has_value()) << to_json(e).dump();
    if (!quick) {
      ++none;
      continue;
    }
    ++answered[quick->match];
    EXPECT_EQ(quick->match, reference->match) << to_json(e).dump();
    EXPECT_EQ(quick->fact.transform.name, reference->transform) << to_json(e).dump();
    EXPECT_EQ(quick->params, reference->params) << to_json(e).dump();
    EXPECT_EQ(quick->fact.median_s, reference->median_s) << to_json(e).dump();
    EXPECT_EQ(quick->distance, reference->distance) << to_json(e).dump();
  }
  EXPECT_GT(answered[Match::exact], 100);
  EXPECT_GT(answered[Match::symbolic], 50);
  EXPECT_GT(answered[Match::nearest], 100);
  RecordProperty("unanswered", none);
}

}  // namespace
}  // namespace einsumdb
