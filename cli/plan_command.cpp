// einsumdb plan: contraction trees and EinDecomp partition vectors for a graph of einsums.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <numeric>
#include <optional>
#include <sstream>

#include "einsumdb/cli/commands.hpp"
#include "einsumdb/cli/common.hpp"
#include "einsumdb/cli/jsonl.hpp"
#include "einsumdb/cli/network_model.hpp"
#include "einsumdb/core/error.hpp"
#include "einsumdb/planner/plan_file.hpp"
#include "einsumdb/planner/plan_store.hpp"
#include "einsumdb/tuner/roofline.hpp"

namespace einsumdb::cli {
namespace {

using ojson = nlohmann::ordered_json;

struct PlanArgs {
  DbArgs db;
  OutputArgs out;
  std::string graph;
  std::string tree;
  std::string sizes;
  std::string passes = "none";
  std::int64_t procs = 0;
  std::string cost = "comm";
  std::string baseline;
  std::string explain;
  std::string output;
  std::size_t exact_limit = 14;
  double memory_limit = 0;
  bool record = false;
  std::string network;
  std::int64_t ranks_per_host = 0;
};

std::vector<std::int64_t> parse_sizes(const std::string& text) {
  std::vector<std::int64_t> sizes;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size())
      throw SpecError("--sizes: '" + item + "' is not an integer (expected e.g. 100,72,128)");
    sizes.push_back(v);
  }
  return sizes;
}

TreePasses parse_passes(const std::string& text, bool& any) {
  TreePasses p{false, false, false};
  any = false;
  if (text == "none") return p;
  if (text == "all") {
    any = true;
    return TreePasses{};
  }
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item == "swap")
      p.swap = true;
    else if (item == "reorder")
      p.reorder = true;
    else if (item == "insert")
      p.insert_permutations = true;
    else
      throw SpecError("--passes: unknown pass '" + item + "' (swap, reorder, insert, all, none)");
    any = true;
  }
  if (p.insert_permutations && !p.reorder)
    throw SpecError(
        "--passes: 'insert' places the permutations that 'reorder' asks for; give "
        "it with reorder");
  return p;
}

// The graph from GRAPH (inline JSON, a file, or - for stdin) or from --tree/--sizes.
EinGraph read_graph(const PlanArgs& a, ojson& report) {
  if (!a.tree.empty()) {
    if (!a.graph.empty()) throw SpecError("give a GRAPH or --tree, not both");
    if (a.sizes.empty()) throw SpecError("--tree needs --sizes (dimension sizes by id)");
    EinsumTree t = parse_einsum_tree(a.tree, parse_sizes(a.sizes));
    bool any = false;
    const TreePasses passes = parse_passes(a.passes, any);
    report["tree"] = to_string(t);
    report["tree_flops"] = tree_flops(t);
    if (any) {
      TreePassReport r;
      t = optimize_tree(t, passes, &r);
      report["passes"] = {{"swaps", r.swaps},
                          {"reorders", r.reorders},
                          {"permutations_inserted", r.permutations_inserted},
                          {"applied", r.applied()},
                          {"tree", to_string(t)}};
    }
    return eingraph_from_tree(t);
  }
  if (a.passes != "none") throw SpecError("--passes rewrites an einsum tree; give it with --tree");
  if (a.graph.empty()) throw SpecError("give a GRAPH (JSON, a file, or -) or --tree TEXT --sizes");
  if (a.graph.front() == '{') return parse_eingraph_text(a.graph);
  InputFile in(a.graph);
  std::stringstream text;
  text << in.stream().rdbuf();
  try {
    return parse_eingraph_text(text.str());
  } catch (const SpecError& e) {
    throw SpecError(a.graph + ": " + e.what());
  }
}

std::string fmt(double v) {
  std::ostringstream s;
  if (v != 0 && (v >= 1e7 || v < 1e-2))
    s.precision(3), s << std::scientific << v;
  else
    s.precision(0), s << std::fixed << v;
  return s.str();
}

std::string ratio(double baseline, double total) {
  if (total <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fx", baseline / total);
  return buf;
}

ojson alternatives_json(const std::vector<Alternative>& alts) {
  ojson out = ojson::array();
  for (const auto& a : alts) {
    ojson d = ojson::object();
    for (const auto& [l, p] : a.d) d[std::string(1, l)] = p;
    ojson row = {{"partition", d},
                 {"join", a.join},
                 {"aggregation", a.aggregation},
                 {"repartition_in", a.repartition_in},
                 {"repartition_out", a.repartition_out},
                 {"total", a.total},
                 {"chosen", a.chosen}};
    if (a.measured) row["measured_objective"] = *a.measured;
    out.push_back(row);
  }
  return out;
}

int run_plan(const PlanArgs& a) {
  ojson report = ojson::object();
  const EinGraph graph = read_graph(a, report);
  PlanOptions options;
  options.procs = a.procs;
  if (a.cost != "comm" && a.cost != "measured")
    throw SpecError("--cost must be comm or measured, got '" + a.cost + "'");
  if (!a.baseline.empty()) {
    const auto m = parse_plan_method(a.baseline);
    if (!m || *m == PlanMethod::eindecomp)
      throw SpecError("--baseline must be sqrt or data, got '" + a.baseline + "'");
    options.method = *m;
  }
  PathOptions path;
  path.exact_limit = a.exact_limit;
  if (a.memory_limit > 0) path.memory_limit_elements = a.memory_limit;

  const auto started = std::chrono::steady_clock::now();
  std::optional<Store> store;
  std::optional<MeasuredPartitionings> measured;
  std::vector<std::shared_ptr<MeasuredSteps>> steps_measured;
  PathOptionsFor per_node;
  const std::string machine = this_machine().fingerprint();
  if (a.cost == "measured") {
    store = open_for_reading(a.db);
    if (!store) {
      std::cerr << "einsumdb: notice: no database at " << resolve_db_path(a.db)
                << "; planning on the cost model alone\n";
    } else {
      measured.emplace(*store, machine, a.procs);
      // Measured times become floats moved at the machine's memory bandwidth: the stored
      // roofline's, or measured now (about a second) when the store has none.
      if (measured->measured_entries() > 0) {
        const auto roofline = store->roofline(machine, "f64");
        measured->set_bandwidth(
            (roofline ? *roofline : measure_roofline(Dtype::f64)).bandwidth_gbs * 1e9);
      }
      options.measured = [&](const PlanStep& s, const PartitionVector& d) {
        return (*measured)(s, d);
      };
      per_node = [&](const EinGraph::Node& n, PathOptions& o) {
        if (n.operands.size() > 8) return;  // 3^n distinct steps to look up
        auto m = std::make_shared<MeasuredSteps>(*store, machine, graph.tensor(n.name).dtype,
                                                 n.join, n.agg, graph.bounds(n));
        steps_measured.push_back(m);
        o.measured_step = [m](const std::string& x, const std::string& y, const std::string& z) {
          return (*m)(x, y, z);
        };
      };
    }
  }
  const StepGraph steps = expand(graph, path, per_node);
  // Every method's plan, made once: the one asked for, the others as baselines and, on a
  // network, as candidates, each priced by the time model. Unless --baseline names one method,
  // the plan predicted fastest is the one written.
  constexpr PlanMethod kMethods[] = {PlanMethod::eindecomp, PlanMethod::sqrt, PlanMethod::data};
  std::map<PlanMethod, std::optional<Plan>> plans;
  plans[options.method] = make_plan(steps, options);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  for (auto m : kMethods) {
    if (m == options.method) continue;
    try {
      PlanOptions o = options;
      o.method = m;
      plans[m] = make_plan(steps, o);
    } catch (const SpecError&) {
      plans[m] = std::nullopt;  // not applicable at this P
    }
  }
  std::map<PlanMethod, Placement> placements;
  for (const auto& [m, p] : plans)
    if (p) placements.emplace(m, place(*p));
  PlanMethod chosen = options.method;
  std::optional<Network> network;
  std::optional<KernelTimes> kernels;
  std::map<PlanMethod, std::vector<StepTime>> method_times;
  ojson method_seconds = ojson::object();
  if (!a.network.empty()) {
    network = network_argument(a.network, a.ranks_per_host, a.db);
    kernels.emplace(a.db);
    const KernelSeconds seconds_of = [&](const BatchedEinsum& e) { return (*kernels)(e); };
    for (auto m : kMethods) {
      const std::string name(to_string(m));
      if (!plans[m]) {
        method_seconds[name] = nullptr;
        continue;
      }
      method_times[m] = predict_times(*plans[m], placements.at(m), *network, seconds_of);
      method_seconds[name] = total_seconds(method_times[m]);
      if (a.baseline.empty() &&
          total_seconds(method_times[m]) < total_seconds(method_times[chosen]))
        chosen = m;
    }
  }
  const Plan& plan = *plans[chosen];
  const Placement& placement = placements.at(chosen);
  const std::vector<StepTime>& times = method_times[chosen];

  ojson baselines = ojson::object();
  for (auto m : kMethods)
    if (m != chosen)
      baselines[std::string(to_string(m))] = plans[m] ? ojson(plans[m]->total) : ojson();

  ojson j = plan_file_json(plan, placement);
  j["graph"] = to_json(graph);
  j["cost"] = a.cost;
  j["baselines"] = baselines;
  j["planning_seconds"] = seconds;
  if (measured) {
    j["measured"] = {{"partitionings_on_this_machine", measured->measured_entries()},
                     {"steps_with_measured_partitionings", measured->hits()},
                     {"vectors_estimated_from_measured_ones", measured->estimated()},
                     {"bandwidth_gbs", measured->bytes_per_second() / 1e9},
                     {"pairwise_steps_with_measured_times",
                      std::accumulate(steps_measured.begin(), steps_measured.end(), std::size_t{0},
                                      [](std::size_t n, const auto& m) { return n + m->hits(); })}};
  }
  if (network) {
    for (std::size_t v = 0; v < times.size(); ++v)
      j["steps"][v]["predicted_time"] = to_json(times[v]);
    j["network"] = to_json(*network);
    j["predicted_seconds"] = total_seconds(times);
    j["method_seconds"] = method_seconds;
    if (plan.method != options.method)
      j["chosen_by"] = "the least predicted time on the network (" +
                       std::string(to_string(options.method)) + " moves fewer numbers)";
    j["kernel_times"] = {{"measured", kernels->measured()}, {"estimated", kernels->estimated()}};
  }
  for (const auto& [k, v] : report.items()) j[k] = v;

  int explain_step = -1;
  std::vector<Alternative> explained;
  if (!a.explain.empty()) {
    explain_step = steps.producer(a.explain);
    if (explain_step < 0) {
      std::string names;
      for (const auto& s : steps.steps) names += (names.empty() ? "" : ", ") + s.name;
      throw SpecError("--explain: no step named '" + a.explain + "' (steps: " + names + ")");
    }
    explained = alternatives(plan, explain_step, options);
    j["explain"] = {{"step", a.explain}, {"alternatives", alternatives_json(explained)}};
  }
  if (!a.output.empty()) {
    std::ofstream f(a.output);
    if (!f) throw Error("cannot write the plan to " + a.output);
    f << j.dump(2) << '\n';
    if (!f.flush()) throw Error("cannot write the plan to " + a.output);
  }
  if (a.record) {
    Store db = open_for_writing(a.db);
    RunInfo run;
    run.label = "plan " + (a.graph.empty() ? std::string("--tree") : a.graph) +
                " P=" + std::to_string(a.procs);
    run.command = "einsumdb plan";
    const std::size_t rows = record_plan(db, plan, this_machine(), run);
    j["recorded"] = {{"partitionings", rows}, {"db", db.path()}};
  }

  if (want_json(a.out)) {
    print_json(j);
    return kExitOk;
  }
  std::cout << "plan: " << plan.graph.steps.size() << " steps on P = " << plan.procs << ", "
            << to_string(plan.method) << " (" << plan.search << "), predicted " << fmt(plan.total)
            << " numbers moved";
  for (const auto& [name, v] : baselines.items())
    if (!v.is_null())
      std::cout << "; " << name << " " << fmt(v.get<double>()) << " ("
                << ratio(v.get<double>(), plan.total) << ")";
  std::cout << "\n";
  if (network) {
    std::cout << "predicted time on the network: " << format_seconds(total_seconds(times));
    for (const auto& [name, v] : method_seconds.items())
      if (name != to_string(plan.method) && !v.is_null())
        std::cout << "; " << name << " " << format_seconds(v.get<double>()) << " ("
                  << ratio(v.get<double>(), total_seconds(times)) << ")";
    std::cout << " (" << network->source << "; kernel times: " << kernels->measured()
              << " measured, " << kernels->estimated() << " from the roofline)\n";
    if (j.contains("chosen_by"))
      std::cout << "chosen by " << j["chosen_by"].get<std::string>() << "\n";
  }
  std::vector<std::vector<std::string>> rows;
  for (std::size_t v = 0; v < plan.graph.steps.size(); ++v) {
    const auto& s = plan.graph.steps[v];
    const auto& c = plan.choice[v];
    rows.push_back({s.name, s.einsum_string(), to_string(c.d), fmt(c.join), fmt(c.aggregation),
                    fmt(c.repartition), fmt(c.join + c.aggregation + c.repartition)});
    if (!times.empty()) rows.back().push_back(format_seconds(times[v].total()));
  }
  std::vector<std::string> header{"step",        "einsum",      "partition", "join",
                                  "aggregation", "repartition", "total"};
  if (!times.empty()) header.push_back("time");
  print_table(header, rows);
  for (const auto& [node, tree] : plan.graph.trees) {
    std::cout << "contraction tree of " << node << " (" << (tree.exact ? "exact" : "greedy") << ", "
              << fmt(tree.flops) << " FLOPs):";
    for (const auto& s : tree.steps)
      std::cout << " (" << s.left << "," << s.right << ")->" << s.indices;
    std::cout << "\n";
  }
  if (report.contains("passes")) {
    const auto& p = report["passes"];
    std::cout << "tree passes: " << p["swaps"] << " swap(s), " << p["reorders"] << " reorder(s), "
              << p["permutations_inserted"] << " permutation(s) inserted"
              << (p["applied"].get<bool>() ? "" : " (nothing to do)") << "\n  "
              << p["tree"].get<std::string>() << "\n";
  }
  if (explain_step >= 0) {
    std::cout << "\nalternatives for " << a.explain << " (neighbours as planned):\n";
    std::vector<std::vector<std::string>> alt_rows;
    for (const auto& alt : explained)
      alt_rows.push_back({alt.chosen ? "*" : "", to_string(alt.d), fmt(alt.join),
                          fmt(alt.aggregation), fmt(alt.repartition_in), fmt(alt.repartition_out),
                          fmt(alt.total)});
    print_table({"", "partition", "join", "aggregation", "repart in", "repart out", "total"},
                alt_rows);
  }
  if (j.contains("recorded"))
    std::cout << "recorded " << j["recorded"]["partitionings"] << " partitionings in "
              << j["recorded"]["db"].get<std::string>() << "\n";
  if (!a.output.empty()) std::cout << "plan written to " << a.output << "\n";
  std::cout << "planned in " << format_seconds(seconds) << "\n";
  return kExitOk;
}

}  // namespace

Command add_plan_command(CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  auto* cmd = app.add_subcommand(
      "plan",
      "Plan a graph of einsums on P processes: contraction trees and EinDecomp partition vectors");
  cmd->footer(
      "GRAPH is EinGraph JSON (inline, a file, or - for stdin):\n"
      "  {\"inputs\": {\"A\": {\"shape\": [1000, 100], \"dtype\": \"f64\"}, ...},\n"
      "   \"nodes\": [{\"name\": \"T1\", \"einsum\": \"ij,jk->ik\", \"inputs\": [\"A\", \"B\"],\n"
      "              \"join\": \"mul\", \"agg\": \"sum\"}, ...], \"outputs\": [\"Z\"]}\n"
      "Examples:\n"
      "  einsumdb plan graph.json --procs 8\n"
      "  einsumdb plan graph.json --procs 8 --baseline sqrt --json\n"
      "  einsumdb plan graph.json --procs 8 --explain T1 --output plan.json --record\n"
      "  einsumdb plan graph.json --procs 64 --network bandwidth=12.5e9,latency=2e-6,"
      "ranks_per_host=16\n"
      "  einsumdb plan --tree '[[8,4],[7,3,8]->[7,3,4]],...' --sizes 100,72,... --procs 4 "
      "--passes all");
  cmd->add_option("GRAPH", a->graph, "EinGraph JSON, a file holding it, or - for stdin");
  cmd->add_option("--procs,-P", a->procs, "Number of processes (a power of two)")
      ->required()
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
  cmd->add_option("--cost", a->cost,
                  "comm: the cost model's numbers moved; measured: prefer what the database "
                  "measured (partitionings run by the distributed executor, pairwise steps "
                  "timed by the tuner)")
      ->capture_default_str();
  cmd->add_option("--baseline", a->baseline,
                  "Plan with a baseline instead: sqrt (split matrices sqrt(P) ways each side) or "
                  "data (split the first dimension P ways)");
  cmd->add_option("--explain", a->explain,
                  "Also list every partition vector considered for this step, with its costs");
  cmd->add_option("--output,-o", a->output, "Write the plan file (JSON) here");
  cmd->add_option("--tree", a->tree, "Plan an einsum tree (the course's string format)");
  cmd->add_option("--sizes", a->sizes, "With --tree: dimension sizes by id, comma-separated");
  cmd->add_option("--passes", a->passes,
                  "With --tree: rewrite passes to apply first: swap, reorder, insert (comma-"
                  "separated), all, or none")
      ->capture_default_str();
  cmd->add_option("--exact-limit", a->exact_limit,
                  "Contraction trees: exact dynamic programming up to this many operands, greedy "
                  "beyond")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{24}));
  cmd->add_option("--memory-limit", a->memory_limit,
                  "Contraction trees: no intermediate with more elements than this");
  cmd->add_option("--network", a->network,
                  "Predict the plan's time (and the baselines') on a network: a file written by "
                  "`einsumdb bench network --output`, `stored` (the last one recorded from this "
                  "machine), or bandwidth=BYTES_PER_S,latency=SECONDS"
                  "[,local_bandwidth=..,local_latency=..,ranks_per_host=N]; kernel times from "
                  "the database, else the roofline. Writes the plan predicted fastest among "
                  "eindecomp, sqrt and data unless --baseline names one");
  cmd->add_option("--ranks-per-host", a->ranks_per_host,
                  "With --network: ranks on each host (rank r on host r / N), replacing the "
                  "network's")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
  cmd->add_flag("--record", a->record,
                "Record the chosen partitionings and their predicted cost in the database");
  add_db_option(cmd, a->db);
  add_output_options(cmd, a->out);
  return [a] { return run_plan(*a); };
}

}  // namespace einsumdb::cli
