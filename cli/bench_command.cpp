// einsumdb bench canon: in-process timing of canonicalization (graph build, nauty, rebuild,
// key and hash; file reading and parsing excluded).
#include <algorithm>
#include <chrono>
#include <iostream>

#include <unistd.h>

#include "canon/canonicalize.hpp"
#include "canon/error.hpp"
#include "canon/parse.hpp"
#include "cli/commands.hpp"
#include "cli/jsonl.hpp"

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

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
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
  return [args] { return run_canon_bench(*args); };
}

}  // namespace einsumdb::cli
