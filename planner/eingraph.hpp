// EinGraph: a DAG of einsums (Sec. 3 of the EinDecomp paper). Graph inputs are named tensors
// with a concrete shape and dtype; each node applies one einsum with ⊗ (join) and ⊕ (agg) to
// the tensors it names, which are graph inputs or earlier nodes; any number of operands (an
// n-ary node gets a contraction tree). Plain values; parse_eingraph validates everything.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "einsumdb/canon/model.hpp"
#include "einsumdb/planner/einsum_tree.hpp"

namespace einsumdb {

struct EinGraph {
  struct Tensor {
    std::vector<std::int64_t> shape;
    Dtype dtype = Dtype::f64;
    bool operator==(const Tensor&) const = default;
  };
  struct Node {
    std::string name;
    std::vector<std::string> operands;  // label string of each operand, one char per axis
    std::string output;                 // label string of the result
    std::vector<std::string> inputs;    // the tensor each operand reads
    JoinOp join = JoinOp::mul;
    AggOp agg = AggOp::sum;
    std::string einsum_string() const;  // "ij,jk->ik"
    bool operator==(const Node&) const = default;
  };
  std::map<std::string, Tensor> inputs;
  std::vector<Node> nodes;           // in a topological order (producers first)
  std::vector<std::string> outputs;  // tensors the caller wants; default: nodes nobody reads

  // The shape and dtype of any tensor: an input or a node's result.
  const Tensor& tensor(const std::string& name) const;
  // The node producing `name`, or nullptr for a graph input.
  const Node* producer(const std::string& name) const;
  // The length of each label of a node.
  std::map<char, std::int64_t> bounds(const Node& n) const;

  bool operator==(const EinGraph&) const = default;

  // Filled by parse/validate: the result of every node.
  std::map<std::string, Tensor> results;
};

// {"inputs": {"A": {"shape": [1000, 100], "dtype": "f64"}, ...},
//  "nodes": [{"name": "T1", "einsum": "ij,jk->ik", "inputs": ["A", "B"],
//             "join": "mul", "agg": "sum"}, ...],
//  "outputs": ["Z"]}
// Nodes may be listed in any order; the result lists them topologically (stable). Throws
// SpecError naming the node, input or key at fault.
EinGraph parse_eingraph(const nlohmann::json& j);
EinGraph parse_eingraph_text(std::string_view text);

// Checks every rule parse_eingraph checks, fills `results` and sorts the nodes topologically.
void validate(EinGraph& g);

// The graph of an einsum tree: leaves become inputs T0, T1, ... (left to right), contractions
// binary nodes and permutations unary nodes, named N<k> by position in `t.nodes`; dimension ids
// become the labels a..z, A..Z (at most 52 distinct ids).
EinGraph eingraph_from_tree(const EinsumTree& t, Dtype dtype = Dtype::f64);

nlohmann::ordered_json to_json(const EinGraph& g);

// Whether an n-ary einsum with this ⊗/⊕ may be evaluated pairwise in any order: ⊗ associative
// and commutative, ⊕ distributing over it (mul/sum, add/max, add/min, max/max, min/min).
bool is_pairwise_decomposable(JoinOp join, AggOp agg);

}  // namespace einsumdb
