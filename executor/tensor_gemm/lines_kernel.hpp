// tensor_gemm's own kernel for streamed lines (streamed.hpp), AVX-512, in floats: where the
// output's unit-stride index uz belongs to X but X runs along another of its rows, ux, a tile of
// X's rows along ux (a half-width register: 8 floats) by four values of uz by six columns of W,
// packed once, is summed over all of X's summed elements in 24 registers, then transposed in
// registers on its way out: each row and column gets its four values of uz side by side in a
// staging block of a few rows, which goes out to the output in runs of whole lines (around the
// cache where it can). libxsmm's kernel writes its tile with the rows contiguous, so its tiles go
// through a buffer of a whole piece and are transposed from there, read back from L2.
//
// Four values of uz lie far apart in X, and a tile reads part of a line from each at every summed
// element: each step of the sum fetches into L2 a line of the panel the next tile reads (the next
// four values of uz, or the next rows, or the next piece). Compiled only for AVX-512, whose 32
// registers hold the 24 accumulators, six columns of W and a register of X (isa_target.hpp).
// Internal to executor/.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "einsumdb/executor/isa_target.hpp"
#include "einsumdb/executor/tensor_gemm/rows_kernel.hpp"  // Halves

#if EINSUMDB_AVX512
EINSUMDB_TARGET_BEGIN
namespace einsumdb::tensor_gemm {
// Internal linkage, as for everything the driver alone instantiates (tensor_gemm.cpp says why).
namespace {

inline constexpr int kLinesU = 4;     // values of uz in a tile
inline constexpr int kLinesC = 6;     // columns of W in a tile
inline constexpr int kLinesRows = 8;  // rows in a tile: a half-width register of floats

// Row i of r[0..3] (i < h), its four values side by side, to s + i·rs.
inline void put_transposed(const __m256 r[kLinesU], float* s, std::int64_t rs, int h) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 q[4] = {_mm256_shuffle_ps(t0, t2, 0x44), _mm256_shuffle_ps(t0, t2, 0xEE),
                       _mm256_shuffle_ps(t1, t3, 0x44), _mm256_shuffle_ps(t1, t3, 0xEE)};
  // q[i]: row i in its low half, row i + 4 in its high half.
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    if (i < h) _mm_storeu_ps(s + i * rs, _mm256_castps256_ps128(q[i]));
    if (i + 4 < h) _mm_storeu_ps(s + (i + 4) * rs, _mm256_extractf128_ps(q[i], 1));
  }
}

// Where a tile reads X and W and writes its staging block. Row i of X's value u of uz, summed
// element l, is x[i + u·us + l·ds]; W's row l is w[l·width, (l + 1)·width), zero past the
// columns; row i, column j, value u of the tile goes to s[i·s_rs + j·stride + u]. Step l fetches
// fetch + l·ds + q·us for the values q of the next panel that a LinesFetch names (first, step,
// end).
struct LinesTile {
  std::int64_t depth, us, ds;
  std::int64_t width;
  std::int64_t s_rs, stride;
};
struct LinesFetch {
  int first, step, end;
};

// The tile of rows [0, h) (all kLinesRows where Full) and values [0, u_end) of uz from x, by
// columns [0, kLinesC) from w, into s.
template <bool Full>
void lines_tile(const LinesTile& t, const float* x, int u_end, int h, const float* w, float* s,
                const float* fetch, LinesFetch f) {
  using H = Halves<float>;  // (its half-width registers)
  const auto rows = static_cast<__mmask8>((1u << h) - 1);
  H::Y acc[kLinesU][kLinesC];
#pragma GCC unroll 4
  for (int u = 0; u < kLinesU; ++u)
#pragma GCC unroll 6
    for (int c = 0; c < kLinesC; ++c) acc[u][c] = H::zero_y();
  const float* xu[kLinesU];  // values past u_end read the last one's, and go nowhere
#pragma GCC unroll 4
  for (int u = 0; u < kLinesU; ++u) xu[u] = x + std::min(u, u_end - 1) * t.us;
  for (std::int64_t l = 0; l < t.depth; ++l, w += t.width) {
    for (int q = f.first; q < f.end; q += f.step)
      _mm_prefetch(reinterpret_cast<const char*>(fetch + l * t.ds + q * t.us), _MM_HINT_T1);
    H::Y wc[kLinesC];
#pragma GCC unroll 6
    for (int c = 0; c < kLinesC; ++c) wc[c] = H::splat_y(w + c);
#pragma GCC unroll 4
    for (int u = 0; u < kLinesU; ++u) {
      const float* xl = xu[u] + l * t.ds;
      const H::Y xv = Full ? H::load_y(xl) : _mm256_maskz_loadu_ps(rows, xl);
#pragma GCC unroll 6
      for (int c = 0; c < kLinesC; ++c) acc[u][c] = H::fma(xv, wc[c], acc[u][c]);
    }
  }
#pragma GCC unroll 6
  for (int c = 0; c < kLinesC; ++c) {
    H::Y r[kLinesU];
#pragma GCC unroll 4
    for (int u = 0; u < kLinesU; ++u) r[u] = acc[u][c];
    put_transposed(r, s + c * t.stride, t.s_rs, Full ? kLinesRows : h);
  }
}

}  // namespace
}  // namespace einsumdb::tensor_gemm
EINSUMDB_TARGET_END
#endif
