// tensor_gemm's wide micro-kernel (AVX-512): a tile of four registers' rows (kWideRows: 32
// doubles, 64 floats) by kWideColumns = 6 columns, behind BLIS's calling convention, for the packed
// path where the sum takes several passes (the GEMM-shaped cases). Each step of the sum loads four
// lines of the A panel and broadcasts six elements of the B panel into 24 FMAs: 0.42 loads per FMA,
// where BLIS's Skylake-X tile of two registers' rows by 14 columns takes 16 loads for 28 FMAs
// (0.57). The B micro-panel, 6 columns by KC = 256 doubles, is 12 KB of L1, and the A micro-panel
// streams from L2. Compiled only for AVX-512 (isa_target.hpp). Internal to executor/.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "einsumdb/executor/isa_target.hpp"
#include "einsumdb/executor/tensor_gemm/micro_kernel.hpp"
#include "einsumdb/executor/tensor_gemm/transpose.hpp"  // Lanes

#if EINSUMDB_AVX512
EINSUMDB_TARGET_BEGIN
namespace einsumdb::tensor_gemm {
// Internal linkage, as for everything the driver alone instantiates (tensor_gemm.cpp says why).
namespace {

// The tile C := alpha·A·B + beta·C of the packed panels `a` (kWideRows rows per summed element,
// zero past row m) and `b` (kWideColumns per summed element, zero past column n) summed over `k`
// elements, its rows m and columns n written at c + i·rs + j·cs; beta = 0 reads nothing of C. Whole
// tiles with unit row stride, alpha = 1 and beta 0 or 1 go from the registers straight to C, their
// lines fetched into L2 as the sum starts and into L1 over its last kTail steps, where a tile of an
// output read back in each pass of the sum is in memory; others through a buffer, element by
// element.
template <typename T>
void wide_tile(dim_t m, dim_t n, dim_t k, T* alpha, T* a, T* b, T* beta, T* c, inc_t rs, inc_t cs,
               auxinfo_t*, cntx_t*) {
  using L = Lanes<T>;
  constexpr int W = static_cast<int>(L::width), R = 4, NR = static_cast<int>(kWideColumns);
  constexpr std::int64_t kTail = 16;
  typename L::V acc[R][NR];
#pragma GCC unroll 24
  for (int j = 0; j < NR; ++j)
    for (int r = 0; r < R; ++r) acc[r][j] = L::zero();
  const auto step = [&]() __attribute__((always_inline)) {
    typename L::V av[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) av[r] = L::load(a + r * W);
#pragma GCC unroll 6
    for (int j = 0; j < NR; ++j)
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[r][j] = L::fma(av[r], b + j, acc[r][j]);
    a += R * W;
    b += NR;
  };
  const bool direct = m == R * W && rs == 1 && *alpha == 1 && (*beta == 0 || *beta == 1);
  const bool reads = direct && *beta != 0;
  std::int64_t p = 0;
  if (reads) {
    // Each column's run of R·W elements: its first line of each register and its last element.
    for (int j = 0; j < n; ++j) {
      for (int r = 0; r < R; ++r) __builtin_prefetch(c + j * cs + r * W, 1, 2);
      __builtin_prefetch(c + j * cs + R * W - 1, 1, 2);
    }
    const std::int64_t head = k > kTail ? k - kTail : 0;
#pragma GCC unroll 2
    for (; p < head; ++p) step();
    for (int j = 0; j < n; ++j) {
      for (int r = 0; r < R; ++r) __builtin_prefetch(c + j * cs + r * W, 1, 3);
      __builtin_prefetch(c + j * cs + R * W - 1, 1, 3);
    }
  }
#pragma GCC unroll 2
  for (; p < k; ++p) step();
  if (direct) {
#pragma GCC unroll 6
    for (int j = 0; j < NR; ++j)
      if (j < n)
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          T* const to = c + j * cs + r * W;
          L::storeu(to, reads ? L::add(acc[r][j], L::loadu(to)) : acc[r][j]);
        }
    return;
  }
  alignas(64) T tile[R * W * NR];  // column j's rows at tile + j·R·W
  for (int j = 0; j < NR; ++j)
    for (int r = 0; r < R; ++r) L::storeu(tile + j * R * W + r * W, acc[r][j]);
  for (dim_t j = 0; j < n; ++j)
    for (dim_t i = 0; i < m; ++i) {
      T& to = c[i * rs + j * cs];
      const T v = *alpha * tile[j * R * W + i];
      to = *beta == 0 ? v : v + *beta * to;
    }
}

}  // namespace
}  // namespace einsumdb::tensor_gemm
EINSUMDB_TARGET_END
#endif  // EINSUMDB_AVX512
