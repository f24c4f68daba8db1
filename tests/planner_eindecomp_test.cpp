// EinDecomp end to end: EinGraph validation, expansion of n-ary nodes, the dynamic program
// against exhaustive search (trees) and the baselines (trees and DAGs), the einsum-tree passes,
// and measured partitionings from the database.
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "einsumdb/core/error.hpp"
#include "einsumdb/planner/eindecomp.hpp"
#include "einsumdb/planner/plan_store.hpp"
#include "einsumdb/tests/support/temp_dir.hpp"

namespace einsumdb {
namespace {

PlanOptions on(std::int64_t procs) {
  PlanOptions o;
  o.procs = procs;
  return o;
}

// ---------------------------------------------------------------- random graphs

// A random graph of up to `nodes` nodes: unary, binary and (sometimes) ternary einsums over
// small power-of-two and odd lengths, reading fresh inputs or earlier results. With `tree`, no
// result is read twice.
EinGraph random_graph(std::mt19937& rng, int nodes, bool tree) {
  const std::int64_t lengths[] = {2, 3, 4, 8, 16};
  auto uniform = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  EinGraph g;
  std::vector<std::string> results;
  std::set<std::string> used;
  char next_label = 'a';
  auto fresh_label = [&] {
    const char l = next_label;
    next_label = next_label == 'z' ? 'A' : static_cast<char>(next_label + 1);
    return l;
  };
  for (int k = 0; k < nodes; ++k) {
    EinGraph::Node n;
    n.name = "V" + std::to_string(k);
    const int arity = uniform(10) < 2 ? 1 : (uniform(10) < 2 ? 3 : 2);
    std::map<char, std::int64_t> bound;
    for (int o = 0; o < arity; ++o) {
      // An earlier result (not yet read, for trees), else a fresh input.
      std::string tensor;
      std::vector<std::string> candidates;
      for (const auto& r : results)
        if (!tree || !used.count(r)) candidates.push_back(r);
      if (!candidates.empty() && uniform(10) < 6) tensor = candidates[rng() % candidates.size()];
      std::string labels;
      if (!tensor.empty()) {
        used.insert(tensor);
        for (std::int64_t len : g.tensor(tensor).shape) {
          // Reuse a label of equal length from another operand, or a fresh one.
          char l = 0;
          for (const auto& [c, b] : bound)
            if (b == len && labels.find(c) == std::string::npos && uniform(2)) l = c;
          if (!l) l = fresh_label(), bound[l] = len;
          labels += l;
        }
      } else {
        tensor = "I" + std::to_string(g.inputs.size());
        const int rank = 1 + uniform(3);
        EinGraph::Tensor t;
        for (int a = 0; a < rank; ++a) {
          char l = 0;
          for (const auto& [c, b] : bound)
            if (labels.find(c) == std::string::npos && uniform(2)) l = c;
          if (!l) l = fresh_label(), bound[l] = lengths[uniform(5)];
          labels += l;
          t.shape.push_back(bound[l]);
        }
        g.inputs[tensor] = t;
      }
      n.operands.push_back(labels);
      n.inputs.push_back(tensor);
    }
    std::string all;
    for (const auto& [c, b] : bound) all += c;
    std::shuffle(all.begin(), all.end(), rng);
    n.output =
        all.substr(0, std::min<std::size_t>(all.size(), static_cast<std::size_t>(uniform(4))));
    if (n.output.empty()) n.output = all.substr(0, 1);
    const JoinOp joins[] = {JoinOp::mul, JoinOp::add, JoinOp::sqdiff};
    n.join = arity == 3 ? JoinOp::mul : joins[uniform(3)];
    n.agg = arity == 3 ? AggOp::sum : (uniform(4) ? AggOp::sum : AggOp::max);
    g.nodes.push_back(n);
    validate(g);
    results.push_back(n.name);
  }
  return g;
}

// The minimum of evaluate() over every combination of viable vectors; nullopt when too many.
std::optional<double> exhaustive(const StepGraph& g, std::int64_t procs, std::size_t limit) {
  std::vector<std::vector<PartitionVector>> viable;
  double combos = 1;
  for (const auto& s : g.steps) {
    viable.push_back(partition_vectors(join_labels(s.x, s.y), s.bounds, procs));
    combos *= static_cast<double>(viable.back().size());
  }
  if (combos > static_cast<double>(limit) || combos == 0) return std::nullopt;
  std::vector<StepChoice> choice(g.steps.size());
  double best = std::numeric_limits<double>::infinity();
  auto rec = [&](auto&& self, std::size_t v) -> void {
    if (v == viable.size()) {
      best = std::min(best, evaluate(g, procs, choice));
      return;
    }
    for (const auto& d : viable[v]) {
      choice[v].d = d;
      self(self, v + 1);
    }
  };
  rec(rec, 0);
  return best;
}

bool splittable(const StepGraph& g, std::int64_t procs) {
  for (const auto& s : g.steps)
    if (partition_vectors(join_labels(s.x, s.y), s.bounds, procs).empty()) return false;
  return true;
}

double plan_total(const StepGraph& g, std::int64_t procs, PlanMethod m) {
  PlanOptions o;
  o.procs = procs;
  o.method = m;
  return make_plan(g, o).total;
}

TEST(EinDecomp, DynamicProgramEqualsExhaustiveSearchOnTrees) {
  std::mt19937 rng(2024);
  int checked = 0, multi_step = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const EinGraph graph = random_graph(rng, 1 + static_cast<int>(rng() % 5), /*tree=*/true);
    const StepGraph g = expand(graph);
    for (std::int64_t procs : {2, 4, 8}) {
      if (!splittable(g, procs)) continue;
      const auto best = exhaustive(g, procs, 100000);
      if (!best) continue;
      const Plan plan = make_plan(g, on(procs));
      ASSERT_EQ(plan.search, "exact");
      ASSERT_NEAR(plan.total, *best, 1e-9 * std::max(1.0, *best))
          << "trial " << trial << " P=" << procs << "\n"
          << to_json(graph).dump();
      EXPECT_LE(plan.total, plan_total(g, procs, PlanMethod::sqrt) * (1 + 1e-12));
      EXPECT_LE(plan.total, plan_total(g, procs, PlanMethod::data) * (1 + 1e-12));
      ++checked;
      multi_step += g.steps.size() > 1;
    }
  }
  EXPECT_GT(checked, 600);
  EXPECT_GT(multi_step, 400);
}

TEST(EinDecomp, NeverWorseThanTheBaselinesOnDags) {
  std::mt19937 rng(99);
  int dags = 0, linearized = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const EinGraph graph = random_graph(rng, 2 + static_cast<int>(rng() % 4), /*tree=*/false);
    const StepGraph g = expand(graph);
    for (std::int64_t procs : {2, 4, 8}) {
      if (!splittable(g, procs)) continue;
      const Plan plan = make_plan(g, on(procs));
      ASSERT_LE(plan.total, plan_total(g, procs, PlanMethod::sqrt) * (1 + 1e-12)) << trial;
      ASSERT_LE(plan.total, plan_total(g, procs, PlanMethod::data) * (1 + 1e-12)) << trial;
      // Never better than the optimum either.
      if (const auto best = exhaustive(g, procs, 20000)) {
        ASSERT_GE(plan.total, *best * (1 - 1e-12));
      }
      // A local optimum too: no single step can change its vector and lower the cost.
      for (int v = 0; v < static_cast<int>(g.steps.size()); ++v) {
        const auto alts = alternatives(plan, v);
        const auto chosen =
            std::find_if(alts.begin(), alts.end(), [](const Alternative& a) { return a.chosen; });
        ASSERT_NE(chosen, alts.end());
        ASSERT_LE(chosen->total, alts.front().total * (1 + 1e-12) + 1e-9)
            << trial << " step " << g.steps[static_cast<std::size_t>(v)].name;
      }
      ++dags;
      linearized += plan.search != "exact";
    }
  }
  EXPECT_GT(dags, 500);
  EXPECT_GT(linearized, 100);  // graphs with shared results were generated and linearized
}

TEST(EinDecomp, LinearizedPathsCoverEveryStepOnce) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 100; ++trial) {
    const StepGraph g = expand(random_graph(rng, 5, false));
    if (!splittable(g, 4)) continue;
    const Plan plan = make_plan(g, on(4));
    if (plan.search == "exact") continue;
    std::vector<int> seen(g.steps.size(), 0);
    for (const auto& path : plan.paths) {
      for (std::size_t k = 0; k < path.size(); ++k) {
        ++seen[static_cast<std::size_t>(path[k])];
        if (k) {  // consecutive steps are producer -> consumer
          const auto c = g.consumers(path[k - 1]);
          EXPECT_NE(std::find(c.begin(), c.end(), path[k]), c.end());
        }
      }
    }
    for (int s : seen) EXPECT_EQ(s, 1);
  }
}

// ---------------------------------------------------------------- the paper's example

EinGraph chain(std::int64_t s) {
  return parse_eingraph_text(R"({"inputs": {
      "A": {"shape": [)" + std::to_string(s) +
                             "," + std::to_string(s / 10) + R"(]},
      "B": {"shape": [)" + std::to_string(s / 10) +
                             "," + std::to_string(s) + R"(]},
      "C": {"shape": [)" + std::to_string(s) +
                             "," + std::to_string(s / 10) + R"(]},
      "D": {"shape": [)" + std::to_string(s / 10) +
                             "," + std::to_string(s * 10) + R"(]},
      "E": {"shape": [)" + std::to_string(s * 10) +
                             "," + std::to_string(s) + R"(]}},
    "nodes": [{"name": "Z", "einsum": "ij,ij->ij", "inputs": ["AB", "CDE"], "join": "add"},
              {"name": "AB", "einsum": "ij,jk->ik", "inputs": ["A", "B"]},
              {"name": "CDE", "einsum": "ij,jk->ik", "inputs": ["C", "DE"]},
              {"name": "DE", "einsum": "ij,jk->ik", "inputs": ["D", "E"]}]})");
}

TEST(EinDecomp, SkewedChainBeatsSqrtAndSplitsTheLongContraction) {
  const EinGraph g = chain(1000);
  // Listed out of order: validate() sorts producers first, stably.
  std::vector<std::string> order;
  for (const auto& n : g.nodes) order.push_back(n.name);
  EXPECT_EQ(order, (std::vector<std::string>{"AB", "DE", "CDE", "Z"}));
  EXPECT_EQ(g.outputs, std::vector<std::string>{"Z"});
  const StepGraph steps = expand(g);
  for (std::int64_t p : {4, 8, 16}) {
    const Plan plan = make_plan(steps, on(p));
    EXPECT_EQ(plan.search, "exact");
    EXPECT_LT(plan.total, plan_total(steps, p, PlanMethod::sqrt));
    // D×E (0.1s × 10s times 10s × s) is split along its long contracted label.
    EXPECT_EQ(plan.choice[1].d.at('j'), p);
  }
}

TEST(EinDecomp, Baselines) {
  PlanStep s;
  s.name = "T";
  s.x = "ij", s.y = "jk", s.z = "ik";
  s.bounds = {{'i', 64}, {'j', 64}, {'k', 64}};
  EXPECT_EQ(baseline_vector(s, 8, PlanMethod::sqrt),
            (PartitionVector{{'i', 2}, {'j', 2}, {'k', 2}}));  // the 3D algorithm
  EXPECT_EQ(baseline_vector(s, 4, PlanMethod::sqrt),
            (PartitionVector{{'i', 2}, {'j', 1}, {'k', 2}}));  // the 2D algorithm
  EXPECT_EQ(baseline_vector(s, 8, PlanMethod::data),
            (PartitionVector{{'i', 8}, {'j', 1}, {'k', 1}}));
  s.bounds['i'] = 2;  // too short: data spills into the next label, sqrt skips it
  EXPECT_EQ(baseline_vector(s, 8, PlanMethod::data),
            (PartitionVector{{'i', 2}, {'j', 1}, {'k', 4}}));
  EXPECT_EQ(baseline_vector(s, 16, PlanMethod::sqrt),
            (PartitionVector{{'i', 2}, {'j', 2}, {'k', 4}}));
  s.bounds = {{'i', 2}, {'j', 1}, {'k', 2}};
  EXPECT_THROW(baseline_vector(s, 8, PlanMethod::sqrt), SpecError);
}

TEST(EinDecomp, TooFewElementsForPIsAClearError) {
  const StepGraph g = expand(parse_eingraph_text(
      R"({"inputs": {"A": {"shape": [2, 2]}}, "nodes": [{"name": "T", "einsum": "ij->ji",
          "inputs": ["A"]}]})"));
  try {
    make_plan(g, on(8));
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("step T (ij->ji) cannot be split into 8"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(make_plan(g, on(3)), SpecError);  // not a power of two
}

// ---------------------------------------------------------------- n-ary nodes

TEST(EinDecomp, NaryNodesBecomeTheirContractionTree) {
  const EinGraph g = parse_eingraph_text(R"({"inputs": {
      "A": {"shape": [100, 10]}, "B": {"shape": [10, 200]}, "C": {"shape": [200, 5]},
      "D": {"shape": [5, 300]}},
    "nodes": [{"name": "Z", "einsum": "ij,jk,kl,lm->im", "inputs": ["A", "B", "C", "D"]},
              {"name": "S", "einsum": "im->i", "inputs": ["Z"], "agg": "max"}]})");
  const StepGraph s = expand(g);
  ASSERT_EQ(s.steps.size(), 4u);  // 3 pairwise steps, then S
  EXPECT_EQ(s.steps[2].name, "Z");
  EXPECT_EQ(s.steps[2].z, "im");
  EXPECT_EQ(s.steps[0].name, "Z.1");
  EXPECT_EQ(s.steps[3].inputs, std::vector<std::string>{"Z"});
  const auto& tree = s.trees.at("Z");
  EXPECT_TRUE(tree.exact);
  EXPECT_EQ(tree.flops, contraction_path({"ij", "jk", "kl", "lm"}, "im",
                                         {{'i', 100}, {'j', 10}, {'k', 200}, {'l', 5}, {'m', 300}})
                            .flops);
  const Plan plan = make_plan(s, on(4));
  EXPECT_EQ(plan.search, "exact");
  const auto j = to_json(plan);
  EXPECT_EQ(j["steps"].size(), 4u);
  EXPECT_EQ(j["trees"]["Z"]["steps"].size(), 3u);
  EXPECT_EQ(j["format"], "einsumdb-plan");
}

// ---------------------------------------------------------------- EinGraph validation

TEST(EinGraph, BadGraphsNameWhatIsWrong) {
  const std::string a = R"("inputs": {"A": {"shape": [4, 5]}, "B": {"shape": [5, 6]}})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[]", "a graph must be a JSON object"},
      {"{" + a + "}", "missing \"nodes\""},
      {"{" + a + R"(, "nodes": [], "x": 1})", "unknown key 'x'"},
      {"{" + a + R"(, "nodes": [{"name": "T", "einsum": "ij,jk->ik", "inputs": ["A"]}]})",
       "node 'T': the einsum 'ij,jk->ik' has 2 operand(s) but \"inputs\" names 1"},
      {"{" + a + R"(, "nodes": [{"name": "T", "einsum": "ij,jk->ik", "inputs": ["A", "Q"]}]})",
       "node 'T': input 'Q' is neither a graph input nor a node"},
      {"{" + a + R"(, "nodes": [{"name": "T", "einsum": "ij,kl->ik", "inputs": ["A", "A"]},
                              {"name": "T", "einsum": "ij->i", "inputs": ["A"]}]})",
       "two nodes are named 'T'"},
      {"{" + a + R"(, "nodes": [{"name": "T", "einsum": "ij,jk->ik", "inputs": ["A", "A"]}]})",
       "node 'T': label 'j' has length 5 at 'A' axis 1 but 4 at 'A' axis 0"},
      {"{" + a + R"(, "nodes": [{"name": "T", "einsum": "ijk,jk->i", "inputs": ["A", "B"]}]})",
       "node 'T': operand 0 ('A') has 2 axes but the einsum gives it 3 labels"},
      {"{" + a + R"(, "nodes": [{"name": "T", "einsum": "ij,jk->iz", "inputs": ["A", "B"]}]})",
       "node 'T': output label 'z' is in no operand"},
      {"{" + a + R"(, "nodes": [{"name": "T", "einsum": "ij,jk->ii", "inputs": ["A", "B"]}]})",
       "node 'T': output label 'i' repeats"},
      {"{" + a + R"(, "nodes": [{"name": "T", "einsum": "ij,jk->ik", "inputs": ["A", "B"],
           "join": "pow"}]})",
       "node 'T': unknown join \"pow\""},
      {"{" + a + R"(, "nodes": [{"name": "T", "einsum": "ij,jk,kl->il", "inputs": ["A", "B", "B"],
           "join": "sqdiff"}]})",
       "node 'T': an einsum of 3 operands needs a join/agg pair"},
      {"{" + a + R"(, "nodes": [{"name": "T", "einsum": "ij->i", "inputs": ["U"]},
                              {"name": "U", "einsum": "i->i", "inputs": ["T"]}]})",
       "is on a cycle"},
      {"{" + a + R"(, "nodes": [{"name": "A", "einsum": "ij->i", "inputs": ["B"]}]})",
       "node 'A' has the name of a graph input"},
      {R"({"inputs": {"A": {"shape": [4, 0]}}, "nodes": [{"name": "T", "einsum": "ij->i",
           "inputs": ["A"]}]})",
       "input 'A', axis 1: a length must be a positive integer, got 0"},
      {"{" + a + R"(, "nodes": [{"name": "T", "einsum": "ij->i", "inputs": ["A"]}],
           "outputs": ["B"]})",
       "output 'B' is not a node"},
      {"{" + a + R"(, "nodes": [{"name": "T", "einsum": "i1->i", "inputs": ["A"]}]})",
       "node 'T': einsum 'i1->i'"},
      {"{", "not valid JSON"},
  };
  for (const auto& [text, message] : cases) {
    try {
      parse_eingraph_text(text);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const SpecError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos)
          << "got: " << e.what() << "\nwanted: " << message;
    }
  }
}

TEST(EinGraph, RoundTripsThroughJson) {
  std::mt19937 rng(1);
  for (int trial = 0; trial < 50; ++trial) {
    const EinGraph g = random_graph(rng, 5, false);
    EXPECT_EQ(parse_eingraph(nlohmann::json::parse(to_json(g).dump())), g);
  }
}

// ---------------------------------------------------------------- einsum trees

struct TreeCase {
  std::string name, tree;
  std::vector<std::int64_t> sizes;
};

std::vector<TreeCase> tree_cases() {
  std::vector<TreeCase> out;
  std::ifstream in(std::string(EINSUMDB_TEST_DATA) + "/einsum_trees.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    out.push_back({j["name"], j["tree"], j["sizes"].get<std::vector<std::int64_t>>()});
  }
  return out;
}

TEST(EinsumTreePasses, KeepFlopsAndReportWhatApplied) {
  const auto cases = tree_cases();
  ASSERT_EQ(cases.size(), 5u);
  int applied = 0;
  for (const auto& c : cases) {
    const EinsumTree t = parse_einsum_tree(c.tree, c.sizes);
    TreePassReport r;
    const EinsumTree o = optimize_tree(t, {}, &r);
    applied += r.applied();
    EXPECT_EQ(tree_flops(o), tree_flops(t)) << c.name;
    EXPECT_EQ(o.num_inputs(), t.num_inputs());
    // What the passes promise: every contraction's left child ends in K,M and its right child
    // in N,K where such dimensions exist, and the result's last dimension is not an N.
    for (const auto& n : o.nodes) {
      if (!n.is_contraction()) continue;
      const auto& l = o.nodes[static_cast<std::size_t>(n.left)].dims;
      const auto& rr = o.nodes[static_cast<std::size_t>(n.right)].dims;
      auto in = [](const std::vector<int>& v, int d) {
        return std::find(v.begin(), v.end(), d) != v.end();
      };
      const int last = n.dims.back();
      EXPECT_FALSE(in(rr, last) && !in(l, last)) << c.name;
      const bool has_k =
          std::any_of(l.begin(), l.end(), [&](int d) { return in(rr, d) && !in(n.dims, d); });
      const bool has_m =
          std::any_of(l.begin(), l.end(), [&](int d) { return !in(rr, d) && in(n.dims, d); });
      if (has_k && has_m && l.size() >= 2) {
        EXPECT_TRUE(in(n.dims, l.back()) && !in(rr, l.back())) << c.name << ": " << to_string(o);
        EXPECT_TRUE(in(rr, l[l.size() - 2]) && !in(n.dims, l[l.size() - 2])) << c.name;
      }
    }
    // The rewritten tree is still a valid tree and plans.
    const EinsumTree back = parse_einsum_tree(to_string(o), c.sizes);
    EXPECT_EQ(tree_flops(back), tree_flops(t));
    const StepGraph g = expand(eingraph_from_tree(o));
    EXPECT_NO_THROW(make_plan(g, on(4)));
    // Idempotent: a second application finds nothing to do.
    TreePassReport again;
    optimize_tree(o, {}, &again);
    EXPECT_FALSE(again.applied()) << c.name << ": " << to_string(o);
  }
  EXPECT_GT(applied, 0);
}

TEST(EinsumTreePasses, EachPassAlone) {
  // The result's last dimension (2) is an N dimension: swap; the left leaf [0,1] does not end
  // in K (1), M (0): a permutation is inserted above it.
  const EinsumTree t = parse_einsum_tree("[0,1],[1,2]->[0,2]", {4, 5, 6});
  TreePassReport r;
  EinsumTree o = optimize_tree(t, {true, false, false}, &r);
  EXPECT_EQ(r.swaps, 1);
  EXPECT_EQ(to_string(o), "[1,2],[0,1]->[0,2]");
  r = {};
  o = optimize_tree(t, {false, true, true}, &r);
  EXPECT_EQ(r.permutations_inserted, 2);  // the right leaf must end in N (2), K (1)
  EXPECT_EQ(to_string(o), "[[0,1]->[1,0]],[[1,2]->[2,1]]->[0,2]");
  r = {};
  o = optimize_tree(t, {false, true, false}, &r);  // leaves are not reordered without insert
  EXPECT_FALSE(r.applied());
  EXPECT_EQ(o, t);
  // An inner child is reordered in place.
  r = {};
  o = optimize_tree(parse_einsum_tree("[[0,1],[1,2]->[0,2]],[2,3]->[0,3]", {2, 3, 4, 5}),
                    {false, true, false}, &r);
  EXPECT_EQ(r.reorders, 1);
  EXPECT_EQ(to_string(o), "[[0,1],[1,2]->[2,0]],[2,3]->[0,3]");
}

TEST(EinsumTreePasses, TreesBecomeGraphs) {
  for (const auto& c : tree_cases()) {
    const EinsumTree t = parse_einsum_tree(c.tree, c.sizes);
    const EinGraph g = eingraph_from_tree(t);
    EXPECT_EQ(g.inputs.size(), t.num_inputs());
    // The graph's pairwise steps do the tree's FLOPs: 2 × Π lengths of each contraction.
    double flops = 0;
    for (const auto& n : g.nodes) {
      if (n.operands.size() != 2) continue;
      double points = 1;
      for (const auto& [l, b] : g.bounds(n)) points *= static_cast<double>(b);
      flops += 2 * points;
    }
    EXPECT_EQ(flops, tree_flops(t)) << c.name;
  }
}

// ---------------------------------------------------------------- the database

// One step T = A·B (ij,jk->ik) with A m×k and B k×n.
StepGraph one_product(std::int64_t m, std::int64_t k, std::int64_t n) {
  const nlohmann::json g = {
      {"inputs", {{"A", {{"shape", {m, k}}}}, {"B", {{"shape", {k, n}}}}}},
      {"nodes", {{{"name", "T"}, {"einsum", "ij,jk->ik"}, {"inputs", {"A", "B"}}}}}};
  return expand(parse_eingraph_text(g.dump()));
}

// Records that step `s` ran split by `d` on `procs` ranks of machine `m` in `seconds`.
void record_measured(Store& store, const Machine& m, const PlanStep& s, std::int64_t procs,
                     const PartitionVector& d, double seconds) {
  const Canonical c = canonicalize(step_einsum(s));
  RunInfo run;
  run.label = "test";
  Store::Partitioning p;
  p.graph_key = c.hash;
  p.procs = static_cast<int>(procs);
  p.vector = canonical_vector(c, d);
  p.predicted_bytes = 8 * (join_cost(s.x, s.y, d, s.bounds, procs) +
                           aggregation_cost(s.x, s.y, s.z, d, s.bounds, procs));
  p.measured_seconds = seconds;
  p.machine = m.fingerprint();
  store.record_partitioning(store.begin_run(run, store.machine_id(m)), p);
}

TEST(EinDecompStore, MeasuredPartitioningsSteerThePlan) {
  testing::TempDir dir("plan");
  Store store = Store::open(dir.path("p.sqlite"));
  Machine m = detect_machine("test BLAS");
  const StepGraph steps = one_product(64, 64, 64);
  const Plan model = make_plan(steps, on(4));
  // Record the model's plan, then measurements saying another vector runs 100x faster.
  RunInfo run;
  run.label = "test";
  EXPECT_EQ(record_plan(store, model, m, run), 1u);
  const auto& s = steps.steps[0];
  const Canonical c = canonicalize(step_einsum(s));
  const auto recorded = store.partitionings(c.hash, 4);
  ASSERT_EQ(recorded.size(), 1u);
  EXPECT_EQ(recorded[0].vector, canonical_vector(c, model.choice[0].d));
  EXPECT_DOUBLE_EQ(*recorded[0].predicted_bytes, model.total * 8);

  PartitionVector other;
  for (const auto& d : partition_vectors("ijk", s.bounds, 4))
    if (d != model.choice[0].d) other = d;
  record_measured(store, m, s, 4, model.choice[0].d, 1.0);
  record_measured(store, m, s, 4, other, 0.01);
  MeasuredPartitionings measured(store, m.fingerprint(), 4);
  EXPECT_EQ(measured.measured_entries(), 2u);
  PlanOptions o = on(4);
  o.measured = [&](const PlanStep& st, const PartitionVector& d) { return measured(st, d); };
  const Plan p = make_plan(steps, o);
  EXPECT_EQ(p.choice[0].d, other);
  EXPECT_GT(measured.hits(), 0u);
  EXPECT_LT(p.objective, p.total);  // the measured objective, not the model's numbers
  // Another machine's measurements are not used.
  MeasuredPartitionings elsewhere(store, "0123456789abcdef0123456789abcdef", 4);
  EXPECT_EQ(elsewhere.measured_entries(), 0u);
}

// A measured time holds computation the model does not count: a vector that was never run is
// estimated from the measured ones, so it cannot displace the measured vector on the model's
// say-so, however little the model says it moves.
TEST(EinDecompStore, AVectorNeverRunDoesNotDisplaceAMeasuredOne) {
  testing::TempDir dir("plan");
  Store store = Store::open(dir.path("p.sqlite"));
  Machine m = detect_machine("test BLAS");
  const StepGraph steps = one_product(256, 16, 256);
  const auto& s = steps.steps[0];
  const Plan model = make_plan(steps, on(2));
  const auto cost = [&](const PartitionVector& d) {
    return join_cost(s.x, s.y, d, s.bounds, 2) + aggregation_cost(s.x, s.y, s.z, d, s.bounds, 2);
  };
  // The vector the model likes least, measured (a step takes milliseconds however little it
  // moves); the model's own choice never ran.
  PartitionVector worst = model.choice[0].d;
  for (const auto& d : partition_vectors("ijk", s.bounds, 2))
    if (cost(d) > cost(worst)) worst = d;
  ASSERT_NE(worst, model.choice[0].d);
  record_measured(store, m, s, 2, worst, 0.005);

  MeasuredPartitionings measured(store, m.fingerprint(), 2);
  measured.set_bandwidth(10e9);
  const auto at_worst = measured(s, worst), at_model = measured(s, model.choice[0].d);
  ASSERT_TRUE(at_worst && at_model);
  EXPECT_DOUBLE_EQ(*at_worst, 0.005 * 10e9 / 8);  // seconds at the bandwidth, in floats
  EXPECT_GT(*at_model, *at_worst);                // estimated: never below the measured one
  EXPECT_EQ(measured.hits(), 1u);
  EXPECT_EQ(measured.estimated(), 1u);
  PlanOptions o = on(2);
  o.measured = [&](const PlanStep& st, const PartitionVector& d) { return measured(st, d); };
  EXPECT_EQ(make_plan(steps, o).choice[0].d, worst);
}

TEST(EinDecompStore, StepKeysAreCanonical) {
  // The same product spelled with other labels and operand names has one key, and the vector
  // in canonical names is the same.
  PlanStep a, b;
  a.x = "ij", a.y = "jk", a.z = "ik", a.inputs = {"A", "B"};
  a.bounds = {{'i', 8}, {'j', 16}, {'k', 32}};
  b.x = "qp", b.y = "rq", b.z = "rp", b.inputs = {"Y", "X"};  // = (X·Y)ᵀ... with r,p swapped
  b.bounds = {{'q', 16}, {'p', 32}, {'r', 8}};
  b.x = "rq", b.y = "qp", b.z = "rp";
  const Canonical ca = canonicalize(step_einsum(a)), cb = canonicalize(step_einsum(b));
  EXPECT_EQ(ca.hash, cb.hash);
  EXPECT_EQ(canonical_vector(ca, {{'i', 2}, {'j', 1}, {'k', 4}}),
            canonical_vector(cb, {{'r', 2}, {'q', 1}, {'p', 4}}));
}

}  // namespace
}  // namespace einsumdb

namespace einsumdb {
namespace {

TEST(EinDecompStore, MeasuredStepsSteerTheContractionTree) {
  testing::TempDir dir("steps");
  Store store = Store::open(dir.path("s.sqlite"));
  const Machine m = detect_machine("test BLAS");
  const std::map<char, std::int64_t> len{{'i', 10}, {'j', 1000}, {'k', 10}, {'l', 1000}};
  const std::vector<std::string> ops{"ij", "jk", "kl"};
  // By FLOPs: (ij,jk) first, 4e5 in all; (jk,kl) first costs 4e7.
  const auto flops_path = contraction_path(ops, "il", len);
  EXPECT_EQ(flops_path.steps[0].indices, "ik");
  EXPECT_EQ(flops_path.flops, 4e5);
  // The tuner measured ij,jk->ik as very slow and jk,kl->jl as very fast on this machine.
  auto step = [&](std::string x, std::string y, std::string z) {
    BatchedEinsum e;
    e.inputs = {x, y};
    e.output = z;
    e.batch = {{"X", "Y"}};
    for (auto [name, labels] : {std::pair{"X", x}, std::pair{"Y", y}}) {
      ArrayInfo a;
      for (char l : labels) a.shape.push_back(Length::of(len.at(l)));
      e.arrays[name] = a;
    }
    return canonicalize(e);
  };
  const Canonical slow = step("ij", "jk", "ik"), fast = step("jk", "kl", "jl");
  auto measured = [](double seconds) {
    Measurement x;
    x.transform = {"ttgt", nlohmann::json::object()};
    x.seconds = {seconds, seconds, seconds};
    x.max_rel_err = 0;
    return x;
  };
  RunInfo run;
  run.label = "tuning";
  store.record_run(run, m, {{&slow, measured(10.0)}, {&fast, measured(1e-6)}});

  MeasuredSteps steps(store, m.fingerprint(), Dtype::f64, JoinOp::mul, AggOp::sum, len);
  PathOptions o;
  o.measured_step = [&](const std::string& a, const std::string& b, const std::string& r) {
    return steps(a, b, r);
  };
  const auto path = contraction_path(ops, "il", len, o);
  EXPECT_EQ(path.steps[0].indices, "jl");  // the measured-fast step first
  EXPECT_EQ(path.flops, 4e7);              // FLOPs of the chosen order, as counted
  EXPECT_LT(path.objective, 1e14);
  EXPECT_GE(steps.hits(), 2u);
  // Another machine: nothing measured, FLOPs decide.
  MeasuredSteps other(store, "0123456789abcdef0123456789abcdef", Dtype::f64, JoinOp::mul,
                      AggOp::sum, len);
  o.measured_step = [&](const std::string& a, const std::string& b, const std::string& r) {
    return other(a, b, r);
  };
  EXPECT_EQ(contraction_path(ops, "il", len, o).steps[0].indices, "ik");
}

}  // namespace
}  // namespace einsumdb
