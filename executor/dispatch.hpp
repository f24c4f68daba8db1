// Choosing and running one transform: a candidate (strategy and parameters), the default a
// workload falls back to when nothing is known, and the textual KEY=VALUE form of a parameter
// (the CLI's --param, the Python module's keyword arguments). Dispatch is not tuning: the
// distributed runtime and the library's Engine run candidates without the tuner.
//
// Thread-safety: every function here is reentrant; execution of one Bound from several threads
// at once is safe (strategies keep their scratch per call or per thread).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "einsumdb/executor/execute.hpp"

namespace einsumdb {

// One transform to try, parameters in the workload's own names.
struct Candidate {
  std::string strategy;
  nlohmann::json params = nlohmann::json::object();

  bool operator==(const Candidate&) const = default;
};

// The transform run when the store knows nothing: the applicable strategy of the lowest
// Strategy::priority (batch_fused for rows that share an operand, then ttgt, loop_over_gemm,
// contraction_tree, loop_nest), with its default parameters.
Candidate default_candidate(const BatchedEinsum& e);

// Runs `c` on `bound`. When `stored` (it came from the database) and the executor refuses it
// (SpecError: parameters of another version, a hand-written record), `c` becomes
// default_candidate() with c's "threads", which runs instead, and `refused` receives the reason.
Results execute_or_default(const Bound& bound, Candidate& c, bool stored,
                           std::string* refused = nullptr);

// Applies "KEY=VALUE" to `params`: VALUE as JSON when it parses, as an index list for
// order/m/n/k when it is letters (order=ikj), as index:size for tile (tile=e:256) and block
// (block=i:32,j:32), otherwise as a string. Throws SpecError for text without KEY=.
void apply_param(nlohmann::json& params, const std::string& assignment);

}  // namespace einsumdb
