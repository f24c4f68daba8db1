// The tuner: enumerates the applicable transforms of a workload (each strategy's parameter
// space), measures them with the protocol of the Feinsum paper, verifies every result, and
// records every candidate — valid, invalid (wrong result) or failed — in one tuning run with the
// machine's fingerprint.
//
// Protocol: `warmup` runs, then repetitions until both `min_reps` and `min_time` are reached
// (defaults 5 / 20 / 2 s). A run shorter than a millisecond is timed in groups of runs, so
// each sample is at least a millisecond and the clock's resolution does not dominate.
//
// Verification: the first run's result is compared with the reference loop nest within a
// dtype-aware tolerance. When the reference would take too long (more than `reference_limit`
// loop iterations), the oracle is tensor_gemm (ttgt, or loop_nest, where it does not apply) at
// full size, after that oracle was itself checked against the reference on a reduced size (every
// axis at most 16 long); the tolerance's scale is then the oracle's result on the arrays'
// magnitudes, in single precision for double-precision arrays (half the time and memory).
//
// Probe: an exhaustive search of a large workload first times every candidate on a reduced copy
// (its longest axes halved until it has at most 2^27 loop iterations; the fastest of up to 3
// runs within 30 ms, after one untimed run) and does not run at full size those more than 3
// times slower there than the fastest (recorded as timeout). No sample is a candidate's first run
// on its memory: it writes pages its result and scratch have not used before. A candidate whose
// verified first run takes half a second or more is then timed 3 times, without further warm-up
// or minimum time. When the oracle ran at full size, its run is the first run of the candidate
// that is the same transform (which then has one warm-up run: the oracle's memory was returned
// since). Memory: the inputs, the oracle's result and one candidate's result and scratch at a
// time (the oracle is tensor_gemm where it applies, which needs no scratch of the workload's
// size).
//
// Stopping: once one candidate is timed, a run that decides whether another is timed (its first,
// or a second) is stopped (executor/deadline.hpp) where it can no longer pass, and the candidate
// recorded as timeout (timed samples are only stopped by the time limit): in the probe at 3 times
// the fastest there; at full size at `slow_factor` times the best median, or `race_factor` times
// when a run that long is a long run. A first run gets 0.1 s more for one-time costs. So a
// hopeless candidate costs at most 1.5 runs of the best at full size, not two of its own (a
// candidate ten times slower than the best would cost twenty of the best's runs).
//
// Time limit: the search of a workload large enough to be probed ends `time_limit` seconds (60)
// after the tune began, once one candidate is measured (the most promising first, in the order
// of the probe): a candidate is not started when it would not be measured by then at its speed
// estimated from the probe, a candidate's next run is not started when one as long as its last
// would end past the limit (one OpenBLAS call cannot be stopped), a run in progress at the limit
// is stopped at its next check, and neither it nor the candidates not started are recorded. The
// first candidate takes no more samples of a long run than fit before the limit (one at least).
// `einsumdb tune` counts the limit from the command's start, keeps half a second of it for the
// process's start and end, and runs its standalone check only in what the search leaves.
//
// Search: exhaustive by default (within the time limit). With a budget, best-first: every
// strategy's default candidate first (GEMM-based strategies before the plain loop nest), then the
// remaining candidates of the strategy that is fastest so far, until the budget is spent (a
// candidate being timed stops at the budget with the samples it has). A candidate whose first run
// is more than `slow_factor` times slower than the best so far is recorded as timeout without being
// timed further (when a second run is too: a first run may include one-time costs such as libxsmm's
// code generation for new shapes). A long run (see Protocol) more than `race_factor` times the best
// median so far, on its first run and on a second, is not sampled further: it cannot be the best,
// and it is recorded with its second run. After a probe, the full-size candidates go in the order
// of their probe times, so that the likely best is measured first. An interruption (stop flag, set
// by SIGINT in the CLI) ends the search after the current candidate; what was measured is kept
// (written when the search ends).
//
// Final round: the candidates within finalist_factor (1.25) of the best, at most max_finalists
// (4), are timed again in turns — each round one sample of each, the next round starting one
// later — and those samples replace the search's (kept as search_median_s). Timed one after
// another, two close candidates were ranked by the moments the machine gave each; in turns, a
// slow moment falls on all of them.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "einsumdb/canon/canonicalize.hpp"
#include "einsumdb/db/store.hpp"
#include "einsumdb/executor/dispatch.hpp"
#include "einsumdb/executor/execute.hpp"

namespace einsumdb {

struct SpaceOptions {
  std::vector<std::string> strategies;  // empty: every built-in strategy but reference
  std::vector<int> threads{1};
};

// The candidates for a workload, each strategy's default first. `extra` strategies (tests) are
// tried with empty parameters. Throws SpecError for an unknown strategy name.
std::vector<Candidate> candidates(const BatchedEinsum& e,
                                  const std::map<char, std::int64_t>& lengths,
                                  const SpaceOptions& options,
                                  const std::vector<Strategy>& extra = {});

struct Protocol {
  int warmup = 5;
  int min_reps = 20;
  double min_time = 2.0;  // seconds
  // A candidate whose run takes at least long_run_s: no warm-up beyond its verified first run,
  // and long_run_reps samples (at most min_reps) without min_time.
  double long_run_s = 0.5;
  int long_run_reps = 3;
};

// A symbolic workload is tuned at one length of each symbol, and recorded under its symbolic key
// with that binding (so that its rate is known, and one fact serves every length). The length:
// what `given` says (in the spec's symbol names), else kDefaultSymbolLength, Feinsum's
// representative length of a long axis (its element count), halved for all unbound symbols
// together while the bound workload's footprint (inputs plus output) exceeds `max_bytes`.
inline constexpr std::int64_t kDefaultSymbolLength = 100000;
inline constexpr double kDefaultBindingBytes = 1 << 30;
// The binding of every symbol of `e` (empty for a concrete workload). Throws SpecError for a
// given symbol that `e` does not have, or a length below 1.
Binding tuning_binding(const BatchedEinsum& e, const Binding& given = {},
                       double max_bytes = kDefaultBindingBytes);

struct TuneOptions {
  Binding binding;  // lengths of the spec's symbols; the rest: tuning_binding()'s default
  SpaceOptions space;
  Protocol protocol;
  std::optional<double> budget;  // seconds for the whole search; none: exhaustive
  double reference_limit = 2e8;  // loop iterations above which the reference is too slow
  double slow_factor = 10;       // a first run this much slower than the best: timeout
  // The final round: candidates whose median is within finalist_factor of the best (at most
  // max_finalists, fastest first) are timed again in turns. 0 finalists: none.
  double finalist_factor = 1.25;
  std::size_t max_finalists = 4;
  double race_factor = 1.5;  // a long first run this much slower than the best: one sample
  // The probe (exhaustive searches of workloads above probe_iterations loop iterations): every
  // candidate runs on a copy of the workload whose longest axes are halved until it has at most
  // probe_iterations; a candidate more than probe_factor times slower there than the fastest is
  // recorded as timeout without a run at full size. 0: no probe.
  double probe_factor = 3;
  double probe_iterations = 1 << 27;
  // Seconds a probed workload's tune may take, from its start (oracle and probe included); 0: no
  // limit. Once one candidate is measured, the search ends at the limit: a run in progress is
  // stopped, and the candidates not reached are not recorded (TuneReport::not_measured).
  double time_limit = 60;
  std::uint64_t seed = 1;       // for the generated input data
  std::vector<Strategy> extra;  // strategies beyond the built-ins (tests)
  const std::atomic<bool>* stop = nullptr;
  RunInfo run;
};

struct TuneResult {
  Candidate candidate;
  Outcome status = Outcome::ok;
  std::vector<double> seconds;
  std::optional<double> max_rel_err;
  std::string error;  // for failed candidates
  double median_s = 0;
  std::optional<double> gflops;
  // A finalist (see the final round): its median in the search, before the final round's
  // samples replaced that search's.
  std::optional<double> search_median_s;
};

struct TuneReport {
  std::string workload_hash, workload_key;
  Binding binding;  // the lengths the spec's symbols were tuned at (empty: concrete)
  std::int64_t run = 0;
  std::vector<TuneResult> results;  // in the order measured
  std::size_t total = 0;            // candidates enumerated
  std::size_t probed = 0;           // candidates the probe ran (0: no probe)
  std::string oracle;  // "reference", or the strategy checked against it on a reduced size
  // The oracle's run at full size, which is also the first run of the same candidate (0: the
  // reference was the oracle).
  double oracle_seconds = 0;
  double arrays_seconds = 0;  // generating the workload's random arrays
  bool interrupted = false, budget_exhausted = false;
  bool time_limit_reached = false;
  std::size_t not_measured = 0;  // candidates the time limit left out

  // The fastest verified result (the smallest median; the first measured among equals), or null.
  const TuneResult* best() const;
};

// Progress as candidates finish: (done, total, the latest result, the best so far or null).
using Progress =
    std::function<void(std::size_t, std::size_t, const TuneResult&, const TuneResult*)>;

// Tunes `e` (arrays generated from the seed; symbols bound as tuning_binding() says) and records
// every measured candidate in `store` under one run, under the key of `e` as given (symbolic or
// not) and with its binding. Parameters are recorded in canonical names. The run is written in
// one transaction when the search ends (or is stopped through options.stop): all of it or,
// should the process die first, none of it.
// Uses `store` (which it does not own) for the whole call: a Store is one thread's, so tune one
// workload per thread with a Store per thread (any number of processes may share the file).
// Timings are only meaningful when nothing else runs on the cores being measured.
TuneReport tune(Store& store, const Machine& machine, const BatchedEinsum& e,
                const TuneOptions& options, const Progress& progress = nullptr);

// The report as JSON, as `einsumdb tune --json` and the Python module give it: the workload, the
// run, the oracle, the counts and flags, and `results` (result_json of each of `shown`, in that
// order; every result when null).
nlohmann::ordered_json report_json(const TuneReport& report,
                                   const std::vector<const TuneResult*>* shown = nullptr);
// One result: strategy, params, status; for a verified one its median, samples (`seconds`), rate,
// and the search's median when the final round timed it again; max_rel_err; the error.
nlohmann::ordered_json result_json(const TuneResult& r);

// Arrays for every operand of `e`, filled from `seed`; SpecError when a length is symbolic.
Arrays random_arrays(const BatchedEinsum& e, std::uint64_t seed);

}  // namespace einsumdb
