// einsumdb tune: measure the candidate transforms of a workload and record them.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <tuple>

#include "einsumdb/canon/metrics.hpp"
#include "einsumdb/cli/commands.hpp"
#include "einsumdb/cli/common.hpp"
#include "einsumdb/cli/jsonl.hpp"
#include "einsumdb/cli/spec_flags.hpp"
#include "einsumdb/core/error.hpp"
#include "einsumdb/core/stats.hpp"
#include "einsumdb/db/error.hpp"
#include "einsumdb/distributed/collectives.hpp"
#include "einsumdb/distributed/graph_job.hpp"
#include "einsumdb/executor/dispatch.hpp"
#include "einsumdb/tuner/roofline.hpp"
#include "einsumdb/tuner/tuner.hpp"

namespace einsumdb::cli {
namespace {

// Of a tune's time limit, what is kept for the work around the search (run_tune says which): half
// a second, or a twentieth of a limit shorter than ten seconds.
constexpr double kFinishReserve = 0.5;
constexpr double kFinishReserveShare = 0.05;

using ojson = nlohmann::ordered_json;

std::atomic<bool> g_stop{false};

extern "C" void on_interrupt(int) {
  g_stop.store(true);
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process at once
}

struct TuneArgs {
  SpecArgs spec;
  DbArgs db;
  OutputArgs out;
  double budget = 0;
  double time_limit = 60;
  std::string strategies;
  std::string threads = "1";
  int warmup = 5, min_reps = 20;
  double min_time = 2.0;
  std::uint64_t seed = 1;
  std::string label;
  bool progress = false, no_progress = false;
  std::size_t top = 0;  // rows shown, fastest first; 0: every candidate
  std::vector<std::string> bind;
  std::string file;     // --file: a campaign of workloads, one per line
  bool retune = false;  // --retune: tune a campaign's workloads already tuned here again
  int standalone = 1;   // --standalone: rounds of the winner and the default in own processes
};

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

std::vector<int> parse_threads(const std::string& text) {
  std::vector<int> out;
  for (const auto& item : split_list(text)) {
    std::size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || v < 1 || v > 256)
      throw SpecError("--threads: '" + item + "' is not a thread count from 1 to 256");
    out.push_back(v);
  }
  if (out.empty()) throw SpecError("--threads: give at least one thread count, e.g. 1,2");
  return out;
}

std::string rel_err_text(const std::optional<double>& e) {
  if (!e) return "-";
  std::ostringstream s;
  s.precision(1);
  s << std::scientific << *e;
  return s.str();
}

// The search options the flags give (the binding aside, which is per workload).
TuneOptions tune_options(const TuneArgs& args, const std::string& command_line) {
  TuneOptions options;
  if (!args.strategies.empty()) options.space.strategies = split_list(args.strategies);
  options.space.threads = parse_threads(args.threads);
  if (args.warmup < 1 || args.min_reps < 1 || !(args.min_time >= 0))
    throw SpecError("--warmup and --min-reps must be at least 1 and --min-time not negative");
  options.protocol = {args.warmup, args.min_reps, args.min_time};
  if (args.budget < 0) throw SpecError("--budget must not be negative");
  if (args.budget > 0) options.budget = args.budget;
  if (!(args.time_limit >= 0)) throw SpecError("--time-limit must not be negative");
  options.time_limit = args.time_limit;
  options.seed = args.seed;
  options.stop = &g_stop;
  options.run.label = args.label;
  options.run.command = command_line;
  return options;
}

int run_campaign(TuneArgs& args, const std::string& command_line);

// The median `einsumdb run` gives for candidate `c` of workload `e` (bound, with its arrays
// generated from `seed`) in a process of its own: the time a user sees, on memory the process
// has not used before. `repeat` runs (the first maps and writes the result's pages), and more
// until they add up to a tenth of a second: a short workload's first runs in a process are its
// slowest.
double standalone_median(const BatchedEinsum& e, const Candidate& c, std::uint64_t seed,
                         int repeat) {
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) throw Error("cannot find this program's path to run a candidate on its own");
  exe[n] = 0;
  std::vector<std::string> argv = {exe,
                                   "run",
                                   to_json(e).dump(),
                                   "--transform",
                                   c.strategy,
                                   "--params",
                                   c.params.dump(),
                                   "--repeat",
                                   std::to_string(repeat),
                                   "--min-time",
                                   "0.1",
                                   "--seed",
                                   std::to_string(seed),
                                   "--json"};
  const std::string out = run_program(argv);
  try {
    return nlohmann::json::parse(out).at("median_s").get<double>();
  } catch (const nlohmann::json::exception&) {
    throw Error("einsumdb run of " + c.strategy + " printed no time: " + out.substr(0, 200));
  }
}

// The search's winner and the untuned default (the transform `run` takes for a workload the
// store knows nothing of), each run `rounds` times in processes of their own, alternating:
// their standalone medians, and how far each is from its median in the tune. With `seconds_left`
// (what the time limit leaves of a large workload's tune), the check runs only if it would end
// within it: each process generates the arrays and makes at least four runs (`einsumdb run
// --repeat 3` after its first, and more to fill 0.1 s), at the median the tune measured (the
// oracle's time for a candidate the tune did not measure), with one run more for the first run's
// fresh pages. Otherwise it is skipped, and says why.
ojson standalone_check(const BatchedEinsum& e, const TuneReport& report, std::uint64_t seed,
                       int rounds, std::optional<double> seconds_left) {
  const TuneResult* best = report.best();
  if (!best || rounds <= 0) return ojson();
  auto without_threads = [](nlohmann::json p) {
    p.erase("threads");
    return p;
  };
  Candidate fallback = default_candidate(e);
  const int threads = best->candidate.params.value("threads", 1);
  fallback.params["threads"] = threads;
  std::vector<std::pair<std::string, Candidate>> who = {{"winner", best->candidate}};
  if (!(fallback.strategy == best->candidate.strategy &&
        without_threads(fallback.params) == without_threads(best->candidate.params)))
    who.push_back({"default", fallback});
  // The tune's verified result of candidate c (at the winner's thread count), or null.
  auto in_tune = [&](const Candidate& c) -> const TuneResult* {
    const TuneResult* found = nullptr;
    for (const auto& r : report.results)
      if (r.status == Outcome::ok && r.candidate.strategy == c.strategy &&
          without_threads(r.candidate.params) == without_threads(c.params) &&
          r.candidate.params.value("threads", 1) == threads)
        found = &r;
    return found;
  };
  if (seconds_left) {
    // Each process: generating the arrays, then five runs at the median (the four it times and
    // one for the first run's fresh pages), or one run and 0.1 s where that is more.
    double expected = 0;
    ojson processes = ojson::array();
    for (const auto& [name, c] : who) {
      const TuneResult* r = in_tune(c);
      const double median_s = r ? r->median_s : report.oracle_seconds;
      const double each = report.arrays_seconds + std::max(5 * median_s, median_s + 0.1);
      expected += rounds * each;
      processes.push_back({{"who", name},
                           {"median_s", median_s},
                           {"arrays_s", report.arrays_seconds},
                           {"expected_s", each}});
    }
    if (expected > *seconds_left)
      return {{"skipped", "the time limit: the check would take about " + format_seconds(expected) +
                              ", and " + format_seconds(std::max(0.0, *seconds_left)) +
                              " of the limit were left (--time-limit 0 runs it)"},
              {"expected_s", expected},
              {"left_s", *seconds_left},
              {"rounds", rounds},
              {"processes", processes}};
  }
  std::vector<std::vector<double>> medians(who.size());
  for (int round = 0; round < rounds; ++round)
    for (std::size_t k = 0; k < who.size(); ++k)
      medians[k].push_back(standalone_median(e, who[k].second, seed, 3));
  ojson out = ojson::object();
  for (std::size_t k = 0; k < who.size(); ++k) {
    const Candidate& c = who[k].second;
    ojson row = {{"strategy", c.strategy}, {"params", c.params}};
    const double m = median(medians[k]);
    row["standalone_median_s"] = m;
    row["runs"] = medians[k];
    if (const TuneResult* r = in_tune(c)) {
      row["in_tune_median_s"] = r->median_s;
      row["in_tune_over_standalone"] = r->median_s / m;
    }
    out[who[k].first] = row;
  }
  if (out.contains("default"))
    out["winner_over_default"] = out["winner"]["standalone_median_s"].get<double>() /
                                 out["default"]["standalone_median_s"].get<double>();
  return out;
}

int run_tune(TuneArgs& args, const std::string& command_line) {
  if (!args.file.empty()) {
    if (!args.spec.spec.empty() || !args.bind.empty())
      throw SpecError("give either SPEC (with --bind) or --file FILE, not both");
    return run_campaign(args, command_line);
  }
  const auto began = std::chrono::steady_clock::now();
  if (args.spec.spec.empty()) throw SpecError("give the workload SPEC, or --file FILE");
  if (args.retune) throw SpecError("--retune is for a campaign (--file)");
  const BatchedEinsum e = read_spec(args.spec);  // functional operands tune as their ideal form
  TuneOptions options = tune_options(args, command_line);
  // A symbolic workload is measured at one length of each symbol (shown, and recorded with it).
  options.binding = tuning_binding(e, parse_binding(args.bind));
  const BatchedEinsum measured = options.binding.empty() ? e : bind_symbols(e, options.binding);

  Store store = open_for_writing(args.db);
  const Machine& machine = this_machine();
  const bool json = want_json(args.out);
  const bool show_progress = !args.no_progress && (args.progress || isatty(STDERR_FILENO));
  const Dtype dtype = result_dtype(e, 0);  // a row's computation dtype (numpy's promotion)
  const Store::Roofline roof = machine_roofline(store, machine, dtype);
  const auto flops = flop_count(measured);
  const auto bytes = footprint_bytes(measured);
  if (!options.binding.empty() && !json)
    std::cerr << "einsumdb: symbolic workload: measuring at " << to_string(options.binding)
              << " (recorded under the symbolic key with this binding; --bind chooses others)\n";

  // The time limit is the whole command's: what the set-up above took (opening the store, the
  // machine's roofline) comes off the search's share, and the standalone check runs in what is
  // left, if it fits. So does what the limit's own time cannot show: the process's start before
  // `began` (loading the libraries), and after the search the run's transaction, the report, the
  // store's checkpoint at its close and the process's exit; kFinishReserve is kept for them
  // (docs/performance/tune-cost.md measures the commands' wall time against the limit).
  const auto seconds_since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  const double reserve = std::min(kFinishReserve, kFinishReserveShare * args.time_limit);
  if (options.time_limit > 0)
    options.time_limit = std::max(1e-3, args.time_limit - reserve - seconds_since(began));
  g_stop.store(false);
  auto* previous = std::signal(SIGINT, on_interrupt);
  Progress progress;
  if (show_progress)
    progress = [&](std::size_t done, std::size_t total, const TuneResult& r,
                   const TuneResult* best) {
      std::cerr << "\r\033[K[" << done << "/" << total << "] " << r.candidate.strategy << " "
                << describe_params(r.candidate.params) << ": " << to_string(r.status);
      if (best)
        std::cerr << " | best " << format_number(best->gflops) << " GFLOP/s ("
                  << best->candidate.strategy << ")";
      std::cerr << std::flush;
    };
  TuneReport report;
  try {
    report = tune(store, machine, e, options, progress);
  } catch (...) {
    std::signal(SIGINT, previous);
    throw;
  }
  std::signal(SIGINT, previous);
  if (show_progress) std::cerr << "\r\033[K";
  // The store holds the run already: a check that cannot run is reported, not fatal.
  ojson standalone;
  if (!report.interrupted && args.standalone > 0) {
    if (show_progress)
      std::cerr << "running the winner and the default in processes of their own..." << std::flush;
    try {
      std::optional<double> left;
      if (report.probed > 0 && args.time_limit > 0)
        left = args.time_limit - reserve - seconds_since(began);
      standalone = standalone_check(measured, report, args.seed, args.standalone, left);
    } catch (const std::exception& err) {
      standalone = {{"error", err.what()}};
      std::cerr << (show_progress ? "\r\033[K" : "")
                << "einsumdb: warning: the standalone check failed: " << err.what() << "\n";
    }
    if (show_progress) std::cerr << "\r\033[K";
  }
  if (report.interrupted)
    std::cerr << "einsumdb: interrupted: " << report.results.size() << " of " << report.total
              << " candidates measured and recorded (run " << report.run << ")\n";
  if (report.budget_exhausted)
    std::cerr << "einsumdb: budget of " << args.budget << " s spent: " << report.results.size()
              << " of " << report.total << " candidates measured (best first)\n";
  if (report.time_limit_reached)
    std::cerr << "einsumdb: time limit of " << args.time_limit
              << " s reached: " << report.not_measured
              << " candidates not measured, the least promising in the probe (--time-limit 0 "
                 "measures all)\n";

  if (standalone.is_object() && standalone.contains("skipped"))
    std::cerr << "einsumdb: the standalone check was skipped: "
              << standalone["skipped"].get<std::string>() << "\n";

  // Fastest verified first, then invalid, then failed.
  std::vector<const TuneResult*> sorted;
  for (const auto& r : report.results) sorted.push_back(&r);
  std::stable_sort(sorted.begin(), sorted.end(), [](const TuneResult* a, const TuneResult* b) {
    if (a->status != b->status) return a->status < b->status;
    return a->status == Outcome::ok && a->median_s < b->median_s;
  });
  const std::size_t hidden =
      args.top > 0 && sorted.size() > args.top ? sorted.size() - args.top : 0;
  sorted.resize(sorted.size() - hidden);
  auto fraction = [&](const TuneResult& r) -> std::optional<double> {
    if (r.status != Outcome::ok || !flops || !bytes || !(r.median_s > 0)) return std::nullopt;
    const int threads = r.candidate.params.value("threads", 1);
    return *flops / r.median_s * 1e-9 / roof.attainable_gflops(*flops, *bytes, threads);
  };
  if (json) {
    ojson out = report_json(report, &sorted);
    for (std::size_t k = 0; k < sorted.size(); ++k) {
      const auto f = fraction(*sorted[k]);
      if (sorted[k]->status == Outcome::ok)
        out["results"][k]["roofline_fraction"] = f ? ojson(*f) : ojson();
    }
    out["machine"] = machine.fingerprint();
    out["roofline"] = {{"dtype", roof.dtype},
                       {"peak_gflops_per_core", roof.peak_gflops},
                       {"bandwidth_gbs", roof.bandwidth_gbs}};
    out["work_flops"] = flops ? ojson(*flops) : ojson();
    out["footprint_bytes"] = bytes ? ojson(*bytes) : ojson();
    out["not_shown"] = hidden;
    out["standalone"] = standalone;
    // The search's share of the time limit, where one applied (a probed workload).
    out["search_time_limit_s"] =
        report.probed > 0 && options.time_limit > 0 ? ojson(options.time_limit) : ojson();
    print_json(out);
  } else {
    std::cout << "workload " << report.workload_hash.substr(0, 12) << "  " << e.einsum_string()
              << (options.binding.empty() ? "" : "  at " + to_string(options.binding)) << "  ("
              << report.results.size() << " of " << report.total << " candidates; verified against "
              << report.oracle << "; run " << report.run << ")\n"
              << "roofline (" << roof.dtype << "): " << format_number(roof.peak_gflops, 1)
              << " GFLOP/s per core, " << format_number(roof.bandwidth_gbs, 1) << " GB/s"
              << (is_complex(dtype) ? "; a complex multiply-add counts 8 FLOPs" : "") << "\n\n";
    std::vector<std::vector<std::string>> rows;
    for (const auto* r : sorted) {
      const auto f = fraction(*r);
      rows.push_back({r->candidate.strategy, describe_params(r->candidate.params),
                      std::string(to_string(r->status)),
                      r->status == Outcome::ok ? format_seconds(r->median_s) : "-",
                      format_number(r->gflops), f ? format_number(*f * 100, 0) + "%" : "-",
                      rel_err_text(r->max_rel_err), r->error});
    }
    print_table(
        {"strategy", "params", "status", "median", "GFLOP/s", "roofline", "rel.err", "error"},
        rows);
    if (hidden > 0)
      std::cout << "... " << hidden << " more candidate(s) recorded, not shown (einsumdb show "
                << report.workload_hash << " lists them all)\n";
    if (standalone.is_object() && standalone.contains("winner")) {
      std::cout << "\nin processes of their own (einsumdb run; the median of "
                << standalone["winner"]["runs"].size() << " process(es)):\n";
      for (const char* who : {"winner", "default"}) {
        if (!standalone.contains(who)) continue;
        const ojson& w = standalone[who];
        std::cout << "  " << who << " " << w["strategy"].get<std::string>() << " "
                  << describe_params(w["params"]) << ": "
                  << format_seconds(w["standalone_median_s"].get<double>());
        if (w.contains("in_tune_median_s"))
          std::cout << " (in the tune " << format_seconds(w["in_tune_median_s"].get<double>())
                    << ", " << format_number(w["in_tune_over_standalone"].get<double>())
                    << "× that)";
        std::cout << "\n";
      }
      if (standalone.contains("winner_over_default"))
        std::cout << "  winner / default: "
                  << format_number(standalone["winner_over_default"].get<double>()) << "\n";
    }
  }
  return report.interrupted ? 130 : kExitOk;
}

// ---------------------------------------------------------------- campaigns (tune --file)

struct CampaignItem {
  std::size_t line = 0;
  BatchedEinsum e;
  Binding bind;
};

// Every workload of a campaign file, all read (and every error found) before anything is tuned.
std::vector<CampaignItem> read_campaign(const std::string& path) {
  std::vector<CampaignItem> items;
  for_each_line(path, [&](std::size_t number, const std::string& text) {
    if (text.find_first_not_of(" \t\r") != std::string::npos &&
        text[text.find_first_not_of(" \t\r")] == '#')
      return;
    const std::string where = path + ":" + std::to_string(number) + ": ";
    try {
      nlohmann::json j = nlohmann::json::parse(text);
      check_json_depth(j, "line");
      CampaignItem item;
      item.line = number;
      if (!j.is_object())
        throw SpecError("expected a spec JSON object or {\"spec\": ..., \"bind\": ...}");
      if (j.contains("spec")) {
        for (const auto& [key, value] : j.items()) {
          (void)value;
          if (key != "spec" && key != "bind")
            throw SpecError("unknown key '" + key +
                            "' (a line is a spec, or {\"spec\", \"bind\"})");
        }
        if (j.contains("bind")) {
          if (!j["bind"].is_object())
            throw SpecError("'bind' must be an object {\"symbol\": length, ...}");
          for (const auto& [symbol, length] : j["bind"].items()) {
            if (!length.is_number_integer() || length.get<std::int64_t>() < 1)
              throw SpecError("bind: '" + symbol + "' must be a length of at least 1, not " +
                              length.dump());
            item.bind.emplace(symbol, length.get<std::int64_t>());
          }
        }
        j = nlohmann::json(j["spec"]);
      }
      take_functions(j);  // functional operands tune as their ideal form
      item.e = parse_spec_json(j);
      items.push_back(std::move(item));
    } catch (const nlohmann::json::exception& e) {
      throw SpecError(where + "not JSON: " + e.what());
    } catch (const SpecError& e) {
      throw SpecError(where + e.what());
    }
  });
  if (items.empty()) throw SpecError(path + ": no workload in the campaign file");
  return items;
}

// What one process of a campaign did with one workload.
ojson tune_campaign_item(Store& store, const Machine& machine, const CampaignItem& item,
                         TuneOptions options, bool retune,
                         const std::function<void(const std::string&)>& status) {
  ojson row = {{"line", item.line}, {"einsum", item.e.einsum_string()}};
  const Canonical c = canonicalize(item.e);
  row["hash"] = c.hash;
  if (!retune) {
    if (const auto best = store.best(c.hash, machine.fingerprint())) {
      row["status"] = "skipped";
      row["reason"] = "tuned on this machine already (--retune tunes it again)";
      row["best"] = {{"strategy", best->transform.name},
                     {"gflops", best->gflops ? ojson(*best->gflops) : ojson()}};
      return row;
    }
  }
  options.binding = tuning_binding(item.e, item.bind);
  if (!options.binding.empty()) row["binding"] = options.binding;
  const TuneReport report =
      tune(store, machine, item.e, options,
           [&](std::size_t done, std::size_t total, const TuneResult& r, const TuneResult* best) {
             std::string s = "[" + std::to_string(done) + "/" + std::to_string(total) + "] " +
                             r.candidate.strategy + ": " + std::string(to_string(r.status));
             if (best) s += " | best " + format_number(best->gflops) + " GFLOP/s";
             status(s);
           });
  row["status"] = report.interrupted ? "interrupted" : "tuned";
  row["run"] = report.run;
  row["candidates"] = report.total;
  row["measured"] = report.results.size();
  row["not_measured"] = report.not_measured;  // left out by the time limit
  if (const TuneResult* best = report.best())
    row["best"] = {{"strategy", best->candidate.strategy},
                   {"median_s", best->median_s},
                   {"gflops", best->gflops ? ojson(*best->gflops) : ojson()}};
  return row;
}

// Rank 0 receives every rank's rows, in rank order, and every rank the worst of their exit codes.
// The ranks end their shares at different times and a workload's tune has no bound of its own, so
// these waits have no deadline (a rank that dies ends the job through mpirun); a waiting rank
// sleeps between polls, leaving its core to a rank still tuning there.
std::pair<ojson, int> gather_rows(const ojson& mine, int code, const MpiSession* mpi) {
  if (!mpi || mpi->size() == 1) return {mine, code};
  const Waiter waiter(MPI_COMM_WORLD, std::numeric_limits<double>::infinity(), true);
  const auto texts = gather_text(waiter, ojson{{"code", code}, {"rows", mine}}.dump(),
                                 "gathering the campaign's results");
  ojson rows = ojson::array();
  int worst = code;
  for (const auto& text : texts) {
    ojson part = ojson::parse(text);
    worst = std::max(worst, part.at("code").get<int>());
    for (auto& row : part.at("rows")) rows.push_back(std::move(row));
  }
  worst = std::stoi(broadcast_text(waiter, std::to_string(worst), "sharing the exit code"));
  return {std::move(rows), worst};
}

int run_campaign(TuneArgs& args, const std::string& command_line) {
  const auto items = read_campaign(args.file);
  TuneOptions options = tune_options(args, command_line);
  if (options.run.label.empty()) options.run.label = "campaign " + args.file;
  // Started by mpirun: each rank takes every size-th workload.
  std::optional<MpiSession> mpi;
  if (std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK")) mpi.emplace();
  const int rank = mpi ? mpi->rank() : 0, size = mpi ? mpi->size() : 1;
  if (rank == 0 && size > 1) {
    const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (local && std::atoi(local) > 1)
      std::cerr << "einsumdb: " << local
                << " ranks on this node time each other's noise: run one rank per node "
                   "(mpirun --map-by ppr:1:node) for timings worth keeping\n";
  }
  const bool show_progress = !args.no_progress && (args.progress || isatty(STDERR_FILENO));
  std::size_t mine = 0;
  for (std::size_t i = static_cast<std::size_t>(rank); i < items.size();
       i += static_cast<std::size_t>(size))
    ++mine;

  ojson rows = ojson::array();
  int code = kExitOk;
  {
    std::optional<Store> store;
    std::string store_error;
    try {
      store.emplace(open_for_writing(args.db));
    } catch (const DatabaseError& e) {
      store_error = e.what();
    }
    const Machine& machine = this_machine();
    g_stop.store(false);
    auto* previous = std::signal(SIGINT, on_interrupt);
    std::size_t done = 0;
    for (std::size_t i = static_cast<std::size_t>(rank); i < items.size();
         i += static_cast<std::size_t>(size)) {
      const CampaignItem& item = items[i];
      ++done;
      ojson row;
      const std::string prefix = (size > 1 ? "rank " + std::to_string(rank) + ": " : "") +
                                 "workload " + std::to_string(done) + "/" + std::to_string(mine) +
                                 " (" + args.file + ":" + std::to_string(item.line) + " " +
                                 item.e.einsum_string() + ") ";
      if (!store_error.empty() || g_stop.load()) {
        row = {{"line", item.line},
               {"einsum", item.e.einsum_string()},
               {"status", "not tuned"},
               {"reason", g_stop.load() ? "interrupted" : store_error}};
        rows.push_back(row);
        continue;
      }
      auto status = [&](const std::string& s) {
        if (show_progress) std::cerr << "\r\033[K" << prefix << s << std::flush;
      };
      status("");
      try {
        row = tune_campaign_item(*store, machine, item, options, args.retune, status);
      } catch (const DatabaseError& e) {
        // The store is gone (a server stopped, say): what was measured is not half-written, and
        // the rest of this rank's share is left for a resumed campaign.
        row = {{"line", item.line},
               {"einsum", item.e.einsum_string()},
               {"status", "failed"},
               {"error", e.what()}};
        store_error = e.what();
      } catch (const std::exception& e) {
        // Any other failure of this workload (a strategy's bug, memory) fails it alone: the
        // other ranks wait for this one's rows, so it must not leave the loop.
        row = {{"line", item.line},
               {"einsum", item.e.einsum_string()},
               {"status", "failed"},
               {"error", e.what()}};
      }
      if (show_progress) std::cerr << "\r\033[K";
      if (row["status"] == "failed") {
        code = kExitRuntime;
        std::cerr << "einsumdb: " << prefix << "failed: " << row["error"].get<std::string>()
                  << '\n';
      }
      rows.push_back(row);
    }
    std::signal(SIGINT, previous);
    if (g_stop.load() && code == kExitOk) code = 130;
  }
  ojson all;
  std::tie(all, code) = gather_rows(rows, code, mpi ? &*mpi : nullptr);
  if (rank != 0) return code;
  std::map<std::string, int> counts;
  for (const auto& row : all) ++counts[row["status"].get<std::string>()];
  if (want_json(args.out)) {
    ojson summary = {{"file", args.file}, {"workloads", items.size()}, {"ranks", size}};
    for (const auto& [status, n] : counts) summary[status] = n;
    summary["results"] = all;
    print_json(summary);
  } else {
    std::vector<std::vector<std::string>> table;
    for (const auto& row : all) {
      const bool has_best = row.contains("best");
      table.push_back({std::to_string(row["line"].get<std::size_t>()),
                       row["einsum"].get<std::string>(), row["status"].get<std::string>(),
                       has_best ? row["best"]["strategy"].get<std::string>() : "-",
                       has_best && !row["best"]["gflops"].is_null()
                           ? format_number(row["best"]["gflops"].get<double>())
                           : "-",
                       row.contains("run") ? std::to_string(row["run"].get<std::int64_t>()) : "-",
                       row.value("error", row.value("reason", ""))});
    }
    print_table({"line", "einsum", "status", "best", "GFLOP/s", "run", "note"}, table);
    std::cout << items.size() << " workload(s) on " << size << " rank(s):";
    for (const auto& [status, n] : counts) std::cout << " " << n << " " << status << ";";
    std::cout << '\n';
  }
  return code;
}

}  // namespace

Command add_tune_command(CLI::App& app) {
  auto args = std::make_shared<TuneArgs>();
  auto* cmd = app.add_subcommand(
      "tune",
      "Measure the applicable transforms of a workload on this machine, verify each result "
      "against the reference, and record every candidate (ok, invalid, failed) in one run");
  add_spec_options(cmd, args->spec, /*spec_required=*/false);
  add_db_option(cmd, args->db);
  add_output_options(cmd, args->out);
  cmd->add_option("--budget", args->budget,
                  "Seconds for the whole search; the most promising candidates first "
                  "(default: every candidate, a large workload's within --time-limit)");
  cmd->add_option("--time-limit", args->time_limit,
                  "Seconds a large workload's tune may take (one the probe runs on: more than "
                  "2^27 loop iterations), the standalone check included; half a second before "
                  "it (a twentieth of a limit under 10 s, kept for storing the run and the exit) "
                  "the search stops once one candidate is measured, a run that would end past "
                  "it is not started, the candidates not reached are not recorded, and the "
                  "standalone check runs only if it fits in what is left; the JSON's "
                  "search_time_limit_s is the search's share "
                  "(default 60; 0: no limit)");
  cmd->add_option(
      "--strategies", args->strategies,
      "Comma-separated strategies to try (default: all but reference): " + strategy_names());
  cmd->add_option("--threads", args->threads,
                  "Comma-separated thread counts to try, e.g. 1,2 (default 1)");
  cmd->add_option("--warmup", args->warmup, "Warm-up runs per candidate (default 5)");
  cmd->add_option("--min-reps", args->min_reps, "Minimum timed repetitions (default 20)");
  cmd->add_option("--min-time", args->min_time,
                  "Minimum seconds of timed repetitions per candidate (default 2)");
  cmd->add_option("--seed", args->seed, "Seed of the generated input data (default 1)");
  cmd->add_option("--label", args->label, "Free-text label stored with the run");
  cmd->add_flag("--progress", args->progress, "Show progress even when stderr is not a terminal");
  cmd->add_flag("--no-progress", args->no_progress, "Never show progress");
  add_bind_option(cmd, args->bind,
                  "default: each symbol " + std::to_string(kDefaultSymbolLength) +
                      ", halved while the footprint exceeds 1 GiB");
  cmd->add_option("--top", args->top,
                  "Show only the N fastest candidates (all are recorded; default: show all)");
  cmd->add_option("--file", args->file,
                  "A campaign: tune every workload of this JSON-lines file (a spec JSON per line, "
                  "or {\"spec\": {...}, \"bind\": {\"N\": 1000}}); under mpirun each rank takes "
                  "its share");
  cmd->add_option("--standalone", args->standalone,
                  "After the search, run the winner and the untuned default this many times "
                  "each in processes of their own (einsumdb run, alternating; 3 runs a "
                  "process, or more to fill 0.1 s) "
                  "and show their times beside those measured in the tune (default 1; 0: skip; "
                  "a campaign, --file, runs none)")
      ->check(CLI::Range(0, 100));
  cmd->add_flag("--retune", args->retune,
                "With --file: tune workloads already tuned on this machine again (default: skip "
                "them, so a campaign resumes where it stopped)");
  cmd->footer(
      "A campaign is resumable: a workload with a verified measurement on this machine is\n"
      "skipped unless --retune, each workload's run is written in one transaction when it ends,\n"
      "and Ctrl-C stops after recording what was measured. Under `mpirun -np N einsumdb tune\n"
      "--file F --db postgresql://...` rank r tunes workloads r, r+N, ... and all write to the\n"
      "shared store; run one rank per node (ranks on one node time each other's noise).");
  return [args] {
    return run_tune(*args, args->file.empty() ? "einsumdb tune " + args->spec.spec
                                              : "einsumdb tune --file " + args->file);
  };
}

}  // namespace einsumdb::cli
