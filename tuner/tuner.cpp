#include "einsumdb/tuner/tuner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <set>

#include "einsumdb/canon/error.hpp"
#include "einsumdb/canon/metrics.hpp"
#include "einsumdb/db/retrieve.hpp"

namespace einsumdb {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

bool contains(const std::string& s, char c) {
  return s.find(c) != std::string::npos;
}

std::string all_labels(const BatchedEinsum& e) {
  std::string all;
  for (const auto& in : e.inputs)
    for (char c : in)
      if (!contains(all, c)) all += c;
  return all;
}

std::string in_order_of(const std::string& labels, const std::string& layout) {
  std::string out;
  for (char c : layout)
    if (contains(labels, c)) out += c;
  return out;
}

// ---- parameter spaces (in the workload's names, without "threads")

std::vector<nlohmann::json> loop_nest_space(const BatchedEinsum& e,
                                            const std::map<char, std::int64_t>& len) {
  const std::string all = all_labels(e);
  std::string summed, def = e.output;
  for (char c : all)
    if (!contains(e.output, c)) summed += c;
  def += summed;
  std::vector<std::string> orders{def};
  auto add = [&](const std::string& o) {
    if (std::find(orders.begin(), orders.end(), o) == orders.end()) orders.push_back(o);
  };
  if (all.size() <= 4) {
    std::string p = def;
    std::sort(p.begin(), p.end());
    do add(p);
    while (std::next_permutation(p.begin(), p.end()));
  } else {
    add(summed + e.output);
    for (char c : def) {  // each index innermost, the others in the default order
      std::string o;
      for (char d : def)
        if (d != c) o += d;
      add(o + c);
    }
  }
  // First the executor's own choice (by locality), then explicit orders.
  std::vector<nlohmann::json> out{nlohmann::json::object()};
  for (const auto& o : orders) out.push_back({{"order", index_list_param(o)}});
  // Blocked variants of the default order: one or two of its three innermost indices.
  const std::size_t n = def.size();
  for (std::int64_t size : {32, 128})
    for (std::size_t a = n >= 3 ? n - 3 : 0; a < n; ++a) {
      if (len.at(def[a]) <= size) continue;
      out.push_back({{"order", index_list_param(def)},
                     {"block", nlohmann::json::array({{index_param(def[a]), size}})}});
      for (std::size_t b = a + 1; b < n; ++b)
        if (len.at(def[b]) > size)
          out.push_back({{"order", index_list_param(def)},
                         {"block", nlohmann::json::array({{index_param(def[a]), size},
                                                          {index_param(def[b]), size}})}});
    }
  return out;
}

std::vector<nlohmann::json> ttgt_space(const BatchedEinsum& e) {
  const std::string &x = e.inputs[0], &y = e.inputs[1], &z = e.output;
  const auto [batch, m, n, k] = gemm_groups(e);
  (void)batch;
  std::vector<nlohmann::json> out;
  std::set<std::string> seen;
  for (const auto& mo : {in_order_of(m, x), in_order_of(m, z)})
    for (const auto& no : {in_order_of(n, y), in_order_of(n, z)})
      for (const auto& ko : {in_order_of(k, x), in_order_of(k, y)})
        if (seen.insert(mo + "|" + no + "|" + ko).second)
          out.push_back({{"m", index_list_param(mo)},
                         {"n", index_list_param(no)},
                         {"k", index_list_param(ko)}});
  return out;
}

std::vector<nlohmann::json> loop_over_gemm_space(const BatchedEinsum& e) {
  std::vector<nlohmann::json> out;
  for (const auto& [m, n, k] : loop_over_gemm_choices(e))
    out.push_back(
        {{"m", index_list_param(m)}, {"n", index_list_param(n)}, {"k", index_list_param(k)}});
  return out;
}

// The output's longest index (0 for a scalar).
char longest_index(const BatchedEinsum& e, const std::map<char, std::int64_t>& len) {
  char longest = 0;
  for (char c : e.output)
    if (!longest || len.at(c) > len.at(longest)) longest = c;
  return longest;
}

// Tiles tried along an index of length n: 256 and 16, each when it makes at least two.
std::vector<std::int64_t> tile_sizes(std::int64_t n) {
  std::vector<std::int64_t> out;
  for (std::int64_t size : {256, 16})
    if (2 * size <= n) out.push_back(size);
  return out;
}

std::vector<nlohmann::json> batch_fused_space(const BatchedEinsum& e,
                                              const std::map<char, std::int64_t>& len) {
  const BatchedEinsum f = batch_fused_einsum(e);
  std::vector<nlohmann::json> out;
  for (const char* inner : {"ttgt", "contraction_tree", "loop_over_gemm", "loop_nest"})
    if (!find_strategy(inner)->rejects(f)) out.push_back({{"inner", inner}});
  // The fused contraction tree also tiled along the output's longest index, as contraction_tree
  // is below (the stacking index β leads the fused output; a tile runs under it).
  const char longest = longest_index(e, len);
  if (!longest || find_strategy("contraction_tree")->rejects(f)) return out;
  auto f_len = len;
  f_len[f.output[0]] = static_cast<std::int64_t>(e.batch.size());
  const nlohmann::json path = default_contraction_path(f, f_len);
  if (contraction_tree_tiles(f, path, longest))
    for (std::int64_t size : tile_sizes(len.at(longest)))
      out.push_back({{"inner", "contraction_tree"}, {"tile", {index_param(longest), size}}});
  return out;
}

// Every pairwise order for up to 4 operands (3 for three, 18 for four); the FLOP-optimal one
// only beyond.
void all_paths(const std::vector<std::string>& ops, const std::string& output,
               nlohmann::json& prefix, std::vector<nlohmann::json>& out) {
  if (ops.size() == 1) {
    out.push_back(prefix);
    return;
  }
  for (std::size_t i = 0; i < ops.size(); ++i)
    for (std::size_t j = i + 1; j < ops.size(); ++j) {
      std::string others = output;
      std::vector<std::string> next;
      for (std::size_t q = 0; q < ops.size(); ++q)
        if (q != i && q != j) others += ops[q], next.push_back(ops[q]);
      next.push_back(contraction_step_result(ops[i], ops[j], others));
      prefix.push_back({index_list_param(ops[i]), index_list_param(ops[j])});
      all_paths(next, output, prefix, out);
      prefix.erase(prefix.size() - 1);
    }
}

std::vector<nlohmann::json> contraction_tree_space(const BatchedEinsum& e,
                                                   const std::map<char, std::int64_t>& len) {
  const nlohmann::json best = default_contraction_path(e, len);
  std::vector<nlohmann::json> out{{{"path", best}}};
  if (e.inputs.size() <= 4) {
    std::vector<nlohmann::json> paths;
    nlohmann::json prefix = nlohmann::json::array();
    all_paths(e.inputs, e.output, prefix, paths);
    for (const auto& p : paths)
      if (p != best) out.push_back({{"path", p}});
  }
  // Each path also tiled along the output's longest index (tile_sizes()), if the tree can be;
  // right after it, so that a budget reaches the tiled FLOP-optimal path early.
  const char longest = longest_index(e, len);
  if (!longest) return out;
  std::vector<nlohmann::json> all;
  for (const auto& p : out) {
    all.push_back(p);
    if (contraction_tree_tiles(e, p["path"], longest))
      for (std::int64_t size : tile_sizes(len.at(longest))) {
        all.push_back(p);
        all.back()["tile"] = {index_param(longest), size};
      }
  }
  return all;
}

std::vector<nlohmann::json> space(const std::string& strategy, const BatchedEinsum& e,
                                  const std::map<char, std::int64_t>& len) {
  if (strategy == "loop_nest") return loop_nest_space(e, len);
  if (strategy == "ttgt") return ttgt_space(e);
  if (strategy == "loop_over_gemm") return loop_over_gemm_space(e);
  if (strategy == "batch_fused") return batch_fused_space(e, len);
  if (strategy == "contraction_tree") return contraction_tree_space(e, len);
  return {nlohmann::json::object()};
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

}  // namespace

Arrays random_arrays(const BatchedEinsum& e, std::uint64_t seed) {
  Arrays arrays;
  for (const auto& [name, info] : e.arrays) {
    std::vector<std::int64_t> shape;
    for (std::size_t a = 0; a < info.shape.size(); ++a) {
      if (info.shape[a].symbolic())
        throw SpecError("array '" + name + "' axis " + std::to_string(a) + " has the symbolic " +
                        "length '" + info.shape[a].symbol + "'; give it data or a number");
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
      for (auto p : builtin ? space(name, e, lengths) : std::vector<nlohmann::json>{{}}) {
        if (!p.is_object()) p = nlohmann::json::object();
        if (builtin) p["threads"] = t;
        out.push_back({name, p});
      }
      if (!builtin) break;
    }
  }
  return out;
}

TuneReport tune(Store& store, const Machine& machine, const BatchedEinsum& e,
                const TuneOptions& options, const Progress& progress) {
  const auto lengths = concrete_lengths(e);
  const Canonical canonical = canonicalize(e);
  auto all = candidates(e, lengths, options.space, options.extra);
  const Arrays arrays = random_arrays(e, options.seed);
  const Bound bound(e, arrays);
  TuneReport report;
  report.workload_hash = canonical.hash;
  report.workload_key = canonical.key;
  report.total = all.size();

  // The oracle.
  Results want;
  std::vector<double> scale;
  if (iterations(e, lengths) <= options.reference_limit) {
    want = run_reference(bound, &scale);
    report.oracle = "reference";
  } else {
    const std::string oracle = ttgt_rejects(e) ? "loop_nest" : "ttgt";
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
    want = execute(bound, oracle);
    // The scale of the terms, as the reference would give it: the oracle on |arrays|.
    Arrays magnitude_arrays;
    for (const auto& [name, t] : arrays) {
      Tensor m(t.dtype(), t.shape(), Tensor::Uninitialized{});
      for (std::int64_t k = 0; k < t.size(); ++k) m.set(k, std::abs(t.at(k)));
      magnitude_arrays.emplace(name, std::move(m));
    }
    for (const auto& m : execute(Bound(e, magnitude_arrays), oracle)) {
      double largest = 0;
      for (std::int64_t k = 0; k < m.size(); ++k) largest = std::max(largest, std::abs(m.at(k)));
      scale.push_back(largest);
    }
    report.oracle = oracle + " (checked against reference at every length ≤ 16)";
  }
  const double tol = tolerance(result_dtype(e, 0), reduction_terms(e, lengths));
  const auto flops = flop_count(e);

  const MachineId machine_id = store.machine_id(machine);
  const WorkloadId workload_id = store.workload_id(canonical);
  const RunId run_id = store.begin_run(options.run, machine_id);
  report.run = id_value(run_id);

  // Best-first order: candidates grouped by strategy, each group's default first.
  std::vector<std::string> order;
  std::map<std::string, std::vector<Candidate>> groups;
  for (auto& c : all) {
    if (!groups.count(c.strategy)) order.push_back(c.strategy);
    groups[c.strategy].push_back(std::move(c));
  }
  // Round one goes from the strategies that are usually fastest to the plain loop nest, so that
  // a budget is not spent on a slow default first.
  auto prior = [](const std::string& s) {
    static const char* const kOrder[] = {"batch_fused", "ttgt", "loop_over_gemm",
                                         "contraction_tree", "loop_nest"};
    const auto* it = std::find(std::begin(kOrder), std::end(kOrder), s);
    return static_cast<int>(it - std::begin(kOrder));
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](const std::string& a, const std::string& b) { return prior(a) < prior(b); });
  std::map<std::string, std::size_t> next;
  std::map<std::string, double> best_of;
  auto pick = [&]() -> const Candidate* {
    for (const auto& s : order)  // round 1: every strategy's default
      if (next[s] == 0) return &groups[s][next[s]++];
    if (!options.budget) {
      for (const auto& s : order)
        if (next[s] < groups[s].size()) return &groups[s][next[s]++];
      return nullptr;
    }
    const std::string* fastest = nullptr;
    for (const auto& s : order) {
      if (next[s] >= groups[s].size()) continue;
      const double t = best_of.count(s) ? best_of[s] : std::numeric_limits<double>::infinity();
      if (!fastest || t < (best_of.count(*fastest) ? best_of[*fastest]
                                                   : std::numeric_limits<double>::infinity()))
        fastest = &s;
    }
    return fastest ? &groups[*fastest][next[*fastest]++] : nullptr;
  };

  const auto start = Clock::now();
  std::optional<std::size_t> best;
  while (const Candidate* c = pick()) {
    if (options.stop && options.stop->load()) {
      report.interrupted = true;
      break;
    }
    Protocol protocol = options.protocol;
    if (options.budget) {
      const double left = *options.budget - since(start);
      if (left <= 0) {
        report.budget_exhausted = true;
        break;
      }
      protocol.min_time = std::min(protocol.min_time, left);
    }
    TuneResult r;
    r.candidate = *c;
    const Strategy* s = lookup(c->strategy, options.extra);
    auto once = [&] { return s->run(bound, c->params); };
    try {
      auto t0 = Clock::now();
      const Results got = once();
      const double first = since(t0);
      r.max_rel_err = verification_error(got, want, scale);
      auto over_budget = [&] { return options.budget && since(start) >= *options.budget; };
      // Far slower than the best: not worth timing. A first run may include one-time costs
      // (libxsmm generating the kernels of new shapes), so a second run decides, budget allowing.
      auto far_slower = [&](double seconds) {
        return best && seconds > options.slow_factor * report.results[*best].median_s;
      };
      double second = first;
      int runs = 1;
      if (*r.max_rel_err <= tol && far_slower(first) && !over_budget()) {
        t0 = Clock::now();
        once();
        second = since(t0);
        runs = 2;
      }
      if (!(*r.max_rel_err <= tol)) {
        r.status = Outcome::invalid;
        r.seconds = {first};
        if (!std::isfinite(*r.max_rel_err)) r.max_rel_err.reset();
      } else if (far_slower(second)) {
        r.status = Outcome::timeout;
        r.seconds = runs == 2 ? std::vector<double>{first, second} : std::vector<double>{first};
      } else {
        double last = second;
        for (int w = runs; w < protocol.warmup && !over_budget(); ++w) {
          t0 = Clock::now();
          once();
          last = since(t0);
        }
        // Samples of at least a millisecond: runs timed in groups when they are shorter.
        const int group =
            static_cast<int>(std::clamp(std::ceil(1e-3 / std::max(last, 1e-9)), 1.0, 1e6));
        const auto measuring = Clock::now();
        while ((static_cast<int>(r.seconds.size()) < protocol.min_reps ||
                since(measuring) < protocol.min_time) &&
               r.seconds.size() < 100000) {
          t0 = Clock::now();
          for (int g = 0; g < group; ++g) once();
          r.seconds.push_back(since(t0) / group);
          if ((options.stop && options.stop->load()) || over_budget()) break;
        }
        r.median_s = summarize(r.seconds).median_s;
        if (flops && r.median_s > 0) r.gflops = *flops / r.median_s * 1e-9;
      }
    } catch (const std::exception& err) {
      r.status = Outcome::failed;
      r.error = err.what();
      r.seconds.clear();
      r.max_rel_err.reset();
    }
    Measurement m;
    m.transform = {c->strategy, c->params};
    m.status = r.status;
    m.seconds = r.seconds;
    m.max_rel_err = r.max_rel_err;
    store.record(run_id, workload_id, machine_id, to_canonical(canonical, m));
    if (r.status == Outcome::ok) {
      auto& b = best_of[c->strategy];
      if (b == 0 || r.median_s < b) b = r.median_s;
      if (!best || r.median_s < report.results[*best].median_s) best = report.results.size();
    }
    report.results.push_back(std::move(r));
    if (progress)
      progress(report.results.size(), report.total, report.results.back(),
               best ? &report.results[*best] : nullptr);
  }
  if (options.stop && options.stop->load()) report.interrupted = true;
  return report;
}

}  // namespace einsumdb
