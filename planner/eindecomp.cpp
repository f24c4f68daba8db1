#include "einsumdb/planner/eindecomp.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "einsumdb/core/error.hpp"

namespace einsumdb {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
using Parts = std::vector<std::int64_t>;  // parts per axis of one tensor

Parts parts_of(const std::string& labels, const PartitionVector& d) {
  Parts p;
  for (char l : labels) p.push_back(d.at(l));
  return p;
}

const std::string& operand_labels(const PlanStep& s, std::size_t k) {
  return k == 0 ? s.x : s.y;
}

// Everything the search needs about the steps, computed once.
struct Context {
  const StepGraph& g;
  std::int64_t procs;
  const PlanOptions& options;
  std::vector<std::vector<PartitionVector>> viable;  // per step (empty when not searching)
  std::vector<Parts> shape;                          // per step: result shape

  Context(const StepGraph& graph, const PlanOptions& o, bool search = true)
      : g(graph), procs(o.procs), options(o) {
    const std::size_t n = g.steps.size();
    if (search) viable.resize(n);
    for (std::size_t v = 0; v < n; ++v) {
      const auto& s = g.steps[v];
      shape.push_back(s.result_shape());
      if (!search) continue;
      viable[v] = partition_vectors(join_labels(s.x, s.y), s.bounds, procs);
      if (viable[v].empty())
        throw SpecError("step " + s.name + " (" + s.einsum_string() + ") cannot be split into " +
                        std::to_string(procs) + " pieces of work: its labels are too short");
    }
  }

  const std::vector<int>& producers(int v) const { return g.operand_producers(v); }
  const std::vector<int>& consumers(int v) const { return g.consumers(v); }

  // Join and aggregation of step v under d, and the objective's term for it.
  double step_objective(int v, const PartitionVector& d) const {
    const auto& s = g.steps[static_cast<std::size_t>(v)];
    if (options.measured)
      if (const auto m = options.measured(s, d)) return *m;
    return join_cost(s.x, s.y, d, s.bounds, procs) +
           aggregation_cost(s.x, s.y, s.z, d, s.bounds, procs);
  }

  // Moving step p's result, produced with parts `from`, into operand k of step v under d.
  double repart(int p, const Parts& from, int v, std::size_t k, const PartitionVector& d) const {
    const auto& s = g.steps[static_cast<std::size_t>(v)];
    return repartition_cost(shape[static_cast<std::size_t>(p)], from,
                            parts_of(operand_labels(s, k), d));
  }

  // The cost of re-partitioning into every operand of consumer c that reads step v.
  double repart_into(int v, const Parts& from, int c, const PartitionVector& dc) const {
    double cost = 0;
    const auto& prod = producers(c);
    for (std::size_t k = 0; k < prod.size(); ++k)
      if (prod[k] == v) cost += repart(v, from, c, k, dc);
    return cost;
  }
};

// The DP of Sec. 8.2/8.3 over the steps in `in_set` (each with at most one consumer inside it),
// the others either labelled in `chosen` (their costs are charged exactly) or not (ignored, as
// Sec. 8.4 does for inputs from off the path). Labels the steps of the set in `chosen`.
void optimize_set(const Context& cx, const std::vector<bool>& in_set,
                  std::vector<std::optional<PartitionVector>>& chosen) {
  struct Entry {
    double cost = kInf;
    std::size_t d = 0;                         // index into viable
    std::vector<std::pair<int, Parts>> picks;  // producer in the set and its result parts
  };
  const int n = static_cast<int>(cx.g.steps.size());
  std::vector<std::map<Parts, Entry>> table(static_cast<std::size_t>(n));
  for (int v = 0; v < n; ++v) {
    if (!in_set[static_cast<std::size_t>(v)]) continue;
    const auto& s = cx.g.steps[static_cast<std::size_t>(v)];
    const auto& prod = cx.producers(v);
    std::vector<int> groups;  // distinct producer steps
    for (int p : prod)
      if (p >= 0 && std::find(groups.begin(), groups.end(), p) == groups.end()) groups.push_back(p);
    auto& mine = table[static_cast<std::size_t>(v)];
    const auto& viable = cx.viable[static_cast<std::size_t>(v)];
    for (std::size_t i = 0; i < viable.size(); ++i) {
      const auto& d = viable[i];
      double cost = cx.step_objective(v, d);
      std::vector<std::pair<int, Parts>> picks;
      for (int p : groups) {
        if (in_set[static_cast<std::size_t>(p)]) {
          double best = kInf;
          const Parts* best_parts = nullptr;
          for (const auto& [parts, e] : table[static_cast<std::size_t>(p)]) {
            const double c = e.cost + cx.repart_into(p, parts, v, d);
            if (c < best) best = c, best_parts = &parts;
          }
          cost += best;
          picks.emplace_back(p, *best_parts);
        } else if (const auto& fixed = chosen[static_cast<std::size_t>(p)]) {
          cost +=
              cx.repart_into(p, parts_of(cx.g.steps[static_cast<std::size_t>(p)].z, *fixed), v, d);
        }
      }
      const Parts out = parts_of(s.z, d);
      for (int c : cx.consumers(v))
        if (!in_set[static_cast<std::size_t>(c)])
          if (const auto& fixed = chosen[static_cast<std::size_t>(c)])
            cost += cx.repart_into(v, out, c, *fixed);
      auto& e = mine[out];
      if (cost < e.cost) e = Entry{cost, i, std::move(picks)};
    }
  }
  // Back-tracking from every step of the set that no step of the set consumes.
  auto label = [&](auto&& self, int v, const Parts& parts) -> void {
    const auto& e = table[static_cast<std::size_t>(v)].at(parts);
    chosen[static_cast<std::size_t>(v)] = cx.viable[static_cast<std::size_t>(v)][e.d];
    for (const auto& [p, pp] : e.picks) self(self, p, pp);
  };
  for (int v = n - 1; v >= 0; --v) {
    if (!in_set[static_cast<std::size_t>(v)]) continue;
    const auto& cons = cx.consumers(v);
    if (std::any_of(cons.begin(), cons.end(),
                    [&](int c) { return in_set[static_cast<std::size_t>(c)]; }))
      continue;
    const auto& mine = table[static_cast<std::size_t>(v)];
    const auto best = std::min_element(mine.begin(), mine.end(), [](const auto& a, const auto& b) {
      return a.second.cost < b.second.cost;
    });
    label(label, v, best->first);
  }
}

// The longest path (in steps) among the unlabelled steps, following producer -> consumer edges.
std::vector<int> longest_unlabelled_path(
    const Context& cx, const std::vector<std::optional<PartitionVector>>& chosen) {
  const int n = static_cast<int>(cx.g.steps.size());
  std::vector<int> length(static_cast<std::size_t>(n), 0), next(static_cast<std::size_t>(n), -1);
  int start = -1;
  for (int v = n - 1; v >= 0; --v) {  // consumers come after producers
    if (chosen[static_cast<std::size_t>(v)]) continue;
    length[static_cast<std::size_t>(v)] = 1;
    for (int c : cx.consumers(v))
      if (!chosen[static_cast<std::size_t>(c)] &&
          length[static_cast<std::size_t>(c)] + 1 > length[static_cast<std::size_t>(v)]) {
        length[static_cast<std::size_t>(v)] = length[static_cast<std::size_t>(c)] + 1;
        next[static_cast<std::size_t>(v)] = c;
      }
    if (start < 0 || length[static_cast<std::size_t>(v)] >= length[static_cast<std::size_t>(start)])
      start = v;
  }
  std::vector<int> path;
  for (int v = start; v >= 0; v = next[static_cast<std::size_t>(v)]) path.push_back(v);
  return path;
}

// The cost terms of step v that depend on its own vector, its neighbours fixed.
struct Local {
  double objective = 0, join = 0, aggregation = 0, in = 0, out = 0;
  std::optional<double> measured;
};
Local local_cost(const Context& cx, const std::vector<StepChoice>& choice, int v,
                 const PartitionVector& d) {
  const auto& s = cx.g.steps[static_cast<std::size_t>(v)];
  Local l;
  l.join = join_cost(s.x, s.y, d, s.bounds, cx.procs);
  l.aggregation = aggregation_cost(s.x, s.y, s.z, d, s.bounds, cx.procs);
  if (cx.options.measured) l.measured = cx.options.measured(s, d);
  const auto& prod = cx.producers(v);
  for (std::size_t k = 0; k < prod.size(); ++k)
    if (prod[k] >= 0)
      l.in += cx.repart(prod[k], choice[static_cast<std::size_t>(prod[k])].result_parts, v, k, d);
  const Parts out = parts_of(s.z, d);
  for (int c : cx.consumers(v))
    l.out += cx.repart_into(v, out, c, choice[static_cast<std::size_t>(c)].d);
  l.objective = l.measured.value_or(l.join + l.aggregation) + l.in + l.out;
  return l;
}

std::vector<StepChoice> to_choices(const Context& cx,
                                   const std::vector<std::optional<PartitionVector>>& chosen) {
  std::vector<StepChoice> out(chosen.size());
  for (std::size_t v = 0; v < chosen.size(); ++v) {
    EINSUMDB_ASSERT(chosen[v].has_value(), "every step is labelled");
    out[v].d = *chosen[v];
    out[v].result_parts = parts_of(cx.g.steps[v].z, out[v].d);
  }
  return out;
}

// Coordinate descent: each step in turn takes its best vector with its neighbours fixed, until a
// sweep changes nothing. Never increases the objective.
void refine(const Context& cx, std::vector<StepChoice>& choice) {
  for (int sweep = 0; sweep < 50; ++sweep) {
    bool changed = false;
    for (int v = 0; v < static_cast<int>(choice.size()); ++v) {
      auto& c = choice[static_cast<std::size_t>(v)];
      const double current = local_cost(cx, choice, v, c.d).objective;
      double best = current;
      const PartitionVector* best_d = nullptr;
      for (const auto& d : cx.viable[static_cast<std::size_t>(v)]) {
        const double cost = local_cost(cx, choice, v, d).objective;
        if (cost < best * (1 - 1e-12) - 1e-9) best = cost, best_d = &d;
      }
      if (best_d) {
        c.d = *best_d;
        c.result_parts = parts_of(cx.g.steps[static_cast<std::size_t>(v)].z, c.d);
        changed = true;
      }
    }
    if (!changed) return;
  }
}

double evaluate_choices(const Context& cx, std::vector<StepChoice>& choice) {
  double objective = 0;
  for (int v = 0; v < static_cast<int>(choice.size()); ++v) {
    auto& c = choice[static_cast<std::size_t>(v)];
    const auto& s = cx.g.steps[static_cast<std::size_t>(v)];
    c.result_parts = parts_of(s.z, c.d);
    c.join = join_cost(s.x, s.y, c.d, s.bounds, cx.procs);
    c.aggregation = aggregation_cost(s.x, s.y, s.z, c.d, s.bounds, cx.procs);
    c.measured = cx.options.measured ? cx.options.measured(s, c.d) : std::nullopt;
    c.repartition = 0;
    const auto& prod = cx.producers(v);
    for (std::size_t k = 0; k < prod.size(); ++k)
      if (prod[k] >= 0)
        c.repartition +=
            cx.repart(prod[k], choice[static_cast<std::size_t>(prod[k])].result_parts, v, k, c.d);
    objective += c.measured.value_or(c.join + c.aggregation) + c.repartition;
  }
  return objective;
}

double total_of(const std::vector<StepChoice>& choice) {
  double t = 0;
  for (const auto& c : choice) t += c.join + c.aggregation + c.repartition;
  return t;
}

std::vector<StepChoice> baseline_choices(const Context& cx, PlanMethod m) {
  std::vector<StepChoice> out(cx.g.steps.size());
  for (std::size_t v = 0; v < out.size(); ++v) {
    out[v].d = baseline_vector(cx.g.steps[v], cx.procs, m);
    out[v].result_parts = parts_of(cx.g.steps[v].z, out[v].d);
  }
  return out;
}

}  // namespace

std::string PlanStep::einsum_string() const {
  return x + (y.empty() ? "" : "," + y) + "->" + z;
}

std::vector<std::int64_t> PlanStep::result_shape() const {
  std::vector<std::int64_t> s;
  for (char l : z) s.push_back(bounds.at(l));
  return s;
}

int StepGraph::producer(const std::string& tensor) const {
  const auto it = index_.find(tensor);
  return it == index_.end() ? -1 : it->second;
}

const std::vector<int>& StepGraph::consumers(int k) const {
  EINSUMDB_ASSERT(consumers_.size() == steps.size(), "StepGraph::link() after editing steps");
  return consumers_[static_cast<std::size_t>(k)];
}

const std::vector<int>& StepGraph::operand_producers(int k) const {
  EINSUMDB_ASSERT(producers_.size() == steps.size(), "StepGraph::link() after editing steps");
  return producers_[static_cast<std::size_t>(k)];
}

void StepGraph::link() {
  index_.clear();
  for (std::size_t k = 0; k < steps.size(); ++k) index_[steps[k].name] = static_cast<int>(k);
  producers_.assign(steps.size(), {});
  consumers_.assign(steps.size(), {});
  for (std::size_t c = 0; c < steps.size(); ++c)
    for (const auto& in : steps[c].inputs) {
      const int p = producer(in);
      producers_[c].push_back(p);
      if (p < 0) continue;
      auto& cons = consumers_[static_cast<std::size_t>(p)];
      if (cons.empty() || cons.back() != static_cast<int>(c)) cons.push_back(static_cast<int>(c));
    }
}

StepGraph expand(const EinGraph& g, const PathOptions& options, const PathOptionsFor& per_node) {
  return expand_with(g, [&](const EinGraph::Node& n, const std::map<char, std::int64_t>& bounds) {
    PathOptions node_options = options;
    if (per_node) per_node(n, node_options);
    return contraction_path(n.operands, n.output, bounds, node_options);
  });
}

StepGraph expand_with(const EinGraph& g, const PathOf& path_of) {
  StepGraph out;
  out.inputs = g.inputs;
  out.outputs = g.outputs;
  for (const auto& n : g.nodes) {
    const auto bounds = g.bounds(n);
    const Dtype dtype = g.tensor(n.name).dtype;
    auto step = [&](std::string name, std::string x, std::string y, std::string z,
                    std::vector<std::string> inputs) {
      PlanStep s;
      s.name = std::move(name);
      s.node = n.name;
      s.x = std::move(x), s.y = std::move(y), s.z = std::move(z);
      s.inputs = std::move(inputs);
      s.join = n.join, s.agg = n.agg, s.dtype = dtype;
      for (char l : s.x + s.y) s.bounds[l] = bounds.at(l);
      out.steps.push_back(std::move(s));
    };
    if (n.operands.size() <= 2) {
      step(n.name, n.operands[0], n.operands.size() == 2 ? n.operands[1] : "", n.output, n.inputs);
      continue;
    }
    const auto path = path_of(n, bounds);
    const std::size_t operands = n.operands.size();
    if (path.steps.size() != operands - 1)
      throw SpecError("the contraction tree of node '" + n.name + "' has " +
                      std::to_string(path.steps.size()) + " steps; its " +
                      std::to_string(operands) + " operands need " + std::to_string(operands - 1));
    std::vector<std::string> labels = n.operands, tensors = n.inputs;
    std::vector<bool> used(2 * operands - 1, false);
    for (std::size_t k = 0; k < path.steps.size(); ++k) {
      const auto& ps = path.steps[k];
      for (int side : {ps.left, ps.right})
        if (side < 0 || static_cast<std::size_t>(side) >= operands + k ||
            used[static_cast<std::size_t>(side)] || ps.left == ps.right)
          throw SpecError("the contraction tree of node '" + n.name + "': step " +
                          std::to_string(k + 1) + " reads operand " + std::to_string(side) +
                          ", which is not available then (each operand and each step's result "
                          "is read exactly once)");
      used[static_cast<std::size_t>(ps.left)] = used[static_cast<std::size_t>(ps.right)] = true;
      for (char c : ps.indices)
        if (labels[static_cast<std::size_t>(ps.left)].find(c) == std::string::npos &&
            labels[static_cast<std::size_t>(ps.right)].find(c) == std::string::npos)
          throw SpecError("the contraction tree of node '" + n.name + "': step " +
                          std::to_string(k + 1) + " keeps index '" + std::string(1, c) +
                          "', which neither of its operands has");
      const bool last = k + 1 == path.steps.size();
      const std::string name = last ? n.name : n.name + "." + std::to_string(k + 1);
      const auto l = static_cast<std::size_t>(ps.left), r = static_cast<std::size_t>(ps.right);
      step(name, labels[l], labels[r], last ? n.output : ps.indices, {tensors[l], tensors[r]});
      labels.push_back(last ? n.output : ps.indices);
      tensors.push_back(name);
    }
    out.trees[n.name] = path;
  }
  // Names must stay unique after expansion ("T.1" could be a user's node name).
  std::set<std::string> names;
  for (const auto& [name, t] : out.inputs) names.insert(name);
  for (const auto& s : out.steps)
    if (!names.insert(s.name).second)
      throw SpecError("the contraction tree of node '" + s.node + "' needs a step named '" +
                      s.name + "', which the graph already uses; rename that node");
  out.link();
  return out;
}

std::string_view to_string(PlanMethod m) {
  switch (m) {
    case PlanMethod::eindecomp:
      return "eindecomp";
    case PlanMethod::sqrt:
      return "sqrt";
    case PlanMethod::data:
      return "data";
  }
  return "?";
}

std::optional<PlanMethod> parse_plan_method(std::string_view s) {
  for (auto m : {PlanMethod::eindecomp, PlanMethod::sqrt, PlanMethod::data})
    if (to_string(m) == s) return m;
  return std::nullopt;
}

PartitionVector baseline_vector(const PlanStep& s, std::int64_t procs, PlanMethod m) {
  const std::string labels = join_labels(s.x, s.y);
  std::string order = s.z;  // result labels first, then the aggregated ones
  for (char l : labels)
    if (order.find(l) == std::string::npos) order += l;
  PartitionVector d;
  for (char l : labels) d[l] = 1;
  std::int64_t left = procs;
  std::size_t at = 0;
  while (left > 1) {
    std::size_t tried = 0;
    while (tried < order.size() && d[order[at]] * 2 > s.bounds.at(order[at])) {
      at = (at + 1) % order.size();
      ++tried;
    }
    if (tried == order.size())
      throw SpecError("step " + s.name + " (" + s.einsum_string() + ") cannot be split into " +
                      std::to_string(procs) + " pieces of work: its labels are too short");
    d[order[at]] *= 2;
    left /= 2;
    if (m == PlanMethod::sqrt) at = (at + 1) % order.size();
  }
  return d;
}

double evaluate(const StepGraph& g, std::int64_t procs, std::vector<StepChoice>& choice,
                const PlanOptions& options) {
  PlanOptions o = options;
  o.procs = procs;
  const Context cx(g, o, /*search=*/false);
  EINSUMDB_ASSERT(choice.size() == g.steps.size(), "one choice per step");
  evaluate_choices(cx, choice);
  return total_of(choice);
}

Plan make_plan(const StepGraph& g, const PlanOptions& options) {
  const Context cx(g, options);
  Plan plan;
  plan.graph = g;
  plan.procs = options.procs;
  plan.method = options.method;
  const std::size_t n = g.steps.size();
  if (options.method != PlanMethod::eindecomp) {
    plan.search = "baseline";
    plan.choice = baseline_choices(cx, options.method);
  } else {
    std::vector<std::optional<PartitionVector>> chosen(n);
    bool tree = true;
    for (int v = 0; v < static_cast<int>(n); ++v) tree = tree && cx.consumers(v).size() <= 1;
    if (tree) {
      plan.search = "exact";
      optimize_set(cx, std::vector<bool>(n, true), chosen);
      plan.choice = to_choices(cx, chosen);
    } else {
      while (std::any_of(chosen.begin(), chosen.end(), [](const auto& c) { return !c; })) {
        const auto path = longest_unlabelled_path(cx, chosen);
        std::vector<bool> in_set(n, false);
        for (int v : path) in_set[static_cast<std::size_t>(v)] = true;
        optimize_set(cx, in_set, chosen);
        plan.paths.push_back(path);
      }
      // The linearized labelling, refined; and the baselines, refined: the cheapest wins.
      std::vector<std::pair<std::string, std::vector<StepChoice>>> starts;
      starts.emplace_back("linearized", to_choices(cx, chosen));
      starts.emplace_back("linearized from sqrt", baseline_choices(cx, PlanMethod::sqrt));
      starts.emplace_back("linearized from data", baseline_choices(cx, PlanMethod::data));
      double best = kInf;
      for (auto& [name, choice] : starts) {
        refine(cx, choice);
        const double cost = evaluate_choices(cx, choice);
        if (cost < best * (1 - 1e-12)) best = cost, plan.search = name, plan.choice = choice;
      }
    }
  }
  plan.objective = evaluate_choices(cx, plan.choice);
  plan.total = total_of(plan.choice);
  return plan;
}

std::vector<Alternative> alternatives(const Plan& plan, int step, const PlanOptions& options) {
  PlanOptions o = options;
  o.procs = plan.procs;
  const Context cx(plan.graph, o);
  std::vector<Alternative> out;
  for (const auto& d : cx.viable[static_cast<std::size_t>(step)]) {
    const Local l = local_cost(cx, plan.choice, step, d);
    out.push_back({d, l.join, l.aggregation, l.in, l.out, l.objective, l.measured,
                   d == plan.choice[static_cast<std::size_t>(step)].d});
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Alternative& a, const Alternative& b) { return a.total < b.total; });
  return out;
}

std::string to_string(const PartitionVector& d) {
  std::string s;
  for (const auto& [l, p] : d)
    s += (s.empty() ? "" : " ") + std::string(1, l) + "=" + std::to_string(p);
  return s;
}

nlohmann::ordered_json to_json(const Plan& p) {
  using oj = nlohmann::ordered_json;
  oj j;
  j["format"] = "einsumdb-plan";
  j["version"] = 1;
  j["procs"] = p.procs;
  j["method"] = to_string(p.method);
  j["search"] = p.search;
  j["inputs"] = oj::object();
  for (const auto& [name, t] : p.graph.inputs)
    j["inputs"][name] = {{"shape", t.shape}, {"dtype", to_string(t.dtype)}};
  j["steps"] = oj::array();
  for (std::size_t v = 0; v < p.graph.steps.size(); ++v) {
    const auto& s = p.graph.steps[v];
    const auto& c = p.choice[v];
    oj d = oj::object();
    for (const auto& [l, parts] : c.d) d[std::string(1, l)] = parts;
    oj bounds = oj::object();
    for (const auto& [l, b] : s.bounds) bounds[std::string(1, l)] = b;
    oj step = {{"name", s.name},
               {"node", s.node},
               {"einsum", s.einsum_string()},
               {"inputs", s.inputs},
               {"join", to_string(s.join)},
               {"agg", to_string(s.agg)},
               {"dtype", to_string(s.dtype)},
               {"bounds", bounds},
               {"partition", d},
               {"result_parts", c.result_parts},
               {"predicted",
                {{"join", c.join},
                 {"aggregation", c.aggregation},
                 {"repartition", c.repartition},
                 {"total", c.join + c.aggregation + c.repartition}}}};
    if (c.measured) step["measured_objective"] = *c.measured;
    j["steps"].push_back(std::move(step));
  }
  j["trees"] = oj::object();
  for (const auto& [node, path] : p.graph.trees) {
    oj steps = oj::array();
    for (const auto& s : path.steps)
      steps.push_back({{"left", s.left}, {"right", s.right}, {"indices", s.indices}});
    j["trees"][node] = {{"steps", steps},
                        {"flops", path.flops},
                        {"largest_intermediate", path.largest_intermediate},
                        {"exact", path.exact}};
  }
  j["outputs"] = p.graph.outputs;
  j["predicted_total"] = p.total;
  if (p.objective != p.total) j["objective"] = p.objective;
  if (!p.paths.empty()) {
    oj paths = oj::array();
    for (const auto& path : p.paths) {
      oj names = oj::array();
      for (int v : path) names.push_back(p.graph.steps[static_cast<std::size_t>(v)].name);
      paths.push_back(names);
    }
    j["linearization"] = paths;
  }
  return j;
}

}  // namespace einsumdb
