// Partition vectors and the communication cost model of EinDecomp (Sec. 6–7 of the EinDecomp
// paper). A binary EinSum Z[z] <- ⊕ ⊗(X[x], Y[y]) is split by a partition vector d over its
// join labels (the distinct labels of x then y, in first appearance): each label l is cut d[l]
// ways, equal labels equally. Costs count floating-point numbers moved, as an upper bound:
// into the join, into the aggregation, and to re-partition a producer's output for a consumer.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace einsumdb {

using PartitionVector = std::map<char, std::int64_t>;  // label -> number of parts (a power of two)

// The distinct labels of x then y, in order of first appearance.
std::string join_labels(const std::string& x, const std::string& y);

// Every partition vector over `labels` with power-of-two entries whose product is `procs` (a
// power of two), so the join yields exactly `procs` pieces of work, and no label is cut into
// more parts than its bound. Deterministic order.
std::vector<PartitionVector> partition_vectors(const std::string& labels,
                                               const std::map<char, std::int64_t>& bounds,
                                               std::int64_t procs);

// Into the join: procs × (n_X + n_Y), n_X the elements of one X sub-tensor (y empty: unary).
double join_cost(const std::string& x, const std::string& y, const PartitionVector& d,
                 const std::map<char, std::int64_t>& bounds, std::int64_t procs);

// Into the aggregation: procs / n_agg × (n_agg − 1) × n_Z, n_agg the parts of the aggregated
// labels (those not in z) and n_Z the elements of one kernel result.
double aggregation_cost(const std::string& x, const std::string& y, const std::string& z,
                        const PartitionVector& d, const std::map<char, std::int64_t>& bounds,
                        std::int64_t procs);

// Re-partitioning a tensor of bound b from the producer's partitioning dz into the consumer's
// dx (both per axis): with n_p = Π b/dz, n_c = Π b/dx, n_int = Π min(b/dz, b/dx) and n = Π b,
// (n_c/n_int − 1)·(n/n_c)·(n_c + n_p), plus n_p·n/n_c when n_p ≠ n_int; 0 when dz == dx.
double repartition_cost(const std::vector<std::int64_t>& b, const std::vector<std::int64_t>& dz,
                        const std::vector<std::int64_t>& dx);

}  // namespace einsumdb
