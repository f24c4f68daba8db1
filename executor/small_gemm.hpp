// Small matrix products through libxsmm's JIT-generated kernels (internal to executor/).
//
// OpenBLAS is tuned for large matrices: it packs both operands into cache-sized panels and pays
// a fixed cost per call. A product whose inner dimensions are small — the element-local
// operators of DG-FEM (N, K ≤ 35·4), or thousands of tiny batch points — spends most of its time
// there. libxsmm generates a register-blocked kernel for the exact (m, n, k) once and calls it
// directly; a tall product is cut into blocks of rows that each call one such kernel.
#pragma once

#include <cstdint>

namespace einsumdb::kernels {

// small_gemm() takes a product whose two dimensions it does not block over are each at most
// kSmallGemmMax, with a product of at most kSmallGemmArea: beyond that, OpenBLAS's packed kernels
// are faster (bench/small_gemm.sh measures both sides at the limit).
inline constexpr std::int64_t kSmallGemmMax = 128;
inline constexpr std::int64_t kSmallGemmArea = 64 * 128;

// C[m×n] (+)= A[m×k] · B[k×n], B and C row-major with a unit column stride and the given leading
// dimension (ldb ≥ n, ldc ≥ n); A the same (lda ≥ k), or with `a_transposed` column-major
// (element (i, l) at a[i + l·lda], lda ≥ m). Runs when n and k, or m and k, fit the limits
// above and libxsmm has a kernel for the shape; returns false, having computed nothing,
// otherwise (the caller then uses the BLAS).
// (For T = float and double.)
template <typename T>
bool small_gemm(std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda,
                bool a_transposed, const T* b, std::int64_t ldb, T* c, std::int64_t ldc,
                bool accumulate);

// For i < batch: C + i·c_step (+)= (A + i·a_step) · (B + i·b_step), each product as small_gemm()
// above. The kernels are looked up once for all points, so a point costs little more than the
// kernel itself (thousands of 3×3 by 3×35 products, one per element, in DG-FEM). Returns false,
// having computed nothing, when small_gemm() would.
template <typename T>
bool small_gemm_batch(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k,
                      const T* a, std::int64_t lda, bool a_transposed, std::int64_t a_step,
                      const T* b, std::int64_t ldb, std::int64_t b_step, T* c, std::int64_t ldc,
                      std::int64_t c_step, bool accumulate);

// One micro-tile of a packed GEMM, as BLIS packs its operands: C[m×n] (+)= A · B with A a
// panel of rows (element (i, l) at a[i + l·lda]) and B a panel of columns ((l, j) at
// b[l·ldb + j]), C at the strides rs, cs (one of them 1). For the edge tiles of tensor_gemm,
// which BLIS's micro-kernel computes at the cost of a whole tile. Returns false, having computed
// nothing, when neither stride is 1 or libxsmm has no kernel for the shape.
template <typename T>
bool packed_tile(std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda,
                 const T* b, std::int64_t ldb, T* c, std::int64_t rs, std::int64_t cs,
                 bool accumulate);

// One libxsmm kernel of a fixed shape, made once and called many times: C'[m × n] = A'[m × k] ·
// B'[k × n], or += with Write::add, column-major at the given leading dimensions, B' transposed
// with `b_transposed`. For a product that streams a large operand in place (tensor_gemm's
// streamed rows and lines), a call names the next call's operands too, and the kernel fetches
// the next call's streamed operand while it runs: B' into L1 (Ahead::b_into_l1), or A' and B'
// into L2 (Ahead::a_into_l2); Ahead::none fetches nothing. With Write::around, C's columns are
// written in non-temporal stores, around the cache (libxsmm's LIBXSMM_GEMM_FLAG_ALIGN_C_NTS_HINT):
// each column of C must then start on a 64-byte boundary and hold whole cache lines. Any size up
// to libxsmm's int (no kSmallGemm limits); empty (false) where libxsmm has no kernel for the
// shape. (For T = float and double.)
template <typename T>
class StreamKernel {
 public:
  enum class Ahead { none, b_into_l1, a_into_l2 };
  enum class Write { cached, around, add };
  StreamKernel() = default;
  StreamKernel(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t lda, std::int64_t ldb,
               std::int64_t ldc, bool b_transposed, Ahead ahead, Write write = Write::cached);
  explicit operator bool() const { return fn_ != nullptr; }
  void operator()(const T* a, const T* b, T* c, const T* next_a, const T* next_b, T* next_c) const;

 private:
  void* fn_ = nullptr;  // libxsmm's kernel (its type stays in small_gemm.cpp)
};

}  // namespace einsumdb::kernels
