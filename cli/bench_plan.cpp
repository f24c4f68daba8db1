// einsumdb bench plan: the planner's figures, measured in one run — predicted communication of
// EinDecomp against the sqrt and data baselines on the chain (A×B)+(C×(D×E)) of Sec. 9 of the
// EinDecomp paper (square and skewed shapes) at several P, and planning time on large graphs.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <random>

#include "einsumdb/canon/metrics.hpp"
#include "einsumdb/cli/commands.hpp"
#include "einsumdb/cli/common.hpp"
#include "einsumdb/cli/network_model.hpp"
#include "einsumdb/core/stats.hpp"
#include "einsumdb/planner/eindecomp.hpp"

namespace einsumdb::cli {
namespace {

using ojson = nlohmann::ordered_json;

struct BenchPlanArgs {
  std::int64_t s = 10000;
  std::size_t nodes = 500;
  std::int64_t procs = 16;
  int repeat = 5;
  std::string network;  // with it: the predicted time at each of `simulate`
  std::vector<std::int64_t> simulate = {16, 64, 256, 1024};
  DbArgs db;
};

EinGraph chain(std::int64_t s, bool skewed) {
  const std::int64_t t = s / 10, w = s * 10;  // 0.1 s and 10 s
  auto m = [](std::int64_t r, std::int64_t c) { return EinGraph::Tensor{{r, c}, Dtype::f64}; };
  EinGraph g;
  if (skewed)
    g.inputs = {{"A", m(s, t)}, {"B", m(t, s)}, {"C", m(s, t)}, {"D", m(t, w)}, {"E", m(w, s)}};
  else
    g.inputs = {{"A", m(s, s)}, {"B", m(s, s)}, {"C", m(s, s)}, {"D", m(s, s)}, {"E", m(s, s)}};
  auto node = [](std::string name, std::string einsum_x, std::string einsum_y, std::string z,
                 std::string x, std::string y, JoinOp join) {
    EinGraph::Node n;
    n.name = std::move(name);
    n.operands = {std::move(einsum_x), std::move(einsum_y)};
    n.output = std::move(z);
    n.inputs = {std::move(x), std::move(y)};
    n.join = join;
    return n;
  };
  g.nodes = {node("AB", "ij", "jk", "ik", "A", "B", JoinOp::mul),
             node("DE", "ij", "jk", "ik", "D", "E", JoinOp::mul),
             node("CDE", "ij", "jk", "ik", "C", "DE", JoinOp::mul),
             node("Z", "ij", "ij", "ij", "AB", "CDE", JoinOp::add)};
  validate(g);
  return g;
}

// A deterministic graph of `n` nodes over matrices: products (also with a transposed operand),
// element-wise sums and transpositions; operands are picked among recent results, so results
// have several consumers, with fresh inputs when no result fits. `tree` keeps every result to
// one consumer (a forest of chains).
EinGraph large_graph(std::size_t n, bool tree, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::int64_t dims[] = {512, 1024, 2048, 4096};
  EinGraph g;
  std::vector<std::string> tensors;
  std::map<std::string, int> uses;
  auto shape = [&](const std::string& t) { return g.tensor(t).shape; };
  auto fresh = [&](std::int64_t r, std::int64_t c) {
    const std::string name = "I" + std::to_string(g.inputs.size());
    g.inputs[name] = {{r, c}, Dtype::f64};
    return name;
  };
  auto pick = [&](auto&& fits) -> std::string {
    for (int tries = 0; tries < 8 && !tensors.empty(); ++tries) {
      const std::size_t back = std::min<std::size_t>(tensors.size(), 12);
      const auto& t = tensors[tensors.size() - 1 - rng() % back];
      if ((!tree || !uses.count(t)) && fits(shape(t))) return t;
    }
    return {};
  };
  for (std::size_t k = 0; k < n; ++k) {
    EinGraph::Node node;
    node.name = "N" + std::to_string(k);
    const int kind = static_cast<int>(rng() % 10);
    std::string x = pick([](const auto&) { return true; });
    if (x.empty()) x = fresh(dims[rng() % 4], dims[rng() % 4]);
    const auto sx = shape(x);
    if (kind < 6) {  // product ij,jk->ik (or ij,kj->ik)
      const bool transposed = kind == 5;
      std::string y = pick([&](const auto& s) { return s[transposed ? 1 : 0] == sx[1]; });
      if (y.empty() || y == x)
        y = transposed ? fresh(dims[rng() % 4], sx[1]) : fresh(sx[1], dims[rng() % 4]);
      node.operands = {"ij", transposed ? "kj" : "jk"};
      node.output = "ik";
      node.inputs = {x, y};
    } else if (kind < 9) {  // element-wise sum
      std::string y = pick([&](const auto& s) { return s == sx; });
      if (y.empty() || y == x) y = fresh(sx[0], sx[1]);
      node.operands = {"ij", "ij"};
      node.output = "ij";
      node.inputs = {x, y};
      node.join = JoinOp::add;
    } else {  // transposition
      node.operands = {"ij"};
      node.output = "ji";
      node.inputs = {x};
    }
    for (const auto& in : node.inputs) ++uses[in];
    // The result's shape, for pick(); validate() below checks it all once.
    std::map<char, std::int64_t> len;
    for (std::size_t o = 0; o < node.operands.size(); ++o)
      for (std::size_t a = 0; a < node.operands[o].size(); ++a)
        len[node.operands[o][a]] = shape(node.inputs[o])[a];
    EinGraph::Tensor result{{}, Dtype::f64};
    for (char l : node.output) result.shape.push_back(len.at(l));
    g.results[node.name] = result;
    g.nodes.push_back(node);
    tensors.push_back(node.name);
  }
  validate(g);
  return g;
}

// The predicted time of the chain and of the large DAG at every P of a.simulate on a.network,
// for each plan method: the time model (planner/network.hpp) on the placed plans, kernel times
// from the database where measured, else the roofline.
ojson simulate(const BenchPlanArgs& a) {
  const Network network = network_argument(a.network, 0, a.db);
  KernelTimes kernels(a.db);
  const KernelSeconds seconds_of = [&](const BatchedEinsum& e) { return kernels(e); };
  ojson rows = ojson::array();
  std::cout << "\npredicted time on " << network.source << " (" << network.ranks_per_host
            << " ranks per host)\n";
  std::cout << "graph              P      eindecomp     sqrt          data          "
               "transfer  kernel    reduce (eindecomp)\n";
  const std::vector<std::pair<std::string, EinGraph>> graphs = {
      {"chain s=" + std::to_string(a.s), chain(a.s, false)},
      {"dag " + std::to_string(a.nodes) + " nodes", large_graph(a.nodes, false, 7)}};
  for (const auto& [name, g] : graphs) {
    const StepGraph steps = expand(g);
    for (std::int64_t p : a.simulate) {
      ojson row = {{"graph", name}, {"procs", p}};
      StepTime sum;
      double best[3] = {0, 0, 0};
      int k = 0;
      for (auto m : {PlanMethod::eindecomp, PlanMethod::sqrt, PlanMethod::data}) {
        PlanOptions o;
        o.procs = p;
        o.method = m;
        const auto t0 = std::chrono::steady_clock::now();
        const Plan plan = make_plan(steps, o);
        const auto times = predict_times(plan, place(plan), network, seconds_of);
        const double took =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        best[k] = total_seconds(times);
        row[std::string(to_string(m))] = {{"seconds", best[k]},
                                          {"predicted_bytes", plan.total},
                                          {"planned_and_priced_in_s", took}};
        if (m == PlanMethod::eindecomp)
          for (const auto& t : times) {
            sum.transfer += t.transfer, sum.kernel += t.kernel, sum.reduce += t.reduce;
            sum.host_bytes += t.host_bytes, sum.local_bytes += t.local_bytes;
          }
        ++k;
      }
      row["eindecomp_terms"] = {{"transfer_s", sum.transfer},
                                {"kernel_s", sum.kernel},
                                {"reduce_s", sum.reduce},
                                {"host_bytes", sum.host_bytes},
                                {"local_bytes", sum.local_bytes}};
      std::printf("%-18s %-6lld %-13.4g %-13.4g %-13.4g %-9.3g %-9.3g %.3g\n", name.c_str(),
                  static_cast<long long>(p), best[0], best[1], best[2], sum.transfer, sum.kernel,
                  sum.reduce);
      rows.push_back(row);
    }
  }
  std::cout << "kernel times: " << kernels.measured() << " measured, " << kernels.estimated()
            << " from the roofline\n";
  return {{"network", to_json(network)},
          {"rows", rows},
          {"kernel_times", {{"measured", kernels.measured()}, {"estimated", kernels.estimated()}}}};
}

int run_bench_plan(const BenchPlanArgs& a) {
  ojson out;
  out["chain"] = ojson::array();
  std::cout << "chain (A x B) + (C x (D x E)), s = " << a.s
            << "; predicted numbers moved (lower is better)\n";
  std::cout << "shapes   P   eindecomp     sqrt          data          sqrt/eindecomp  "
               "data/eindecomp\n";
  for (bool skewed : {false, true}) {
    const StepGraph steps = expand(chain(a.s, skewed));
    for (std::int64_t p : {4, 8, 16}) {
      double cost[3];
      int k = 0;
      for (auto m : {PlanMethod::eindecomp, PlanMethod::sqrt, PlanMethod::data}) {
        PlanOptions o;
        o.procs = p;
        o.method = m;
        cost[k++] = make_plan(steps, o).total;
      }
      std::printf("%-8s %-3lld %-13.4g %-13.4g %-13.4g %-15.2f %.2f\n",
                  skewed ? "skewed" : "square", static_cast<long long>(p), cost[0], cost[1],
                  cost[2], cost[1] / cost[0], cost[2] / cost[0]);
      out["chain"].push_back({{"shapes", skewed ? "skewed" : "square"},
                              {"procs", p},
                              {"eindecomp", cost[0]},
                              {"sqrt", cost[1]},
                              {"data", cost[2]},
                              {"sqrt_over_eindecomp", cost[1] / cost[0]},
                              {"data_over_eindecomp", cost[2] / cost[0]}});
    }
  }
  out["large"] = ojson::array();
  std::cout << "\nplanning time, " << a.nodes << " nodes, P = " << a.procs << " (median of "
            << a.repeat << ")\n";
  bool ok = true;
  for (bool tree : {true, false}) {
    const EinGraph g = large_graph(a.nodes, tree, 7);
    std::vector<double> seconds;
    Plan plan;
    for (int r = 0; r < a.repeat; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      PlanOptions o;
      o.procs = a.procs;
      plan = make_plan(expand(g), o);
      seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    PlanOptions o;
    o.procs = a.procs;
    o.method = PlanMethod::sqrt;
    const double sqrt_total = make_plan(expand(g), o).total;
    o.method = PlanMethod::data;
    const double data_total = make_plan(expand(g), o).total;
    const double t = median(seconds);
    ok = ok && t < 1.0;
    std::printf(
        "%-5s %zu steps, search %-22s %.3f s (target < 1 s: %s); sqrt/eindecomp %.2f, "
        "data/eindecomp %.2f\n",
        tree ? "tree" : "DAG", plan.graph.steps.size(), plan.search.c_str(), t,
        t < 1.0 ? "ok" : "MISSED", sqrt_total / plan.total, data_total / plan.total);
    out["large"].push_back({{"graph", tree ? "tree" : "dag"},
                            {"steps", plan.graph.steps.size()},
                            {"search", plan.search},
                            {"seconds", t},
                            {"sqrt_over_eindecomp", sqrt_total / plan.total},
                            {"data_over_eindecomp", data_total / plan.total}});
  }
  if (!a.network.empty()) out["simulation"] = simulate(a);
  std::cout << "\n" << out.dump() << "\n";
  return ok ? kExitOk : kExitRuntime;
}

}  // namespace

Command add_bench_plan_command(CLI::App& bench) {
  auto a = std::make_shared<BenchPlanArgs>();
  auto* cmd = bench.add_subcommand(
      "plan",
      "EinDecomp against the sqrt and data baselines on the chain of Sec. 9, and "
      "planning time on a large graph");
  cmd->add_option("--s", a->s, "The chain's size parameter s")->capture_default_str();
  cmd->add_option("--nodes", a->nodes, "Nodes of the large graphs")->capture_default_str();
  cmd->add_option("--procs", a->procs, "P for the large graphs")->capture_default_str();
  cmd->add_option("--repeat", a->repeat, "Timed plannings per large graph")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--network", a->network,
                  "Also predict the time of the chain and of the large DAG on this network at "
                  "each P of --simulate (a file of `einsumdb bench network`, or "
                  "bandwidth=BYTES_PER_S,latency=SECONDS,ranks_per_host=N)");
  cmd->add_option("--simulate", a->simulate, "With --network: the P to predict at (powers of two)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
  add_db_option(cmd, a->db);
  return [a] { return run_bench_plan(*a); };
}

}  // namespace einsumdb::cli
