#include "einsumdb/planner/eingraph.hpp"

#include <algorithm>
#include <set>

#include "einsumdb/canon/parse.hpp"
#include "einsumdb/core/error.hpp"

namespace einsumdb {
namespace {

using json = nlohmann::json;

std::string in_quotes(const std::string& s) {
  return "'" + s + "'";
}

void check_keys(const json& j, std::initializer_list<std::string_view> allowed,
                const std::string& where) {
  for (const auto& [key, value] : j.items())
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
      throw SpecError(where + ": unknown key " + in_quotes(key));
}

const json& required(const json& j, const char* key, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end()) throw SpecError(where + ": missing \"" + key + "\"");
  return *it;
}

std::string string_of(const json& j, const std::string& where) {
  if (!j.is_string()) throw SpecError(where + " must be a string, got " + j.dump());
  return j.get<std::string>();
}

EinGraph::Tensor parse_tensor(const json& j, const std::string& name) {
  const std::string where = "input " + in_quotes(name);
  if (!j.is_object()) throw SpecError(where + " must be an object {\"shape\": [...], \"dtype\"}");
  check_keys(j, {"shape", "dtype"}, where);
  const json& shape = required(j, "shape", where);
  if (!shape.is_array()) throw SpecError(where + ": \"shape\" must be a list of lengths");
  EinGraph::Tensor t;
  for (std::size_t a = 0; a < shape.size(); ++a) {
    const json& len = shape[a];
    if (!len.is_number_integer() || len.get<std::int64_t>() < 1)
      throw SpecError(where + ", axis " + std::to_string(a) +
                      ": a length must be a positive integer, got " + len.dump());
    t.shape.push_back(len.get<std::int64_t>());
  }
  if (const auto d = j.find("dtype"); d != j.end()) {
    const auto dt = parse_dtype(string_of(*d, where + ": \"dtype\""));
    if (!dt) throw SpecError(where + ": unknown dtype " + d->dump());
    t.dtype = *dt;
  }
  return t;
}

EinGraph::Node parse_node(const json& j, std::size_t position) {
  std::string where = "node #" + std::to_string(position);
  if (!j.is_object()) throw SpecError(where + " must be an object");
  const std::string name = string_of(required(j, "name", where), where + ": \"name\"");
  if (name.empty()) throw SpecError(where + ": \"name\" is empty");
  where = "node " + in_quotes(name);
  check_keys(j, {"name", "einsum", "inputs", "join", "agg"}, where);
  EinGraph::Node n;
  n.name = name;
  const std::string text = string_of(required(j, "einsum", where), where + ": \"einsum\"");
  try {
    auto pattern = parse_einsum_pattern(text);
    n.operands = std::move(pattern.inputs);
    n.output = std::move(pattern.output);
  } catch (const SpecError& e) {
    throw SpecError(where + ": einsum " + in_quotes(text) + ": " + e.what());
  }
  const json& inputs = required(j, "inputs", where);
  if (!inputs.is_array()) throw SpecError(where + ": \"inputs\" must be a list of tensor names");
  for (const auto& in : inputs) n.inputs.push_back(string_of(in, where + ": an input"));
  if (const auto op = j.find("join"); op != j.end()) {
    const auto v = parse_join(string_of(*op, where + ": \"join\""));
    if (!v)
      throw SpecError(where + ": unknown join " + op->dump() +
                      " (mul, add, sub, sqdiff, absdiff, max, min)");
    n.join = *v;
  }
  if (const auto op = j.find("agg"); op != j.end()) {
    const auto v = parse_agg(string_of(*op, where + ": \"agg\""));
    if (!v) throw SpecError(where + ": unknown agg " + op->dump() + " (sum, max, min)");
    n.agg = *v;
  }
  return n;
}

}  // namespace

std::string EinGraph::Node::einsum_string() const {
  std::string s;
  for (std::size_t k = 0; k < operands.size(); ++k) s += (k ? "," : "") + operands[k];
  return s + "->" + output;
}

const EinGraph::Tensor& EinGraph::tensor(const std::string& name) const {
  if (const auto it = inputs.find(name); it != inputs.end()) return it->second;
  const auto it = results.find(name);
  if (it == results.end()) throw SpecError("no tensor named " + in_quotes(name));
  return it->second;
}

const EinGraph::Node* EinGraph::producer(const std::string& name) const {
  for (const auto& n : nodes)
    if (n.name == name) return &n;
  return nullptr;
}

std::map<char, std::int64_t> EinGraph::bounds(const Node& n) const {
  std::map<char, std::int64_t> b;
  for (std::size_t k = 0; k < n.operands.size(); ++k) {
    const auto& shape = tensor(n.inputs[k]).shape;
    for (std::size_t a = 0; a < n.operands[k].size(); ++a) b.emplace(n.operands[k][a], shape[a]);
  }
  return b;
}

bool is_pairwise_decomposable(JoinOp join, AggOp agg) {
  return (join == JoinOp::mul && agg == AggOp::sum) || (join == JoinOp::add && agg != AggOp::sum) ||
         (join == JoinOp::max && agg == AggOp::max) || (join == JoinOp::min && agg == AggOp::min);
}

void validate(EinGraph& g) {
  std::map<std::string, std::size_t> node_at;
  for (std::size_t k = 0; k < g.nodes.size(); ++k) {
    const auto& n = g.nodes[k];
    if (g.inputs.count(n.name))
      throw SpecError("node " + in_quotes(n.name) + " has the name of a graph input");
    if (!node_at.emplace(n.name, k).second)
      throw SpecError("two nodes are named " + in_quotes(n.name));
  }
  // Topological order, stable: Kahn's algorithm taking the earliest listed ready node.
  std::vector<std::size_t> pending(g.nodes.size(), 0);
  std::vector<std::vector<std::size_t>> consumers(g.nodes.size());
  for (std::size_t k = 0; k < g.nodes.size(); ++k) {
    const auto& n = g.nodes[k];
    const std::string where = "node " + in_quotes(n.name);
    if (n.inputs.size() != n.operands.size())
      throw SpecError(where + ": the einsum " + in_quotes(n.einsum_string()) + " has " +
                      std::to_string(n.operands.size()) + " operand(s) but \"inputs\" names " +
                      std::to_string(n.inputs.size()));
    for (const auto& in : n.inputs) {
      if (g.inputs.count(in)) continue;
      const auto p = node_at.find(in);
      if (p == node_at.end())
        throw SpecError(where + ": input " + in_quotes(in) +
                        " is neither a graph input nor a node");
      if (p->second == k) throw SpecError(where + " reads its own result");
      ++pending[k];
      consumers[p->second].push_back(k);
    }
    if (n.operands.size() > 2 && !is_pairwise_decomposable(n.join, n.agg))
      throw SpecError(where + ": an einsum of " + std::to_string(n.operands.size()) +
                      " operands needs a join/agg pair that may be evaluated pairwise (mul/sum, "
                      "add/max, add/min, max/max, min/min), got " +
                      std::string(to_string(n.join)) + "/" + std::string(to_string(n.agg)));
  }
  std::set<std::size_t> ready;
  for (std::size_t k = 0; k < g.nodes.size(); ++k)
    if (pending[k] == 0) ready.insert(k);
  std::vector<EinGraph::Node> sorted;
  g.results.clear();
  while (!ready.empty()) {
    const std::size_t k = *ready.begin();
    ready.erase(ready.begin());
    const auto& n = g.nodes[k];
    const std::string where = "node " + in_quotes(n.name);
    std::map<char, std::pair<std::int64_t, std::string>> seen;  // label -> length, where
    Dtype dtype = Dtype::i8;
    for (std::size_t o = 0; o < n.operands.size(); ++o) {
      const auto& t = g.tensor(n.inputs[o]);
      dtype = dtype_rank(t.dtype) > dtype_rank(dtype) || o == 0 ? t.dtype : dtype;
      if (t.shape.size() != n.operands[o].size())
        throw SpecError(where + ": operand " + std::to_string(o) + " (" + in_quotes(n.inputs[o]) +
                        ") has " + std::to_string(t.shape.size()) +
                        " axes but the einsum gives it " + std::to_string(n.operands[o].size()) +
                        " labels (" + in_quotes(n.operands[o]) + ")");
      for (std::size_t a = 0; a < t.shape.size(); ++a) {
        const char l = n.operands[o][a];
        const std::string here = in_quotes(n.inputs[o]) + " axis " + std::to_string(a);
        const auto [it, inserted] = seen.emplace(l, std::make_pair(t.shape[a], here));
        if (!inserted && it->second.first != t.shape[a])
          throw SpecError(where + ": label '" + std::string(1, l) + "' has length " +
                          std::to_string(it->second.first) + " at " + it->second.second + " but " +
                          std::to_string(t.shape[a]) + " at " + here);
      }
    }
    EinGraph::Tensor result{{}, dtype};
    for (std::size_t a = 0; a < n.output.size(); ++a) {
      const char l = n.output[a];
      if (n.output.find(l) != a)
        throw SpecError(where + ": output label '" + std::string(1, l) + "' repeats");
      const auto it = seen.find(l);
      if (it == seen.end())
        throw SpecError(where + ": output label '" + std::string(1, l) + "' is in no operand of " +
                        in_quotes(n.einsum_string()));
      result.shape.push_back(it->second.first);
    }
    g.results[n.name] = result;
    sorted.push_back(n);
    for (std::size_t c : consumers[k])
      if (--pending[c] == 0) ready.insert(c);
  }
  if (sorted.size() != g.nodes.size()) {
    for (std::size_t k = 0; k < g.nodes.size(); ++k)
      if (pending[k] != 0)
        throw SpecError("node " + in_quotes(g.nodes[k].name) +
                        " is on a cycle: it depends, through its inputs, on its own result");
  }
  g.nodes = std::move(sorted);
  if (g.outputs.empty()) {
    std::set<std::string> read;
    for (const auto& n : g.nodes) read.insert(n.inputs.begin(), n.inputs.end());
    for (const auto& n : g.nodes)
      if (!read.count(n.name)) g.outputs.push_back(n.name);
  }
  for (const auto& o : g.outputs)
    if (!g.results.count(o))
      throw SpecError("output " + in_quotes(o) + " is not a node of the graph");
}

EinGraph parse_eingraph(const json& j) {
  check_json_depth(j, "the graph");
  if (!j.is_object())
    throw SpecError("a graph must be a JSON object with \"inputs\" and \"nodes\"");
  check_keys(j, {"inputs", "nodes", "outputs"}, "the graph");
  EinGraph g;
  const json& inputs = required(j, "inputs", "the graph");
  if (!inputs.is_object()) throw SpecError("the graph: \"inputs\" must map names to tensors");
  for (const auto& [name, t] : inputs.items()) {
    if (name.empty()) throw SpecError("the graph: an input has an empty name");
    g.inputs[name] = parse_tensor(t, name);
  }
  const json& nodes = required(j, "nodes", "the graph");
  if (!nodes.is_array() || nodes.empty())
    throw SpecError("the graph: \"nodes\" must be a non-empty list");
  for (std::size_t k = 0; k < nodes.size(); ++k) g.nodes.push_back(parse_node(nodes[k], k));
  if (const auto out = j.find("outputs"); out != j.end()) {
    if (!out->is_array()) throw SpecError("the graph: \"outputs\" must be a list of node names");
    for (const auto& o : *out) g.outputs.push_back(string_of(o, "the graph: an output"));
  }
  validate(g);
  return g;
}

EinGraph parse_eingraph_text(std::string_view text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw SpecError(std::string("the graph is not valid JSON: ") + e.what());
  } catch (const json::exception& e) {
    throw SpecError(std::string("the graph: ") + e.what());
  }
  return parse_eingraph(j);
}

EinGraph eingraph_from_tree(const EinsumTree& t, Dtype dtype) {
  static constexpr std::string_view kLabels =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  auto labels = [&](const std::vector<int>& dims) {
    std::string s;
    for (int d : dims) {
      if (d < 0 || static_cast<std::size_t>(d) >= kLabels.size())
        throw SpecError("dimension id " + std::to_string(d) +
                        " cannot be planned: at most 52 distinct dimension ids");
      s += kLabels[static_cast<std::size_t>(d)];
    }
    return s;
  };
  EinGraph g;
  std::vector<std::string> name(t.nodes.size());
  for (std::size_t k = 0; k < t.nodes.size(); ++k) {
    const auto& n = t.nodes[k];
    if (n.is_leaf()) {
      name[k] = "T" + std::to_string(n.input);
      EinGraph::Tensor in{{}, dtype};
      for (int d : n.dims) in.shape.push_back(t.sizes[static_cast<std::size_t>(d)]);
      g.inputs[name[k]] = in;
      continue;
    }
    name[k] = "N" + std::to_string(k);
    EinGraph::Node node;
    node.name = name[k];
    node.output = labels(n.dims);
    node.operands.push_back(labels(t.nodes[static_cast<std::size_t>(n.left)].dims));
    node.inputs.push_back(name[static_cast<std::size_t>(n.left)]);
    if (n.is_contraction()) {
      node.operands.push_back(labels(t.nodes[static_cast<std::size_t>(n.right)].dims));
      node.inputs.push_back(name[static_cast<std::size_t>(n.right)]);
    }
    g.nodes.push_back(std::move(node));
  }
  if (g.nodes.empty()) throw SpecError("the einsum tree has no contraction or permutation");
  validate(g);
  return g;
}

nlohmann::ordered_json to_json(const EinGraph& g) {
  nlohmann::ordered_json j;
  j["inputs"] = nlohmann::ordered_json::object();
  for (const auto& [name, t] : g.inputs)
    j["inputs"][name] = {{"shape", t.shape}, {"dtype", to_string(t.dtype)}};
  j["nodes"] = nlohmann::ordered_json::array();
  for (const auto& n : g.nodes)
    j["nodes"].push_back({{"name", n.name},
                          {"einsum", n.einsum_string()},
                          {"inputs", n.inputs},
                          {"join", to_string(n.join)},
                          {"agg", to_string(n.agg)}});
  j["outputs"] = g.outputs;
  return j;
}

}  // namespace einsumdb
