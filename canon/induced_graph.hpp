// The induced colored graph of a batched einsum and its canonical labeling by nauty.
//
// Two layouts describe the same batched einsum and have the same color-preserving
// isomorphisms, so either one decides isomorphism (Sec. 5 of the Feinsum paper):
//
// - `paper`: the digraph of the paper's appendix "Induced Graph". Nodes for every argument
//   (array), index, input access (row, operand, index, axis), output access (index, axis),
//   output (batch row), argument position (operand), dtype, axis length and dimension (axis
//   number); edges access->argument, {row, operand, index, dimension}->input access, {index,
//   dimension}->output access, length->index, dtype->argument, and the rank tournaments among
//   lengths, dtypes and dimensions.
// - `compact`: undirected. Because every row shares the operands' index lists, the input access
//   (row, operand, index, axis) splits into an occurrence (row, operand) joined to its row,
//   operand and array, and an operand access (operand, axis) joined to its operand, index and
//   dimension: b·n + Σ rank nodes instead of b·Σ rank. Every edge joins two different classes
//   and only one direction between two classes ever occurs, so directions carry nothing; the
//   ranked classes (dtypes, lengths, dimensions) are singleton cells in rank order, which is what
//   the tournaments enforce.
//
// Beyond the paper, in both layouts: a symbolic length is a node of its own class (symbols have
// no order); for a non-commutative join (`sub`) each operand position is its own cell, so
// operands are never permuted; and in `paper` a scalar (rank-0) operand, which has no input
// access, gets one scalar-access node (row -> it, operand -> it, it -> argument) so the array it
// reads is not lost. Building a graph is pure; canonical_labeling is thread-safe (nauty is built
// with thread-local storage).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "einsumdb/canon/model.hpp"

namespace einsumdb {

enum class NodeClass : std::uint8_t {
  argument,
  index,
  input_access,  // paper: (row, operand, axis); compact: (operand, axis)
  output_access,
  output,
  argument_position,
  dtype,
  length,
  dimension,
  symbolic_length,
  occurrence,  // paper: scalar operands only; compact: every (row, operand)
};
inline constexpr std::size_t kNodeClasses = 11;

enum class GraphLayout : std::uint8_t { paper, compact };

struct GraphOptions {
  bool with_lengths = true;  // false: the structure graph, all axis lengths abstracted
  GraphLayout layout = GraphLayout::compact;
  // When not empty, row i stands for row_multiplicity[i] interchangeable rows (see
  // canonicalize.hpp): row nodes are split into cells by multiplicity, ascending.
  std::vector<int> row_multiplicity;
  // When not empty, argument k (in BatchedEinsum::arrays order) is marked private (read by one
  // row only, so replicated with it) or shared: arguments are split into a shared cell and a
  // private cell.
  std::vector<char> private_argument;
};

struct InducedGraph {
  int num_nodes = 0;
  bool directed = true;
  std::vector<int> offsets;  // CSR adjacency (out-neighbours when directed)
  std::vector<int> targets;
  std::vector<int> lab;  // initial ordered partition in nauty's lab/ptn form
  std::vector<int> ptn;
  // Node range of each class: [first[c], first[c+1]). Argument node k is the k-th array of
  // BatchedEinsum::arrays, index node k the k-th index in ASCII order, output node k batch row
  // k, argument-position node k operand k.
  std::array<int, kNodeClasses + 1> first{};

  int node(NodeClass c, int k) const { return first[static_cast<std::size_t>(c)] + k; }
  int count(NodeClass c) const {
    const auto i = static_cast<std::size_t>(c);
    return first[i + 1] - first[i];
  }
  std::size_t num_edges() const { return directed ? targets.size() : targets.size() / 2; }
};

// Builds the graph of a validated einsum.
InducedGraph build_induced_graph(const BatchedEinsum& e, const GraphOptions& options = {});

// How the canonical labeling is computed. Each method gives a different (each canonical)
// labeling, so the keys stored in databases are defined by one of them (kKeyLabeling).
enum class Labeling : std::uint8_t {
  nauty_sparse_digraph,  // sparsenauty on the paper's digraph, adjacencies invariant
  nauty_dense_digraph,   // densenauty on the paper's digraph, adjacencies invariant
  nauty_sparse,          // sparsenauty on the compact graph
  traces,                // Traces on the compact graph
};
std::string_view to_string(Labeling l);
std::optional<Labeling> parse_labeling(std::string_view s);
GraphLayout layout_of(Labeling l);

// The canonical labeling: result[p] is the node placed at canonical position p. The graph's
// layout must be layout_of(method).
std::vector<int> canonical_labeling(const InducedGraph& g, Labeling method);

}  // namespace einsumdb
