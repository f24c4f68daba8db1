// The tuner: every candidate measured is recorded with its verdict; a wrong result is recorded
// invalid and never returned as best; budgets, interruption and the measuring protocol.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <limits>
#include <memory>
#include <thread>

#include "einsumdb/canon/metrics.hpp"
#include "einsumdb/canon/parse.hpp"
#include "einsumdb/core/error.hpp"
#include "einsumdb/db/retrieve.hpp"
#include "einsumdb/executor/deadline.hpp"
#include "einsumdb/tests/support/temp_dir.hpp"
#include "einsumdb/tuner/roofline.hpp"
#include "einsumdb/tuner/sampling.hpp"
#include "einsumdb/tuner/tuner.hpp"

namespace einsumdb {
namespace {

using json = nlohmann::json;

Machine test_machine() {
  return detect_machine("test BLAS");
}

BatchedEinsum product(const std::string& shapes_a, const std::string& shapes_b) {
  SpecFlags f;
  f.shapes = {"A=" + shapes_a, "B=" + shapes_b};
  return read_spec_argument("ik,kj->ij", f);
}

TuneOptions quick() {
  TuneOptions o;
  o.protocol = {1, 3, 0.0};
  o.slow_factor = 1e9;  // time every candidate
  return o;
}

// quick(), probing workloads above 2^21 loop iterations (a 256³ product has 2^24).
TuneOptions probed() {
  TuneOptions o = quick();
  o.probe_iterations = 1 << 21;
  return o;
}

// probed(), ruling nothing out, neither in the probe nor by the best's time: only the time limit
// (`seconds`) ends the search, and long runs (3 samples) from `long_run_s`.
TuneOptions only_the_time_limit(double seconds, double long_run_s) {
  TuneOptions o = probed();
  o.probe_factor = 1e9;
  o.race_factor = 1e9;
  o.protocol.long_run_s = long_run_s;
  o.time_limit = seconds;
  return o;
}

// A strategy that is fast and wrong (registered only here), and one that throws.
Strategy broken() {
  return {"broken", "ttgt with one element off",
          [](const BatchedEinsum& e) { return ttgt_rejects(e); },
          [](const Bound& b, const nlohmann::json&) {
            Results r = execute(b, "ttgt");
            r[0].set(0, r[0].at(0) + 1.0);
            return r;
          },
          nullptr};
}
// A strategy registered only here: tensor_gemm after `before` (a delay, a scratch tensor, a note
// of the process's state), at this priority.
Strategy tensor_gemm_after(std::string name, std::string summary, std::function<void()> before,
                           int priority = 100) {
  return {std::move(name),
          std::move(summary),
          [](const BatchedEinsum&) { return std::optional<std::string>(); },
          [before = std::move(before)](const Bound& b, const nlohmann::json&) {
            before();
            return execute(b, "tensor_gemm");
          },
          nullptr,
          priority};
}
Strategy failing() {
  return {"failing", "throws", [](const BatchedEinsum&) { return std::optional<std::string>(); },
          [](const Bound&, const nlohmann::json&) -> Results {
            throw std::runtime_error("out of registers");
          },
          nullptr};
}

TEST(Tuner, RecordsEveryVerdictAndNeverReturnsAWrongResult) {
  testing::TempDir dir("tuner");
  Store store = Store::open(dir.path("db.sqlite"));
  const BatchedEinsum e = product("40x30", "30x50");
  TuneOptions o = quick();
  o.extra = {broken(), failing()};
  o.run.label = "test";
  const TuneReport report = tune(store, test_machine(), e, o);
  EXPECT_EQ(report.results.size(), report.total);
  std::map<std::string, Outcome> verdict;
  for (const auto& r : report.results) verdict[r.candidate.strategy] = r.status;
  EXPECT_EQ(verdict.at("broken"), Outcome::invalid);
  EXPECT_EQ(verdict.at("failing"), Outcome::failed);
  EXPECT_EQ(verdict.at("ttgt"), Outcome::ok);
  EXPECT_EQ(verdict.at("loop_nest"), Outcome::ok);
  // Everything is in the store, in one run.
  const auto rows = store.show(report.workload_hash);
  EXPECT_EQ(rows.size(), report.total);
  std::set<std::int64_t> runs;
  int invalid = 0, failed = 0;
  for (const auto& row : rows) {
    runs.insert(row["run"]["id"].get<std::int64_t>());
    invalid += row["status"] == "invalid";
    failed += row["status"] == "failed";
  }
  EXPECT_EQ(runs.size(), 1u);
  EXPECT_EQ(invalid, 1);
  EXPECT_EQ(failed, 1);
  // The broken strategy is the fastest thing measured, yet never the answer.
  for (const auto& a : top_k_for(store, canonicalize(e), test_machine().fingerprint(), 100))
    EXPECT_NE(a.fact.transform.name, "broken");
  const auto best = best_for(store, canonicalize(e), test_machine().fingerprint());
  ASSERT_TRUE(best);
  EXPECT_NE(best->fact.transform.name, "broken");
  EXPECT_NE(best->fact.transform.name, "failing");
}

TEST(Tuner, BudgetMeasuresTheDefaultsFirstAndStopsInTime) {
  testing::TempDir dir("tuner");
  Store store = Store::open(dir.path("db.sqlite"));
  const BatchedEinsum e = product("64x64", "64x64");
  TuneOptions o = quick();
  // Each candidate takes at least min_time, so the budget holds round one (4 × 0.1 s) with room
  // for the runs' own time on a loaded machine, and far fewer than every candidate.
  o.protocol = {1, 3, 0.1};
  o.budget = 1.0;
  const TuneReport report = tune(store, test_machine(), e, o);
  EXPECT_TRUE(report.budget_exhausted);
  EXPECT_LT(report.results.size(), report.total);
  // Round one: every strategy's default before any second candidate.
  std::set<std::string> first;
  for (const auto& r : report.results) {
    if (first.count(r.candidate.strategy)) break;
    first.insert(r.candidate.strategy);
  }
  EXPECT_EQ(first, (std::set<std::string>{"loop_nest", "ttgt", "loop_over_gemm", "tensor_gemm"}));
}

TEST(Tuner, AnInterruptionKeepsWhatWasMeasured) {
  testing::TempDir dir("tuner");
  Store store = Store::open(dir.path("db.sqlite"));
  const BatchedEinsum e = product("20x20", "20x20");
  std::atomic<bool> stop{false};
  TuneOptions o = quick();
  o.stop = &stop;
  const TuneReport report =
      tune(store, test_machine(), e, o,
           [&](std::size_t done, std::size_t, const TuneResult&, const TuneResult*) {
             if (done == 4) stop.store(true);  // as the SIGINT handler does
           });
  EXPECT_TRUE(report.interrupted);
  EXPECT_EQ(report.results.size(), 4u);
  EXPECT_EQ(store.show(report.workload_hash).size(), 4u);
}

TEST(Tuner, ProtocolTakesTheRepetitionsAndTheTimeAsked) {
  testing::TempDir dir("tuner");
  Store store = Store::open(dir.path("db.sqlite"));
  const BatchedEinsum e = product("30x30", "30x30");
  TuneOptions o;
  o.protocol = {2, 7, 0.05};
  o.space.strategies = {"ttgt"};
  const auto t0 = std::chrono::steady_clock::now();
  const TuneReport report = tune(store, test_machine(), e, o);
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(report.results.size(), 1u);
  const auto& r = report.results[0];
  EXPECT_GE(r.seconds.size(), 7u);
  EXPECT_GE(elapsed, 0.05);
  // Samples are per run (short runs are timed in groups): far below the time spent.
  for (double t : r.seconds) EXPECT_LT(t, 0.01);
  EXPECT_GT(*r.gflops, 0);
}

// The loop `run` and the protocol take their samples with: the count and the time asked, calls in
// groups, a stop after any sample, the samples already held counted.
TEST(Sampling, TakesTheSamplesAndTheTimeAskedInGroupsAndStopsWhenAsked) {
  int calls = 0;
  auto nap = [&] {
    ++calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  auto never = [] { return false; };
  std::vector<double> seconds;
  sample_calls(seconds, {3, 0, 1}, nap, never);
  EXPECT_EQ(seconds.size(), 3u);
  EXPECT_EQ(calls, 3);
  for (double t : seconds) EXPECT_GE(t, 0.001);

  seconds.clear(), calls = 0;
  sample_calls(seconds, {1, 0.02, 2}, nap, never);
  double sum = 0;
  for (double t : seconds) sum += 2 * t;  // each sample the mean of its two calls
  EXPECT_GE(sum, 0.02);
  EXPECT_EQ(calls, 2 * static_cast<int>(seconds.size()));

  seconds = {1.0, 1.0};  // two samples held already: one more makes three
  calls = 0;
  sample_calls(seconds, {3, 0, 1}, nap, never);
  EXPECT_EQ(seconds.size(), 3u);
  EXPECT_EQ(calls, 1);

  seconds.clear(), calls = 0;
  sample_calls(seconds, {100, 10.0, 1}, nap, [&] { return calls == 4; });
  EXPECT_EQ(seconds.size(), 4u);

  seconds.clear(), calls = 0;
  sample_calls(seconds, {100, 0, 1, 5}, nap, never);
  EXPECT_EQ(seconds.size(), 5u);
}

// Real, complex and mixed: the oracle's scale (its run on the operands' magnitudes, in single
// precision) leaves every correct candidate within the tolerance and one element off outside it.
TEST(Tuner, LargeWorkloadsAreVerifiedAgainstACheckedOracle) {
  for (const auto& [a, b] : std::vector<std::pair<std::string, std::string>>{
           {"f64", "f64"}, {"c64", "c64"}, {"c128", "c128"}, {"f64", "c64"}}) {
    SCOPED_TRACE(a + " × " + b);
    testing::TempDir dir("tuner");
    Store store = Store::open(dir.path("db.sqlite"));
    BatchedEinsum e = product("60x50", "50x40");
    e.arrays.at("A").dtype = *parse_dtype(a);
    e.arrays.at("B").dtype = *parse_dtype(b);
    TuneOptions o = quick();
    o.reference_limit = 1000;  // pretend the reference is too slow
    o.space.strategies = {"loop_nest", "ttgt"};
    o.extra = {broken()};
    o.space.strategies.push_back("broken");
    const TuneReport report = tune(store, test_machine(), e, o);
    EXPECT_NE(report.oracle.find("tensor_gemm"), std::string::npos);
    for (const auto& r : report.results)
      EXPECT_EQ(r.status, r.candidate.strategy == "broken" ? Outcome::invalid : Outcome::ok)
          << r.candidate.strategy << ": " << r.error;
  }
}

// The oracle's full-size run is the first run of the candidate that is the same transform, which
// is not run again to be verified.
TEST(Tuner, TheOraclesRunIsTheFirstRunOfTheSameCandidate) {
  testing::TempDir dir("tuner");
  Store store = Store::open(dir.path("db.sqlite"));
  const BatchedEinsum e = product("60x50", "50x40");
  TuneOptions o = quick();
  o.reference_limit = 1000;
  o.protocol.long_run_s = 0;  // every run is long: one warm-up, then three samples
  o.space.strategies = {"tensor_gemm"};
  const TuneReport report = tune(store, test_machine(), e, o);
  EXPECT_GT(report.oracle_seconds, 0);
  // tensor_gemm with its defaults (its rows stream here: its packed path is a second candidate).
  const auto same = std::find_if(report.results.begin(), report.results.end(), [](const auto& x) {
    return x.candidate.strategy == "tensor_gemm" && !x.candidate.params.contains("stream_rows");
  });
  ASSERT_NE(same, report.results.end()) << report.results.front().candidate.params;
  const auto& r = *same;
  EXPECT_EQ(r.status, Outcome::ok);
  ASSERT_EQ(r.seconds.size(), 3u);
  // Verified by being the oracle, not run again for it; and, run before the tuner unmapped the
  // memory it had used, not a sample (the next run maps its result afresh: a warm-up).
  EXPECT_EQ(r.max_rel_err, 0.0);
  for (const double t : r.seconds) EXPECT_NE(t, report.oracle_seconds);
}

// A large workload: the probe runs every candidate on a reduced copy, and those far slower there
// are recorded as timeouts without a run at full size.
TEST(Tuner, TheProbeRulesOutHopelessCandidatesBeforeTheFullSize) {
  testing::TempDir dir("tuner");
  Store store = Store::open(dir.path("db.sqlite"));
  const BatchedEinsum e = product("256x256", "256x256");
  TuneOptions o = probed();
  o.space.strategies = {"tensor_gemm", "loop_nest"};
  const TuneReport report = tune(store, test_machine(), e, o);
  EXPECT_EQ(report.probed, report.total);
  int ruled_out = 0, timed = 0;
  for (const auto& r : report.results) {
    if (r.status == Outcome::timeout && r.seconds.empty()) {
      ++ruled_out;
      EXPECT_EQ(r.candidate.strategy, "loop_nest");
      EXPECT_NE(r.error.find("probe"), std::string::npos) << r.error;
    } else {
      EXPECT_EQ(r.status, Outcome::ok) << r.candidate.strategy;
      ++timed;
    }
  }
  EXPECT_GT(ruled_out, 0);
  EXPECT_GT(timed, 0);
  EXPECT_EQ(report.results.size(), report.total);  // every candidate recorded
  // Without the probe, every candidate runs at full size.
  o.probe_factor = 0;
  o.space.strategies = {"tensor_gemm"};
  EXPECT_EQ(tune(store, test_machine(), e, o).probed, 0u);
}

// The probe times a candidate by its fastest of a few runs: one run slowed by a neighbour on the
// machine (here a pause in the probe's first timed run) does not rule a fast candidate out.
TEST(Tuner, OneSlowRunInTheProbeRulesNothingOut) {
  testing::TempDir dir("tuner");
  Store store = Store::open(dir.path("db.sqlite"));
  const BatchedEinsum e = product("256x256", "256x256");
  auto calls = std::make_shared<int>(0);
  const Strategy paused =
      tensor_gemm_after("paused", "tensor_gemm, its second run 20 ms late", [calls] {
        if (++*calls == 2) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      });
  TuneOptions o = probed();
  o.extra = {paused};
  o.space.strategies = {"tensor_gemm", "paused"};
  const TuneReport report = tune(store, test_machine(), e, o);
  EXPECT_EQ(report.probed, 2u);
  EXPECT_GE(*calls, 3);  // the probe's warm-up, the paused run and more
  for (const auto& r : report.results)
    EXPECT_EQ(r.status, Outcome::ok) << r.candidate.strategy << ": " << r.error;
}

// After a probe the full-size candidates go fastest first, whatever the strategies' priority,
// and a long run already race_factor times slower than the best is timed once.
TEST(Tuner, LongRunsFarBehindTheBestAreTimedOnce) {
  testing::TempDir dir("tuner");
  Store store = Store::open(dir.path("db.sqlite"));
  const BatchedEinsum e = product("256x256", "256x256");
  const Strategy late = tensor_gemm_after(
      "late", "tensor_gemm, 100 ms late",
      [] { std::this_thread::sleep_for(std::chrono::milliseconds(100)); },
      0);  // first in the priority order
  TuneOptions o = probed();
  o.probe_factor = 1e9;  // the probe rules nothing out
  // late's runs are long, and more than 1.5× behind while tensor_gemm's take under 200 ms (about
  // 1 ms here)
  o.protocol.long_run_s = 0.05;
  o.extra = {late};
  o.space.strategies = {"tensor_gemm", "late"};
  const TuneReport report = tune(store, test_machine(), e, o);
  ASSERT_EQ(report.results.size(), 2u);
  EXPECT_EQ(report.results[0].candidate.strategy, "tensor_gemm");
  EXPECT_EQ(report.results[0].seconds.size(), 3u);
  EXPECT_EQ(report.results[1].candidate.strategy, "late");
  EXPECT_EQ(report.results[1].status, Outcome::ok);
  EXPECT_EQ(report.results[1].seconds.size(), 1u);
}

// A candidate's freed tensors are not kept for reuse once it is measured: the next candidate
// starts with none of its scratch in the process (kept, the cache may hold as much as the tensors
// alive, and a tune's peak memory grew with the candidates' scratch).
TEST(Tuner, NoCandidateStartsWithAnEarlierCandidatesScratch) {
  if (!recycles_large_tensors())
    GTEST_SKIP() << "under AddressSanitizer tensors are heap blocks, not recycled";
  testing::TempDir dir("tuner");
  Store store = Store::open(dir.path("db.sqlite"));
  const BatchedEinsum e = product("64x64", "64x64");
  const Strategy scratchy = tensor_gemm_after(
      "scratchy", "tensor_gemm after writing a 16 MiB scratch tensor",
      [] {
        Tensor scratch(Dtype::f64, {2048, 1024});
      },
      0);  // measured first
  auto cached = std::make_shared<std::vector<std::size_t>>();
  const Strategy watcher = tensor_gemm_after(
      "watcher", "tensor_gemm, noting the bytes kept for reuse when it starts",
      [cached] { cached->push_back(recycled_bytes()); }, 1);
  TuneOptions o = quick();
  o.extra = {scratchy, watcher};
  o.space.strategies = {"scratchy", "watcher"};
  const TuneReport report = tune(store, test_machine(), e, o);
  ASSERT_EQ(report.results.size(), 2u);
  EXPECT_EQ(report.results[0].candidate.strategy, "scratchy");
  for (const auto& r : report.results) EXPECT_EQ(r.status, Outcome::ok) << r.error;
  ASSERT_FALSE(cached->empty());
  EXPECT_LT(cached->front(), std::size_t{16} << 20) << "scratchy's scratch is still cached";
}

// A candidate whose verified run is long is timed long_run_reps times after it, without further
// warm-up or the minimum time.
TEST(Tuner, LongRunsAreTimedAFewTimes) {
  testing::TempDir dir("tuner");
  Store store = Store::open(dir.path("db.sqlite"));
  const BatchedEinsum e = product("64x64", "64x64");
  auto calls = std::make_shared<int>(0);
  TuneOptions o = quick();
  o.protocol = {5, 20, 30.0};
  o.protocol.long_run_s = 0;  // every run counts as long
  // Runs of 2 ms or more, timed one by one (shorter ones are timed in groups).
  o.extra = {tensor_gemm_after("counted", "tensor_gemm after 2 ms, its runs counted", [calls] {
    ++*calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  })};
  o.space.strategies = {"counted"};
  const auto t0 = std::chrono::steady_clock::now();
  const TuneReport report = tune(store, test_machine(), e, o);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30);
  ASSERT_EQ(report.results.size(), 1u);
  EXPECT_EQ(report.results[0].status, Outcome::ok);
  EXPECT_EQ(report.results[0].seconds.size(), 3u);
  EXPECT_EQ(*calls, 4);  // the verified first run, then the three samples
}

// No sample is a candidate's first run, which pays what only a first run pays (pages of its
// result written for the first time, libxsmm's code generation): not a long run's either.
TEST(Tuner, NoSampleIsACandidatesFirstRun) {
  testing::TempDir dir("tuner");
  Store store = Store::open(dir.path("db.sqlite"));
  const BatchedEinsum e = product("64x64", "64x64");
  for (const double long_run_s : {0.0, 1e9}) {  // every run long; none
    auto calls = std::make_shared<int>(0);
    TuneOptions o = quick();
    o.protocol = {3, 5, 0.0};
    o.protocol.long_run_s = long_run_s;
    o.extra = {tensor_gemm_after("cold", "tensor_gemm, its first run 50 ms longer", [calls] {
      if ((*calls)++ == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    })};
    o.space.strategies = {"cold"};
    const TuneReport report = tune(store, test_machine(), e, o);
    ASSERT_EQ(report.results.size(), 1u);
    const TuneResult& r = report.results[0];
    EXPECT_EQ(r.status, Outcome::ok) << r.error;
    EXPECT_EQ(r.seconds.size(), long_run_s == 0 ? 3u : 5u);
    for (const double t : r.seconds) EXPECT_LT(t, 0.04) << "the first run is a sample";
  }
}

// The finalists, candidates within finalist_factor of the best, are timed again in turns, and
// those samples are what is recorded: two candidates timed one after the other would see the
// machine at different moments.
TEST(Tuner, TheFinalistsAreTimedAgainInTurns) {
  testing::TempDir dir("tuner");
  Store store = Store::open(dir.path("db.sqlite"));
  const BatchedEinsum e = product("64x64", "64x64");
  auto calls = std::make_shared<std::vector<std::string>>();
  auto noted = [calls](std::string name) {
    return tensor_gemm_after(name, "tensor_gemm after 2 ms, its calls noted", [calls, name] {
      calls->push_back(name);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    });
  };
  TuneOptions o = quick();
  o.protocol = {1, 3, 0.0};
  o.protocol.long_run_s = 0;  // three rounds
  o.finalist_factor = 1e9;    // both are finalists
  // Every run is a long one here (long_run_s = 0), and a long run slower than race_factor (1.5) ×
  // the best is stopped: with runs of 2 ms, a neighbour on the machine delaying one run by 1 ms
  // makes the second candidate a timeout and no finalist. Nothing races in this test.
  o.race_factor = 1e9;
  o.extra = {noted("left"), noted("right")};
  o.space.strategies = {"left", "right"};
  const TuneReport report = tune(store, test_machine(), e, o);
  ASSERT_EQ(report.results.size(), 2u);
  for (const auto& r : report.results) {
    EXPECT_EQ(r.status, Outcome::ok) << r.error;
    EXPECT_TRUE(r.search_median_s) << r.candidate.strategy << " was not a finalist";
    EXPECT_EQ(r.seconds.size(), 3u);
  }
  // The last six calls: three rounds, each of one call of each finalist.
  ASSERT_GE(calls->size(), 6u);
  for (std::size_t k = calls->size() - 6; k < calls->size(); k += 2)
    EXPECT_NE((*calls)[k], (*calls)[k + 1])
        << "calls " << k << " and " << k + 1 << " are not one round";
  // What is recorded is the final round's samples.
  const auto rows = store.show(report.workload_hash);
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& row : rows) EXPECT_EQ(row["seconds"].size(), 3u) << row.dump();

  // A finalist's first turn maps its memory afresh (its blocks were unmapped after it was
  // measured): that run is not a sample. Here a run takes 2 ms (so it is timed alone, not in a
  // group), and one that maps a block 50 ms more.
  if (recycles_large_tensors()) {
    auto cold_when_mapping = [](std::string name) {
      auto cold = [] {
        const std::uint64_t before = fresh_mappings();
        // 1 MiB: a mapping of its own. Not written: a recycled block that was never written
        // (a fresh mapping is zero already) would fault on its first writes, which on a virtual
        // machine can take as long again as the run.
        Tensor scratch(Dtype::f64, {128, 1024}, Tensor::Uninitialized{});
        const bool mapped = fresh_mappings() != before;
        std::this_thread::sleep_for(std::chrono::milliseconds(mapped ? 52 : 2));
      };
      return tensor_gemm_after(name, "tensor_gemm after 2 ms, 50 ms more when it maps", cold);
    };
    o.extra = {cold_when_mapping("left"), cold_when_mapping("right")};
    const TuneReport cold = tune(store, test_machine(), e, o);
    ASSERT_EQ(cold.results.size(), 2u);
    for (const auto& r : cold.results) {
      EXPECT_TRUE(r.search_median_s) << r.candidate.strategy << " was not a finalist";
      for (const double t : r.seconds) EXPECT_LT(t, 0.04) << r.candidate.strategy;
    }
  }

  // A candidate far from the best is not a finalist.
  calls->clear();
  o.finalist_factor = 1.25;
  o.extra = {noted("left"), tensor_gemm_after("slow", "tensor_gemm after 40 ms", [] {
               std::this_thread::sleep_for(std::chrono::milliseconds(40));
             })};
  o.space.strategies = {"left", "slow"};
  const TuneReport far = tune(store, test_machine(), e, o);
  ASSERT_EQ(far.results.size(), 2u);
  for (const auto& r : far.results) EXPECT_FALSE(r.search_median_s) << r.candidate.strategy;
}

// A strategy registered only here: tensor_gemm after `seconds` of short pieces of work, each
// followed by a check of the run's deadline (as the executor's loops do), or of one piece that
// cannot be stopped (as one OpenBLAS call); `reduced_seconds` instead where index i is shorter
// than `from_i` (the probe's reduced copy).
Strategy crawling(std::string name, double seconds, std::int64_t from_i = 0,
                  double reduced_seconds = 0, bool checks = true) {
  return {std::move(name), "tensor_gemm after a long loop that checks its deadline",
          [](const BatchedEinsum&) { return std::optional<std::string>(); },
          [=](const Bound& b, const nlohmann::json&) {
            const double wait = b.length('i') >= from_i ? seconds : reduced_seconds;
            const auto end = std::chrono::steady_clock::now() +
                             std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                 std::chrono::duration<double>(wait));
            if (!checks) std::this_thread::sleep_until(end);
            while (std::chrono::steady_clock::now() < end) {
              std::this_thread::sleep_for(std::chrono::milliseconds(1));
              check_deadline();
            }
            return execute(b, "tensor_gemm");
          },
          nullptr};
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The first candidate of a time-limited search is measured whatever the limit, with as many
// samples of its long runs as fit before it (one at least), and the search then ends: with runs of
// 0.2 s and 0.5 s for all, the first run and one sample, where three samples would end past 0.8 s.
// The oracle is tensor_gemm, whose run the report times and the bounds leave out (the reference's
// run it does not time, and the sanitizers slow the reference most).
TEST(Tuner, TheFirstCandidatesSamplesFitTheTimeLimit) {
  testing::TempDir dir("tuner");
  Store store = Store::open(dir.path("db.sqlite"));
  const BatchedEinsum e = product("256x256", "256x256");
  TuneOptions o = only_the_time_limit(0.5, 0.1);
  o.reference_limit = 0;
  o.extra = {crawling("crawl1", 0.2, 256, 0.005), crawling("crawl2", 0.2, 256, 0.005)};
  o.space.strategies = {"crawl1", "crawl2"};
  const auto t0 = std::chrono::steady_clock::now();
  const TuneReport report = tune(store, test_machine(), e, o);
  const double elapsed = seconds_since(t0);
  ASSERT_EQ(report.results.size(), 1u);
  EXPECT_EQ(report.not_measured, 1u);
  const TuneResult& r = report.results.front();
  EXPECT_EQ(r.status, Outcome::ok) << r.error;
  EXPECT_EQ(r.seconds.size(), 1u);
  // Under the first run and three samples alone (4 × 0.2 s), less what comes before the search
  // (the arrays and the oracle's run), which a loaded machine and the sanitizers stretch.
  EXPECT_LT(elapsed - report.arrays_seconds - report.oracle_seconds, 0.8);

  // With 1.6 s, the first candidate's first run and three samples end past 0.8 s, and the second
  // is not started: four runs as fast as the first's (its first run and three samples) would pass
  // the limit. Started, it would be stopped at the limit.
  o.time_limit = 1.6;
  const auto t1 = std::chrono::steady_clock::now();
  const TuneReport longer = tune(store, test_machine(), e, o);
  EXPECT_LT(seconds_since(t1) - longer.arrays_seconds - longer.oracle_seconds, 1.2);
  ASSERT_EQ(longer.results.size(), 1u);
  EXPECT_EQ(longer.results.front().seconds.size(), 3u);
  EXPECT_EQ(longer.not_measured, 1u);
}

// At full size a run far slower than the best is stopped where it can no longer pass (twice when
// its runs are short: the first may include one-time costs; once when a run that long is a long
// run, race_factor times the best), not run to its end: recorded as timeout without samples.
TEST(Tuner, AHopelessRunIsStoppedNotWaitedFor) {
  testing::TempDir dir("tuner");
  Store store = Store::open(dir.path("db.sqlite"));
  const BatchedEinsum e = product("64x64", "64x64");
  for (double long_run_s : {0.5, 0.0}) {
    TuneOptions o = quick();
    o.slow_factor = 10;
    o.protocol.long_run_s = long_run_s;  // 0: every run is long, and races
    // One fast candidate ("quick": tensor_gemm's default, nothing to wait for), so that no other
    // candidate races it within 1.5× on a loaded machine.
    o.extra = {crawling("crawl", 30), crawling("quick", 0)};
    o.space.strategies = {"quick", "crawl"};
    const auto t0 = std::chrono::steady_clock::now();
    const TuneReport report = tune(store, test_machine(), e, o);
    EXPECT_LT(seconds_since(t0), 10);
    ASSERT_EQ(report.results.size(), 2u);  // quick and crawl
    const auto crawl = std::find_if(report.results.begin(), report.results.end(),
                                    [](const auto& x) { return x.candidate.strategy == "crawl"; });
    ASSERT_NE(crawl, report.results.end());
    for (const auto& x : report.results) {
      if (x.candidate.strategy == "crawl") continue;
      EXPECT_EQ(x.status, Outcome::ok) << x.candidate.params;
    }
    const auto& r = *crawl;
    EXPECT_EQ(r.status, Outcome::timeout);
    EXPECT_TRUE(r.seconds.empty());
    EXPECT_EQ(r.error.rfind("stopped after", 0), 0u) << r.error;
    EXPECT_NE(r.error.find(long_run_s == 0 ? "1.5" : "10.0"), std::string::npos) << r.error;
  }
}

// In the probe, a candidate whose every run there is stopped at probe_factor times the fastest is
// ruled out without waiting for its runs to end.
TEST(Tuner, TheProbeStopsAHopelessCandidate) {
  testing::TempDir dir("tuner");
  Store store = Store::open(dir.path("db.sqlite"));
  const BatchedEinsum e = product("256x256", "256x256");
  TuneOptions o = probed();
  o.extra = {crawling("crawl", 30)};  // after tensor_gemm in the probe (priority 100)
  o.space.strategies = {"tensor_gemm", "crawl"};
  const auto t0 = std::chrono::steady_clock::now();
  const TuneReport report = tune(store, test_machine(), e, o);
  EXPECT_LT(seconds_since(t0), 10);
  EXPECT_EQ(report.probed, 2u);
  bool seen = false;
  for (const auto& r : report.results)
    if (r.candidate.strategy == "crawl") {
      seen = true;
      EXPECT_EQ(r.status, Outcome::timeout);
      EXPECT_EQ(r.error.rfind("ruled out by the probe at reduced size: stopped after", 0), 0u)
          << r.error;
    }
  EXPECT_TRUE(seen);
}

// A probed workload's search ends at the time limit once a candidate is measured: the run in
// progress is stopped, and neither it nor the candidates not reached are recorded. Without a limit
// every candidate is measured.
TEST(Tuner, TheTimeLimitEndsALargeWorkloadsSearch) {
  testing::TempDir dir("tuner");
  Store store = Store::open(dir.path("db.sqlite"));
  const BatchedEinsum e = product("256x256", "256x256");
  // A crawl's run is long: 3 runs, the verified first among them.
  TuneOptions o = only_the_time_limit(0.3, 0.1);
  // Each 0.2 s at full size (i = 256); in the probe 5 ms, after tensor_gemm.
  o.extra = {crawling("crawl1", 0.2, 256, 0.005), crawling("crawl2", 0.2, 256, 0.005),
             crawling("crawl3", 0.2, 256, 0.005)};
  o.space.strategies = {"tensor_gemm", "crawl1", "crawl2", "crawl3"};
  auto t0 = std::chrono::steady_clock::now();
  double first_measured = 0;  // when the first candidate was recorded
  const TuneReport limited =
      tune(store, test_machine(), e, o,
           [&](std::size_t, std::size_t, const TuneResult&, const TuneResult*) {
             if (first_measured == 0) first_measured = seconds_since(t0);
           });
  const double elapsed = seconds_since(t0);
  EXPECT_TRUE(limited.time_limit_reached);
  EXPECT_GT(limited.not_measured, 0u);
  EXPECT_EQ(limited.results.size() + limited.not_measured, limited.total);
  // The limit (or the first candidate, measured whatever the limit), and no crawl's 0.2 s run to
  // its end after it.
  EXPECT_LT(elapsed, std::max(o.time_limit, first_measured) + 0.19);
  bool gemm = false;
  for (const auto& r : limited.results) {
    EXPECT_EQ(r.status, Outcome::ok) << r.candidate.strategy << ": " << r.error;
    gemm = gemm || r.candidate.strategy == "tensor_gemm";
  }
  EXPECT_TRUE(gemm);  // the fastest in the probe, measured first
  EXPECT_EQ(store.show(limited.workload_hash).size(), limited.results.size());

  o.time_limit = 0;
  const TuneReport all = tune(store, test_machine(), e, o);
  EXPECT_FALSE(all.time_limit_reached);
  EXPECT_EQ(all.not_measured, 0u);
  EXPECT_EQ(all.results.size(), all.total);

  o.time_limit = -1;
  EXPECT_THROW(tune(store, test_machine(), e, o), SpecError);
}

// A tune of `e`, with when its first result was recorded (the best, where it is measured first)
// and when it ended, in seconds from its start.
struct TimedTune {
  TuneReport report;
  double best_done = 0, elapsed = 0;
};
TimedTune tune_after_the_best(Store& store, const BatchedEinsum& e, const TuneOptions& o) {
  TimedTune out;
  const auto t0 = std::chrono::steady_clock::now();
  out.report = tune(store, test_machine(), e, o,
                    [&](std::size_t, std::size_t, const TuneResult&, const TuneResult*) {
                      if (out.best_done == 0) out.best_done = seconds_since(t0);
                    });
  out.elapsed = seconds_since(t0);
  return out;
}

// Near the limit a candidate is not started when it could not be measured before it, were it as
// fast as the best: a run that cannot be stopped (one OpenBLAS call) would pass the limit.
TEST(Tuner, ACandidateThatCannotFinishBeforeTheLimitIsNotStarted) {
  testing::TempDir dir("tuner");
  Store store = Store::open(dir.path("db.sqlite"));
  const BatchedEinsum e = product("256x256", "256x256");
  TuneOptions o = only_the_time_limit(1.0, 0.1);  // 3 runs each: the best 0.6 s, the others 0.75
  o.extra = {crawling("best", 0.2, 256, 0, false), crawling("block1", 0.25, 256, 0.005, false),
             crawling("block2", 0.25, 256, 0.005, false)};
  o.space.strategies = {"best", "block1", "block2"};
  const auto [report, best_done, elapsed] = tune_after_the_best(store, e, o);
  ASSERT_FALSE(report.results.empty());
  EXPECT_EQ(report.results[0].candidate.strategy, "best");
  if (best_done >= o.time_limit)
    GTEST_SKIP() << "the best alone took until " << best_done
                 << " s, past the limit: a machine this slow decides nothing here";
  EXPECT_TRUE(report.time_limit_reached);
  EXPECT_EQ(report.not_measured, 2u);
  // block1 not started (it would have ended past the limit): one of its runs alone takes 0.25 s.
  // Measured from the best's end, not against the limit, which a loaded machine's slower best
  // can reach with the store's writes after it.
  EXPECT_LT(elapsed - best_done, 0.25);
}

// Near the limit a candidate is judged at its own speed, estimated from the probe: "slow", 10× the
// best there, is not started where four runs at the best's speed would fit but four of its own
// (0.3 s each, none of which can be stopped) would pass the limit.
TEST(Tuner, ACandidateSlowerInTheProbeIsJudgedAtItsOwnSpeed) {
  testing::TempDir dir("tuner");
  Store store = Store::open(dir.path("db.sqlite"));
  const BatchedEinsum e = product("256x256", "256x256");
  TuneOptions o = only_the_time_limit(1.2, 0.05);  // 4 runs each: the best 0.4 s, "slow" 1.2 s
  o.extra = {crawling("best", 0.1, 256, 0.001, false), crawling("slow", 0.3, 256, 0.01, false)};
  o.space.strategies = {"best", "slow"};
  const auto [report, best_done, elapsed] = tune_after_the_best(store, e, o);
  ASSERT_FALSE(report.results.empty());
  EXPECT_EQ(report.results[0].candidate.strategy, "best");
  if (best_done + 0.4 >= o.time_limit)
    GTEST_SKIP() << "the best alone took until " << best_done
                 << " s: four runs at its speed no longer fit, which decides nothing here";
  EXPECT_TRUE(report.time_limit_reached);
  EXPECT_EQ(report.not_measured, 1u);
  EXPECT_EQ(report.results.size(), 1u);
  EXPECT_LT(elapsed - best_done, 0.3);  // one run of "slow" takes 0.3 s
}

// Near the limit a run is not started when the candidate's last run, as long again, would end past
// it: "misjudged", twice the best in the probe but 6 times at full size (0.6 s a run, one piece
// that cannot be stopped, as one OpenBLAS call), is started where four runs at twice the best's
// speed fit (0.8 s), and after its first run its next would end past the limit (the best's four
// runs alone end past 0.4 s). Started anyway, that run would end 0.6 s later, stopped only then.
TEST(Tuner, ARunThatWouldEndPastTheLimitIsNotStarted) {
  testing::TempDir dir("tuner");
  Store store = Store::open(dir.path("db.sqlite"));
  const BatchedEinsum e = product("256x256", "256x256");
  TuneOptions o = only_the_time_limit(1.5, 0.05);
  std::atomic<int> full_size_runs{0};
  Strategy misjudged = crawling("misjudged", 0, 256, 0, false);
  misjudged.run = [&](const Bound& b, const nlohmann::json&) {
    const bool full_size = b.length('i') >= 256;
    if (full_size) ++full_size_runs;
    std::this_thread::sleep_for(std::chrono::duration<double>(full_size ? 0.6 : 0.002));
    return execute(b, "tensor_gemm");
  };
  o.extra = {crawling("best", 0.1, 256, 0.001, false), misjudged};
  o.space.strategies = {"best", "misjudged"};
  const auto [report, best_done, elapsed] = tune_after_the_best(store, e, o);
  ASSERT_FALSE(report.results.empty());
  EXPECT_EQ(report.results[0].candidate.strategy, "best");
  if (full_size_runs.load() == 0)
    GTEST_SKIP() << "the best alone took until " << best_done
                 << " s, and misjudged was not started: a machine this slow decides nothing here";
  EXPECT_TRUE(report.time_limit_reached);
  EXPECT_EQ(full_size_runs.load(), 1);
  EXPECT_EQ(report.results.size(), 1u);
  EXPECT_EQ(report.not_measured, 1u);
  EXPECT_LT(elapsed - best_done, 1.2);  // its first run, and not a second
}

TEST(Tuner, FarSlowerCandidatesAreRecordedAsTimeouts) {
  testing::TempDir dir("tuner");
  Store store = Store::open(dir.path("db.sqlite"));
  const BatchedEinsum e = product("128x128", "128x128");
  TuneOptions o = quick();
  o.slow_factor = 2;
  o.space.strategies = {"ttgt", "loop_nest"};
  const TuneReport report = tune(store, test_machine(), e, o);
  double best = std::numeric_limits<double>::infinity();
  for (const auto& r : report.results)
    if (r.status == Outcome::ok) best = std::min(best, r.median_s);
  int timeouts = 0;
  for (const auto& r : report.results) {
    if (r.status == Outcome::timeout) {
      ++timeouts;
      // Stopped at slow_factor times the best (twice: a first run may include one-time costs),
      // or, finished past it before its next check, with its runs.
      if (r.error.rfind("stopped after", 0) != 0) {
        EXPECT_FALSE(r.seconds.empty()) << r.error;
        for (double t : r.seconds) EXPECT_GT(t, o.slow_factor * best);
      }
      EXPECT_EQ(r.candidate.strategy, "loop_nest");
    }
  }
  EXPECT_GT(timeouts, 0);
  EXPECT_EQ(report.results.front().candidate.strategy, "ttgt");  // GEMM strategies first
}

// A first run slowed by a one-time cost (as libxsmm's code generation for a new shape) is not
// taken for the candidate's speed: it is timed when its second run is fast. The product is large
// enough (one to two milliseconds) that a loaded machine's pause in the second run does not make
// it ten times slower than ttgt's, as it did a 64x64 product's (tens of microseconds); the first
// run's 200 ms stay far beyond ten times that.
TEST(Tuner, AOneTimeCostInTheFirstRunIsNoTimeout) {
  testing::TempDir dir("tuner");
  Store store = Store::open(dir.path("db.sqlite"));
  const BatchedEinsum e = product("256x256", "256x256");
  auto calls = std::make_shared<int>(0);
  Strategy warming{"warming", "ttgt after a slow first call",
                   [](const BatchedEinsum& x) { return ttgt_rejects(x); },
                   [calls](const Bound& b, const nlohmann::json&) {
                     if ((*calls)++ == 0)
                       std::this_thread::sleep_for(std::chrono::milliseconds(200));
                     return execute(b, "ttgt");
                   },
                   nullptr};
  TuneOptions o = quick();
  o.slow_factor = 10;
  o.space.strategies = {"ttgt", "warming"};
  o.extra = {warming};
  const TuneReport report = tune(store, test_machine(), e, o);
  bool seen = false;
  for (const auto& r : report.results)
    if (r.candidate.strategy == "warming") {
      seen = true;
      EXPECT_EQ(r.status, Outcome::ok);
      EXPECT_LT(r.median_s, 0.1);
    }
  EXPECT_TRUE(seen);
  EXPECT_GE(*calls, 3);
}

TEST(Tuner, ASymbolicWorkloadIsMeasuredAtABindingAndRecordedUnderItsSymbolicKey) {
  testing::TempDir dir("tuner");
  Store store = Store::open(dir.path("db.sqlite"));
  const BatchedEinsum e = product("Nx3", "3x4");
  TuneOptions o = quick();
  o.binding = {{"N", 64}};
  o.space.strategies = {"loop_nest", "ttgt"};
  const TuneReport report = tune(store, test_machine(), e, o);
  EXPECT_EQ(report.binding, (Binding{{"N", 64}}));
  EXPECT_EQ(report.workload_hash, canonicalize(e).hash);  // the symbolic key
  const auto rows = store.show(report.workload_hash);
  ASSERT_EQ(rows.size(), report.results.size());
  for (const auto& r : rows) {
    EXPECT_EQ(r["binding"].get<Binding>(), (Binding{{"N0", 64}}));
    EXPECT_DOUBLE_EQ(r["flops"].get<double>(), 2.0 * 64 * 3 * 4);
  }
  // A concrete size of it is answered by that fact.
  const auto a =
      best_for(store, canonicalize(product("500x3", "3x4")), test_machine().fingerprint());
  ASSERT_TRUE(a);
  EXPECT_EQ(a->match, Match::symbolic);
  EXPECT_EQ(a->binding, (Binding{{"N0", 500}}));
}

TEST(Tuner, DefaultBindingIsFeinsumsLengthWithinTheMemoryBound) {
  EXPECT_TRUE(tuning_binding(product("3x3", "3x4")).empty());
  EXPECT_EQ(tuning_binding(product("Nx3", "3x4")), (Binding{{"N", kDefaultSymbolLength}}));
  EXPECT_EQ(tuning_binding(product("Nx3", "3x4"), {{"N", 50}}), (Binding{{"N", 50}}));
  // N×N matrices at 100,000 would take 240 GB: halved until the three fit in 1 GiB.
  const Binding square = tuning_binding(product("NxN", "NxN"));
  EXPECT_EQ(square, (Binding{{"N", 6250}}));
  EXPECT_LE(*footprint_bytes(bind_symbols(product("NxN", "NxN"), square)), kDefaultBindingBytes);
  // A given length stays as given; the others shrink around it.
  EXPECT_EQ(tuning_binding(product("NxM", "MxM"), {{"N", 10}}).at("N"), 10);
  EXPECT_THROW(tuning_binding(product("Nx3", "3x4"), {{"K", 3}}), SpecError);
}

TEST(Tuner, RefusesUnknownSymbolsAndStrategies) {
  testing::TempDir dir("tuner");
  Store store = Store::open(dir.path("db.sqlite"));
  TuneOptions bad = quick();
  bad.binding = {{"M", 4}};
  EXPECT_THROW(tune(store, test_machine(), product("Nx3", "3x4"), bad), SpecError);
  bad.binding = {{"N", 0}};
  EXPECT_THROW(tune(store, test_machine(), product("Nx3", "3x4"), bad), SpecError);
  TuneOptions o = quick();
  o.space.strategies = {"warp"};
  EXPECT_THROW(tune(store, test_machine(), product("3x3", "3x3"), o), SpecError);
}

TEST(Roofline, IsMeasuredOnceAndStoredWithTheMachine) {
  testing::TempDir dir("tuner");
  Store store = Store::open(dir.path("db.sqlite"));
  const Machine m = test_machine();
  const auto r = machine_roofline(store, m, Dtype::f64);
  EXPECT_GT(r.peak_gflops, 0.5);
  EXPECT_GT(r.bandwidth_gbs, 0.5);
  const auto again = store.roofline(m.fingerprint(), "f64");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->peak_gflops, r.peak_gflops);
  EXPECT_EQ(machine_roofline(store, m, Dtype::f64).measured_at, again->measured_at);
  // Compute-bound below the ridge point, bandwidth-bound above it.
  EXPECT_EQ(r.attainable_gflops(1e12, 1, 1), r.peak_gflops);
  EXPECT_DOUBLE_EQ(r.attainable_gflops(1, 1e9, 1), 1e-9 * r.bandwidth_gbs);
}

}  // namespace
}  // namespace einsumdb
