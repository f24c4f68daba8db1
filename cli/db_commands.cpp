// The database subcommands: record, best, show, list, stats, export, import, db check.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>

#include "einsumdb/canon/parse.hpp"
#include "einsumdb/cli/commands.hpp"
#include "einsumdb/cli/common.hpp"
#include "einsumdb/cli/jsonl.hpp"
#include "einsumdb/cli/spec_flags.hpp"
#include "einsumdb/core/error.hpp"
#include "einsumdb/db/error.hpp"
#include "einsumdb/db/feinsum.hpp"
#include "einsumdb/db/location.hpp"
#include "einsumdb/db/record_lines.hpp"
#include "einsumdb/db/retrieve.hpp"
#include "einsumdb/db/sync.hpp"
#include "einsumdb/report/report.hpp"

namespace einsumdb::cli {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

std::string short_hash(const std::string& h) {
  return h.substr(0, 12);
}

// A hash or a prefix of one (at least 4 hex digits) rather than an einsum such as 'ab->b'.
bool looks_like_hash(const std::string& s) {
  return is_hash_prefix(s) && s.find_first_of("0123456789") != std::string::npos;
}

// ---------------------------------------------------------------- record

struct RecordArgs {
  DbArgs db;
  OutputArgs out;
  std::string file;
  std::string label;
};

int run_record(const RecordArgs& args) {
  RecordLines lines(args.label, this_machine());
  std::vector<std::string> errors;
  const bool progress = isatty(STDERR_FILENO);
  // Everything is parsed and checked first: a file with a bad line records nothing.
  for_each_line(args.file, [&](std::size_t number, const std::string& text) {
    try {
      lines.add(text);
    } catch (const Error& e) {
      errors.push_back(args.file + ":" + std::to_string(number) + ": " + e.what());
    }
    if (progress && number % 10000 == 0)
      std::cerr << "\rrecord: read " << number << " lines" << std::flush;
  });
  if (progress) std::cerr << "\r" << std::string(40, ' ') << "\r";
  if (!errors.empty()) {
    for (const auto& e : errors) std::cerr << "einsumdb: error: " << e << '\n';
    std::cerr << "einsumdb: error: " << errors.size() << " bad line(s); nothing was recorded\n";
    return kExitUsage;
  }

  Store store = open_for_writing(args.db);
  ojson summary = {{"db", store.path()}, {"lines", lines.size()}, {"runs", ojson::array()}};
  std::size_t inserted = 0, duplicates = 0, created = 0;
  for (const auto& r : lines.record(store, "einsumdb record --file " + args.file)) {
    inserted += r.inserted;
    duplicates += r.duplicates;
    created += r.id != 0;
    summary["runs"].push_back({{"run", r.id ? ojson(r.id) : ojson()},
                               {"label", r.label},
                               {"machine", r.machine},
                               {"inserted", r.inserted},
                               {"duplicates", r.duplicates}});
  }
  summary["inserted"] = inserted;
  summary["duplicates"] = duplicates;
  summary["runs_created"] = created;
  if (want_json(args.out)) {
    print_json(summary);
  } else if (inserted == 0) {
    std::cout << "nothing new: all " << duplicates << " measurement(s) are already in "
              << store.path() << " (no run created)\n";
  } else {
    std::cout << "recorded " << inserted << " measurement(s) in " << created << " run(s) into "
              << store.path();
    if (duplicates) std::cout << " (" << duplicates << " already present)";
    std::cout << '\n';
  }
  return kExitOk;
}

// ---------------------------------------------------------------- best

struct BestArgs {
  SpecArgs spec;
  DbArgs db;
  OutputArgs out;
  std::string machine;
  std::size_t top = 1;
  bool exact = false;
  std::vector<std::string> bind;
};

int nothing_known(const std::string& key, const std::string& spec, const std::string& why) {
  std::cerr << "einsumdb: nothing known: " << why << " (key " << key << ")\n"
            << "hint: measure it with: einsumdb tune " << spec << '\n';
  return kExitNotFound;
}

// Whether a canonical key has a symbolic length (its symbols are N0, N1, ...).
bool symbolic_key(const std::string& key) {
  for (std::size_t at = key.find('N'); at != std::string::npos; at = key.find('N', at + 1))
    if (at > 0 && (key[at - 1] == '[' || key[at - 1] == ',') && at + 1 < key.size() &&
        std::isdigit(static_cast<unsigned char>(key[at + 1])))
      return true;
  return false;
}

// The binding of a fact's measurements, for a table: "N0=100000", "2 bindings", "unstated" (a
// symbolic fact imported with its work but not its lengths), or "-" (concrete).
std::string bindings_text(const Fact& f) {
  if (f.bindings.empty()) return symbolic_key(f.workload_key) ? "unstated" : "-";
  if (f.bindings.size() == 1) return to_string(f.bindings.front());
  return std::to_string(f.bindings.size()) + " bindings";
}

int run_best(const BestArgs& args) {
  BatchedEinsum spec = read_spec(args.spec);
  if (!args.bind.empty()) spec = bind_symbols(spec, parse_binding(args.bind));
  const Canonical query = canonicalize(spec, kQueryCanon);
  auto store = open_for_reading(args.db);
  if (!store)
    return nothing_known(query.key, args.spec.spec,
                         "no database at " + resolve_db_path(args.db) + " yet");
  // A machine named on the command line must exist; this machine may simply be unmeasured.
  const std::vector<std::string> machines = args.machine.empty()
                                                ? std::vector{this_machine().fingerprint()}
                                                : store->machines_matching(args.machine);
  const auto answers = top_k_for(*store, query, machines, args.top, !args.exact);
  if (answers.empty())
    return nothing_known(
        query.key, args.spec.spec,
        "no verified measurement of this workload" +
            std::string(args.exact ? " or of a symbolic form of it"
                                   : ", of a symbolic form or of another size of it") +
            (args.machine.empty() ? " on this machine (" + short_hash(machines.front()) + ")"
                                  : " on machine " + args.machine));
  if (want_json(args.out)) {
    if (args.top == 1) {
      print_json(to_json(answers.front()));
    } else {
      ojson all = ojson::array();
      for (const auto& a : answers) all.push_back(to_json(a));
      print_json(all);
    }
    return kExitOk;
  }
  const Answer& first = answers.front();
  if (first.match == Match::nearest)
    std::cout << "approximate: measured on another size of this contraction ("
              << first.fact.workload_key << ", distance " << format_number(first.distance, 3)
              << ")\n";
  if (first.match == Match::symbolic)
    std::cout << "symbolic: measured on the symbolic form " << first.fact.workload_key
              << ", which is this workload at " << to_string(first.binding) << "\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& a : answers)
    rows.push_back({a.fact.transform.name, describe_params(a.params),
                    format_seconds(a.fact.median_s), bindings_text(a.fact),
                    format_number(a.fact.gflops), std::to_string(a.fact.measurements),
                    short_hash(a.fact.machine)});
  print_table({"transform", "params (your names)", "median", "measured at", "GFLOP/s",
               "measurements", "machine"},
              rows);
  if (!first.fact.origin.is_null()) std::cout << "origin: " << first.fact.origin.dump() << "\n";
  return kExitOk;
}

// ---------------------------------------------------------------- show

struct ShowArgs {
  SpecArgs spec;
  DbArgs db;
  OutputArgs out;
};

int run_show(const ShowArgs& args) {
  std::string hash, key = "?";
  auto store = open_for_reading(args.db);
  if (looks_like_hash(args.spec.spec) && args.spec.flags.empty()) {
    // A hash or the 12-digit prefix the tables print.
    if (!store) throw DatabaseError("no database at " + resolve_db_path(args.db));
    hash = store->resolve_workload(args.spec.spec);
  } else {
    const Canonical c = canonicalize(read_spec(args.spec));
    hash = c.hash;
    key = c.key;
  }
  const auto rows = store ? store->show(hash) : std::vector<ojson>{};
  if (rows.empty()) {
    std::cerr << "einsumdb: nothing known about workload " << hash << " (key " << key << ")\n";
    return kExitNotFound;
  }
  if (want_json(args.out)) {
    print_json({{"hash", hash}, {"key", rows.front()["workload"]["key"]}, {"measurements", rows}});
    return kExitOk;
  }
  std::cout << "workload " << hash << "\nkey      "
            << rows.front()["workload"]["key"].get<std::string>() << "\n\n";
  std::vector<std::vector<std::string>> table;
  std::set<std::string> notes;
  for (const auto& r : rows) {
    auto opt = [&](const char* k) -> std::optional<double> {
      return r[k].is_null() ? std::nullopt : std::optional<double>(r[k].get<double>());
    };
    std::string binding = "-";
    if (r["binding"].is_object()) {
      binding.clear();
      for (const auto& [symbol, length] : r["binding"].items())
        binding += (binding.empty() ? "" : ",") + symbol + "=" + length.dump();
    } else if (symbolic_key(r["workload"]["key"].get<std::string>())) {
      binding = "unstated";
    }
    if (r["origin"].is_object() && r["origin"].contains("note"))
      notes.insert(r["origin"]["note"].get<std::string>());
    table.push_back({short_hash(r["machine"]["fingerprint"]), r["status"], r["transform"]["name"],
                     r["transform"]["params"].dump(),
                     opt("median_s") ? format_seconds(*opt("median_s")) : "-", binding,
                     format_number(opt("gflops")), std::to_string(r["repetitions"].get<int>()),
                     r["max_rel_err"].is_null() ? "-" : r["max_rel_err"].dump(), r["run"]["label"],
                     r["recorded_at"]});
  }
  print_table({"machine", "status", "transform", "params (canonical)", "median", "measured at",
               "GFLOP/s", "reps", "max_rel_err", "run", "recorded"},
              table);
  for (const auto& n : notes) std::cout << "note: " << n << '\n';
  return kExitOk;
}

// ---------------------------------------------------------------- list / stats / export / import /
// check

struct ListArgs {
  DbArgs db;
  OutputArgs out;
  ListFilter filter;
};

void add_filter_options(CLI::App* cmd, ListFilter& f) {
  cmd->add_option("--machine", f.machine, "Only this machine (fingerprint or a prefix of it)");
  cmd->add_option("--strategy", f.strategy, "Only measurements of this strategy");
  cmd->add_option("--since", f.since, "Only measurements recorded at or after this ISO 8601 time");
}

int run_list(const ListArgs& args) {
  auto store = open_for_reading(args.db);
  const auto rows = store ? store->list(args.filter) : std::vector<WorkloadSummary>{};
  if (want_json(args.out)) {
    ojson all = ojson::array();
    for (const auto& r : rows) all.push_back(to_json(r));
    print_json(all);
    return kExitOk;
  }
  std::vector<std::vector<std::string>> table;
  for (const auto& r : rows)
    table.push_back({short_hash(r.hash), r.key.size() > 60 ? r.key.substr(0, 57) + "..." : r.key,
                     std::to_string(r.measurements), std::to_string(r.ok),
                     format_number(r.best_gflops),
                     r.best_strategy.empty() ? "-" : r.best_strategy});
  print_table({"hash", "key", "measurements", "ok", "best GFLOP/s", "best strategy"}, table);
  if (!store) std::cerr << "(no database at " << resolve_db_path(args.db) << " yet)\n";
  return kExitOk;
}

struct SimpleArgs {
  DbArgs db;
  OutputArgs out;
};

int run_stats(const SimpleArgs& args) {
  auto store = open_for_reading(args.db);
  if (!store) {
    std::cerr << "einsumdb: no database at " << resolve_db_path(args.db) << " yet\n";
    return kExitNotFound;
  }
  const ojson s = store->stats();
  if (want_json(args.out)) {
    print_json(s);
    return kExitOk;
  }
  for (const char* k :
       {"path", "schema_version", "bytes", "machines", "workloads", "structures", "transforms",
        "strategies", "runs", "measurements", "partitionings", "first_recorded", "last_recorded"})
    std::cout << k << std::string(16 - std::string(k).size(), ' ')
              << (s[k].is_string() ? s[k].get<std::string>() : s[k].dump()) << '\n';
  std::cout << "by status       " << s["measurements_by_status"].dump() << '\n';
  std::vector<std::vector<std::string>> rows;
  for (const auto& m : s["by_machine"])
    rows.push_back({short_hash(m["fingerprint"]), m["cpu_model"], m["cores"].dump(), m["blas"],
                    m["measurements"].dump()});
  std::cout << '\n';
  print_table({"machine", "cpu", "cores", "blas", "measurements"}, rows);
  return kExitOk;
}

struct ExportArgs {
  DbArgs db;
  ListFilter filter;
  std::string output;
};

int run_export(const ExportArgs& args) {
  auto store = open_for_reading(args.db);
  if (!store) throw DatabaseError("no database at " + resolve_db_path(args.db));
  std::ofstream file;
  if (!args.output.empty()) {
    file.open(args.output, std::ios::binary | std::ios::trunc);
    if (!file) throw Error("cannot write '" + args.output + "'");
  }
  const auto n = store->export_jsonl(args.output.empty() ? std::cout : file, args.filter);
  if (!args.output.empty())
    std::cerr << "exported " << n << " measurement(s) to " << args.output << '\n';
  return kExitOk;
}

struct ImportArgs {
  DbArgs db;
  OutputArgs out;
  std::vector<std::string> files;
  std::string from = "einsumdb";
};

int run_import_feinsum(const ImportArgs& args) {
  Store store = open_for_writing(args.db);
  const bool progress = isatty(STDERR_FILENO);
  ojson summary = ojson::array();
  for (const auto& f : args.files) {
    const auto r = import_feinsum(store, f, [&](std::size_t done, std::size_t total) {
      if (progress) std::cerr << "\r\033[K" << f << ": read " << done << " of " << total << " rows";
    });
    if (progress) std::cerr << "\r\033[K";
    summary.push_back({{"file", f},
                       {"rows", r.rows},
                       {"workloads", r.workloads},
                       {"machines", r.machines},
                       {"inserted", r.inserted},
                       {"duplicates", r.duplicates},
                       {"runs", r.runs}});
  }
  if (want_json(args.out)) {
    print_json(summary);
  } else {
    for (const auto& s : summary)
      std::cout << s["file"].get<std::string>() << ": " << s["rows"] << " Feinsum facts of "
                << s["workloads"] << " workloads on " << s["machines"]
                << " machine(s) (device and driver): " << s["inserted"] << " imported, "
                << s["duplicates"] << " already present, " << s["runs"] << " new run(s)\n";
  }
  return kExitOk;
}

int run_import(const ImportArgs& args) {
  if (args.from == "feinsum") return run_import_feinsum(args);
  if (args.from != "einsumdb")
    throw SpecError("--from '" + args.from +
                    "': expected einsumdb (JSON lines of einsumdb "
                    "export) or feinsum (a Feinsum fact database, .sqlite)");
  Store store = open_for_writing(args.db);
  ojson summary = ojson::array();
  for (const auto& f : args.files) {
    InputFile input(f);
    const auto r = store.import_jsonl(input.stream(), f);
    summary.push_back(
        {{"file", f}, {"inserted", r.inserted}, {"duplicates", r.duplicates}, {"runs", r.runs}});
  }
  if (want_json(args.out)) {
    print_json(summary);
  } else {
    for (const auto& s : summary)
      std::cout << s["file"].get<std::string>() << ": " << s["inserted"] << " imported, "
                << s["duplicates"] << " already present, " << s["runs"] << " new run(s)\n";
  }
  return kExitOk;
}

struct SyncArgs {
  OutputArgs out;
  std::string from, to;
  SyncOptions options;
  bool progress = false, no_progress = false;
};

int run_sync(const SyncArgs& args) {
  auto from = open_store_for_reading(store_path(args.from));
  if (!from)
    throw DatabaseError("no einsumdb store at '" + store_display_name(store_path(args.from)) +
                        "' to copy from");
  Store to = open_store_for_writing(store_path(args.to));
  const bool progress = !args.no_progress && (args.progress || isatty(STDERR_FILENO));
  const auto started = std::chrono::steady_clock::now();
  const auto r = sync_stores(*from, to, args.options, [&](std::size_t done, std::size_t total) {
    if (progress)
      std::cerr << "\r\033[K" << from->path() << " -> " << to.path() << ": " << done << " of "
                << total << " measurements read";
  });
  if (progress) std::cerr << "\r\033[K";
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ojson summary = {{"from", from->path()}, {"to", to.path()}};
  summary.update(to_json(r));
  summary["seconds"] = seconds;
  if (want_json(args.out)) {
    print_json(summary);
  } else {
    std::cout << from->path() << " -> " << to.path() << ": " << r.inserted << " of "
              << r.measurements << " measurements copied (" << r.duplicates << " already there), "
              << r.runs << " new run(s), " << r.machines << " new machine(s), " << r.rooflines
              << " roofline(s), " << r.partitionings << " partitioning(s) copied ("
              << r.partitionings_present << " already there), in " << format_seconds(seconds)
              << '\n';
  }
  return kExitOk;
}

struct ReportArgs {
  DbArgs db;
  OutputArgs out;
  std::string output = "einsumdb-report.html";
  ReportOptions options;
};

int run_report(const ReportArgs& args) {
  if (args.options.max_points < 1) throw SpecError("--max-points must be at least 1");
  if (args.options.max_rows < 1) throw SpecError("--max-rows must be at least 1");
  ReportOptions options = args.options;
  options.this_machine = this_machine().fingerprint();
  auto store = open_for_reading(args.db);
  if (!store) throw DatabaseError("no database at " + resolve_db_path(args.db));
  // Written beside its final name and renamed: a reader never sees half a page.
  const std::string partial = args.output + ".partial";
  ReportSummary r;
  {
    std::ofstream file(partial, std::ios::binary | std::ios::trunc);
    if (!file) throw Error("cannot write '" + partial + "'");
    try {
      r = write_report(*store, file, options);
    } catch (...) {
      file.close();
      std::filesystem::remove(partial);
      throw;
    }
    file.close();
    if (!file) throw Error("cannot write '" + partial + "'");
  }
  std::filesystem::rename(partial, args.output);
  const std::string where = std::filesystem::absolute(args.output).string();
  if (want_json(args.out)) {
    print_json({{"report", where},
                {"bytes", r.bytes},
                {"machines", r.machines},
                {"points", r.points},
                {"points_drawn", r.points_drawn},
                {"devices", r.devices},
                {"devices_drawn", r.devices_drawn},
                {"strategies", r.strategies},
                {"index_rows", r.index_rows},
                {"compared", r.compared},
                {"compared_differ", r.compared_differ},
                {"slowdowns", r.slowdowns},
                {"workloads", r.workloads},
                {"partitionings", r.partitionings}});
  } else {
    std::cout << "wrote " << where << " (" << r.machines << " machine(s) as " << r.devices
              << " device(s), " << r.points_drawn << " of " << r.points
              << " roofline point(s) drawn, " << r.strategies << " strategy distribution(s), "
              << r.slowdowns << " fact(s) slower than before, " << r.workloads << " workload(s), "
              << r.partitionings << " partitioning(s); "
              << format_number(static_cast<double>(r.bytes) / 1e6, 2) << " MB)\n";
    if (!args.options.compare.empty())
      std::cout << "two machines side by side: " << r.compared << " workload(s) on both, the "
                << "winner differs on " << r.compared_differ << "\n";
    std::cout << "open it in a browser: file://" << where << "\n";
  }
  return kExitOk;
}

int run_check(const SimpleArgs& args) {
  auto store = open_for_reading(args.db);
  if (!store) throw DatabaseError("no database at " + resolve_db_path(args.db));
  const ojson c = store->check();
  if (want_json(args.out)) {
    print_json(c);
  } else {
    std::cout << c["path"].get<std::string>() << ": schema " << c["schema_version"]
              << " (this einsumdb: " << c["supported_schema_version"] << "), journal "
              << c["journal_mode"].get<std::string>() << ", " << c["workloads_checked"]
              << " workload keys checked: " << (c["ok"].get<bool>() ? "ok" : "PROBLEMS") << '\n';
    for (const auto& p : c["problems"]) std::cout << "  " << p.get<std::string>() << '\n';
  }
  return c["ok"].get<bool>() ? kExitOk : kExitRuntime;
}

}  // namespace

std::vector<std::pair<CLI::App*, Command>> add_db_commands(CLI::App& app) {
  std::vector<std::pair<CLI::App*, Command>> out;

  auto rec = std::make_shared<RecordArgs>();
  auto* record =
      app.add_subcommand("record", "Record measurements from a JSON-lines file (one per line)");
  record->footer(
      "Each line: {\"spec\": <spec JSON>, \"transform\": {\"name\": \"ttgt\", \"params\": {...}},\n"
      "  \"seconds\": [t1, t2, ...], \"status\": \"ok\", \"max_rel_err\": 1e-15, \"run\": "
      "\"label\",\n"
      "  \"machine\": {...optional, default this machine}, \"binding\": {\"Ne\": 100000}, "
      "\"flops\": F}.\n"
      "A symbolic spec's verified line needs the binding its times were taken at, or its flops.\n"
      "Parameters are in the spec's names:\n"
      "{\"index\": \"i\"} names an index, {\"array\": \"A\"} an array. A file with a bad line "
      "records\n"
      "nothing; lines with one run label form one run, committed atomically.");
  record->add_option("--file", rec->file, "JSON-lines file of measurements ('-' for stdin)")
      ->required();
  record->add_option("--label", rec->label, "Run label for lines that do not name one");
  add_db_option(record, rec->db);
  add_output_options(record, rec->out);
  out.emplace_back(record, [rec] { return run_record(*rec); });

  auto best_args = std::make_shared<BestArgs>();
  auto* best =
      app.add_subcommand("best", "The fastest verified transform for a workload, in your names");
  add_spec_options(best, best_args->spec);
  add_db_option(best, best_args->db);
  add_output_options(best, best_args->out);
  best->add_option("--machine", best_args->machine,
                   "A machine's fingerprint or its prefix (the 12 digits the tables print), or "
                   "model=NAME for every machine of that CPU model or device, whatever its "
                   "BLAS or driver (default: this machine)");
  add_bind_option(best, best_args->bind,
                  "asks for that size: an exact fact, else the symbolic form's");
  best->add_option("--top", best_args->top, "How many transforms, fastest first (default 1)");
  best->add_flag("--exact", best_args->exact, "No nearest-size answer for unseen shapes");
  best->footer("Exit code 3 when nothing is known; measure the workload with einsumdb tune.");
  out.emplace_back(best, [best_args] { return run_best(*best_args); });

  auto show_args = std::make_shared<ShowArgs>();
  auto* show =
      app.add_subcommand("show",
                         "Every measurement of one workload (SPEC, its hash, or the hash's "
                         "first 12 digits as the tables print them)");
  add_spec_options(show, show_args->spec);
  add_db_option(show, show_args->db);
  add_output_options(show, show_args->out);
  out.emplace_back(show, [show_args] { return run_show(*show_args); });

  auto list_args = std::make_shared<ListArgs>();
  auto* list = app.add_subcommand("list", "Workloads in the database with counts and best GFLOP/s");
  add_db_option(list, list_args->db);
  add_output_options(list, list_args->out);
  add_filter_options(list, list_args->filter);
  list->add_option("--limit", list_args->filter.limit, "At most this many workloads");
  out.emplace_back(list, [list_args] { return run_list(*list_args); });

  auto stats_args = std::make_shared<SimpleArgs>();
  auto* stats =
      app.add_subcommand("stats", "What the database holds: counts, machines, size, schema");
  add_db_option(stats, stats_args->db);
  add_output_options(stats, stats_args->out);
  out.emplace_back(stats, [stats_args] { return run_stats(*stats_args); });

  auto export_args = std::make_shared<ExportArgs>();
  auto* exp =
      app.add_subcommand("export", "Write measurements as JSON lines (for import elsewhere)");
  add_db_option(exp, export_args->db);
  add_filter_options(exp, export_args->filter);
  exp->add_option("--output,-o", export_args->output, "File to write (default: stdout)");
  out.emplace_back(exp, [export_args] { return run_export(*export_args); });

  auto import_args = std::make_shared<ImportArgs>();
  auto* imp = app.add_subcommand(
      "import",
      "Merge exported JSON lines, or a Feinsum fact database; never overwrites, skips "
      "duplicates");
  imp->add_option("FILES", import_args->files,
                  "Files written by einsumdb export ('-' for stdin), or with --from feinsum "
                  "Feinsum's SQLite fact databases")
      ->required();
  imp->add_option("--from", import_args->from,
                  "einsumdb (default) or feinsum: FEINSUM_TIMING_FACTS rows become verified "
                  "measurements (absent lengths become symbols, the device and driver the "
                  "machine, parameters verbatim)");
  add_db_option(imp, import_args->db);
  add_output_options(imp, import_args->out);
  out.emplace_back(imp, [import_args] { return run_import(*import_args); });

  auto sync_args = std::make_shared<SyncArgs>();
  auto* sync = app.add_subcommand(
      "sync",
      "Copy the facts of one store into another (SQLite file or PostgreSQL server, either way): "
      "machines, rooflines, measurements, partitionings; idempotent and resumable");
  sync->add_option("FROM", sync_args->from,
                   "The store to copy from: a SQLite file or postgresql://user@host/dbname")
      ->required();
  sync->add_option("TO", sync_args->to,
                   "The store to copy into (created if it does not exist): a file or a server")
      ->required();
  sync->add_option("--batch", sync_args->options.batch,
                   "Measurements per transaction in TO (default 5000); an interrupted sync keeps "
                   "the batches it committed")
      ->check(CLI::PositiveNumber);
  add_filter_options(sync, sync_args->options.filter);
  add_output_options(sync, sync_args->out);
  sync->add_flag("--progress", sync_args->progress,
                 "Show progress even when stderr is not a terminal");
  sync->add_flag("--no-progress", sync_args->no_progress, "Never show progress");
  sync->footer(
      "A measurement already in TO (the same content, however it got there) is skipped, so\n"
      "running sync again moves only what is missing; nothing in TO is overwritten.");
  out.emplace_back(sync, [sync_args] { return run_sync(*sync_args); });

  auto report_args = std::make_shared<ReportArgs>();
  auto* report = app.add_subcommand(
      "report",
      "Write the database as one self-contained HTML page: rooflines, every candidate of "
      "chosen workloads, partitionings");
  add_db_option(report, report_args->db);
  add_output_options(report, report_args->out);
  report->add_option("--output,-o", report_args->output,
                     "The HTML file to write (default einsumdb-report.html)");
  report->add_option("--machine", report_args->options.machine,
                     "Only this machine: a fingerprint, its prefix, or model=NAME");
  report->add_option("--since", report_args->options.since,
                     "Only measurements recorded at or after this ISO 8601 time");
  report
      ->add_option("--workload", report_args->options.workloads,
                   "Workloads to show in detail (hashes or their 12-digit prefixes; default: "
                   "the 12 most measured)")
      ->take_all();
  report
      ->add_option("--compare", report_args->options.compare,
                   "Two machines (fingerprint prefixes or model=NAME, each naming one) whose "
                   "winners and rates to set side by side")
      ->expected(2);
  report->add_option("--max-points", report_args->options.max_points,
                     "Roofline points drawn per device (default 2000; the rest are sampled)");
  report->add_option("--max-rows", report_args->options.max_rows,
                     "Rows of the index and of the comparison (default 2000)");
  report->footer(
      "The page needs no network; open it in any browser. Its filter bar (search, machine,\n"
      "strategy, dtype) and sortable tables use an inline script; without script it shows\n"
      "everything. The filters' state is kept in the address: page.html#q=TEXT&m=MACHINE&\n"
      "s=STRATEGY&off=f32. Every name from the database is escaped. Hover a point or a\n"
      "candidate for its figures.");
  out.emplace_back(report, [report_args] { return run_report(*report_args); });

  auto check_args = std::make_shared<SimpleArgs>();
  auto* dbcmd = app.add_subcommand("db", "Database maintenance");
  dbcmd->require_subcommand(1);
  auto* check =
      dbcmd->add_subcommand("check", "Integrity, foreign keys, schema version and every key");
  add_db_option(check, check_args->db);
  add_output_options(check, check_args->out);
  out.emplace_back(check, [check_args] { return run_check(*check_args); });
  return out;
}

}  // namespace einsumdb::cli
