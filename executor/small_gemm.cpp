#include "einsumdb/executor/small_gemm.hpp"

#include <libxsmm.h>

#include <algorithm>
#include <array>
#include <limits>
#include <mutex>
#include <type_traits>

namespace einsumdb::kernels {
namespace {

// libxsmm is column-major: a kernel computes C'[m'×n'] (+)= A'[m'×k'] · B'[k'×n']. A row-major
// product C = A·B is the column-major Cᵀ = Bᵀ·Aᵀ, and a row-major matrix is its own transpose
// read column-major, so the kernel runs on (B, A, C) as they lie. A column-major A is Aᵀ's
// transpose read column-major: libxsmm's B' transposed (its A' cannot be).
template <typename T>
using Kernel =
    std::conditional_t<std::is_same_v<T, double>, libxsmm_dmmfunction, libxsmm_smmfunction>;

struct Shape {
  std::int64_t m, n, k, lda, ldb, ldc;
  bool accumulate, b_transposed;
  bool operator==(const Shape& o) const {
    return m == o.m && n == o.n && k == o.k && lda == o.lda && ldb == o.ldb && ldc == o.ldc &&
           accumulate == o.accumulate && b_transposed == o.b_transposed;
  }
};

// The kernel of a column-major shape, or null. libxsmm keeps generated kernels in its own
// registry; a few recent ones are remembered per thread to skip even that lookup in loops over
// batch points.
template <typename T>
Kernel<T> kernel(const Shape& s) {
  static std::once_flag init;
  std::call_once(init, [] { libxsmm_init(); });
  struct Entry {
    Shape shape;
    Kernel<T> fn;
  };
  thread_local std::array<Entry, 4> recent{};
  thread_local std::size_t next = 0;
  for (const auto& e : recent)
    if (e.fn && e.shape == s) return e.fn;
  if (s.m * s.n * s.k > LIBXSMM_MAX_MNK) return nullptr;
  const libxsmm_blasint lda = s.lda, ldb = s.ldb, ldc = s.ldc;
  const T alpha = 1, beta = s.accumulate ? 1 : 0;
  const int flags = s.b_transposed ? LIBXSMM_GEMM_FLAG_TRANS_B : LIBXSMM_GEMM_FLAG_NONE;
  const int prefetch = LIBXSMM_PREFETCH_NONE;
  Kernel<T> fn;
  if constexpr (std::is_same_v<T, double>)
    fn = libxsmm_dmmdispatch(s.m, s.n, s.k, &lda, &ldb, &ldc, &alpha, &beta, &flags, &prefetch);
  else
    fn = libxsmm_smmdispatch(s.m, s.n, s.k, &lda, &ldb, &ldc, &alpha, &beta, &flags, &prefetch);
  if (fn) recent[next++ % recent.size()] = {s, fn};
  return fn;
}

// The largest block of the blocked dimension that keeps m'·n'·k' within libxsmm's limit, at
// most 64.
std::int64_t block_of(std::int64_t other, std::int64_t k) {
  return std::clamp<std::int64_t>(LIBXSMM_MAX_MNK / std::max<std::int64_t>(other * k, 1), 1, 64);
}

// Calls call(kernel, start) over [0, total) in blocks of `block` (the last one shorter), with the
// kernels of shape_of(length), for each of `batch` points (call(kernel, start, point)); false,
// calling nothing, when libxsmm has no such kernel.
template <typename T, typename ShapeOf, typename Call>
bool in_blocks(std::int64_t batch, std::int64_t total, std::int64_t block, ShapeOf shape_of,
               Call call) {
  const std::int64_t tail = total % block;
  const Kernel<T> full = kernel<T>(shape_of(block));
  const Kernel<T> last = tail ? kernel<T>(shape_of(tail)) : full;
  if (!full || !last) return false;
  for (std::int64_t i = 0; i < batch; ++i) {
    std::int64_t s = 0;
    for (; s + block <= total; s += block) call(full, s, i);
    if (s < total) call(last, s, i);
  }
  return true;
}

template <typename T>
bool run(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k, const T* a,
         std::int64_t lda, bool at, std::int64_t a_step, const T* b, std::int64_t ldb,
         std::int64_t b_step, T* c, std::int64_t ldc, std::int64_t c_step, bool accumulate) {
  if (batch < 1 || m < 1 || n < 1 || k < 1 || k > kSmallGemmMax) return false;
  const std::int64_t a_row = at ? 1 : lda;  // row r of A starts at a + r·a_row
  // Blocks of rows of C: C'[n × rows] = B' · A'[k × rows].
  if (n <= kSmallGemmMax && n * k <= kSmallGemmArea)
    return in_blocks<T>(
        batch, m, std::min(m, block_of(n, k)),
        [&](std::int64_t rows) { return Shape{n, rows, k, ldb, lda, ldc, accumulate, at}; },
        [&](Kernel<T> f, std::int64_t r, std::int64_t i) {
          f(b + i * b_step, a + i * a_step + r * a_row, c + i * c_step + r * ldc);
        });
  // Blocks of columns of C: C'[cols × m] = B'[cols × k] · A'.
  if (m <= kSmallGemmMax && m * k <= kSmallGemmArea)
    return in_blocks<T>(
        batch, n, std::min(n, block_of(m, k)),
        [&](std::int64_t cols) { return Shape{cols, m, k, ldb, lda, ldc, accumulate, at}; },
        [&](Kernel<T> f, std::int64_t j, std::int64_t i) {
          f(b + i * b_step + j, a + i * a_step, c + i * c_step + j);
        });
  return false;
}

}  // namespace

template <typename T>
bool small_gemm(std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda,
                bool a_transposed, const T* b, std::int64_t ldb, T* c, std::int64_t ldc,
                bool accumulate) {
  return run(1, m, n, k, a, lda, a_transposed, 0, b, ldb, 0, c, ldc, 0, accumulate);
}

template <typename T>
bool small_gemm_batch(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k,
                      const T* a, std::int64_t lda, bool a_transposed, std::int64_t a_step,
                      const T* b, std::int64_t ldb, std::int64_t b_step, T* c, std::int64_t ldc,
                      std::int64_t c_step, bool accumulate) {
  return run(batch, m, n, k, a, lda, a_transposed, a_step, b, ldb, b_step, c, ldc, c_step,
             accumulate);
}

template <typename T>
bool packed_tile(std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda,
                 const T* b, std::int64_t ldb, T* c, std::int64_t rs, std::int64_t cs,
                 bool accumulate) {
  // B's panel read column-major is Bᵀ [n × k]: libxsmm's B' transposed. With C column-major the
  // kernel runs on (A, B); row-major, Cᵀ = Bᵀ · Aᵀ on (B, A), A's panel being Aᵀ transposed.
  if (rs == 1) {
    const Kernel<T> f = kernel<T>(Shape{m, n, k, lda, ldb, cs, accumulate, true});
    if (!f) return false;
    f(a, b, c);
    return true;
  }
  if (cs == 1) {
    const Kernel<T> f = kernel<T>(Shape{n, m, k, ldb, lda, rs, accumulate, true});
    if (!f) return false;
    f(b, a, c);
    return true;
  }
  return false;
}

template <typename T>
bool streamed_rows(std::int64_t cols, std::int64_t depth, const T* w, const T* x, std::int64_t x_rs,
                   std::int64_t x_ds, const RowPiece* pieces, std::int64_t count, T* c,
                   std::int64_t c_rs) {
  static std::once_flag init;
  std::call_once(init, [] { libxsmm_init(); });
  // Column-major: C'[cols × rows] = W'[cols × depth] · X'[depth × rows], X' read as it lies
  // where its summed elements are contiguous, otherwise transposed (its rows contiguous).
  const bool transposed = x_ds != 1;
  constexpr std::int64_t most = std::numeric_limits<libxsmm_blasint>::max();
  if (std::max({cols, depth, x_ds, x_rs, c_rs}) > most) return false;  // beyond libxsmm's int
  const libxsmm_blasint lda = static_cast<libxsmm_blasint>(cols),
                        ldb = static_cast<libxsmm_blasint>(transposed ? x_ds : x_rs),
                        ldc = static_cast<libxsmm_blasint>(c_rs);
  const T alpha = 1, beta = 0;
  const int flags = transposed ? LIBXSMM_GEMM_FLAG_TRANS_B : LIBXSMM_GEMM_FLAG_NONE;
  // Each call fetches the next call's X' into L1 as it goes. TCCG case 1 (bda,dc->abc: 97,344
  // rows of 312 summed elements, 24 columns), `einsumdb run ... --transform tensor_gemm --repeat
  // 7`, one thread, three pairs of processes alternating with no prefetch, time over time (min /
  // median / max): 0.78 / 0.89 / 0.97.
  const int prefetch = LIBXSMM_GEMM_PREFETCH_BL1;
  struct Length {
    std::int64_t rows;
    Kernel<T> fn;
  };
  std::array<Length, 4> kernels{};  // pieces come in a few lengths: whole runs and their ends
  std::size_t known = 0;
  const auto kernel_of = [&](std::int64_t rows) -> Kernel<T> {
    for (std::size_t i = 0; i < known; ++i)
      if (kernels[i].rows == rows) return kernels[i].fn;
    Kernel<T> fn;
    if constexpr (std::is_same_v<T, double>)
      fn = libxsmm_dmmdispatch(cols, rows, depth, &lda, &ldb, &ldc, &alpha, &beta, &flags,
                               &prefetch);
    else
      fn = libxsmm_smmdispatch(cols, rows, depth, &lda, &ldb, &ldc, &alpha, &beta, &flags,
                               &prefetch);
    if (fn && known < kernels.size()) kernels[known++] = {rows, fn};
    return fn;
  };
  for (std::int64_t i = 0; i < count; ++i)  // every kernel first: nothing is computed without
    if (!kernel_of(pieces[i].rows)) return false;
  for (std::int64_t i = 0; i < count; ++i) {
    const RowPiece& p = pieces[i];
    const RowPiece& next = pieces[std::min(count - 1, i + 1)];
    kernel_of(p.rows)(w, x + p.x, c + p.c, w, x + next.x, c + next.c);
  }
  return true;
}

template <typename T>
StreamKernel<T>::StreamKernel(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t lda,
                              std::int64_t ldb, std::int64_t ldc) {
  static std::once_flag init;
  std::call_once(init, [] { libxsmm_init(); });
  constexpr std::int64_t most = std::numeric_limits<libxsmm_blasint>::max();
  if (std::max({m, n, k, lda, ldb, ldc}) > most) return;  // beyond libxsmm's int
  const libxsmm_blasint ld[3] = {static_cast<libxsmm_blasint>(lda),
                                 static_cast<libxsmm_blasint>(ldb),
                                 static_cast<libxsmm_blasint>(ldc)};
  const T alpha = 1, beta = 0;
  const int flags = LIBXSMM_GEMM_FLAG_NONE;
  const int prefetch = LIBXSMM_GEMM_PREFETCH_AL2BL2_VIA_C;
  Kernel<T> fn;
  if constexpr (std::is_same_v<T, double>)
    fn = libxsmm_dmmdispatch(m, n, k, &ld[0], &ld[1], &ld[2], &alpha, &beta, &flags, &prefetch);
  else
    fn = libxsmm_smmdispatch(m, n, k, &ld[0], &ld[1], &ld[2], &alpha, &beta, &flags, &prefetch);
  fn_ = reinterpret_cast<void*>(fn);
}

template <typename T>
void StreamKernel<T>::operator()(const T* a, const T* b, T* c, const T* next_a, const T* next_b,
                                 T* next_c) const {
  reinterpret_cast<Kernel<T>>(fn_)(a, b, c, next_a, next_b, next_c);
}

template class StreamKernel<float>;
template class StreamKernel<double>;

#define EINSUMDB_SMALL_GEMM(T)                                                                     \
  template bool small_gemm(std::int64_t, std::int64_t, std::int64_t, const T*, std::int64_t, bool, \
                           const T*, std::int64_t, T*, std::int64_t, bool);                        \
  template bool small_gemm_batch(std::int64_t, std::int64_t, std::int64_t, std::int64_t, const T*, \
                                 std::int64_t, bool, std::int64_t, const T*, std::int64_t,         \
                                 std::int64_t, T*, std::int64_t, std::int64_t, bool);              \
  template bool packed_tile(std::int64_t, std::int64_t, std::int64_t, const T*, std::int64_t,      \
                            const T*, std::int64_t, T*, std::int64_t, std::int64_t, bool);         \
  template bool streamed_rows(std::int64_t, std::int64_t, const T*, const T*, std::int64_t,        \
                              std::int64_t, const RowPiece*, std::int64_t, T*, std::int64_t);
EINSUMDB_SMALL_GEMM(float)
EINSUMDB_SMALL_GEMM(double)
#undef EINSUMDB_SMALL_GEMM

}  // namespace einsumdb::kernels
