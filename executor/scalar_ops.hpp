// ⊗ and ⊕ on one pair of numbers, in double or complex<double>: the arithmetic of the loops
// that evaluate an einsum term by term (the reference and the direct strategy). Complex numbers
// have mul, add and sub as ⊗ and sum as ⊕ only (complex_rejects refuses the others).
#pragma once

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>

#include "einsumdb/canon/model.hpp"

namespace einsumdb::kernels {

inline double join(JoinOp op, double a, double b) {
  switch (op) {
    case JoinOp::mul:
      return a * b;
    case JoinOp::add:
      return a + b;
    case JoinOp::sub:
      return a - b;
    case JoinOp::sqdiff:
      return (a - b) * (a - b);
    case JoinOp::absdiff:
      return std::abs(a - b);
    case JoinOp::max:
      return std::max(a, b);
    case JoinOp::min:
      return std::min(a, b);
  }
  return 0;
}

inline std::complex<double> join(JoinOp op, std::complex<double> a, std::complex<double> b) {
  return op == JoinOp::add ? a + b : op == JoinOp::sub ? a - b : a * b;
}

// ⊕'s identity: what an output element aggregating no terms holds.
inline double identity(AggOp op) {
  switch (op) {
    case AggOp::sum:
      return 0;
    case AggOp::max:
      return -std::numeric_limits<double>::infinity();
    case AggOp::min:
      return std::numeric_limits<double>::infinity();
  }
  return 0;
}

inline double combine(AggOp op, double acc, double v) {
  switch (op) {
    case AggOp::sum:
      return acc + v;
    case AggOp::max:
      return std::max(acc, v);
    case AggOp::min:
      return std::min(acc, v);
  }
  return acc;
}

inline std::complex<double> combine(AggOp, std::complex<double> acc, std::complex<double> v) {
  return acc + v;
}

}  // namespace einsumdb::kernels
