// A complex row of an einsum computed as a real one, so that the real kernels (BLIS's
// micro-kernel in tensor_gemm, the vectorized loops of loop_nest) compute complex numbers too.
//
// A complex tensor in memory is a real one with a last axis of 2: its real and imaginary parts.
// Call that axis's index p (a letter the einsum does not use). Where ⊗ is add or sub, complex
// numbers combine part by part: every operand and the output take p as their last index, and the
// real einsum computes both parts at once. Where ⊗ is mul, a product of two complex numbers mixes
// the parts:
//
//   (x₀ + i·x₁)(y₀ + i·y₁) = (x₀y₀ − x₁y₁) + i·(x₀y₁ + x₁y₀)
//                          = Σ_q x_q · W[q][p],   W = [[y₀, y₁], [−y₁, y₀]]  (row q, column p).
//
// So one operand y is expanded into W, with two axes of 2 after its own: q, summed with x's
// parts, and p, the output's parts. The real einsum x·q, y·q·p → z·p sums twice the elements and
// writes twice the columns, 8 real FLOPs per complex multiply-add as the complex product has, no
// more: the 1m method (F. G. Van Zee and R. A. van de Geijn, "Implementing high-performance
// complex matrix multiplication via the 1m method", SISC 2020), here at the level of tensors, so
// the real strategy never learns that the numbers were complex. W costs one pass over y and twice
// its memory; which operand is expanded, real_form.cpp says. A product of one operand (a copy or a
// sum) combines part by part; products of three or more complex operands are not formed here.
//
// In a product, the other operand x keeps its parts q as its last index, at unit stride: its own
// fastest index then lies 2 apart, with the parts below it (tensor_gemm reads such an index along
// whole lines all the same: blocking.hpp's parts_below).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "einsumdb/executor/execute.hpp"

namespace einsumdb {

struct RealForm {
  BatchedEinsum e;    // one row, real operands
  Arrays arrays;      // real views of the complex operands, and W
  char part = 0;      // p: the parts of the output (and of every operand but W)
  char summed = 0;    // q: the parts summed in a product (0 where none is)
  int expanded = -1;  // the operand expanded into W, or -1
  Dtype complex_dtype = Dtype::c128;
  std::vector<std::int64_t> shape;  // the complex result's
  Lengths lengths;                  // the real einsum's: the complex one's, and 2 for p and q
  // The complex result whose real form `real` is (sharing its memory).
  Tensor complex_result(const Tensor& real) const {
    return Tensor::reinterpret(real, complex_dtype, shape);
  }
};

// Why the real form cannot compute this einsum's complex rows: a ⊗ other than mul, add and sub,
// a ⊕ other than sum, a product of three or more operands, or no letter left for the parts.
// nullopt: it can. Requires every operand of a complex row to share the row's dtype.
std::optional<std::string> real_form_rejects(const BatchedEinsum& e);

// The real form's einsum alone (operands contiguous, no data): which operand it expands, given
// the index lengths. Its arrays are named "~re0", "~re1", ... after the operands' positions.
RealForm real_form_layout(const BatchedEinsum& e, std::size_t row, const Lengths& len);

// Row `row` of `bound` (complex, every operand of the row's dtype, no functional operand) as a
// real einsum over views of its operands and, for a product, W, expanded on `threads` threads.
RealForm real_form(const Bound& bound, std::size_t row, int threads = 1);

}  // namespace einsumdb
