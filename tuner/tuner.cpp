#include "einsumdb/tuner/tuner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <set>

#include "einsumdb/canon/metrics.hpp"
#include "einsumdb/core/error.hpp"
#include "einsumdb/db/retrieve.hpp"
#include "einsumdb/executor/deadline.hpp"
#include "einsumdb/tuner/sampling.hpp"

namespace einsumdb {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

const Strategy* lookup(const std::string& name, const std::vector<Strategy>& extra) {
  for (const auto& s : extra)
    if (s.name == name) return &s;
  return find_strategy(name);
}

std::map<char, std::int64_t> concrete_lengths(const BatchedEinsum& e) {
  std::map<char, std::int64_t> len;
  for (const auto& [c, l] : e.index_lengths()) {
    if (l.symbolic())
      throw SpecError("index '" + std::string(1, c) + "' has the symbolic length '" + l.symbol +
                      "'; tuning needs concrete lengths (give every axis a number)");
    len[c] = l.value;
  }
  return len;
}

double iterations(const BatchedEinsum& e, const std::map<char, std::int64_t>& len) {
  double n = static_cast<double>(e.batch.size());
  for (const auto& [c, l] : len) n *= static_cast<double>(l);
  return n;
}

// `e` with every length cut to at most `cap`.
BatchedEinsum reduced(const BatchedEinsum& e, std::int64_t cap) {
  BatchedEinsum r = e;
  for (auto& [name, info] : r.arrays)
    for (auto& l : info.shape) l.value = std::min(l.value, cap);
  return r;
}

// A candidate's time in the probe: the fastest of up to kProbeRuns runs, as many as fit in
// kProbeTime seconds, and at least two unless the first took kProbeAlone seconds or more (a run
// that long is not slowed several times over by a neighbour's pause, and a second would cost as
// much again). With one run only, a run slowed past kProbeTime by a neighbour ruled its
// candidate out (Tuner.OneSlowRunInTheProbeRulesNothingOut, under AddressSanitizer with the
// suite's other tests running beside it).
constexpr int kProbeRuns = 3;
constexpr double kProbeTime = 0.03;
constexpr double kProbeAlone = 0.3;
// Once a candidate has been timed, a run of another one is stopped where it could no longer
// pass: in the probe at probe_factor times the fastest there, at full size at slow_factor times
// the best median (race_factor times, when a run that long is a long run). A first run may
// include one-time costs (libxsmm generating the kernels of new shapes), and gets this much
// longer.
constexpr double kOneTimeAllowance = 0.1;

// `e` with its longest axes halved until it has at most `limit` loop iterations.
BatchedEinsum probe_size(const BatchedEinsum& e, double limit) {
  BatchedEinsum r = e;
  auto lengths = concrete_lengths(r);
  while (iterations(r, lengths) > limit) {
    const auto longest = std::max_element(lengths.begin(), lengths.end(),
                                          [](auto& a, auto& b) { return a.second < b.second; });
    if (longest->second <= 1) break;
    const char c = longest->first;
    longest->second = (longest->second + 1) / 2;
    for (const auto& row : r.batch)
      for (std::size_t k = 0; k < row.size(); ++k)
        for (std::size_t a = 0; a < r.inputs[k].size(); ++a)
          if (r.inputs[k][a] == c) r.arrays.at(row[k]).shape[a].value = longest->second;
  }
  return r;
}

}  // namespace

Arrays random_arrays(const BatchedEinsum& e, std::uint64_t seed) {
  Arrays arrays;
  for (const auto& [name, info] : e.arrays) {
    std::vector<std::int64_t> shape;
    for (std::size_t a = 0; a < info.shape.size(); ++a) {
      if (info.shape[a].symbolic())
        throw SpecError("array '" + name + "' axis " + std::to_string(a) + " has the symbolic " +
                        "length '" + info.shape[a].symbol + "'; give it data or a length (--bind " +
                        info.shape[a].symbol + "=N)");
      shape.push_back(info.shape[a].value);
    }
    Tensor t(info.dtype, shape);
    fill_random(t, seed + std::hash<std::string>{}(name));
    arrays.emplace(name, std::move(t));
  }
  return arrays;
}

std::vector<Candidate> candidates(const BatchedEinsum& e,
                                  const std::map<char, std::int64_t>& lengths,
                                  const SpaceOptions& options, const std::vector<Strategy>& extra) {
  std::vector<std::string> names = options.strategies;
  if (names.empty()) {
    for (const auto& s : builtin_strategies())
      if (s.name != "reference") names.push_back(s.name);
    for (const auto& s : extra) names.push_back(s.name);
  }
  std::vector<Candidate> out;
  for (const auto& name : names) {
    const Strategy* s = lookup(name, extra);
    if (!s) {
      throw SpecError("unknown strategy '" + name + "'; known: " + strategy_names());
    }
    if (s->rejects(e)) continue;
    const bool builtin = find_strategy(name) == s;
    for (int t : options.threads) {
      if (t < 1) throw SpecError("--threads: " + std::to_string(t) + " is not a thread count");
      for (auto p : builtin && s->space ? s->space(e, lengths) : std::vector<nlohmann::json>{{}}) {
        if (!p.is_object()) p = nlohmann::json::object();
        if (builtin) p["threads"] = t;
        out.push_back({name, p});
      }
      if (!builtin) break;
    }
  }
  return out;
}

// Samples of at least a millisecond: runs of `seconds` each are timed in groups this large.
int runs_per_sample(double seconds) {
  return static_cast<int>(std::clamp(std::ceil(1e-3 / std::max(seconds, 1e-9)), 1.0, 1e6));
}

// The final round. The search times one candidate after another, so each sees the machine at other
// moments: on a shared machine, which of two close candidates won was decided by the moment each
// was timed. The finalists, the candidates within `finalist_factor` of the best, are timed again in
// turns, each round starting one finalist later, so that a slow moment falls on them alike; their
// samples are then those of the round. A sample whose run mapped memory afresh (a finalist's first
// turn: its blocks were unmapped after it was measured) is taken again once. Skipped when
// interrupted, out of budget, or when the rounds would not end before the time limit; abandoned,
// the search's samples stand.
void final_round(TuneReport& report,
                 std::vector<std::pair<const Canonical*, Measurement>>& measured,
                 std::optional<std::size_t>& best, const TuneOptions& options, const Bound& bound,
                 const std::function<bool(double)>& time_out,
                 std::optional<Clock::time_point> time_end,
                 std::optional<Clock::time_point> budget_end) {
  if (!best || (options.stop && options.stop->load()) || report.budget_exhausted) return;
  const double best_s = report.results[*best].median_s;
  std::vector<std::size_t> finalists;
  for (std::size_t i = 0; i < report.results.size(); ++i) {
    const TuneResult& r = report.results[i];
    if (r.status == Outcome::ok && r.median_s <= options.finalist_factor * best_s)
      finalists.push_back(i);
  }
  std::stable_sort(finalists.begin(), finalists.end(), [&](std::size_t a, std::size_t b) {
    return report.results[a].median_s < report.results[b].median_s;
  });
  if (finalists.size() > options.max_finalists) finalists.resize(options.max_finalists);
  if (finalists.size() < 2) return;
  // As many rounds as the search's minimum time would give the best alone, from 3 to min_reps
  // (a long run: long_run_reps).
  const Protocol& p = options.protocol;
  const bool long_run = best_s >= p.long_run_s;
  const int rounds =
      long_run ? std::max(1, std::min(p.min_reps, p.long_run_reps))
               : static_cast<int>(std::clamp(std::ceil(p.min_time / std::max(best_s, 1e-9)), 3.0,
                                             static_cast<double>(std::max(3, p.min_reps))));
  double round_s = 0;
  std::vector<int> group;  // runs per sample: a sample of at least a millisecond
  for (const std::size_t i : finalists) {
    const double m = report.results[i].median_s;
    group.push_back(runs_per_sample(m));
    round_s += m * group.back();
  }
  // Each finalist's first turn maps its memory again (its blocks were unmapped after it was
  // measured): one run more each.
  const double needed = (rounds + 1) * round_s;
  if (time_out(needed) ||
      (budget_end && Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(needed)) >=
                         *budget_end))
    return;
  std::vector<std::vector<double>> samples(finalists.size());
  try {
    for (int round = 0; round < rounds; ++round) {
      for (std::size_t turn = 0; turn < finalists.size(); ++turn) {
        const std::size_t k = (turn + round) % finalists.size();
        const TuneResult& r = report.results[finalists[k]];
        const Strategy* s = lookup(r.candidate.strategy, options.extra);
        auto time_one = [&] {
          std::optional<Deadline> deadline;
          if (time_end)
            deadline.emplace(std::chrono::duration<double>(*time_end - Clock::now()).count());
          const std::uint64_t mapped = fresh_mappings();
          const auto t0 = Clock::now();
          for (int g = 0; g < group[k]; ++g) s->run(bound, r.candidate.params);
          return std::make_pair(since(t0) / group[k], fresh_mappings() != mapped);
        };
        auto [t, remapped] = time_one();
        if (remapped) t = time_one().first;
        samples[k].push_back(t);
        if (options.stop && options.stop->load()) return;
      }
    }
  } catch (const std::exception&) {
    return;  // stopped by the time limit, or failing now: the search's samples stand
  }
  const auto flops = flop_count(bound.einsum());
  for (std::size_t k = 0; k < finalists.size(); ++k) {
    TuneResult& r = report.results[finalists[k]];
    r.search_median_s = r.median_s;
    r.seconds = samples[k];
    r.median_s = summarize(r.seconds).median_s;
    r.gflops.reset();
    if (flops && r.median_s > 0) r.gflops = *flops / r.median_s * 1e-9;
    measured[finalists[k]].second.seconds = r.seconds;
  }
  for (const std::size_t i : finalists)
    if (report.results[i].median_s < report.results[*best].median_s) best = i;
}

Binding tuning_binding(const BatchedEinsum& e, const Binding& given, double max_bytes) {
  const auto names = symbols(e);
  if (names.empty() && given.empty()) return {};
  bind_symbols(e, given);  // checks the given names and lengths
  Binding b = given;
  std::vector<std::string> open;
  for (const auto& name : names)
    if (!b.count(name)) open.push_back(name);
  for (std::int64_t length = kDefaultSymbolLength;;
       length = std::max<std::int64_t>(1, length / 2)) {
    for (const auto& name : open) b[name] = length;
    const auto bytes = footprint_bytes(bind_symbols(e, b));
    if (open.empty() || length == 1 || !bytes || *bytes <= max_bytes) return b;
  }
}
namespace {
// The oracle: the result every candidate is checked against, and the scale of its terms (the
// largest magnitude of each result). On a workload small enough the reference computes it; on a
// larger one, a strategy checked against the reference on a reduced copy first. When a strategy
// ran at full size, its run (the first, with its one-time costs) is also the first run of the
// candidate that is the same transform: it need not run again to be verified against itself.
struct Oracle {
  Results want;
  std::vector<double> scale;
  std::string description;             // TuneReport::oracle
  std::optional<Candidate> candidate;  // the strategy that ran at full size, if one did
  double seconds = 0;                  // its run
};

Oracle make_oracle(const BatchedEinsum& e, const std::map<char, std::int64_t>& lengths,
                   const Arrays& arrays, const Bound& bound, const TuneOptions& options) {
  Oracle o;
  if (iterations(e, lengths) <= options.reference_limit) {
    o.want = run_reference(bound, &o.scale);
    o.description = "reference";
    return o;
  }
  // tensor_gemm needs no scratch of the workload's size; ttgt and the loop nest after it.
  const std::string oracle = !tensor_gemm_rejects(e) ? "tensor_gemm"
                             : !ttgt_rejects(e)      ? "ttgt"
                                                     : "loop_nest";
  {
    const BatchedEinsum small = reduced(e, 16);
    const Arrays small_arrays = random_arrays(small, options.seed);
    const Bound small_bound(small, small_arrays);
    std::vector<double> small_scale;
    const Results small_want = run_reference(small_bound, &small_scale);
    const double err = verification_error(execute(small_bound, oracle), small_want, small_scale);
    const double tol =
        tolerance(result_dtype(small, 0), reduction_terms(small, small_bound.lengths()));
    if (!(err <= tol))
      throw Error("the oracle " + oracle +
                  " disagrees with the reference on a reduced size "
                  "(relative error " +
                  std::to_string(err) + "); refusing to tune against it");
  }
  // The check's tensors are gone before the full size (at length 16 a result of six indices
  // is 128 MiB; kept alive and cached, two of them would sit beside the full size's tensors for
  // the whole tune, adding their size to its peak).
  release_recycled_memory();
  const auto t0 = Clock::now();
  o.want = execute(bound, oracle);
  o.seconds = since(t0);
  o.candidate = Candidate{oracle, {{"threads", 1}}};
  // The oracle's scratch goes before the run below, which needs scratch of its own (tensor_gemm's
  // real form of a complex operand is twice the operand's size).
  release_recycled_memory();
  // The scale of the terms, as the reference would give it: the oracle on |arrays|, in single
  // precision (|z| of a complex element is real): a sum of non-negative terms is off by at most its
  // length times 2^-24 of itself, which a tolerance's scale does not notice, and the run takes
  // half the time and half the memory of a double one, a quarter of a complex one and none of its
  // real form. (TCCG case 12: 5.0 s in double precision.)
  BatchedEinsum magnitudes = e;
  Arrays magnitude_arrays;
  for (const auto& [name, t] : arrays) {
    const bool floating =
        t.dtype() == Dtype::f64 || t.dtype() == Dtype::c64 || t.dtype() == Dtype::c128;
    const Dtype d = floating ? Dtype::f32 : t.dtype();
    magnitudes.arrays.at(name).dtype = d;
    Tensor m(d, t.shape(), Tensor::Uninitialized{});
    if (t.dtype() == Dtype::f64) {
      const double* from = t.data<double>();
      float* to = m.data<float>();
      for (std::int64_t k = 0; k < t.size(); ++k) to[k] = static_cast<float>(std::abs(from[k]));
    } else {
      for (std::int64_t k = 0; k < t.size(); ++k) m.set(k, std::abs(t.at(k)));
    }
    magnitude_arrays.emplace(name, std::move(m));
  }
  for (const auto& m : execute(Bound(magnitudes, magnitude_arrays), oracle)) {
    double largest = 0;
    if (m.dtype() == Dtype::f32) {
      const float* v = m.data<float>();
      float top = 0;
      for (std::int64_t k = 0; k < m.size(); ++k) top = std::max(top, std::abs(v[k]));
      largest = top;
    } else {
      for (std::int64_t k = 0; k < m.size(); ++k) largest = std::max(largest, std::abs(m.at(k)));
    }
    o.scale.push_back(largest);
  }
  o.description = oracle + " (checked against reference at every length ≤ 16)";
  return o;
}

// The order of a search without a probe: the candidates grouped by strategy, each group's default
// first. Round one takes every strategy's default, from the strategies that are usually fastest to
// the plain loop nest, so that a budget is not spent on a slow default first. Then, without a
// budget, every other candidate strategy by strategy; with one, the next candidate of the strategy
// whose best verified median so far is the smallest.
class Schedule {
 public:
  Schedule(std::vector<Candidate> all, const TuneOptions& options) : options_(options) {
    for (auto& c : all) {
      if (!groups_.count(c.strategy)) order_.push_back(c.strategy);
      groups_[c.strategy].push_back(std::move(c));
    }
    auto prior = [&](const std::string& s) { return lookup(s, options.extra)->priority; };
    std::stable_sort(order_.begin(), order_.end(), [&](const std::string& a, const std::string& b) {
      return prior(a) < prior(b);
    });
  }

  // Every candidate, strategy by strategy in the order of round one.
  std::vector<const Candidate*> all() const {
    std::vector<const Candidate*> out;
    for (const auto& s : order_)
      for (const auto& c : groups_.at(s)) out.push_back(&c);
    return out;
  }

  // The next candidate to measure, or null when every one was taken.
  const Candidate* next() {
    for (const auto& s : order_)  // round 1: every strategy's default
      if (next_[s] == 0) return &groups_[s][next_[s]++];
    if (!options_.budget) {
      for (const auto& s : order_)
        if (next_[s] < groups_[s].size()) return &groups_[s][next_[s]++];
      return nullptr;
    }
    const auto best = [&](const std::string& s) {
      return best_of_.count(s) ? best_of_[s] : std::numeric_limits<double>::infinity();
    };
    const std::string* fastest = nullptr;
    for (const auto& s : order_) {
      if (next_[s] >= groups_[s].size()) continue;
      if (!fastest || best(s) < best(*fastest)) fastest = &s;
    }
    return fastest ? &groups_[*fastest][next_[*fastest]++] : nullptr;
  }

  // A verified median of one of `strategy`'s candidates.
  void measured(const std::string& strategy, double median_s) {
    auto& b = best_of_[strategy];
    if (b == 0 || median_s < b) b = median_s;
  }

 private:
  const TuneOptions& options_;
  std::vector<std::string> order_;
  std::map<std::string, std::vector<Candidate>> groups_;
  std::map<std::string, std::size_t> next_;
  std::map<std::string, double> best_of_;
};

// The probe's verdict on a large workload: every candidate timed on a reduced copy, those far
// slower there than the fastest (or stopped before they could finish) ruled out, with why, and the
// others in the order of their probe times, then those the probe could not run (left to the
// search, which records why they fail at full size), with the probe time of each it timed.
struct ProbeVerdict {
  std::vector<std::pair<const Candidate*, std::string>> ruled_out;
  std::vector<const Candidate*> order;
  std::vector<std::pair<const Candidate*, double>> seconds;
  std::size_t probed = 0;
};

ProbeVerdict probe(const BatchedEinsum& e, const std::vector<const Candidate*>& all,
                   const TuneOptions& options) {
  const BatchedEinsum small = probe_size(e, options.probe_iterations);
  const Arrays small_arrays = random_arrays(small, options.seed);
  const Bound small_bound(small, small_arrays);
  std::vector<std::pair<const Candidate*, double>> probes;
  // Candidates whose run was stopped (too slow to pass), with the seconds they had run.
  std::vector<std::pair<const Candidate*, double>> stopped;
  double fastest = std::numeric_limits<double>::infinity();
  for (const Candidate* c : all) {
    if (options.stop && options.stop->load()) continue;
    const Strategy* st = lookup(c->strategy, options.extra);
    // A run is stopped where it could no longer keep its candidate in: it counts as that
    // long. The candidate is ruled out when every timed run was stopped.
    const double limit = options.probe_factor * fastest;
    auto run = [&](double allowance) -> std::optional<double> {
      std::optional<Deadline> deadline;
      if (std::isfinite(limit)) deadline.emplace(limit + allowance);
      const auto t0 = Clock::now();
      try {
        st->run(small_bound, c->params);
      } catch (const DeadlineExceeded&) {
        return std::nullopt;
      }
      return since(t0);
    };
    const auto t0 = Clock::now();
    try {
      run(kOneTimeAllowance);  // a first run may include one-time costs
      // The fastest of up to kProbeRuns runs, until they add up to kProbeTime: one short
      // run is easily slowed several times over by a neighbour on the machine.
      double best_s = std::numeric_limits<double>::infinity(), total = 0;
      for (int k = 0; k < kProbeRuns && (total < kProbeTime || (k == 1 && total < kProbeAlone));
           ++k) {
        const auto t = run(0);
        if (t) best_s = std::min(best_s, *t);
        total += t ? *t : limit;
      }
      if (std::isfinite(best_s)) {
        probes.emplace_back(c, best_s);
        fastest = std::min(fastest, best_s);
      } else {
        stopped.emplace_back(c, since(t0));
      }
    } catch (const std::exception&) {
      // Left to the search, which records why it fails at full size.
    }
  }
  ProbeVerdict v;
  std::set<const Candidate*> ruled_out;
  for (const auto& [c, seconds] : probes)
    if (seconds > options.probe_factor * fastest) {
      ruled_out.insert(c);
      v.ruled_out.emplace_back(
          c, "ruled out by the probe at reduced size: " + std::to_string(seconds / fastest) +
                 "× the fastest candidate there");
    }
  for (const auto& [c, seconds] : stopped) {
    ruled_out.insert(c);
    v.ruled_out.emplace_back(c, "ruled out by the probe at reduced size: stopped after " +
                                    std::to_string(seconds) + " s, more than " +
                                    std::to_string(seconds / fastest) +
                                    "× the fastest candidate there");
  }
  v.probed = probes.size() + stopped.size();
  // Full size in the order of the probe times (candidates the probe could not run last).
  std::stable_sort(probes.begin(), probes.end(),
                   [](const auto& x, const auto& y) { return x.second < y.second; });
  for (const auto& [c, seconds] : probes)
    if (!ruled_out.count(c)) v.order.push_back(c);
  for (const Candidate* c : all)
    if (!ruled_out.count(c) &&
        std::none_of(probes.begin(), probes.end(), [&](const auto& p) { return p.first == c; }))
      v.order.push_back(c);
  v.seconds = std::move(probes);
  release_recycled_memory();
  return v;
}

// The search at full size: each candidate verified against the oracle and timed as the protocol
// says, against the best so far, the results kept in the report in the order measured and as the
// measurements the run will store. A probed workload's search ends at the time limit (counted from
// the tune's start), once one candidate is measured; a run then in progress is stopped and its
// candidate not recorded.
class Search {
 public:
  enum class Step { next, stop };

  Search(TuneReport& report, const Canonical& canonical, const Binding& binding, const Bound& bound,
         Oracle& oracle, Schedule& schedule, const TuneOptions& options, const Progress& progress,
         std::optional<Clock::time_point> time_end,
         std::vector<std::pair<const Candidate*, double>> probe_seconds = {})
      : report_(report),
        canonical_(canonical),
        binding_(binding),
        bound_(bound),
        oracle_(oracle),
        schedule_(schedule),
        options_(options),
        progress_(progress),
        tol_(tolerance(result_dtype(bound.einsum(), 0),
                       reduction_terms(bound.einsum(), bound.lengths()))),
        flops_(flop_count(bound.einsum())),
        start_(Clock::now()),
        time_limited_(time_end.has_value()),
        time_end_(time_end.value_or(start_)),
        probe_seconds_(std::move(probe_seconds)) {}

  // Keeps a result: in the report, among the measurements to store, and as the best so far.
  void record(TuneResult r) {
    Measurement m;
    m.transform = {r.candidate.strategy, r.candidate.params};
    m.status = r.status;
    m.seconds = r.seconds;
    m.max_rel_err = r.max_rel_err;
    m.binding = binding_;
    measured_.emplace_back(&canonical_, to_canonical(canonical_, m));
    if (r.status == Outcome::ok) {
      schedule_.measured(r.candidate.strategy, r.median_s);
      if (!best_ || r.median_s < report_.results[*best_].median_s) {
        best_ = report_.results.size();
        best_probe_s_ = probe_time(r.candidate);
      }
    }
    report_.results.push_back(std::move(r));
    if (progress_)
      progress_(report_.results.size(), report_.total, report_.results.back(),
                best_ ? &report_.results[*best_] : nullptr);
  }

  // Measures one candidate and records it, unless the time limit leaves it out; `stop` where the
  // search ends here (interrupted, or the budget spent).
  Step measure(const Candidate& candidate) {
    const Candidate* c = &candidate;
    if (options_.stop && options_.stop->load()) {
      report_.interrupted = true;
      return Step::stop;
    }
    // A candidate starts only if it would be measured before the limit: a run in progress stops
    // at its next check, but one OpenBLAS call is a single piece that runs to its end.
    double needed = 0;
    if (best_) {
      // Its run at full size: the best's, times the ratio of the two's probe times where the probe
      // timed both, and never less than the best's (the probe's reduced copy ranks candidates
      // roughly; a candidate estimated faster than the best may well not be).
      double b = report_.results[*best_].median_s;
      if (const auto own = probe_time(*c); own && best_probe_s_ && *best_probe_s_ > 0)
        b *= std::max(1.0, *own / *best_probe_s_);
      const Protocol& p = options_.protocol;
      // A long run: its first run (verified, or the warm-up after the oracle's), then its
      // samples. A shorter one: its first run and warm-ups, then the samples' minimum time.
      needed = b >= p.long_run_s ? b * (1 + std::min(p.min_reps, p.long_run_reps))
                                 : b * (1 + p.warmup) + p.min_time;
    }
    if (time_out(needed)) {
      report_.time_limit_reached = true;
      ++report_.not_measured;
      return Step::next;
    }
    Protocol protocol = options_.protocol;
    if (options_.budget) {
      const double left = *options_.budget - since(start_);
      if (left <= 0) {
        report_.budget_exhausted = true;
        return Step::stop;
      }
      protocol.min_time = std::min(protocol.min_time, left);
    }
    TuneResult r;
    r.candidate = *c;
    const Strategy* s = lookup(c->strategy, options_.extra);
    // Past `limit` a run is stopped, and the candidate recorded as timeout: slow_factor times the
    // best median so far, or race_factor times when a run that long is a long run (it could not
    // be the best). A first run may include one-time costs: a long one gets kOneTimeAllowance
    // more; a shorter one stopped is run again, and the second run decides.
    const double best_s = best_ ? report_.results[*best_].median_s : 0;
    const bool racing = best_ && options_.race_factor * best_s >= protocol.long_run_s;
    const double limit = !best_   ? std::numeric_limits<double>::infinity()
                         : racing ? options_.race_factor * best_s
                                  : options_.slow_factor * best_s;
    // Only the runs that decide whether the candidate is timed are held to `limit`: a timed sample
    // slowed by a neighbour on the machine does not turn a verified candidate into a timeout.
    double allowance = racing ? kOneTimeAllowance : 0;
    bool judging = true;
    const bool until_time_end = time_limited_ && best_;
    // Near the limit a run is not started when its last run, as long again, would end past it: a
    // run in progress stops at its next check, but one OpenBLAS call (all of ttgt's work on a
    // GEMM-shaped case) runs to its end, and a candidate the probe misjudged can take far longer
    // than `needed` allowed for.
    double last_run_s = oracle_.candidate && *c == *oracle_.candidate ? oracle_.seconds : 0;
    bool would_pass_limit = false;
    auto once = [&] {
      if (until_time_end && time_out(last_run_s)) {
        would_pass_limit = true;
        throw DeadlineExceeded("a run as long as the last would end past the time limit");
      }
      double left = judging ? limit + allowance : std::numeric_limits<double>::infinity();
      allowance = 0;
      if (until_time_end)
        left = std::min(left, std::chrono::duration<double>(time_end_ - Clock::now()).count());
      std::optional<Deadline> deadline;
      if (std::isfinite(left)) deadline.emplace(left);
      const auto run_began = Clock::now();
      Results out = s->run(bound_, c->params);
      last_run_s = since(run_began);
      return out;
    };
    auto t0 = Clock::now();
    // Runs of this candidate on the memory it has now: the oracle's run came before the cached
    // blocks were unmapped, so its next run maps its result afresh, as any candidate's first does.
    int runs_here = 0;
    try {
      double first = 0;
      bool rerun = false;  // the first run was stopped, and run again
      if (oracle_.candidate && *c == *oracle_.candidate) {
        first = oracle_.seconds;  // the oracle's run: its result is `want`
        r.max_rel_err = 0;
        oracle_.candidate.reset();
      } else {
        runs_here = 1;
        std::optional<Results> got;  // freed before the timed runs
        try {
          got = once();
        } catch (const DeadlineExceeded&) {
          if (racing || would_pass_limit || time_out()) throw;
          rerun = true;
          t0 = Clock::now();
          got = once();
        }
        first = since(t0);
        r.max_rel_err = verification_error(*got, oracle_.want, oracle_.scale);
      }
      auto over_budget = [&] { return options_.budget && since(start_) >= *options_.budget; };
      // Far slower than the best: not worth timing. A first run may include one-time costs
      // (libxsmm generating the kernels of new shapes), so a second run decides, budget allowing.
      auto far_slower = [&](double seconds) {
        return best_ && seconds > options_.slow_factor * report_.results[*best_].median_s;
      };
      double second = first;
      int runs = 1;
      if (*r.max_rel_err <= tol_ && far_slower(first) && !rerun && !over_budget()) {
        t0 = Clock::now();
        once();
        second = since(t0);
        runs = 2;
        ++runs_here;
      }
      if (!(*r.max_rel_err <= tol_)) {
        r.status = Outcome::invalid;
        r.seconds = {first};
        if (!std::isfinite(*r.max_rel_err)) r.max_rel_err.reset();
      } else if (far_slower(second)) {
        r.status = Outcome::timeout;
        r.seconds = runs == 2 ? std::vector<double>{first, second} : std::vector<double>{first};
      } else {
        double last = second;
        // A run this long has no cold start to warm up from beyond the run already made, and
        // its samples are capped by the time limit.
        const bool long_run = second >= protocol.long_run_s;
        // A long run already this much slower than the best cannot win: one warm run is what
        // is recorded (the first may include one-time costs, so a second run decides). Each
        // repetition it spares a candidate at twice the best's time saves two of the best's
        // runs, which on a full-size case are seconds each.
        auto behind = [&](double seconds) {
          return best_ && seconds > options_.race_factor * report_.results[*best_].median_s;
        };
        bool out_raced = long_run && behind(second);
        if (out_raced && runs == 1 && !over_budget()) {
          t0 = Clock::now();
          once();
          second = since(t0);
          runs = 2;
          ++runs_here;
          out_raced = behind(second);
        }
        // One warm run is what is recorded of a candidate that cannot win.
        if (out_raced) r.seconds = {second};
        judging = false;
        // No sample is a candidate's first run on its memory: that run maps and writes pages its
        // result and scratch have not used before, which on a virtual machine can cost as much as
        // a memory-shaped run itself. A long run has that one warm-up; a shorter one `warmup` runs.
        const int warmups = long_run ? 1 : protocol.warmup;
        for (int w = runs_here; w < warmups && !out_raced && !over_budget(); ++w) {
          t0 = Clock::now();
          once();
          last = since(t0);
        }
        SamplingRule rule{
            long_run ? std::min(protocol.min_reps, protocol.long_run_reps) : protocol.min_reps,
            long_run ? 0 : protocol.min_time, runs_per_sample(last)};
        // The first candidate of a time-limited search is measured whatever the limit, but with
        // no more samples of a long run than fit before it, one at least: the oracle's run, a
        // warm-up and three samples are five runs, and with runs of twelve seconds those alone
        // fill a limit of 60.
        if (time_limited_ && !best_ && long_run) {
          const double left = std::chrono::duration<double>(time_end_ - Clock::now()).count();
          rule.min_samples =
              std::clamp(static_cast<int>(left / std::max(last, 1e-9)), 1, rule.min_samples);
        }
        t0 = Clock::now();
        if (!out_raced)
          sample_calls(r.seconds, rule, once,
                       [&] { return (options_.stop && options_.stop->load()) || over_budget(); });
        r.median_s = summarize(r.seconds).median_s;
        if (flops_ && r.median_s > 0) r.gflops = *flops_ / r.median_s * 1e-9;
      }
    } catch (const DeadlineExceeded&) {
      if (would_pass_limit || time_out()) {  // not measured: stopped by the time limit
        report_.time_limit_reached = true;
        ++report_.not_measured;
        release_recycled_memory();
        return Step::next;
      }
      r.status = Outcome::timeout;
      r.error = "stopped after " + std::to_string(since(t0)) + " s: past " +
                std::to_string(racing ? options_.race_factor : options_.slow_factor) +
                "× the best median so far (" + std::to_string(best_s) + " s)";
      r.seconds.clear();
      r.max_rel_err.reset();
    } catch (const std::exception& err) {
      r.status = Outcome::failed;
      r.error = err.what();
      r.seconds.clear();
      r.max_rel_err.reset();
    }
    record(std::move(r));
    // The candidate's mappings, kept for its own next runs, are returned before the next
    // candidate, whose blocks have other sizes: the cache may hold as much as the tensors alive
    // (the inputs among them), and held the scratch of earlier candidates. Kept, a candidate
    // that permutes its largest operand (ttgt) leaves a copy of it cached while the next one
    // allocates its own: three footprints at the peak where returning them leaves about two
    // (the tensors, and one candidate's scratch).
    release_recycled_memory();
    return Step::next;
  }

  // The final round among the closest candidates (final_round), then the measurements to store.
  std::vector<std::pair<const Canonical*, Measurement>>& finish() {
    final_round(
        report_, measured_, best_, options_, bound_, [&](double more) { return time_out(more); },
        time_limited_ ? std::optional<Clock::time_point>(time_end_) : std::nullopt,
        options_.budget ? std::optional<Clock::time_point>(start_ + seconds(*options_.budget))
                        : std::nullopt);
    if (options_.stop && options_.stop->load()) report_.interrupted = true;
    return measured_;
  }

 private:
  // Past the limit, or so near it that `more` seconds would pass it.
  bool time_out(double more = 0) const {
    return time_limited_ && best_ && Clock::now() + seconds(more) >= time_end_;
  }

  // The candidate's time in the probe, where the probe timed it.
  std::optional<double> probe_time(const Candidate& c) const {
    for (const auto& [p, seconds] : probe_seconds_)
      if (*p == c) return seconds;
    return std::nullopt;
  }

  TuneReport& report_;
  const Canonical& canonical_;
  const Binding& binding_;
  const Bound& bound_;
  Oracle& oracle_;
  Schedule& schedule_;
  const TuneOptions& options_;
  const Progress& progress_;
  const double tol_;
  const std::optional<double> flops_;
  const Clock::time_point start_;  // of the search: a budget counts from here
  const bool time_limited_;
  const Clock::time_point time_end_;
  const std::vector<std::pair<const Candidate*, double>> probe_seconds_;
  std::optional<std::size_t> best_;     // in report_.results
  std::optional<double> best_probe_s_;  // the best's time in the probe
  // The run is written when the search ends, in one short transaction: a tune killed midway
  // leaves nothing half-written, and a shared server's rows are never locked for a whole search.
  std::vector<std::pair<const Canonical*, Measurement>> measured_;
};

}  // namespace

TuneReport tune(Store& store, const Machine& machine, const BatchedEinsum& spec,
                const TuneOptions& options, const Progress& progress) {
  // The key is the spec's own (symbolic when it has symbols); the measuring is at the binding.
  const Canonical canonical = canonicalize(spec);
  const Binding binding = tuning_binding(spec, options.binding);
  const BatchedEinsum e = binding.empty() ? spec : bind_symbols(spec, binding);
  const auto lengths = concrete_lengths(e);
  const auto began = Clock::now();
  if (!(options.time_limit >= 0))
    throw SpecError("the time limit must be a number of seconds, 0 or more; got " +
                    std::to_string(options.time_limit));
  Schedule schedule(candidates(e, lengths, options.space, options.extra), options);
  const std::vector<const Candidate*> all = schedule.all();
  const auto generating = Clock::now();
  const Arrays arrays = random_arrays(e, options.seed);
  const Bound bound(e, arrays);
  TuneReport report;
  report.arrays_seconds = since(generating);
  report.workload_hash = canonical.hash;
  report.workload_key = canonical.key;
  report.binding = binding;
  report.total = all.size();

  Oracle oracle = make_oracle(e, lengths, arrays, bound, options);
  report.oracle = oracle.description;
  report.oracle_seconds = oracle.seconds;
  // The oracle's scratch and its run on |arrays| are gone: their mappings, kept for reuse, would
  // otherwise add to the candidates' memory.
  release_recycled_memory();

  // The probe: on a large workload, every candidate is timed on a reduced copy, and those far
  // slower there than the fastest are not run at full size; the others run in the order of their
  // probe times, and the search ends at the time limit.
  std::optional<ProbeVerdict> probed;
  if (options.probe_factor > 0 && all.size() > 1 && !options.budget &&
      iterations(e, lengths) > options.probe_iterations)
    probed = probe(e, all, options);
  const bool time_limited = probed && options.time_limit > 0;
  Search search(report, canonical, binding, bound, oracle, schedule, options, progress,
                time_limited ? std::optional(began + seconds(options.time_limit)) : std::nullopt,
                probed ? probed->seconds : std::vector<std::pair<const Candidate*, double>>{});
  if (probed) {
    report.probed = probed->probed;
    for (const auto& [c, why] : probed->ruled_out) {
      TuneResult r;
      r.candidate = *c;
      r.status = Outcome::timeout;
      r.error = why;
      search.record(std::move(r));
    }
  }
  std::size_t probed_next = 0;
  auto next_candidate = [&]() -> const Candidate* {
    if (!probed) return schedule.next();
    return probed_next < probed->order.size() ? probed->order[probed_next++] : nullptr;
  };
  while (const Candidate* c = next_candidate())
    if (search.measure(*c) == Search::Step::stop) break;
  const auto& measured = search.finish();
  if (!measured.empty()) report.run = store.record_run(options.run, machine, measured).run;
  return report;
}

const TuneResult* TuneReport::best() const {
  const TuneResult* out = nullptr;
  for (const auto& r : results)
    if (r.status == Outcome::ok && (!out || r.median_s < out->median_s)) out = &r;
  return out;
}

nlohmann::ordered_json result_json(const TuneResult& r) {
  using ojson = nlohmann::ordered_json;
  ojson row = {{"strategy", r.candidate.strategy},
               {"params", r.candidate.params},
               {"status", to_string(r.status)}};
  if (r.status == Outcome::ok) {
    row["median_s"] = r.median_s;
    row["repetitions"] = r.seconds.size();
    row["seconds"] = r.seconds;
    if (r.search_median_s) row["search_median_s"] = *r.search_median_s;
    row["gflops"] = r.gflops ? ojson(*r.gflops) : ojson();
  }
  row["max_rel_err"] = r.max_rel_err ? ojson(*r.max_rel_err) : ojson();
  if (!r.error.empty()) row["error"] = r.error;
  return row;
}

nlohmann::ordered_json report_json(const TuneReport& report,
                                   const std::vector<const TuneResult*>* shown) {
  using ojson = nlohmann::ordered_json;
  ojson out = {{"workload", {{"hash", report.workload_hash}, {"key", report.workload_key}}},
               {"run", report.run},
               {"oracle", report.oracle},
               {"binding", report.binding.empty() ? ojson() : ojson(report.binding)},
               {"candidates", report.total},
               {"measured", report.results.size()},
               {"probed", report.probed},
               {"interrupted", report.interrupted},
               {"budget_exhausted", report.budget_exhausted},
               {"time_limit_reached", report.time_limit_reached},
               {"not_measured", report.not_measured},
               {"results", ojson::array()}};
  if (shown) {
    for (const TuneResult* r : *shown) out["results"].push_back(result_json(*r));
  } else {
    for (const TuneResult& r : report.results) out["results"].push_back(result_json(r));
  }
  return out;
}

}  // namespace einsumdb
