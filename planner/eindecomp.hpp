// EinDecomp (Sec. 8 of the EinDecomp paper): choose, for every binary or unary einsum of a graph,
// a partition vector that makes its join exactly P pieces of work, minimising the floating-point
// numbers moved into joins, into aggregations and to re-partition producers' results for their
// consumers (the cost model of planner/eindecomp_cost.hpp).
//
// The graph is first expanded into steps: an n-ary node becomes the pairwise steps of its
// contraction tree. When every step has at most one consumer the dynamic program of Sec. 8.2/8.3
// is exact; otherwise the graph is linearized into longest paths (Sec. 8.4), each optimised with
// the same dynamic program, the paths' fixed neighbours charged exactly, and the result improved
// by coordinate descent and compared with the baselines on the full cost model.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "einsumdb/canon/contraction_path.hpp"
#include "einsumdb/planner/eindecomp_cost.hpp"
#include "einsumdb/planner/eingraph.hpp"

namespace einsumdb {

// One binary (x, y) or unary (x only) einsum: the unit that EinDecomp partitions.
struct PlanStep {
  std::string name;                 // the node's name; "<node>.<k>" for inner steps of a tree
  std::string node;                 // the graph node it computes (part of)
  std::string x, y, z;              // operand labels (y empty: unary) and result labels
  std::vector<std::string> inputs;  // tensors read: graph inputs or earlier steps
  JoinOp join = JoinOp::mul;
  AggOp agg = AggOp::sum;
  Dtype dtype = Dtype::f64;
  std::map<char, std::int64_t> bounds;
  std::string einsum_string() const;
  std::vector<std::int64_t> result_shape() const;
};

struct StepGraph {
  std::map<std::string, EinGraph::Tensor> inputs;
  std::vector<PlanStep> steps;  // topological
  std::vector<std::string> outputs;
  std::map<std::string, ContractionPath> trees;  // per n-ary node, over its operands

  // Index of the step producing `tensor`, or -1 for a graph input.
  int producer(const std::string& tensor) const;
  // The distinct steps reading step k's result, in order.
  const std::vector<int>& consumers(int k) const;
  // Per step, per operand: the step producing it, or -1 for a graph input.
  const std::vector<int>& operand_producers(int k) const;

  // Builds the name index and the edges above from `steps`; expand() calls it, and whoever
  // edits `steps` by hand must call it again.
  void link();

 private:
  std::map<std::string, int> index_;
  std::vector<std::vector<int>> producers_, consumers_;
};

// Expands every node into steps; n-ary nodes through contraction_path(options), where
// `per_node`, when given, may adjust the options for each n-ary node (e.g. measured step costs).
using PathOptionsFor = std::function<void(const EinGraph::Node&, PathOptions&)>;
StepGraph expand(const EinGraph& g, const PathOptions& options = {},
                 const PathOptionsFor& per_node = {});
// The same with each n-ary node's contraction tree given by `path_of` (e.g. read from a plan
// file); the path must fit the node (expand_with checks its operand numbers).
using PathOf = std::function<ContractionPath(const EinGraph::Node&,
                                             const std::map<char, std::int64_t>& bounds)>;
StepGraph expand_with(const EinGraph& g, const PathOf& path_of);

enum class PlanMethod { eindecomp, sqrt, data };
std::string_view to_string(PlanMethod m);
std::optional<PlanMethod> parse_plan_method(std::string_view s);

struct PlanOptions {
  std::int64_t procs = 1;  // a power of two
  PlanMethod method = PlanMethod::eindecomp;
  // With it, a step's join + aggregation cost under a vector is this value when it has one
  // (measured seconds converted to floats moved); the DP minimises that objective instead.
  std::function<std::optional<double>(const PlanStep&, const PartitionVector&)> measured;
};

struct StepChoice {
  PartitionVector d;
  std::vector<std::int64_t> result_parts;             // per result axis
  double join = 0, aggregation = 0, repartition = 0;  // repartition: into this step's operands
  std::optional<double> measured;                     // objective term when measured
};

struct Plan {
  StepGraph graph;
  std::int64_t procs = 1;
  PlanMethod method = PlanMethod::eindecomp;
  std::string search;                   // "exact", "linearized" (+ which start won), or "baseline"
  std::vector<StepChoice> choice;       // per step
  double total = 0;                     // floats moved under the cost model
  double objective = 0;                 // what was minimised (== total without measured costs)
  std::vector<std::vector<int>> paths;  // the linearization, when the graph needed it
};

// Throws SpecError when P is not a power of two or a step cannot be split P ways.
Plan make_plan(const StepGraph& g, const PlanOptions& options);

// The partition vector of a baseline for one step: `sqrt` splits the result's labels (then the
// aggregated ones) round-robin, doubling one label at a time; `data` splits the first result
// label P ways (spilling into the next labels when it is too short). Both stay feasible.
PartitionVector baseline_vector(const PlanStep& s, std::int64_t procs, PlanMethod m);

// The cost of an assignment of vectors to steps, filling each choice's cost terms.
double evaluate(const StepGraph& g, std::int64_t procs, std::vector<StepChoice>& choice,
                const PlanOptions& options = {});

// Every viable vector of one step with its cost given its neighbours' choices in `plan`.
struct Alternative {
  PartitionVector d;
  double join = 0, aggregation = 0, repartition_in = 0, repartition_out = 0, total = 0;
  std::optional<double> measured;
  bool chosen = false;
};
std::vector<Alternative> alternatives(const Plan& plan, int step, const PlanOptions& options = {});

std::string to_string(const PartitionVector& d);  // "i=2 j=1 k=4"

// The plan file: {"format": "einsumdb-plan", "version": 1, "procs", "method", "search",
// "inputs", "steps": [{"name", "node", "einsum", "inputs", "join", "agg", "dtype", "bounds",
// "partition", "result_parts", "predicted": {...}}], "trees": {...}, "outputs",
// "predicted_total"} (+ "objective" with measured costs, "linearization" when linearized).
// `einsumdb plan` adds the graph, the cost mode, the baselines' totals and the planning time.
nlohmann::ordered_json to_json(const Plan& p);

}  // namespace einsumdb
