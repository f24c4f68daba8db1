// einsumdb tune: measure the candidate transforms of a workload and record them.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <iostream>
#include <sstream>

#include "einsumdb/canon/error.hpp"
#include "einsumdb/canon/metrics.hpp"
#include "einsumdb/cli/commands.hpp"
#include "einsumdb/cli/common.hpp"
#include "einsumdb/cli/spec_flags.hpp"
#include "einsumdb/tuner/roofline.hpp"
#include "einsumdb/tuner/tuner.hpp"

namespace einsumdb::cli {
namespace {

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
  std::string strategies;
  std::string threads = "1";
  int warmup = 5, min_reps = 20;
  double min_time = 2.0;
  std::uint64_t seed = 1;
  std::string label;
  bool progress = false, no_progress = false;
  std::size_t top = 0;  // rows shown, fastest first; 0: every candidate
  std::vector<std::string> bind;
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

int run_tune(TuneArgs& args, const std::string& command_line) {
  const BatchedEinsum e = read_spec(args.spec);  // functional operands tune as their ideal form
  TuneOptions options;
  if (!args.strategies.empty()) options.space.strategies = split_list(args.strategies);
  options.space.threads = parse_threads(args.threads);
  if (args.warmup < 1 || args.min_reps < 1 || !(args.min_time >= 0))
    throw SpecError("--warmup and --min-reps must be at least 1 and --min-time not negative");
  options.protocol = {args.warmup, args.min_reps, args.min_time};
  if (args.budget < 0) throw SpecError("--budget must not be negative");
  if (args.budget > 0) options.budget = args.budget;
  options.seed = args.seed;
  options.stop = &g_stop;
  options.run.label = args.label;
  options.run.command = command_line;
  // A symbolic workload is measured at one length of each symbol (shown, and recorded with it).
  options.binding = tuning_binding(e, parse_binding(args.bind));
  const BatchedEinsum measured = options.binding.empty() ? e : bind_symbols(e, options.binding);

  Store store = open_for_writing(args.db);
  const Machine& machine = this_machine();
  const bool json = want_json(args.out);
  const bool show_progress = !args.no_progress && (args.progress || isatty(STDERR_FILENO));
  const Dtype dtype = e.arrays.at(e.batch[0][0]).dtype;
  const Store::Roofline roof = machine_roofline(store, machine, dtype);
  const auto flops = flop_count(measured);
  const auto bytes = footprint_bytes(measured);
  if (!options.binding.empty() && !json)
    std::cerr << "einsumdb: symbolic workload: measuring at " << to_string(options.binding)
              << " (recorded under the symbolic key with this binding; --bind chooses others)\n";

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
  if (report.interrupted)
    std::cerr << "einsumdb: interrupted: " << report.results.size() << " of " << report.total
              << " candidates measured and recorded (run " << report.run << ")\n";
  if (report.budget_exhausted)
    std::cerr << "einsumdb: budget of " << args.budget << " s spent: " << report.results.size()
              << " of " << report.total << " candidates measured (best first)\n";

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
    return *flops / r.median_s * 1e-9 / roofline_gflops(roof, *flops, *bytes, threads);
  };
  if (json) {
    ojson out = {{"workload", {{"hash", report.workload_hash}, {"key", report.workload_key}}},
                 {"run", report.run},
                 {"machine", machine.fingerprint()},
                 {"oracle", report.oracle},
                 {"roofline",
                  {{"dtype", roof.dtype},
                   {"peak_gflops_per_core", roof.peak_gflops},
                   {"bandwidth_gbs", roof.bandwidth_gbs}}},
                 {"binding", options.binding.empty() ? ojson() : ojson(options.binding)},
                 {"work_flops", flops ? ojson(*flops) : ojson()},
                 {"footprint_bytes", bytes ? ojson(*bytes) : ojson()},
                 {"candidates", report.total},
                 {"measured", report.results.size()},
                 {"interrupted", report.interrupted},
                 {"budget_exhausted", report.budget_exhausted},
                 {"not_shown", hidden},
                 {"results", ojson::array()}};
    for (const auto* r : sorted) {
      ojson row = {{"strategy", r->candidate.strategy},
                   {"params", r->candidate.params},
                   {"status", to_string(r->status)}};
      if (r->status == Outcome::ok) {
        row["median_s"] = r->median_s;
        row["repetitions"] = r->seconds.size();
        row["gflops"] = r->gflops ? ojson(*r->gflops) : ojson();
        const auto f = fraction(*r);
        row["roofline_fraction"] = f ? ojson(*f) : ojson();
      }
      row["max_rel_err"] = r->max_rel_err ? ojson(*r->max_rel_err) : ojson();
      if (!r->error.empty()) row["error"] = r->error;
      out["results"].push_back(row);
    }
    print_json(out);
  } else {
    std::cout << "workload " << report.workload_hash.substr(0, 12) << "  " << e.einsum_string()
              << (options.binding.empty() ? "" : "  at " + to_string(options.binding)) << "  ("
              << report.results.size() << " of " << report.total << " candidates; verified against "
              << report.oracle << "; run " << report.run << ")\n"
              << "roofline (" << roof.dtype << "): " << format_number(roof.peak_gflops, 1)
              << " GFLOP/s per core, " << format_number(roof.bandwidth_gbs, 1) << " GB/s\n\n";
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
  }
  return report.interrupted ? 130 : kExitOk;
}

}  // namespace

Command add_tune_command(CLI::App& app) {
  auto args = std::make_shared<TuneArgs>();
  auto* cmd = app.add_subcommand(
      "tune",
      "Measure the applicable transforms of a workload on this machine, verify each result "
      "against the reference, and record every candidate (ok, invalid, failed) in one run");
  add_spec_options(cmd, args->spec);
  add_db_option(cmd, args->db);
  add_output_options(cmd, args->out);
  cmd->add_option("--budget", args->budget,
                  "Seconds for the whole search; the most promising candidates first "
                  "(default: exhaustive)");
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
  return [args] { return run_tune(*args, "einsumdb tune " + args->spec.spec); };
}

}  // namespace einsumdb::cli
