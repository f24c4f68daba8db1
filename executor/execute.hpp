// Executing one batched einsum on one process. Strategies are named kernels with a parameter
// space; each can say that it does not apply to a workload, and why.
//   reference — a plain loop nest over every index, in double precision: the correctness oracle;
//   ttgt      — transpose operands into GEMM layout, OpenBLAS ?gemm per batch label, transpose
//               back (binary mul/sum einsums without diagonal or private summed indices).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "canon/model.hpp"
#include "executor/tensor.hpp"

namespace einsumdb {

using Arrays = std::map<std::string, Tensor>;

// The length of every index, read from the arrays bound to the einsum (so symbolic lengths get
// their run-time values). Throws SpecError naming the array and axis that disagree with the
// spec or with another array, a missing array, or a dtype the executor cannot compute in.
std::map<char, std::int64_t> bind_lengths(const BatchedEinsum& e, const Arrays& arrays);

// The dtype of a row's result: the highest-ranked dtype of its operands.
Dtype result_dtype(const BatchedEinsum& e, std::size_t row);

// One result per batch row.
using Results = std::vector<Tensor>;

Results run_reference(const BatchedEinsum& e, const Arrays& arrays);

// nullopt when ttgt applies; otherwise the reason it does not.
std::optional<std::string> ttgt_rejects(const BatchedEinsum& e);
Results run_ttgt(const BatchedEinsum& e, const Arrays& arrays);

struct Strategy {
  std::string name;
  std::function<std::optional<std::string>(const BatchedEinsum&)> rejects;
  std::function<Results(const BatchedEinsum&, const Arrays&, const nlohmann::json& params)> run;
};

// The built-in strategies, reference first.
const std::vector<Strategy>& builtin_strategies();

}  // namespace einsumdb
