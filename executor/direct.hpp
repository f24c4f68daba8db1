// The "direct" strategy: one loop nest over the operands as they lie, planned once. For einsums
// so small that another strategy's set-up (packing tables, scratch tensors, a BLAS call) costs more
// than their arithmetic: a 2×2 matrix product is 8 multiply-adds, a few nanoseconds, where
// tensor_gemm spends microseconds on its tables and ttgt on its transposes. The plan is made when
// the workload is prepared; a run reads every operand through its own strides (no copy, no
// tensor) and writes the result where the caller says.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "einsumdb/canon/model.hpp"

namespace einsumdb {

// The loops DirectLoops plans, as its kernel (compiled once per instruction set, isa.hpp) reads
// them.
struct DirectPlan {
  static constexpr std::size_t kMaxIndices = 16;
  static constexpr std::size_t kMaxOperands = 8;
  Dtype dtype = Dtype::f64;
  JoinOp join = JoinOp::mul;
  AggOp agg = AggOp::sum;
  std::size_t operands = 0, indices = 0;
  std::array<std::int64_t, kMaxIndices> length{};  // per index: summed indices last
  std::size_t kept = 0;                            // the output's indices come first
  // Per operand and axis: the index it is indexed by (repeats: a diagonal).
  std::array<std::array<std::uint8_t, kMaxIndices>, kMaxOperands> axis_index{};
  std::array<std::size_t, kMaxOperands> rank{};
  std::array<std::uint8_t, kMaxIndices> out_index{};  // per output axis
};

class DirectLoops {
 public:
  // At most this many iteration points (the product of every index's length). A point costs
  // about 1-2 ns in these loops (scalar, strided), so 1024 points take about what another
  // strategy spends setting up (a few microseconds for a product through the engine: its plan,
  // scratch and packed panels); past that, packing and vector kernels, at a fraction of a
  // nanosecond per point, pay for their set-up.
  static constexpr std::int64_t kMaxPoints = 1024;
  static constexpr std::size_t kMaxIndices = DirectPlan::kMaxIndices;
  static constexpr std::size_t kMaxOperands = DirectPlan::kMaxOperands;

  // Why the direct loops do not apply: more points than kMaxPoints (or a symbolic length), too
  // many indices or operands, mixed dtypes, or a join/aggregation complex numbers lack. nullopt:
  // they do.
  static std::optional<std::string> rejects(const BatchedEinsum& e);

  // The plan for row 0 of `e` (which must be accepted by rejects; SpecError otherwise).
  explicit DirectLoops(const BatchedEinsum& e);

  Dtype dtype() const { return plan_.dtype; }
  std::size_t operands() const { return plan_.operands; }
  // The output's shape.
  const std::vector<std::int64_t>& shape() const { return shape_; }

  // out[...] = ⊕ over the summed indices of ⊗ of the operands. `data[k]` points at operand k's
  // first element, `strides[k]` at its element strides (one per axis; nullptr: row-major);
  // `out`, with `out_strides` (nullptr: row-major), receives the result (every element is
  // written). Thread-safe.
  void run(const void* const* data, const std::int64_t* const* strides, void* out,
           const std::int64_t* out_strides = nullptr) const;

 private:
  DirectPlan plan_;
  std::vector<std::int64_t> shape_;
};

}  // namespace einsumdb
