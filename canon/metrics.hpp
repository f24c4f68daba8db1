// Work and data volume of a batched einsum, for GFLOP/s and roofline figures.
#pragma once

#include <optional>

#include "canon/model.hpp"

namespace einsumdb {

// Floating-point operations: for each of the b rows, one operation per operand (n - 1 joins and
// one aggregation) at every point of the iteration space, the product of all index lengths
// (2·M·N·K for a matrix product). nullopt when a length is symbolic.
std::optional<double> flop_count(const BatchedEinsum& e);

// Bytes of every distinct input array plus the b outputs (in the widest input dtype): the data
// a single pass must move at least once. nullopt when a length is symbolic.
std::optional<double> footprint_bytes(const BatchedEinsum& e);

}  // namespace einsumdb
