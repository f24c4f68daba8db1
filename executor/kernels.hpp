// Building blocks the strategies share (internal to executor/): threads, OpenBLAS calls on
// strided matrices, and packing an operand into a new layout with its function applied.
#pragma once

#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <limits>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "einsumdb/core/error.hpp"
#include "einsumdb/executor/deadline.hpp"
#include "einsumdb/executor/execute.hpp"
#include "einsumdb/executor/permute.hpp"
#include "einsumdb/executor/small_gemm.hpp"

namespace einsumdb::kernels {

// Sets OpenBLAS's thread count for a scope and restores it after.
class BlasThreads {
 public:
  explicit BlasThreads(int n) : saved_(openblas_get_num_threads()) {
    if (n != saved_) openblas_set_num_threads(n);
  }
  ~BlasThreads() {
    if (openblas_get_num_threads() != saved_) openblas_set_num_threads(saved_);
  }
  BlasThreads(const BlasThreads&) = delete;
  BlasThreads& operator=(const BlasThreads&) = delete;

 private:
  int saved_;
};

// Stops OpenBLAS's worker threads where set_blas_calls_exclusive(true) allows it (execute.hpp
// says why), before parallel_for starts threads of its own.
void quiet_blas_pool();

// Calls f(lo, hi) on `threads` contiguous slices of [0, n); the calling thread takes the first.
// An exception in any slice is rethrown after all have finished. The slices run under the
// calling thread's deadline (deadline.hpp).
template <typename F>
void parallel_for(std::int64_t n, int threads, F&& f) {
  const std::int64_t t = std::max<std::int64_t>(1, std::min<std::int64_t>(threads, n));
  if (t <= 1) {
    if (n > 0) f(std::int64_t{0}, n);
    return;
  }
  quiet_blas_pool();
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(t));
  std::vector<std::thread> pool;
  const auto* deadline = detail::deadline_flag();
  auto slice = [&](std::int64_t k) {
    detail::InheritDeadline inherit(deadline);
    try {
      f(n * k / t, n * (k + 1) / t);
    } catch (...) {
      errors[static_cast<std::size_t>(k)] = std::current_exception();
    }
  };
  for (std::int64_t k = 1; k < t; ++k) pool.emplace_back(slice, k);
  slice(0);
  for (auto& th : pool) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// A sum of products split among threads where the result is small and the sum long (a GEMM of
// 156 × 296 summed over 97344 elements: OpenBLAS's threads would split the short sides): share s
// of `threads` is summed by thread s, the first into the result, each other into a buffer of its
// own, at most this many elements, so that the buffers stay small beside the work.
inline constexpr std::int64_t kSplitSumElements = std::int64_t{1} << 20;

// Runs share(s, to, rs, cs) for s < threads on as many threads, share 0 writing the m × n result
// at c (strides c_rs, c_cs) and share s > 0 a row-major buffer of its own; then adds the buffers
// to c. The buffers, (threads − 1)·m·n elements, are a tensor: a large one reuses a block that
// an earlier tensor freed, its pages already faulted in (tensor.cpp), where memory from glibc's
// heap may have been given back to the kernel and be faulted in and zeroed again.
template <typename T, typename Share>
void split_sum(int threads, std::int64_t m, std::int64_t n, T* c, std::int64_t c_rs,
               std::int64_t c_cs, Share&& share) {
  const std::int64_t mn = m * n;
  Tensor buffers(dtype_of<T>(), {(threads - 1) * mn}, Tensor::Uninitialized{});
  T* const partial = buffers.data<T>();
  parallel_for(threads, threads, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t s = lo; s < hi; ++s) {
      if (s == 0)
        share(s, c, c_rs, c_cs);
      else
        share(s, partial + (s - 1) * mn, n, std::int64_t{1});
    }
  });
  parallel_for(m, threads, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i)
      for (std::int64_t s = 1; s < threads; ++s) {
        const T* from = partial + (s - 1) * mn + i * n;
        T* to = c + i * c_rs;
        for (std::int64_t j = 0; j < n; ++j) to[j * c_cs] += from[j];
      }
  });
}

inline std::int64_t product(const std::string& labels, const std::map<char, std::int64_t>& len) {
  std::int64_t p = 1;
  for (char c : labels) p *= len.at(c);
  return p;
}

// The elements of a tensor of `shape`.
inline std::int64_t product(const std::vector<std::int64_t>& shape) {
  std::int64_t p = 1;
  for (auto n : shape) p *= n;
  return p;
}

inline bool contains(const std::string& s, char c) {
  return s.find(c) != std::string::npos;
}

// Up to `n` index letters the einsum does not use (a-z, then A-Z): names for the indices a
// strategy adds (batch_fused's stacking index, the real form's parts). Fewer where it uses nearly
// all of them.
inline std::string unused_letters(const BatchedEinsum& e, std::size_t n) {
  std::string used = e.output, free;
  for (const auto& in : e.inputs) used += in;
  for (char c = 'a'; c <= 'z' && free.size() < n; ++c)
    if (!contains(used, c)) free += c;
  for (char c = 'A'; c <= 'Z' && free.size() < n; ++c)
    if (!contains(used, c)) free += c;
  return free;
}

// Element strides of each label of `labels` in a row-major tensor indexed by `layout`
// (repeated labels add their strides: a diagonal); 0 for a label the layout lacks. Axes whose
// label is not in `labels` are ignored.
inline std::vector<std::int64_t> label_strides(const std::string& labels, const std::string& layout,
                                               const std::vector<std::int64_t>& tensor_strides) {
  std::vector<std::int64_t> s(labels.size(), 0);
  for (std::size_t a = 0; a < layout.size(); ++a)
    if (const auto at = labels.find(layout[a]); at != std::string::npos) s[at] += tensor_strides[a];
  return s;
}

inline void check_blas_dim(std::int64_t dim, std::string_view strategy) {
  if (dim > std::numeric_limits<blasint>::max())
    throw SpecError(std::string(strategy) + ": a GEMM dimension of " + std::to_string(dim) +
                    " exceeds what the BLAS can index");
}

// A matrix view: element (r, c) at p[r * rs + c * cs].
template <typename T>
struct View {
  const T* p;
  std::int64_t rs, cs;
};

// Strides of a rows×cols matrix with its length-1 axes given the strides the BLAS accepts.
inline void canonical_strides(std::int64_t rows, std::int64_t cols, std::int64_t& rs,
                              std::int64_t& cs) {
  if (rows == 1 && cols == 1)
    rs = cs = 1;
  else if (rows == 1)
    rs = cs == 1 ? cols : 1;
  else if (cols == 1)
    cs = rs == 1 ? rows : 1;
}

// How a row-major BLAS call reads a rows×cols matrix with these strides: NoTrans with ld = rs
// when cs is 1, Trans with ld = cs when rs is 1. False when neither holds.
inline bool blas_operand(std::int64_t rows, std::int64_t cols, std::int64_t rs, std::int64_t cs,
                         CBLAS_TRANSPOSE& t, std::int64_t& ld) {
  canonical_strides(rows, cols, rs, cs);
  if (cs == 1 && rs >= std::max<std::int64_t>(cols, 1)) {
    t = CblasNoTrans, ld = rs;
    return true;
  }
  if (rs == 1 && cs >= std::max<std::int64_t>(rows, 1)) {
    t = CblasTrans, ld = cs;
    return true;
  }
  return false;
}

// A product C[m×n] = A[m×k] · B[k×n] as gemm() hands it to a row-major BLAS call: a C that is not
// row-major is computed as Cᵀ = Bᵀ·Aᵀ (`exchanged`: m and n, A and B swapped, each view
// transposed), and each operand is read NoTrans (ld: its row stride) or Trans (ld: its column
// stride). `ok` is false when some matrix has no unit stride the BLAS can use.
template <typename T>
struct BlasCall {
  std::int64_t m, n;
  View<T> a, b;
  std::int64_t c_rs, c_cs;
  CBLAS_TRANSPOSE ta = CblasNoTrans, tb = CblasNoTrans;
  std::int64_t lda = 0, ldb = 0;
  bool exchanged = false, ok = false;
};

template <typename T>
BlasCall<T> blas_call(std::int64_t m, std::int64_t n, std::int64_t k, View<T> a, View<T> b,
                      std::int64_t c_rs, std::int64_t c_cs) {
  canonical_strides(m, n, c_rs, c_cs);
  BlasCall<T> x{m, n, a, b, c_rs, c_cs};
  if (!(c_cs == 1 && c_rs >= std::max<std::int64_t>(n, 1))) {  // Cᵀ[n×m] = Bᵀ[n×k] · Aᵀ[k×m]
    x = {n, m, {b.p, b.cs, b.rs}, {a.p, a.cs, a.rs}, c_cs, c_rs};
    x.exchanged = true;
  }
  x.ok = x.c_cs == 1 && x.c_rs >= std::max<std::int64_t>(x.n, 1) &&
         blas_operand(x.m, k, x.a.rs, x.a.cs, x.ta, x.lda) &&
         blas_operand(k, x.n, x.b.rs, x.b.cs, x.tb, x.ldb);
  return x;
}

// Whether gemm() below can run on these views without copying.
inline bool gemm_in_place(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t a_rs,
                          std::int64_t a_cs, std::int64_t b_rs, std::int64_t b_cs,
                          std::int64_t c_rs, std::int64_t c_cs) {
  return blas_call<double>(m, n, k, {nullptr, a_rs, a_cs}, {nullptr, b_rs, b_cs}, c_rs, c_cs).ok;
}

// y[rows] (+)= M[rows×cols] · x[cols] with strided x and y; false (nothing computed) when the
// matrix has no unit stride or a vector stride is 0.
template <typename T>
bool gemv(std::int64_t rows, std::int64_t cols, View<T> mat, const T* x, std::int64_t incx, T* y,
          std::int64_t incy, bool accumulate) {
  if (rows < 1 || cols < 1 || incx < 1 || incy < 1) return false;
  if (rows == 1) mat.rs = std::max<std::int64_t>(cols, 1);
  CBLAS_ORDER order;
  std::int64_t ld;
  if (mat.cs == 1 && mat.rs >= cols)
    order = CblasRowMajor, ld = mat.rs;
  else if (mat.rs == 1 && mat.cs >= rows)
    order = CblasColMajor, ld = mat.cs;
  else
    return false;
  for (auto d : {rows, cols, ld, incx, incy}) check_blas_dim(d, "gemv");
  const auto R = static_cast<blasint>(rows), C = static_cast<blasint>(cols);
  const auto L = static_cast<blasint>(ld), IX = static_cast<blasint>(incx),
             IY = static_cast<blasint>(incy);
  if constexpr (std::is_same_v<T, double>) {
    cblas_dgemv(order, CblasNoTrans, R, C, 1.0, mat.p, L, x, IX, accumulate ? 1.0 : 0.0, y, IY);
  } else if constexpr (std::is_same_v<T, float>) {
    cblas_sgemv(order, CblasNoTrans, R, C, 1.0f, mat.p, L, x, IX, accumulate ? 1.0f : 0.0f, y, IY);
  } else {  // complex: the scalars go by address
    const T one(1), beta(accumulate ? 1 : 0);
    if constexpr (std::is_same_v<T, std::complex<double>>)
      cblas_zgemv(order, CblasNoTrans, R, C, &one, mat.p, L, x, IX, &beta, y, IY);
    else
      cblas_cgemv(order, CblasNoTrans, R, C, &one, mat.p, L, x, IX, &beta, y, IY);
  }
  return true;
}

// small_gemm() on BLAS-addressable views when it fits: A is read as it lies (libxsmm takes it
// transposed), a transposed B — the small operand — is copied into row-major order first, when
// at least 256 rows of A reuse the copy (the copy is a pass over B at every call, which only
// enough rows of A, each reading all of B, amortize: a copy of a 32×48 B before each 64-row
// product cost more than reading B transposed saved). Only on one BLAS thread: with
// more, the call is OpenBLAS's to parallelize.
template <typename T>
bool small_gemm_view(std::int64_t m, std::int64_t n, std::int64_t k, View<T> a, CBLAS_TRANSPOSE ta,
                     std::int64_t lda, View<T> b, CBLAS_TRANSPOSE tb, std::int64_t ldb, T* c,
                     std::int64_t ldc, bool accumulate) {
  if constexpr (is_complex_v<T>) {
    return false;  // libxsmm's kernels are real
  } else {
    if (k > kSmallGemmMax || (n > kSmallGemmMax && m > kSmallGemmMax) ||
        openblas_get_num_threads() != 1)
      return false;
    const T* pb = b.p;
    if (tb != CblasNoTrans) {
      if (n > kSmallGemmMax || m < 256) return false;
      thread_local std::vector<T> copy;
      copy.resize(static_cast<std::size_t>(k * n));
      for (std::int64_t r = 0; r < k; ++r)
        for (std::int64_t q = 0; q < n; ++q) copy[r * n + q] = b.p[r * b.rs + q * b.cs];
      pb = copy.data(), ldb = n;
    }
    return small_gemm(m, n, k, a.p, lda, ta != CblasNoTrans, pb, ldb, c, ldc, accumulate);
  }
}

// C[m×n] (+)= A[m×k] · B[k×n] on strided views, in place: each matrix needs a unit stride along
// one of its axes (check with gemm_in_place first). A column-major C is computed as Cᵀ = Bᵀ·Aᵀ.
// `three_m`: complex products by OpenBLAS's ?gemm3m, the 3M method: three real products where
// the complex product is four, (a₀ + a₁)(b₀ + b₁) − a₀b₀ − a₁b₁ for the imaginary part. Its error
// is bounded by |a||b| as a whole rather than part by part (an imaginary part far smaller than
// its real part loses relative accuracy), and it pays only on large products: which is faster
// the tuner measures (ttgt and loop_over_gemm's "gemm3m"). Real products ignore it.
template <typename T>
void gemm(std::int64_t m, std::int64_t n, std::int64_t k, View<T> a, View<T> b, T* c,
          std::int64_t c_rs, std::int64_t c_cs, bool accumulate, bool three_m = false) {
  if (m == 0 || n == 0) return;
  canonical_strides(m, n, c_rs, c_cs);
  if (k == 0) {
    if (!accumulate)
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) c[i * c_rs + j * c_cs] = T(0);
    return;
  }
  // A matrix-vector product goes to ?gemv, which streams the matrix once (?gemm with one
  // column packs it first).
  if (n == 1 && gemv<T>(m, k, a, b.p, b.rs, c, c_rs, accumulate)) return;
  if (m == 1 && gemv<T>(n, k, {b.p, b.cs, b.rs}, a.p, a.cs, c, c_cs, accumulate)) return;
  const BlasCall<T> x = blas_call(m, n, k, a, b, c_rs, c_cs);
  EINSUMDB_ASSERT(x.ok, "gemm called on views the BLAS cannot address");
  if (small_gemm_view(x.m, x.n, k, x.a, x.ta, x.lda, x.b, x.tb, x.ldb, c, x.c_rs, accumulate))
    return;
  for (auto d : {x.m, x.n, k, x.lda, x.ldb, x.c_rs}) check_blas_dim(d, "gemm");
  const auto M = static_cast<blasint>(x.m), N = static_cast<blasint>(x.n),
             K = static_cast<blasint>(k), LDA = static_cast<blasint>(x.lda),
             LDB = static_cast<blasint>(x.ldb), LDC = static_cast<blasint>(x.c_rs);
  const T beta = accumulate ? T(1) : T(0);
  if constexpr (std::is_same_v<T, double>) {
    cblas_dgemm(CblasRowMajor, x.ta, x.tb, M, N, K, 1.0, x.a.p, LDA, x.b.p, LDB, beta, c, LDC);
  } else if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, x.ta, x.tb, M, N, K, 1.0f, x.a.p, LDA, x.b.p, LDB, beta, c, LDC);
  } else {  // complex: the scalars go by address; no conjugation (einsum multiplies as is)
    const T one(1);
    if constexpr (std::is_same_v<T, std::complex<double>>)
      (three_m ? cblas_zgemm3m : cblas_zgemm)(CblasRowMajor, x.ta, x.tb, M, N, K, &one, x.a.p, LDA,
                                              x.b.p, LDB, &beta, c, LDC);
    else
      (three_m ? cblas_cgemm3m : cblas_cgemm)(CblasRowMajor, x.ta, x.tb, M, N, K, &one, x.a.p, LDA,
                                              x.b.p, LDB, &beta, c, LDC);
  }
}

// For i < nb: gemm() on the views moved by i·a_step, i·b_step, i·c_step. Small products whose B
// needs no copy go to libxsmm as one batch (its kernels looked up once for all points), the
// others to gemm() point by point.
template <typename T>
void gemm_batch(std::int64_t nb, std::int64_t m, std::int64_t n, std::int64_t k, View<T> a,
                std::int64_t a_step, View<T> b, std::int64_t b_step, T* c, std::int64_t c_rs,
                std::int64_t c_cs, std::int64_t c_step, bool accumulate, bool three_m = false) {
  if constexpr (!is_complex_v<T>) {  // libxsmm's kernels are real
    if (nb > 1 && m > 1 && n > 1 && k > 0 && openblas_get_num_threads() == 1) {
      const BlasCall<T> x = blas_call(m, n, k, a, b, c_rs, c_cs);
      const std::int64_t as = x.exchanged ? b_step : a_step, bs = x.exchanged ? a_step : b_step;
      if (x.ok && x.tb == CblasNoTrans &&
          small_gemm_batch(nb, x.m, x.n, k, x.a.p, x.lda, x.ta != CblasNoTrans, as, x.b.p, x.ldb,
                           bs, c, x.c_rs, c_step, accumulate))
        return;
    }
  }
  for (std::int64_t i = 0; i < nb; ++i)
    gemm<T>(m, n, k, {a.p + i * a_step, a.rs, a.cs}, {b.p + i * b_step, b.rs, b.cs}, c + i * c_step,
            c_rs, c_cs, accumulate, three_m);
}

// dst[i] = src[i] for i < n, in pieces of 2 KiB: glibc's memmove copies long runs with
// `rep movsb`, which AMD's cores run far slower than vector loads and stores where source and
// destination are not aligned alike (bench/expression_bench times both: copy against copy_run).
template <typename T>
inline void copy_run(const T* src, std::int64_t n, T* dst) {
  constexpr std::int64_t kPiece = 2048 / sizeof(T);
  for (std::int64_t at = 0; at < n; at += kPiece)
    std::copy(src + at, src + std::min(n, at + kPiece), dst + at);
}

// Copies of at least this many elements split among threads where the caller has several
// (copy_strided, copy_into_strided): a copy runs at memory speed, which one core of a server
// does not reach alone, and starting a thread (tens of µs) is then under a tenth of the copy
// (2^20 doubles, 16 MiB read and written, take 0.5-0.8 ms at 20-30 GB/s).
inline constexpr std::int64_t kThreadedCopyElements = std::int64_t{1} << 20;

// Runs copy(lo, hi, axis) over `threads` ranges of one axis of `shape`. The axis is the one
// farthest apart in both layouts (the largest of its two strides' smaller), so that each thread
// reads and writes blocks of its own: split along one layout's unit stride, each thread would take
// part of every run of that layout, and both would touch every page of it. Where that axis is the
// unit stride of either layout (a 2-D transpose), the ranges hold whole cache lines of it:
// copy_layout transposes in blocks of a line, and a range ending mid-line leaves both threads
// partial blocks at the seam.
template <typename T, typename Copy>
void split_copy(const std::vector<std::int64_t>& shape,
                const std::vector<std::int64_t>& src_strides,
                const std::vector<std::int64_t>& dst_strides, int threads, Copy&& copy) {
  std::size_t axis = 0;
  std::int64_t apart = -1;
  for (std::size_t a = 0; a < shape.size(); ++a) {
    const std::int64_t d = std::min(std::abs(src_strides[a]), std::abs(dst_strides[a]));
    if (shape[a] > 1 && d > apart) axis = a, apart = d;
  }
  const std::int64_t n = shape.empty() ? 1 : shape[axis];
  const std::int64_t step =
      apart == 1 ? std::max<std::int64_t>(1, 64 / std::int64_t{sizeof(T)}) : 1;
  parallel_for((n + step - 1) / step, threads, [&](std::int64_t lo, std::int64_t hi) {
    copy(lo * step, std::min(n, hi * step), axis);
  });
}

// dst (contiguous, row-major `shape`) = f(src) read with element `stride` per axis. Without a
// function it is copy_layout's permutation; with one, f runs along the last axis, run by run.
// `whole_elements`: those of the copy this one is a range of (for copy_layout's choice of
// streaming stores).
template <typename T>
void copy_strided_range(const T* src, const std::vector<std::int64_t>& shape_in,
                        const std::vector<std::int64_t>& stride_in, T* dst, const Expression* f,
                        std::int64_t whole_elements) {
  const std::int64_t total = product(shape_in);
  if (total == 0) return;
  const auto whole_bytes = static_cast<std::size_t>(whole_elements) * sizeof(T);
  if constexpr (is_complex_v<T>) {
    EINSUMDB_ASSERT(!f,
                    "functions of complex arrays are evaluated before a strategy runs (promoted)");
    copy_layout(src, stride_in, dst, row_major_strides(shape_in), shape_in, sizeof(T), whole_bytes);
    return;
  }
  // Trailing axes that are contiguous in src too are one run (a function is then evaluated over
  // whole rows of a block, not over each row of its last axis).
  std::vector<std::int64_t> shape = shape_in, stride = stride_in;
  while (shape.size() >= 2 && stride[shape.size() - 2] == stride.back() * shape.back()) {
    shape[shape.size() - 2] *= shape.back();
    stride[stride.size() - 2] = stride.back();
    shape.pop_back(), stride.pop_back();
  }
  const std::size_t r = shape.size();
  const std::int64_t inner = r ? shape[r - 1] : 1, inner_stride = r ? stride[r - 1] : 1;
  // Short runs: gathered first, then f evaluated once over the whole of dst (in place), not
  // once per run: an evaluation's fixed cost (walking the expression, its loop's start and
  // remainder) is then paid once rather than for every few elements, and its loop runs long
  // enough to vectorize (build/bin/expression_bench times both: evaluate_runs_of_3 against
  // pack_runs_of_3).
  if (!f || (inner < 64 && total > inner)) {
    copy_layout(src, stride, dst, row_major_strides(shape), shape, sizeof(T), whole_bytes);
    if (f) f->apply(dst, 1, dst, total);
    return;
  }
  std::vector<std::int64_t> counter(r, 0);
  std::int64_t offset = 0;
  for (std::int64_t k = 0; k < total; k += inner) {
    f->apply(src + offset, inner_stride, dst + k, inner);
    for (std::size_t a = r ? r - 1 : 0; a-- > 0;) {
      offset += stride[a];
      if (++counter[a] < shape[a]) break;
      offset -= stride[a] * shape[a];
      counter[a] = 0;
    }
  }
}

// copy_strided_range over the whole copy, on up to `threads` threads (split_copy).
template <typename T>
void copy_strided(const T* src, const std::vector<std::int64_t>& shape,
                  const std::vector<std::int64_t>& stride, T* dst, const Expression* f,
                  int threads = 1) {
  const std::int64_t total = product(shape);
  if (total == 0) return;
  if (threads <= 1 || total < kThreadedCopyElements)
    return copy_strided_range(src, shape, stride, dst, f, total);
  split_copy<T>(shape, stride, row_major_strides(shape), threads,
                [&](std::int64_t lo, std::int64_t hi, std::size_t axis) {
                  std::vector<std::int64_t> part = shape;
                  part[axis] = hi - lo;
                  copy_strided_range(src + lo * stride[axis], part, stride,
                                     dst + lo * (total / shape[axis]), f, total);
                });
}

// The inverse of copy_strided without a function: contiguous row-major src of `shape` into dst
// with element `stride` per axis (`whole_elements`: of the tensor dst is a part of, if larger),
// on up to `threads` threads (split_copy).
template <typename T>
void copy_into_strided(const T* src, const std::vector<std::int64_t>& shape, T* dst,
                       const std::vector<std::int64_t>& stride, std::int64_t whole_elements = 0,
                       int threads = 1) {
  const std::int64_t total = product(shape);
  if (total == 0) return;
  const auto whole_bytes = static_cast<std::size_t>(std::max(whole_elements, total)) * sizeof(T);
  const auto from = row_major_strides(shape);
  if (threads <= 1 || total < kThreadedCopyElements)
    return copy_layout(src, from, dst, stride, shape, sizeof(T), whole_bytes);
  split_copy<T>(shape, from, stride, threads,
                [&](std::int64_t lo, std::int64_t hi, std::size_t axis) {
                  std::vector<std::int64_t> part = shape;
                  part[axis] = hi - lo;
                  copy_layout(src + lo * from[axis], from, dst + lo * stride[axis], stride, part,
                              sizeof(T), whole_bytes);
                });
}

// Row-major element strides of a tensor indexed by `labels`.
inline std::vector<std::int64_t> row_major_strides(const std::string& labels,
                                                   const std::map<char, std::int64_t>& len) {
  std::vector<std::int64_t> s(labels.size(), 1);
  for (std::size_t a = labels.size(); a-- > 1;) s[a - 1] = s[a] * len.at(labels[a]);
  return s;
}

// Element strides, in the order `to`, of a row-major tensor indexed by `from` with these
// axis strides (`to` is a permutation of `from`).
inline std::vector<std::int64_t> permuted_strides(const std::string& from, const std::string& to,
                                                  const std::vector<std::int64_t>& strides) {
  std::vector<std::int64_t> s(to.size());
  for (std::size_t a = 0; a < to.size(); ++a) s[a] = strides[from.find(to[a])];
  return s;
}

// Copies operand x (its array indexed by `from`, no repeated labels) into `dst`, row-major in
// the order `to` (a permutation of `from`), applying the operand's function on the way.
template <typename T>
void pack(const Bound::Operand& x, const std::string& from, const std::string& to,
          const std::map<char, std::int64_t>& len, T* dst) {
  std::vector<std::int64_t> shape;
  for (char c : to) shape.push_back(len.at(c));
  copy_strided(x.tensor->data<T>(), shape, permuted_strides(from, to, x.tensor->strides()), dst,
               x.function);
}

// A functional operand evaluated into `buffer` in its array's layout (`labels`), after which `x`
// reads the buffer; an operand without a function is left as it is. For strategies whose
// kernels read operands themselves (BLAS, BLIS), so that there is no pass to fuse into.
template <typename T>
void evaluate_in_place(Bound::Operand& x, Tensor& buffer, const std::string& labels,
                       const std::map<char, std::int64_t>& len) {
  if (!x.function) return;
  buffer = Tensor(x.tensor->dtype(), x.tensor->shape(), Tensor::Uninitialized{});
  pack<T>(x, labels, labels, len, buffer.template data<T>());
  x = {&buffer, nullptr};
}

// Copies a contiguous tensor indexed by `from` into `dst` (indexed by `to`, a permutation).
template <typename T>
void permute_into(const T* src, const std::string& from, const std::string& to,
                  const std::map<char, std::int64_t>& len, T* dst) {
  std::vector<std::int64_t> shape;
  for (char c : to) shape.push_back(len.at(c));
  copy_strided(src, shape, permuted_strides(from, to, row_major_strides(from, len)), dst,
               static_cast<const Expression*>(nullptr));
}

inline std::vector<std::int64_t> shape_of(const std::string& labels,
                                          const std::map<char, std::int64_t>& len) {
  std::vector<std::int64_t> s;
  for (char c : labels) s.push_back(len.at(c));
  return s;
}

// Why a GEMM-based strategy (`who`) cannot run `e`: not two operands under mul/sum, a diagonal,
// an index summed within one operand, or a dtype it does not compute in. nullopt: it can.
std::optional<std::string> binary_product_rejects(const BatchedEinsum& e, std::string_view who);

// Whether the strategy computes in the dtypes of this einsum (f32, f64, c64, c128). Rows whose
// operands differ in dtype are computed in the row's result dtype (numpy's promotion): the
// operands of other dtypes are converted before the strategy runs (promoted(), strategies.cpp), so
// a strategy sees one dtype per row.
inline std::optional<std::string> dtype_rejects(const BatchedEinsum& e, std::string_view who) {
  for (const auto& [name, info] : e.arrays)
    if (!executable_dtype(info.dtype))
      return std::string(who) + " computes in f32, f64, c64 and c128; array '" + name + "' is " +
             std::string(to_string(info.dtype));
  return std::nullopt;
}

}  // namespace einsumdb::kernels
