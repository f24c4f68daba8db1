#include "einsumdb/planner/plan_file.hpp"

#include "einsumdb/core/error.hpp"

namespace einsumdb {
namespace {

std::string list_text(const std::vector<std::string>& v) {
  std::string t = "[";
  for (std::size_t a = 0; a < v.size(); ++a) t += (a ? ", " : "") + v[a];
  return t + "]";
}

const nlohmann::json& member(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) throw SpecError(where + " has no \"" + key + "\"");
  return j.at(key);
}

ContractionPath read_tree(const nlohmann::json& j, const std::string& node) {
  const std::string where = "the plan's tree of node '" + node + "'";
  ContractionPath p;
  const auto& steps = member(j, "steps", where);
  if (!steps.is_array()) throw SpecError(where + ": \"steps\" must be an array");
  for (const auto& s : steps) {
    if (!s.is_object() || !s.contains("left") || !s.contains("right") || !s.contains("indices") ||
        !s["left"].is_number_integer() || !s["right"].is_number_integer() ||
        !s["indices"].is_string())
      throw SpecError(where +
                      ": each step must be {\"left\": int, \"right\": int, \"indices\": "
                      "string}");
    p.steps.push_back({s["left"].get<int>(), s["right"].get<int>(), s["indices"]});
  }
  return p;
}

PlanFile read_checked(const nlohmann::json& j, const EinGraph& g,
                      std::optional<std::int64_t> procs);

}  // namespace

PlanFile read_plan(const nlohmann::json& j, const EinGraph& g, std::optional<std::int64_t> procs) {
  try {
    return read_checked(j, g, procs);
  } catch (const nlohmann::json::exception& e) {  // a value of the wrong JSON type
    throw SpecError(std::string("not a valid plan file: ") + e.what());
  }
}

namespace {

PlanFile read_checked(const nlohmann::json& j, const EinGraph& g,
                      std::optional<std::int64_t> procs) {
  if (!j.is_object() || !j.contains("format") || j["format"] != "einsumdb-plan")
    throw SpecError(
        "not a plan file (expected \"format\": \"einsumdb-plan\"; write one with "
        "einsumdb plan GRAPH --procs P --output PLAN.json)");
  if (j.value("version", 0) != 1)
    throw SpecError("plan file version " + j.value("version", nlohmann::json()).dump() +
                    " is not supported (this einsumdb reads version 1)");
  const auto& jp = member(j, "procs", "the plan");
  if (!jp.is_number_integer() || jp.get<std::int64_t>() < 1)
    throw SpecError("the plan's \"procs\" must be a positive integer");
  PlanFile out;
  Plan& plan = out.plan;
  plan.procs = jp.get<std::int64_t>();
  if (procs && *procs != plan.procs)
    throw SpecError("the plan is for " + std::to_string(plan.procs) + " ranks, but this job has " +
                    std::to_string(*procs) + " (run it with mpirun -np " +
                    std::to_string(plan.procs) + ", or plan again with --procs " +
                    std::to_string(*procs) + ")");
  const auto method = parse_plan_method(j.value("method", std::string("eindecomp")));
  if (!method) throw SpecError("the plan's \"method\" must be eindecomp, sqrt or data");
  plan.method = *method;
  plan.search = j.value("search", std::string());

  // Inputs: exactly the graph's.
  const auto& inputs = member(j, "inputs", "the plan");
  if (!inputs.is_object()) throw SpecError("the plan's \"inputs\" must be an object");
  for (const auto& [name, t] : g.inputs) {
    if (!inputs.contains(name))
      throw SpecError("the graph's input '" + name +
                      "' is not in the plan (a plan of another "
                      "graph?)");
    const auto& e = inputs[name];
    std::vector<std::int64_t> shape;
    try {
      shape = e.at("shape").get<std::vector<std::int64_t>>();
    } catch (const nlohmann::json::exception&) {
      throw SpecError("the plan's input '" + name + "' has no valid \"shape\"");
    }
    if (shape != t.shape)
      throw SpecError("the plan's input '" + name + "' has shape " + shape_text(shape) +
                      ", but the graph's has " + shape_text(t.shape));
    const std::string dtype = e.value("dtype", std::string("f64"));
    if (dtype != to_string(t.dtype))
      throw SpecError("the plan's input '" + name + "' is " + dtype + ", but the graph's is " +
                      std::string(to_string(t.dtype)));
  }
  for (const auto& [name, e] : inputs.items())
    if (!g.inputs.count(name))
      throw SpecError("the plan reads an input '" + name + "' the graph does not have");

  // Steps: the graph expanded with the plan's trees must give the plan's steps.
  const nlohmann::json trees = j.value("trees", nlohmann::json::object());
  plan.graph = expand_with(g, [&](const EinGraph::Node& n, const std::map<char, std::int64_t>&) {
    if (!trees.is_object() || !trees.contains(n.name))
      throw SpecError("the graph's node '" + n.name + "' has " + std::to_string(n.operands.size()) +
                      " operands, but the plan has no contraction tree for it");
    return read_tree(trees[n.name], n.name);
  });
  const auto& steps = member(j, "steps", "the plan");
  if (!steps.is_array()) throw SpecError("the plan's \"steps\" must be an array");
  if (steps.size() != plan.graph.steps.size())
    throw SpecError("the plan has " + std::to_string(steps.size()) +
                    " steps, but the graph needs " + std::to_string(plan.graph.steps.size()) +
                    " (a plan of another graph?)");
  for (std::size_t v = 0; v < steps.size(); ++v) {
    const PlanStep& s = plan.graph.steps[v];
    const auto& e = steps[v];
    const std::string where = "plan step " + std::to_string(v + 1);
    const std::string name =
        member(e, "name", where).is_string() ? e["name"].get<std::string>() : std::string("?");
    const std::string einsum = e.value("einsum", std::string());
    std::vector<std::string> reads;
    try {
      reads = e.at("inputs").get<std::vector<std::string>>();
    } catch (const nlohmann::json::exception&) {
      throw SpecError(where + " ('" + name + "') has no valid \"inputs\"");
    }
    if (name != s.name || einsum != s.einsum_string() || reads != s.inputs ||
        e.value("join", std::string("mul")) != to_string(s.join) ||
        e.value("agg", std::string("sum")) != to_string(s.agg))
      throw SpecError(where + " is '" + name + "' computing " + einsum + " of " + list_text(reads) +
                      ", but the graph needs '" + s.name + "' computing " + s.einsum_string() +
                      " of " + list_text(s.inputs) + " (" + std::string(to_string(s.join)) + "/" +
                      std::string(to_string(s.agg)) + ")");
    const auto& part = member(e, "partition", where + " ('" + name + "')");
    if (!part.is_object())
      throw SpecError(where + " ('" + name + "'): \"partition\" must be an object");
    StepChoice c;
    std::int64_t pieces = 1;
    for (char l : join_labels(s.x, s.y)) {
      const std::string key(1, l);
      if (!part.contains(key) || !part[key].is_number_integer())
        throw SpecError("plan step '" + s.name + "': the partition does not cut label '" + key +
                        "'");
      const auto n = part[key].get<std::int64_t>();
      if (n < 1 || (n & (n - 1)) != 0 || n > s.bounds.at(l))
        throw SpecError("plan step '" + s.name + "': label '" + key + "' of length " +
                        std::to_string(s.bounds.at(l)) + " cannot be cut into " +
                        std::to_string(n) + " parts (a power of two up to its length)");
      c.d[l] = n;
      pieces *= n;
    }
    for (const auto& [key, n] : part.items())
      if (key.size() != 1 || !c.d.count(key[0]))
        throw SpecError("plan step '" + s.name + "': the partition cuts '" + key +
                        "', which is not a label of " + s.einsum_string());
    if (pieces != plan.procs)
      throw SpecError("plan step '" + s.name + "': the partition makes " + std::to_string(pieces) +
                      " pieces of work; a plan for " + std::to_string(plan.procs) +
                      " ranks needs exactly " + std::to_string(plan.procs));
    plan.choice.push_back(std::move(c));
  }
  plan.total = plan.objective = evaluate(plan.graph, plan.procs, plan.choice);
  if (j.contains("placement")) {
    out.placement = placement_from_json(j["placement"], plan);
    out.placement_given = true;
  } else {
    out.placement = place(plan);
  }
  return out;
}

}  // namespace

nlohmann::ordered_json plan_file_json(const Plan& plan, const Placement& placement) {
  auto j = to_json(plan);
  j["placement"] = to_json(placement, plan);
  return j;
}

}  // namespace einsumdb
