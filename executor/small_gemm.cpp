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

// libxsmm's kernel for a column-major shape (libxsmm initialized on first use), or null.
template <typename T>
Kernel<T> dispatch(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t lda,
                   std::int64_t ldb, std::int64_t ldc, bool accumulate, bool b_transposed,
                   int prefetch, bool nontemporal = false) {
  static std::once_flag init;
  std::call_once(init, [] { libxsmm_init(); });
  constexpr std::int64_t most = std::numeric_limits<libxsmm_blasint>::max();
  if (std::max({m, n, k, lda, ldb, ldc}) > most) return nullptr;  // beyond libxsmm's int
  const auto M = static_cast<libxsmm_blasint>(m), N = static_cast<libxsmm_blasint>(n),
             K = static_cast<libxsmm_blasint>(k), LDA = static_cast<libxsmm_blasint>(lda),
             LDB = static_cast<libxsmm_blasint>(ldb), LDC = static_cast<libxsmm_blasint>(ldc);
  const T alpha = 1, beta = accumulate ? 1 : 0;
  const int flags = (b_transposed ? LIBXSMM_GEMM_FLAG_TRANS_B : LIBXSMM_GEMM_FLAG_NONE) |
                    (nontemporal ? LIBXSMM_GEMM_FLAG_ALIGN_C_NTS_HINT : 0);
  if constexpr (std::is_same_v<T, double>)
    return libxsmm_dmmdispatch(M, N, K, &LDA, &LDB, &LDC, &alpha, &beta, &flags, &prefetch);
  else
    return libxsmm_smmdispatch(M, N, K, &LDA, &LDB, &LDC, &alpha, &beta, &flags, &prefetch);
}

// The kernel of a column-major shape, or null. libxsmm keeps generated kernels in its own
// registry; a few recent ones are remembered per thread to skip even that lookup in loops over
// batch points.
template <typename T>
Kernel<T> kernel(const Shape& s) {
  struct Entry {
    Shape shape;
    Kernel<T> fn;
  };
  thread_local std::array<Entry, 4> recent{};
  thread_local std::size_t next = 0;
  for (const auto& e : recent)
    if (e.fn && e.shape == s) return e.fn;
  if (s.m * s.n * s.k > LIBXSMM_MAX_MNK) return nullptr;
  const Kernel<T> fn = dispatch<T>(s.m, s.n, s.k, s.lda, s.ldb, s.ldc, s.accumulate, s.b_transposed,
                                   LIBXSMM_PREFETCH_NONE);
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
bool run_in_blocks(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k, const T* a,
                   std::int64_t lda, bool at, std::int64_t a_step, const T* b, std::int64_t ldb,
                   std::int64_t b_step, T* c, std::int64_t ldc, std::int64_t c_step,
                   bool accumulate) {
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
  return run_in_blocks(1, m, n, k, a, lda, a_transposed, 0, b, ldb, 0, c, ldc, 0, accumulate);
}

template <typename T>
bool small_gemm_batch(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k,
                      const T* a, std::int64_t lda, bool a_transposed, std::int64_t a_step,
                      const T* b, std::int64_t ldb, std::int64_t b_step, T* c, std::int64_t ldc,
                      std::int64_t c_step, bool accumulate) {
  return run_in_blocks(batch, m, n, k, a, lda, a_transposed, a_step, b, ldb, b_step, c, ldc, c_step,
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
StreamKernel<T>::StreamKernel(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t lda,
                              std::int64_t ldb, std::int64_t ldc, bool b_transposed, Ahead ahead,
                              Write write)
    : fn_(reinterpret_cast<void*>(
          dispatch<T>(m, n, k, lda, ldb, ldc, write == Write::add, b_transposed,
                      ahead == Ahead::none        ? LIBXSMM_GEMM_PREFETCH_NONE
                      : ahead == Ahead::b_into_l1 ? LIBXSMM_GEMM_PREFETCH_BL1
                                                  : LIBXSMM_GEMM_PREFETCH_AL2BL2_VIA_C,
                      write == Write::around))) {}

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
                            const T*, std::int64_t, T*, std::int64_t, std::int64_t, bool);
EINSUMDB_SMALL_GEMM(float)
EINSUMDB_SMALL_GEMM(double)
#undef EINSUMDB_SMALL_GEMM

}  // namespace einsumdb::kernels
