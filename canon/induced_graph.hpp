// The induced colored digraph of a batched einsum (appendix "Induced Graph" of the Feinsum
// paper) and its canonical labeling by nauty.
//
// Node classes, in the paper's order: one node per argument (array), index, input access
// (row, operand, index, axis), output access (index, axis), output (batch row), argument
// position (operand), dtype, axis length and dimension (axis number). Edges run
// access->argument, {row, operand, index, dimension}->input access, {index, dimension}->output
// access, length->index and dtype->argument, plus the rank tournaments among lengths, dtypes
// and dimensions (smaller -> larger). Beyond the paper: a symbolic length is a node of its own
// class (no rank edges, since symbols have no order), and for a non-commutative join (`sub`)
// every operand position is a color of its own, so operands are never permuted. A scalar
// (rank-0) operand has no input access in the paper's graph, which would lose which array it
// reads in which row; it gets one scalar-access node (row -> it, operand -> it, it -> argument)
// instead, so einsums without scalar operands have exactly the paper's graph.
//
// The initial ordered partition puts each class in one cell; the dtype, length and dimension
// cells are further split by rank, which the tournaments force anyway and which spares nauty
// the work. Building a graph is pure; canonical_labeling is thread-safe (nauty is built with
// thread-local storage).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "canon/model.hpp"

namespace einsumdb {

enum class NodeClass : std::uint8_t {
  argument,
  index,
  input_access,
  output_access,
  output,
  argument_position,
  dtype,
  length,
  dimension,
  symbolic_length,
  scalar_access,
};
inline constexpr std::size_t kNodeClasses = 11;

struct GraphOptions {
  bool with_lengths = true;  // false: the structure graph, all axis lengths abstracted
};

struct InducedGraph {
  int num_nodes = 0;
  std::vector<int> offsets;  // CSR out-adjacency: targets[offsets[v] .. offsets[v+1])
  std::vector<int> targets;
  std::vector<int> lab;  // initial ordered partition in nauty's lab/ptn form
  std::vector<int> ptn;
  // Node range of each class: [first[c], first[c+1]). Within the argument class, node k is
  // the k-th array of BatchedEinsum::arrays; index node k the k-th index in ASCII order;
  // output node k batch row k; argument-position node k operand k.
  std::array<int, kNodeClasses + 1> first{};

  int node(NodeClass c, int k) const { return first[static_cast<std::size_t>(c)] + k; }
  int count(NodeClass c) const {
    const auto i = static_cast<std::size_t>(c);
    return first[i + 1] - first[i];
  }
  std::size_t num_edges() const { return targets.size(); }
};

// Builds the graph of a validated einsum.
InducedGraph build_induced_graph(const BatchedEinsum& e, const GraphOptions& options = {});

enum class NautyApi : std::uint8_t { sparse, dense };

// The canonical labeling: result[p] is the node placed at canonical position p. The sparse and
// the dense API give different (each canonical) labelings; keys use the sparse one.
std::vector<int> canonical_labeling(const InducedGraph& g, NautyApi api = NautyApi::sparse);

}  // namespace einsumdb
