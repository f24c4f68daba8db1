// einsumdb bench canon: in-process timing of canonicalization (graph build, nauty, rebuild,
// key and hash; file reading and parsing excluded).
#include <algorithm>
#include <chrono>
#include <iostream>

#include <unistd.h>

#include "einsumdb/canon/canonicalize.hpp"
#include "einsumdb/canon/metrics.hpp"
#include "einsumdb/canon/parse.hpp"
#include "einsumdb/cli/commands.hpp"
#include "einsumdb/cli/jsonl.hpp"
#include "einsumdb/core/error.hpp"
#include "einsumdb/core/stats.hpp"
#include "einsumdb/db/error.hpp"
#include "einsumdb/db/retrieve.hpp"
#include "einsumdb/db/store.hpp"

#include <filesystem>
#include <random>

namespace einsumdb::cli {
namespace {

struct BenchArgs {
  std::string file;
  int repeat = 200;
  std::string labeling{to_string(kKeyLabeling)};
  bool no_structure = false;
  bool no_twin_rows = false;
};

struct Case {
  std::string name;
  BatchedEinsum spec;
};

// Lines are specs, {"name", "spec"} or isomorphism pairs {"name", "a", "b"} (two cases).
std::vector<Case> read_cases(const std::string& path) {
  std::vector<Case> cases;
  for_each_line(path, [&](std::size_t number, const std::string& text) {
    const std::string where = path + ":" + std::to_string(number);
    try {
      const auto j = nlohmann::json::parse(text);
      check_json_depth(j, "line");
      const std::string name = j.is_object() && j.contains("name")
                                   ? j.at("name").get<std::string>()
                                   : "line" + std::to_string(number);
      if (j.is_object() && j.contains("spec")) {
        cases.push_back({name, parse_spec_json(j.at("spec"))});
      } else if (j.is_object() && j.contains("a") && j.contains("b")) {
        cases.push_back({name + "/a", parse_spec_json(j.at("a"))});
        cases.push_back({name + "/b", parse_spec_json(j.at("b"))});
      } else {
        cases.push_back({name, parse_spec_json(j)});
      }
    } catch (const nlohmann::json::exception& err) {
      throw SpecError(where + ": " + err.what());
    } catch (const SpecError& err) {
      throw SpecError(where + ": " + err.what());
    }
  });
  if (cases.empty()) throw SpecError(path + ": no cases");
  return cases;
}

template <class F>
std::vector<double> time_us(int repeat, F&& f) {
  for (int w = 0; w < std::min(repeat, 10); ++w) f();  // warm caches and nauty's buffers
  std::vector<double> us;
  us.reserve(repeat);
  for (int r = 0; r < repeat; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const auto t1 = std::chrono::steady_clock::now();
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  return us;
}

int run_canon_bench(const BenchArgs& args) {
  if (args.repeat < 1) throw SpecError("--repeat must be at least 1");
  CanonOptions options;
  options.labeling = *parse_labeling(args.labeling);
  options.structure = !args.no_structure;
  options.twin_rows = !args.no_twin_rows;
  const auto cases = read_cases(args.file);

  nlohmann::ordered_json out;
  out["labeling"] = args.labeling;
  out["structure"] = options.structure;
  out["twin_rows"] = options.twin_rows;
  out["repeat"] = args.repeat;
  auto& rows = out["cases"] = nlohmann::ordered_json::array();
  std::vector<double> medians;
  const bool progress = isatty(STDERR_FILENO);
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const auto& c = cases[k];
    if (progress && k % 8 == 0)
      std::cerr << "\rbench canon: case " << k + 1 << "/" << cases.size() << std::flush;
    std::size_t sink = 0;
    const Canonical::Stats stats = canonicalize(c.spec, options).stats;
    const auto us =
        time_us(args.repeat, [&] { sink += canonicalize(c.spec, options).hash.size(); });
    if (sink == 0) throw Error("benchmark produced no output");
    const double m = median(us);
    medians.push_back(m);
    rows.push_back({
        {"name", c.name},
        {"operands", c.spec.num_operands()},
        {"rows", c.spec.num_rows()},
        {"row_classes", stats.row_classes},
        {"nodes", stats.nodes},
        {"edges", stats.edges},
        {"median_us", m},
        {"min_us", *std::min_element(us.begin(), us.end())},
    });
  }
  if (progress) std::cerr << "\r" << std::string(40, ' ') << "\r";
  out["median_us"] = median(medians);
  out["max_median_us"] = *std::max_element(medians.begin(), medians.end());
  std::cout << out.dump(2) << '\n';
  return kExitOk;
}

struct DbBenchArgs {
  std::string db;
  std::size_t workloads = 100000;
  std::size_t measurements = 1000000;
  std::size_t batch = 10000;
  std::size_t queries = 2000;
  std::size_t nearest_queries = 200;
  bool keep = false;
  bool reuse = false;
};

// A user-named spec of workload w: four structures, lengths from w's digits, all distinct.
BatchedEinsum bench_spec(std::size_t w) {
  const std::size_t s = w % 4, v = w / 4;
  auto len = [&](std::size_t digit) {
    return Length::of(static_cast<std::int64_t>(2 + (v / digit) % 30));
  };
  BatchedEinsum e;
  switch (s) {
    case 0:  // matrix product
      e.inputs = {"ik", "kj"};
      e.output = "ij";
      e.arrays["A"] = {{len(1), len(30)}, Dtype::f64};
      e.arrays["B"] = {{len(30), len(900)}, Dtype::f64};
      break;
    case 1:  // two matrix products sharing the left factor
      e.inputs = {"ij", "jk"};
      e.output = "ik";
      e.arrays["A"] = {{len(1), len(30)}, Dtype::f64};
      e.arrays["B"] = {{len(30), len(900)}, Dtype::f64};
      e.arrays["C"] = {{len(30), len(900)}, Dtype::f64};
      e.batch = {{"A", "B"}, {"A", "C"}};
      return e;
    case 2:  // batched matrix product
      e.inputs = {"bik", "bkj"};
      e.output = "bij";
      e.arrays["A"] = {{len(900), len(1), len(30)}, Dtype::f32};
      e.arrays["B"] = {{len(900), len(30), Length::of(8)}, Dtype::f32};
      break;
    default:  // a TCCG contraction
      e.inputs = {"abcd", "ea"};
      e.output = "ebcd";
      e.arrays["A"] = {{len(1), len(30), len(900), Length::of(4)}, Dtype::f64};
      e.arrays["B"] = {{Length::of(6), len(1)}, Dtype::f64};
      break;
  }
  e.batch = {{"A", "B"}};
  return e;
}

// A matrix-vector product of n rows and l columns; n symbolic ("N") when not given.
BatchedEinsum bench_symbolic_spec(std::int64_t l, std::optional<std::int64_t> n) {
  BatchedEinsum e;
  e.inputs = {"ij", "j"};
  e.output = "i";
  e.arrays["A"] = {{n ? Length::of(*n) : Length::named("N"), Length::of(l)}, Dtype::f64};
  e.arrays["x"] = {{Length::of(l)}, Dtype::f64};
  e.batch = {{"A", "x"}};
  return e;
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))];
}

int run_db_bench(const DbBenchArgs& args) {
  if (args.workloads == 0 || args.measurements == 0 || args.batch == 0 || args.queries == 0)
    throw SpecError("--workloads, --measurements, --batch and --queries must be positive");
  const std::string path = args.db.empty()
                               ? (std::filesystem::temp_directory_path() /
                                  ("einsumdb_bench_" + std::to_string(getpid()) + ".sqlite"))
                                     .string()
                               : args.db;
  if (args.reuse && args.db.empty()) throw SpecError("--reuse needs --db FILE");
  if (!args.reuse)
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  const bool progress = isatty(STDERR_FILENO);
  using clock = std::chrono::steady_clock;
  auto seconds_since = [](clock::time_point t0) {
    return std::chrono::duration<double>(clock::now() - t0).count();
  };

  std::vector<BatchedEinsum> specs;
  std::vector<Canonical> canon;
  specs.reserve(args.workloads);
  canon.reserve(args.workloads);
  auto t0 = clock::now();
  for (std::size_t w = 0; w < args.workloads; ++w) {
    specs.push_back(bench_spec(w));
    if (!args.reuse) canon.push_back(canonicalize(specs.back()));
  }
  const double canon_seconds = seconds_since(t0);

  Machine machine;
  machine.cpu_model = "bench";
  machine.cores = 1;
  machine.isa = "bench";
  machine.blas = "bench";
  auto measurement = [&](std::size_t i) {
    const BatchedEinsum& e = specs[i % specs.size()];
    Measurement m;
    m.transform = {
        "strategy" + std::to_string(i % 8),
        {{"inner", {{"index", std::string(1, e.inputs[0].back())}}}, {"tile", 8 << (i % 3)}}};
    m.seconds = {1e-6 * static_cast<double>(1 + i % 1000), 1e-6 * static_cast<double>(2 + i)};
    m.max_rel_err = 1e-15;
    return to_canonical(canon[i % canon.size()], std::move(m));
  };

  Store store = Store::open(path);
  // Batched: one transaction per `batch` measurements. Only record_run is timed.
  double batched_seconds = 0;
  for (std::size_t start = 0; !args.reuse && start < args.measurements; start += args.batch) {
    std::vector<std::pair<const Canonical*, Measurement>> run;
    for (std::size_t i = start; i < std::min(args.measurements, start + args.batch); ++i)
      run.emplace_back(&canon[i % canon.size()], measurement(i));
    t0 = clock::now();
    store.record_run({"bench", "einsumdb bench db", "", ""}, machine, run);
    batched_seconds += seconds_since(t0);
    if (progress)
      std::cerr << "\rbench db: recorded " << std::min(args.measurements, start + args.batch) << "/"
                << args.measurements << std::flush;
  }
  // Symbolic workloads (Feinsum's kind of fact): a matrix-vector product of N rows for each of
  // 30 column counts, measured at two lengths of N.
  if (!args.reuse) {
    std::vector<Canonical> symbolic;
    for (std::int64_t l = 2; l < 32; ++l)
      symbolic.push_back(canonicalize(bench_symbolic_spec(l, {})));
    std::vector<std::pair<const Canonical*, Measurement>> run;
    for (const auto& c : symbolic) {
      for (std::int64_t n : {128, 1024}) {
        Measurement m;
        m.transform = {"strategy" + std::to_string(n % 3), nlohmann::json::object()};
        m.seconds = {1e-9 * static_cast<double>(n * 100)};
        m.max_rel_err = 1e-15;
        m.binding = {{"N", n}};
        run.emplace_back(&c, to_canonical(c, std::move(m)));
      }
    }
    store.record_run({"bench symbolic", "einsumdb bench db", "", ""}, machine, run);
  }
  // Baseline: one transaction per measurement, on a sample.
  const std::size_t single = args.reuse ? 0 : std::min<std::size_t>(2000, args.measurements);
  double single_seconds = 0;
  for (std::size_t i = 0; i < single; ++i) {
    const std::size_t k = args.measurements + i;
    const std::vector<std::pair<const Canonical*, Measurement>> one{
        {&canon[k % canon.size()], measurement(k)}};
    t0 = clock::now();
    store.record_run({"bench single", "einsumdb bench db", "", ""}, machine, one);
    single_seconds += seconds_since(t0);
  }
  if (progress) std::cerr << "\r" << std::string(60, ' ') << "\r";

  // best(): canonicalize the user's spec, look up, translate, for random workloads; each timing
  // on a workload of its own, so that none finds the pages the one before it touched.
  const std::string fingerprint = machine.fingerprint();
  std::mt19937_64 rng(1);
  auto any_spec = [&]() -> const BatchedEinsum& { return specs[rng() % specs.size()]; };
  // A query is canonicalized as best() callers do (kQueryCanon); "canonicalization alone" is the
  // whole of canonicalize(), both labelings, as it was measured before best() skipped one.
  const CanonOptions query_options = kQueryCanon;
  std::vector<double> best_us, canon_us, key_us, lookup_us, statement_us;
  std::size_t found = 0;
  for (std::size_t q = 0; q < args.queries; ++q) {
    const BatchedEinsum& e = any_spec();
    auto t = clock::now();
    const Canonical c = canonicalize(e);
    canon_us.push_back(seconds_since(t) * 1e6);
    const BatchedEinsum& e1 = any_spec();
    t = clock::now();
    const Canonical c1 = canonicalize(e1, query_options);
    key_us.push_back(seconds_since(t) * 1e6);
    const BatchedEinsum& e2 = any_spec();
    t = clock::now();
    found += best_for(store, canonicalize(e2, query_options), fingerprint).has_value();
    best_us.push_back(seconds_since(t) * 1e6);
    const Canonical c3 = canonicalize(any_spec(), query_options);
    t = clock::now();
    found += best_for(store, c3, fingerprint).has_value();
    lookup_us.push_back(seconds_since(t) * 1e6);
    // The floor under any answer: one statement that reads one value (on a server, one round
    // trip).
    t = clock::now();
    const int version = store.schema_version();
    statement_us.push_back(seconds_since(t) * 1e6);
    if (version <= 0) throw DatabaseError("the store lost its schema version mid-benchmark");
  }
  // Sizes never measured (see bench_spec: v from 25000 on gives new lengths) answered by the
  // nearest measured size of their structure.
  std::vector<double> nearest_us;
  std::size_t nearest_found = 0;
  for (std::size_t q = 0; q < args.nearest_queries; ++q) {
    const BatchedEinsum e = bench_spec(4 * (25000 + rng() % 2000) + rng() % 4);
    const auto t = clock::now();
    const auto a = best_for(store, canonicalize(e, query_options), fingerprint);
    nearest_us.push_back(seconds_since(t) * 1e6);
    nearest_found += a && a->match == Match::nearest;
  }
  // Concrete sizes of the symbolic workloads: answered by the one whose column count they have.
  std::vector<double> symbolic_us;
  std::size_t symbolic_found = 0;
  for (std::size_t q = 0; q < args.nearest_queries; ++q) {
    const BatchedEinsum e = bench_symbolic_spec(2 + static_cast<std::int64_t>(rng() % 30),
                                                2 + static_cast<std::int64_t>(rng() % 5000));
    const auto t = clock::now();
    const auto a = best_for(store, canonicalize(e, query_options), fingerprint);
    symbolic_us.push_back(seconds_since(t) * 1e6);
    symbolic_found += a && a->match == Match::symbolic;
  }
  // best_many: a framework's batch of shapes, canonical forms known, one read transaction.
  std::vector<Canonical> batch;
  for (std::size_t q = 0; q < args.queries; ++q)
    batch.push_back(canonicalize(any_spec(), query_options));
  auto t = clock::now();
  const auto many = best_many(store, batch, fingerprint);
  const double many_seconds = seconds_since(t);
  std::vector<BatchedEinsum> batch_specs;
  for (std::size_t q = 0; q < args.queries; ++q) batch_specs.push_back(any_spec());
  t = clock::now();
  std::vector<Canonical> batch_canon;
  for (const auto& e : batch_specs) batch_canon.push_back(canonicalize(e, query_options));
  const auto many_specs = best_many(store, batch_canon, fingerprint);
  const double many_spec_seconds = seconds_since(t);
  for (const auto* answers : {&many, &many_specs})
    found += static_cast<std::size_t>(std::count_if(answers->begin(), answers->end(),
                                                    [](const auto& a) { return a.has_value(); }));
  // The store's facts answer as its measurements do: every fact of the queried workloads.
  std::size_t compared = 0, equal = 0;
  for (const auto& c : batch) {
    ++compared;
    equal +=
        store.top_k(c.hash, {fingerprint}, 0) == store.top_k_measured(c.hash, {fingerprint}, 0);
  }
  const auto stats = store.stats();
  nlohmann::ordered_json out = {{"db", path},
                                {"workloads", stats["workloads"]},
                                {"measurements", stats["measurements"]},
                                {"db_bytes", stats["bytes"]}};
  if (!args.reuse) {
    out["canonicalize_per_workload_us"] = canon_seconds / static_cast<double>(args.workloads) * 1e6;
    const double batched = static_cast<double>(args.measurements) / batched_seconds;
    const double one = static_cast<double>(single) / single_seconds;
    out["record_batch"] = args.batch;
    out["record_per_second_batched"] = batched;
    out["record_per_second_one_per_transaction"] = one;
    out["record_batched_speedup"] = batched / one;
  }
  out["best_queries"] = args.queries;
  out["asked"] = 4 * args.queries;  // best, lookup and the two batches
  out["answered"] = found;
  out["best_median_us"] = median(best_us);
  out["best_p90_us"] = percentile(best_us, 0.9);
  out["canonicalize_median_us"] = median(canon_us);
  out["canonicalize_p90_us"] = percentile(canon_us, 0.9);
  out["best_over_canonicalize"] = median(best_us) / median(canon_us);
  out["key_median_us"] = median(key_us);
  out["key_p90_us"] = percentile(key_us, 0.9);
  out["lookup_median_us"] = median(lookup_us);
  out["lookup_p90_us"] = percentile(lookup_us, 0.9);
  out["statement_median_us"] = median(statement_us);
  if (!nearest_us.empty()) {
    out["nearest_queries"] = args.nearest_queries;
    out["nearest_found"] = nearest_found;
    out["nearest_median_us"] = median(nearest_us);
    out["nearest_p90_us"] = percentile(nearest_us, 0.9);
  }
  out["facts_compared"] = compared;
  out["facts_equal_to_measurements"] = equal;
  if (!symbolic_us.empty()) {
    out["symbolic_found"] = symbolic_found;
    out["symbolic_median_us"] = median(symbolic_us);
    out["symbolic_p90_us"] = percentile(symbolic_us, 0.9);
  }
  out["best_many_per_second"] = static_cast<double>(args.queries) / many_seconds;
  out["best_many_from_specs_per_second"] = static_cast<double>(args.queries) / many_spec_seconds;
  std::cout << out.dump(2) << '\n';
  if (!args.keep && args.db.empty())
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  const bool sound = found == 4 * args.queries && nearest_found == args.nearest_queries &&
                     symbolic_found == args.nearest_queries && equal == compared;
  return sound ? kExitOk : kExitRuntime;
}

}  // namespace

Command add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  auto* bench = app.add_subcommand("bench", "In-process benchmarks of einsumdb's own components");
  bench->require_subcommand(1);
  auto* canon = bench->add_subcommand(
      "canon", "Time canonicalization per case (median and minimum microseconds) as JSON");
  canon
      ->add_option(
          "FILE", args->file,
          "JSON lines: specs, {\"name\",\"spec\"} or isomorphism pairs {\"name\",\"a\",\"b\"}")
      ->required();
  canon->add_option("--repeat", args->repeat, "Timed repetitions per case (default 200)");
  canon
      ->add_option("--labeling", args->labeling,
                   "Canonical labeling method: traces (what keys use), nauty-sparse, "
                   "nauty-sparse-digraph or nauty-dense-digraph (the paper's digraph)")
      ->check(
          CLI::IsMember({"traces", "nauty-sparse", "nauty-sparse-digraph", "nauty-dense-digraph"}));
  canon->add_flag(
      "--no-twin-rows", args->no_twin_rows,
      "Label every batch row separately instead of once per class of interchangeable rows");
  canon->add_flag("--no-structure", args->no_structure,
                  "Skip the structure key (one nauty call, not two)");
  auto db_args = std::make_shared<DbBenchArgs>();
  auto* db = bench->add_subcommand(
      "db", "Fill a database with synthetic measurements, then time recording and best()");
  db->add_option("--db", db_args->db, "Database file (default: a temporary file, removed after)");
  db->add_option("--workloads", db_args->workloads, "Distinct workloads (default 100000)");
  db->add_option("--measurements", db_args->measurements,
                 "Measurements to record (default 1000000)");
  db->add_option("--batch", db_args->batch, "Measurements per transaction (default 10000)");
  db->add_option("--queries", db_args->queries, "best() queries to time (default 2000)");
  db->add_option("--nearest-queries", db_args->nearest_queries,
                 "Queries of unmeasured sizes, answered by the nearest size, and of sizes of "
                 "symbolic workloads (default 200 of each)");
  db->add_flag("--keep", db_args->keep, "Keep the temporary database");
  db->add_flag("--reuse", db_args->reuse,
               "Time best() on the store --db already holds (one this benchmark filled with the "
               "same --workloads), recording nothing");
  auto* canon_cmd = canon;
  Command plan_run = add_bench_plan_command(*bench);
  auto* plan_cmd = bench->get_subcommand("plan");
  Command network_run = add_bench_network_command(*bench);
  auto* network_cmd = bench->get_subcommand("network");
  return [args, db_args, canon_cmd, plan_cmd, plan_run, network_cmd, network_run] {
    if (plan_cmd->parsed()) return plan_run();
    if (network_cmd->parsed()) return network_run();
    return canon_cmd->parsed() ? run_canon_bench(*args) : run_db_bench(*db_args);
  };
}

}  // namespace einsumdb::cli
