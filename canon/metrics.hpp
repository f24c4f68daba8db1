// Work, data volume and timing statistics of a batched einsum: the one definition of each, for
// GFLOP/s, roofline and verification figures everywhere (tuner, run, store, planner, benches).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "einsumdb/canon/model.hpp"

namespace einsumdb {

// Floating-point operations of the b rows at the given index lengths. A product of 3+ operands
// under mul/sum counts the FLOPs of its cheapest pairwise order (what a contraction tree does:
// 2·M·N·K per matrix product); any other einsum counts one operation per operand (n − 1 joins and
// one aggregation) at every point of the iteration space. All counts are of real operations: where
// an array is complex, a complex multiply-add counts 8 (4 multiplications, 4 additions), four
// times a real one, and a complex addition 2.
double work_flops(const BatchedEinsum& e, const std::map<char, std::int64_t>& lengths);

// work_flops at the spec's own lengths; nullopt when a length is symbolic.
std::optional<double> flop_count(const BatchedEinsum& e);

// Bytes of every distinct input array plus the b outputs (in the widest input dtype): the data
// a single pass must move at least once. nullopt when a length is symbolic.
std::optional<double> footprint_bytes(const BatchedEinsum& e);

// The terms combined into one output element: the operands times the lengths of the summed
// indices (what a verification tolerance scales with).
double reduction_terms(const BatchedEinsum& e, const std::map<char, std::int64_t>& lengths);

}  // namespace einsumdb
