// The data of a graph run: its inputs, built block by block (each rank builds or reads only the
// blocks it owns), and the whole graph executed in one process, the reference a distributed run
// is verified against.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "einsumdb/executor/dispatch.hpp"
#include "einsumdb/executor/execute.hpp"
#include "einsumdb/planner/eingraph.hpp"
#include "einsumdb/planner/placement.hpp"

namespace einsumdb {

// Which ranks read a graph's input files.
enum class InputReader {
  owners,  // each rank reads the blocks it owns from DIR on its own host
  root,    // rank 0 reads DIR on its host and sends every other rank its blocks
};

// Where a graph's inputs come from. Without `dir` every input is generated from `seed`; with it
// every input is DIR/NAME.npy, and a missing file is an error, unless `generate` names the input.
struct InputSource {
  std::string dir;
  std::uint64_t seed = 1;
  std::set<std::string> generate;  // generated from `seed` even though `dir` is set
  InputReader reader = InputReader::owners;
  // Whether input `name` is generated rather than read.
  bool generated(const std::string& name) const { return dir.empty() || generate.count(name) > 0; }
  // The file input `name` is read from, or "" when it is generated.
  std::string file_of(const std::string& name) const;
};

// The generated value of element `flat` (row-major) of input `name`: a function of the seed, the
// name and the position only, so any block of any input can be built on its own.
double input_value(std::uint64_t seed, std::string_view name, std::int64_t flat);

// Elements `region` of input `name` (of `t`'s shape and dtype), read or generated. Throws
// SpecError naming the file when it is missing, not .npy, or its shape or dtype is not the graph's.
Tensor input_region(const InputSource& src, const std::string& name, const EinGraph::Tensor& t,
                    const Region& region);

// A transform for a kernel, and where it came from ("best known", "default", ...).
struct KernelChoice {
  Candidate transform;
  std::string source;
};
using ChooseKernel = std::function<KernelChoice(const BatchedEinsum&)>;

// Runs `choice` on `bound` with `threads`. When a stored transform (any source but "default")
// is refused — another version's parameters, a hand-written record — `choice` becomes the
// default, which runs instead, and `refused` (when given) receives the reason.
Results execute_kernel(const Bound& bound, KernelChoice& choice, int threads,
                       std::string* refused = nullptr);

// One node (any number of operands) as a one-row batched einsum; arrays are named T0, T1, ...
// by operand position, so a tensor read twice is bound twice.
BatchedEinsum node_einsum(const EinGraph& g, const EinGraph::Node& n);

// Checks that input `name`'s file holds `t`'s shape and dtype (nothing when it is generated);
// throws SpecError naming the file otherwise.
void check_input_file(const InputSource& src, const std::string& name, const EinGraph::Tensor& t);

// Runs the graph in this process on the full inputs; returns every node's result.
std::map<std::string, Tensor> run_graph_locally(const EinGraph& g, const InputSource& src,
                                                const ChooseKernel& choose, int threads = 1);
// The same on inputs already in memory (`inputs` holds every graph input whole).
std::map<std::string, Tensor> run_graph_locally(const EinGraph& g,
                                                std::map<std::string, Tensor> inputs,
                                                const ChooseKernel& choose, int threads = 1);

}  // namespace einsumdb
