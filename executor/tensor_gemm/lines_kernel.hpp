// tensor_gemm's own kernel for streamed lines (streamed.hpp), AVX-512, in floats: where the
// output's unit-stride index uz belongs to X but X runs along another of its rows, ux, a tile of
// X's rows along ux (a register: 16 floats, or 8 in a half-width one where the processor runs a
// 512-bit FMA as two halves, RowsShape) by four values of uz by six columns of W, packed once,
// is summed over all of X's summed elements in 24 registers, then transposed in
// registers on its way out: each row and column gets its four values of uz side by side in a
// staging block of a few rows, which goes out to the output in runs of whole lines (around the
// cache where it can). A run of rows that leaves 8 after its whole registers (72 floats) takes its
// last 8 in a pair tile at full width: 8 rows by eight values of uz, two values' rows to a
// register. libxsmm's kernel writes its tile with the rows contiguous, so its tiles go through a
// buffer of a whole piece and are transposed from there, read back from L2.
//
// Four values of uz lie far apart in X, and a tile reads a register's rows of each at every summed
// element, a line or part of two: each step of the sum fetches into L2 the lines of one value of
// the panel the next tile reads (the next four values of uz, or the next rows, or the next
// piece). Compiled only for AVX-512, whose 32
// registers hold the 24 accumulators, six columns of W and a register of X (isa_target.hpp).
// Internal to executor/.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "einsumdb/executor/isa_target.hpp"
#include "einsumdb/executor/tensor_gemm/rows_kernel.hpp"  // RowsShape

#if EINSUMDB_AVX512
EINSUMDB_TARGET_BEGIN
namespace einsumdb::tensor_gemm {
// Internal linkage, as for everything the driver alone instantiates (tensor_gemm.cpp says why).
namespace {

inline constexpr int kLinesU = 4;  // values of uz in a tile
inline constexpr int kLinesC = 6;  // columns of W in a tile

// A tile's registers of R rows: 8 floats (half width) or 16 (full width).
template <int R>
struct LinesRegs;
template <>
struct LinesRegs<8> {
  using V = __m256;
  static V zero() { return _mm256_setzero_ps(); }
  static V splat(const float* p) { return _mm256_set1_ps(*p); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V load(const float* p, int h) {
    return _mm256_maskz_loadu_ps(static_cast<__mmask8>((1u << h) - 1), p);
  }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V unpacklo(V a, V b) { return _mm256_unpacklo_ps(a, b); }
  static V unpackhi(V a, V b) { return _mm256_unpackhi_ps(a, b); }
  template <int imm>
  static V shuffle(V a, V b) {
    return _mm256_shuffle_ps(a, b, imm);
  }
  template <int lane>
  static __m128 part(V v) {
    return lane == 0 ? _mm256_castps256_ps128(v) : _mm256_extractf128_ps(v, lane & 1);
  }
};
template <>
struct LinesRegs<16> {
  using V = __m512;
  static V zero() { return _mm512_setzero_ps(); }
  static V splat(const float* p) { return _mm512_set1_ps(*p); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static V load(const float* p, int h) {
    return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << h) - 1), p);
  }
  // 8 floats from lo in lanes [0, 8), 8 from hi in lanes [8, 16).
  static V load_pair(const float* lo, const float* hi) {
    const __m512d low = _mm512_castps_pd(_mm512_castps256_ps512(_mm256_loadu_ps(lo)));
    return _mm512_castpd_ps(
        _mm512_mask_insertf64x4(low, 0xFF, low, _mm256_castps_pd(_mm256_loadu_ps(hi)), 1));
  }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  // (The masked forms, all lanes set, here, in load_pair and in part(): GCC 12's unmasked ones
  // start from an undefined register, which its -Wuninitialized reports where they are inlined.)
  static V unpacklo(V a, V b) { return _mm512_mask_unpacklo_ps(a, 0xFFFF, a, b); }
  static V unpackhi(V a, V b) { return _mm512_mask_unpackhi_ps(a, 0xFFFF, a, b); }
  template <int imm>
  static V shuffle(V a, V b) {
    return _mm512_shuffle_ps(a, b, imm);
  }
  template <int lane>
  static __m128 part(V v) {
    return _mm512_mask_extractf32x4_ps(_mm_setzero_ps(), 0xF, v, lane);
  }
};

// The rows of r[0..3], four values side by side: q[i] holds in its 128-bit lane L the four values
// of row i + 4·L (unpacking and shuffling go within 128-bit lanes).
template <int R>
inline void transpose_quads(const typename LinesRegs<R>::V r[kLinesU],
                            typename LinesRegs<R>::V q[4]) {
  using G = LinesRegs<R>;
  const auto t0 = G::unpacklo(r[0], r[1]), t1 = G::unpackhi(r[0], r[1]);
  const auto t2 = G::unpacklo(r[2], r[3]), t3 = G::unpackhi(r[2], r[3]);
  q[0] = G::template shuffle<0x44>(t0, t2), q[1] = G::template shuffle<0xEE>(t0, t2);
  q[2] = G::template shuffle<0x44>(t1, t3), q[3] = G::template shuffle<0xEE>(t1, t3);
}

// Row i of r[0..3] (i < h), its four values side by side, to s + i·rs.
template <int R>
inline void put_transposed(const typename LinesRegs<R>::V r[kLinesU], float* s, std::int64_t rs,
                           int h) {
  using G = LinesRegs<R>;
  typename G::V q[4];
  transpose_quads<R>(r, q);
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    if (i < h) _mm_storeu_ps(s + i * rs, G::template part<0>(q[i]));
    if (i + 4 < h) _mm_storeu_ps(s + (i + 4) * rs, G::template part<1>(q[i]));
    if constexpr (R == 16) {
      if (i + 8 < h) _mm_storeu_ps(s + (i + 8) * rs, G::template part<2>(q[i]));
      if (i + 12 < h) _mm_storeu_ps(s + (i + 12) * rs, G::template part<3>(q[i]));
    }
  }
}

// Row i < 8 of a pair tile's r[0..3] (lanes [0, 8): values 0-3; lanes [8, 16): values 4-7), its
// eight values side by side, to s + i·rs: values 4-7 only where `upper`.
inline void put_pair(const __m512 r[kLinesU], float* s, std::int64_t rs, bool upper) {
  using G = LinesRegs<16>;
  __m512 q[4];
  transpose_quads<16>(r, q);
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    _mm_storeu_ps(s + i * rs, G::part<0>(q[i]));
    _mm_storeu_ps(s + (i + 4) * rs, G::part<1>(q[i]));
    if (upper) {
      _mm_storeu_ps(s + i * rs + 4, G::part<2>(q[i]));
      _mm_storeu_ps(s + (i + 4) * rs + 4, G::part<3>(q[i]));
    }
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

// The tile of rows [0, h) (all R where Full) and values [0, u_end) of uz from x, by columns
// [0, kLinesC) from w, into s. A Pair tile (R = 16) takes 8 rows of twice the values, u_end up to
// 2·kLinesU, in full-width registers: lanes [0, 8) of register u hold value u's rows, lanes [8, 16)
// value u + 4's. Where a run of rows leaves 8 after its whole registers (a's 72 floats in TCCG case
// 3, dbea,ec->abcd), a half-width tile would take as long as a full one for half its FMAs.
template <int R, bool Full, bool Pair = false>
void lines_tile(const LinesTile& t, const float* x, int u_end, int h, const float* w, float* s,
                const float* fetch, LinesFetch f) {
  static_assert(!Pair || (R == 16 && Full));
  using G = LinesRegs<R>;
  constexpr int U = Pair ? 2 * kLinesU : kLinesU;  // values of uz
  typename G::V acc[kLinesU][kLinesC];
#pragma GCC unroll 4
  for (int u = 0; u < kLinesU; ++u)
#pragma GCC unroll 6
    for (int c = 0; c < kLinesC; ++c) acc[u][c] = G::zero();
  const float* xu[U];  // values past u_end read the last one's, and go nowhere
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u) xu[u] = x + std::min(u, u_end - 1) * t.us;
  const auto sum = [&](auto once) {
    for (std::int64_t l = 0; l < t.depth; ++l, w += t.width) {
      // Each value's R floats: off a line's start they span two lines, and the second, fetched by
      // no one, was a miss wherever they did.
      for (int q = f.first; q < f.end; q += f.step)
        fetch_span<decltype(once)::value>(fetch + l * t.ds + q * t.us, R);
      typename G::V wc[kLinesC];
#pragma GCC unroll 6
      for (int c = 0; c < kLinesC; ++c) wc[c] = G::splat(w + c);
#pragma GCC unroll 4
      for (int u = 0; u < kLinesU; ++u) {
        const float* xl = xu[u] + l * t.ds;
        typename G::V xv;
        if constexpr (Pair)
          xv = G::load_pair(xl, xu[u + kLinesU] + l * t.ds);
        else
          xv = Full ? G::load(xl) : G::load(xl, h);
#pragma GCC unroll 6
        for (int c = 0; c < kLinesC; ++c) acc[u][c] = G::fma(xv, wc[c], acc[u][c]);
      }
    }
  };
  if (fetch_once<float>(t.ds))
    sum(std::true_type{});
  else
    sum(std::false_type{});
#pragma GCC unroll 6
  for (int c = 0; c < kLinesC; ++c) {
    typename G::V r[kLinesU];
#pragma GCC unroll 4
    for (int u = 0; u < kLinesU; ++u) r[u] = acc[u][c];
    if constexpr (Pair)
      put_pair(r, s + c * t.stride, t.s_rs, u_end > kLinesU);
    else
      put_transposed<R>(r, s + c * t.stride, t.s_rs, Full ? R : h);
  }
}

}  // namespace
}  // namespace einsumdb::tensor_gemm
EINSUMDB_TARGET_END
#endif
