// Functional operands (Sec. 7 of the Feinsum paper): an operand that is an element-wise
// expression of one array, such as `2*A+1`, `sin(q)` or `A*A`. The einsum is canonicalized,
// looked up and tuned as its idealized form (the expression replaced by an array of the same
// shape and dtype); the executor evaluates the expression inside the pass that already reads the
// array (packing, transposition, or the innermost loop) instead of materializing it.
//
// Grammar: sums and differences of products and quotients of powers (`^`) of unary minus,
// numbers, the array's name, parentheses, and the functions sin cos tan exp log sqrt abs tanh.
// The expression is compiled to a small stack program evaluated over chunks of elements. Over a
// complex array it is evaluated in complex arithmetic (principal branches of log, sqrt and a
// power, as numpy's; abs the modulus, a complex number with no imaginary part).
#pragma once

#include <complex>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace einsumdb {

class Expression {
 public:
  // Throws SpecError naming the position in `text` at fault, or a second array name.
  static Expression parse(std::string_view text);

  const std::string& text() const { return text_; }
  // The one array the expression reads.
  const std::string& array() const { return array_; }

  double operator()(double x) const;
  std::complex<double> operator()(std::complex<double> x) const;
  // out[i] = f(in[i * stride]) for i < n; `out` must not alias `in` unless stride is 1. T: float,
  // double, std::complex<float> or std::complex<double>.
  template <typename T>
  void apply(const T* in, std::int64_t stride, T* out, std::int64_t n) const;

 private:
  enum class Op : std::uint8_t {
    x,
    constant,
    add,
    sub,
    mul,
    div,
    pow,
    neg,
    sin,
    cos,
    tan,
    exp,
    log,
    sqrt,
    abs,
    tanh
  };
  struct Instr {
    Op op;
    double value = 0;
  };
  friend class ExpressionParser;
  // Calls k with the function of a binary operation; false when `op` is not one.
  template <typename T, typename K>
  static bool with_binary(Op op, K&& k);
  // Calls k with the function of a unary operation (every operation but x, constant and the
  // binary ones).
  template <typename T, typename K>
  static void with_unary(Op op, K&& k);
  template <typename T>
  T evaluate(T x) const;
  std::string text_, array_;
  std::vector<Instr> program_;
  int depth_ = 0;  // the stack depth the program needs
};

// Functional operands of an einsum, by the name the batch uses for them.
using Functions = std::map<std::string, Expression>;

// Reads the optional "functions" member of spec JSON ({"F": "2*A+1", ...}), removes it from `j`,
// and completes `j` so that it describes the idealized einsum: every function name gets the
// shape and dtype of the array it reads. Throws SpecError naming the function at fault (a bad
// expression, an unknown array, a name that is also an array).
Functions take_functions(nlohmann::json& j);

}  // namespace einsumdb
