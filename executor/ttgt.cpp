// TTGT: Transpose-Transpose-GEMM-Transpose. Indices are classified as batch (in both operands
// and the result), M (left operand and result), N (right operand and result) and K (both
// operands, summed). Each operand is permuted into [batch, M, K] / [batch, K, N] (no copy when it
// already is), one OpenBLAS GEMM runs per batch point, and the [batch, M, N] result is permuted
// into the output's order (no copy when it already is).
#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

#include "executor/execute.hpp"

namespace einsumdb {
namespace {

struct Layout {
  std::string batch, m, n, k;
};

Layout classify(const BatchedEinsum& e) {
  const std::string &x = e.inputs[0], &y = e.inputs[1], &z = e.output;
  auto in = [](const std::string& s, char c) { return s.find(c) != std::string::npos; };
  Layout l;
  for (char c : z) {  // batch, M, N in the output's order
    if (in(x, c) && in(y, c))
      l.batch += c;
    else if (in(x, c))
      l.m += c;
    else
      l.n += c;
  }
  for (char c : x)
    if (in(y, c) && !in(z, c)) l.k += c;
  return l;
}

// Copies `t` (indexed by `from`) into a new tensor indexed by `to` (a permutation of `from`).
template <typename T>
Tensor permute(const Tensor& t, const std::string& from, const std::string& to,
               const std::map<char, std::int64_t>& len) {
  std::vector<std::int64_t> shape;
  for (char c : to) shape.push_back(len.at(c));
  Tensor out(t.dtype(), shape);
  const auto src_strides = t.strides();
  std::vector<std::int64_t> stride(to.size());
  for (std::size_t a = 0; a < to.size(); ++a) stride[a] = src_strides[from.find(to[a])];
  const T* src = t.data<T>();
  T* dst = out.data<T>();
  const std::size_t r = to.size();
  if (out.size() == 0) return out;
  if (r == 0) {
    dst[0] = src[0];
    return out;
  }
  std::vector<std::int64_t> counter(r, 0);
  std::int64_t offset = 0;
  const std::int64_t inner = r ? shape[r - 1] : 1, inner_stride = r ? stride[r - 1] : 0;
  for (std::int64_t k = 0; k < out.size(); k += inner) {
    for (std::int64_t i = 0; i < inner; ++i) dst[k + i] = src[offset + i * inner_stride];
    for (std::size_t a = r - 1; a-- > 0;) {
      offset += stride[a];
      if (++counter[a] < shape[a]) break;
      offset -= stride[a] * shape[a];
      counter[a] = 0;
    }
  }
  return out;
}

// Row-major C[m×n] = A[m×k] · B[k×n], all contiguous.
template <typename T>
void gemm(std::int64_t m, std::int64_t n, std::int64_t k, const T* a, const T* b, T* c) {
  const auto M = static_cast<blasint>(m), N = static_cast<blasint>(n), K = static_cast<blasint>(k);
  const blasint lda = std::max<blasint>(K, 1), ldb = std::max<blasint>(N, 1), ldc = ldb;
  if constexpr (std::is_same_v<T, double>)
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0, a, lda, b, ldb, 0.0, c,
                ldc);
  else
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a, lda, b, ldb, 0.0f, c,
                ldc);
}

std::int64_t product(const std::string& labels, const std::map<char, std::int64_t>& len) {
  std::int64_t p = 1;
  for (char c : labels) p *= len.at(c);
  return p;
}

template <typename T>
Tensor run_row(const BatchedEinsum& e, const Tensor& x, const Tensor& y,
               const std::map<char, std::int64_t>& len) {
  const Layout l = classify(e);
  const std::string xl = l.batch + l.m + l.k, yl = l.batch + l.k + l.n, zl = l.batch + l.m + l.n;
  const Tensor xp = e.inputs[0] == xl ? Tensor() : permute<T>(x, e.inputs[0], xl, len);
  const Tensor yp = e.inputs[1] == yl ? Tensor() : permute<T>(y, e.inputs[1], yl, len);
  const T* a = e.inputs[0] == xl ? x.data<T>() : xp.data<T>();
  const T* b = e.inputs[1] == yl ? y.data<T>() : yp.data<T>();
  const std::int64_t nb = product(l.batch, len), m = product(l.m, len), n = product(l.n, len),
                     k = product(l.k, len);
  for (std::int64_t dim : {m, n, k})
    if (dim > std::numeric_limits<blasint>::max())
      throw SpecError("ttgt: a GEMM dimension of " + std::to_string(dim) +
                      " exceeds what the BLAS can index");
  std::vector<std::int64_t> shape;
  for (char c : zl) shape.push_back(len.at(c));
  Tensor c(x.dtype(), shape);
  if (m > 0 && n > 0)
    for (std::int64_t i = 0; i < nb; ++i)
      gemm<T>(m, n, k, a + i * m * k, b + i * k * n, c.data<T>() + i * m * n);
  return zl == e.output ? std::move(c) : permute<T>(c, zl, e.output, len);
}

}  // namespace

std::optional<std::string> ttgt_rejects(const BatchedEinsum& e) {
  if (e.inputs.size() != 2)
    return "ttgt contracts two operands; this einsum has " + std::to_string(e.inputs.size());
  if (e.join != JoinOp::mul || e.agg != AggOp::sum)
    return "ttgt needs mul/sum (a GEMM); this einsum uses " + std::string(to_string(e.join)) + "/" +
           std::string(to_string(e.agg));
  for (std::size_t k = 0; k < 2; ++k) {
    const std::string& s = e.inputs[k];
    for (std::size_t a = 0; a < s.size(); ++a) {
      if (s.find(s[a]) != a)
        return "operand " + std::to_string(k) + " repeats index '" + std::string(1, s[a]) +
               "' (a diagonal)";
      if (e.inputs[1 - k].find(s[a]) == std::string::npos &&
          e.output.find(s[a]) == std::string::npos)
        return "index '" + std::string(1, s[a]) + "' is summed within operand " +
               std::to_string(k) + " alone";
    }
  }
  for (const auto& row : e.batch)
    if (e.arrays.at(row[0]).dtype != e.arrays.at(row[1]).dtype)
      return "the operands of a row have different dtypes";
  return std::nullopt;
}

Results run_ttgt(const BatchedEinsum& e, const Arrays& arrays) {
  if (const auto why = ttgt_rejects(e)) throw SpecError("ttgt does not apply: " + *why);
  const auto len = bind_lengths(e, arrays);
  Results out;
  for (const auto& row : e.batch) {
    const Tensor &x = arrays.at(row[0]), &y = arrays.at(row[1]);
    out.push_back(x.dtype() == Dtype::f32 ? run_row<float>(e, x, y, len)
                                          : run_row<double>(e, x, y, len));
  }
  return out;
}

const std::vector<Strategy>& builtin_strategies() {
  static const std::vector<Strategy> strategies{
      {"reference", [](const BatchedEinsum&) { return std::optional<std::string>(); },
       [](const BatchedEinsum& e, const Arrays& a, const nlohmann::json&) {
         return run_reference(e, a);
       }},
      {"ttgt", ttgt_rejects,
       [](const BatchedEinsum& e, const Arrays& a, const nlohmann::json&) {
         return run_ttgt(e, a);
       }},
  };
  return strategies;
}

}  // namespace einsumdb
