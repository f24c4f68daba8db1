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
//
// A product of a real operand x and a complex one y (of x's precision) needs no W: x·y's parts are
// x·y₀ and x·y₁, so y keeps its parts p as its last index and the real einsum x, y·p → z·p
// computes both at once, 4 real FLOPs per multiply-add where converting x to complex first would
// cost 8 and a pass over x (real_factor).
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
  int real = -1;      // the real factor (real_factor), or -1
  Dtype complex_dtype = Dtype::c128;
  std::vector<std::int64_t> shape;  // the complex result's
  Lengths lengths;                  // the real einsum's: the complex one's, and 2 for p and q
  // The complex result whose real form `real` is (sharing its memory).
  Tensor complex_result(const Tensor& real) const {
    return Tensor::reinterpret(real, complex_dtype, shape);
  }
};

// The real factor of row `row`: in a product of two operands whose result is complex, the real
// one, of the result's precision (its other operand complex); -1 where there is none. The real
// form reads it as the real array it is, wherever an einsum given to real_form has one; a strategy
// that would rather not converts it first (promoted_einsum, strategies.cpp): loop_nest where the
// parts do not run with the output (parts_run_with_output), tensor_gemm there and where it streams
// the row as complex rows or lines instead (tensor_gemm_reads_real_factor), ttgt where the
// complex operand's last index is summed (ttgt_reads_real_factor).
int real_factor(const BatchedEinsum& e, std::size_t row);

// Whether, in row `row`'s real form with a real factor, the complex operand's parts p run with the
// output's: that operand holds the output's unit-stride index (or the output is a scalar), so p
// joins that index in the output's runs. Where the real factor holds it instead, each run of the
// output alternates between the operands' indices, every element a tile's edge.
bool parts_run_with_output(const BatchedEinsum& e, std::size_t row);

// Why the real form cannot compute this einsum's complex rows: a ⊗ other than mul, add and sub,
// a ⊕ other than sum, a product of three or more operands, or no letter left for the parts.
// nullopt: it can. Requires every operand of a complex row but its real factor to share the row's
// dtype.
std::optional<std::string> real_form_rejects(const BatchedEinsum& e);

// The real form's einsum alone (operands contiguous, no data): which operand it expands, given
// the index lengths. Its arrays are named "~re0", "~re1", ... after the operands' positions.
RealForm real_form_layout(const BatchedEinsum& e, std::size_t row, const Lengths& len);

// Row `row` of `bound` (complex, every operand of the row's dtype but its real factor, no
// functional operand but that one) as a real einsum over views of its operands (a function of the
// real factor evaluated) and, for a product of complex operands, W, expanded on `threads` threads.
RealForm real_form(const Bound& bound, std::size_t row, int threads = 1);

}  // namespace einsumdb
