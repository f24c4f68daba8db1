// tensor_gemm's own micro-kernel (AVX-512): a tile of two registers' rows (MR = 2 lines: 32
// floats, 16 doubles) by NR columns, from the panels BLIS's packing layout gives (packing.hpp),
// kept in registers over the whole sum, then written a line at a time: rows [0, W) and [W, 2W) of
// column j to wherever they lie. Two uses (macro_kernel.hpp):
//   - streamed: a tile whose two halves lie apart in the output (a float tile of 32 rows over an
//     output index of 16, TCCG cases 31-36 and 43-48), each line stored whole around the cache.
//     BLIS's micro-kernel and libxsmm's store a tile only with its rows contiguous, so such a tile
//     went through a buffer, and two libxsmm kernels of a line's rows each would read the packed B
//     panel twice, with half the FMAs per element of B; here each element of B feeds both halves,
//     as in BLIS's kernel;
//   - in place, set or added: a whole tile of a large output read back in each of several summed
//     passes (the GEMM-shaped float cases), its lines fetched during the sum (line_tile says how).
// Compiled only for AVX-512 (isa_target.hpp). Internal to executor/.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "einsumdb/executor/isa_target.hpp"
#include "einsumdb/executor/tensor_gemm/micro_kernel.hpp"

#if EINSUMDB_AVX512
EINSUMDB_TARGET_BEGIN
namespace einsumdb::tensor_gemm {
// Internal linkage, as for everything the driver alone instantiates (tensor_gemm.cpp says why).
namespace {

template <typename T>
struct LineVector;
template <>
struct LineVector<double> {
  using V = __m512d;
  static constexpr int width = 8;
  static V zero() { return _mm512_setzero_pd(); }
  static V load(const double* p) { return _mm512_load_pd(p); }
  static V fma(V a, const double* b, V c) { return _mm512_fmadd_pd(a, _mm512_set1_pd(*b), c); }
  static void stream(double* p, V v) { _mm512_stream_pd(p, v); }
  static V loadu(const double* p) { return _mm512_loadu_pd(p); }
  static void storeu(double* p, V v) { _mm512_storeu_pd(p, v); }
  static V add(V x, V y) { return _mm512_add_pd(x, y); }
};
template <>
struct LineVector<float> {
  using V = __m512;
  static constexpr int width = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_load_ps(p); }
  static V fma(V a, const float* b, V c) { return _mm512_fmadd_ps(a, _mm512_set1_ps(*b), c); }
  static void stream(float* p, V v) { _mm512_stream_ps(p, v); }
  static V loadu(const float* p) { return _mm512_loadu_ps(p); }
  static void storeu(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V add(V x, V y) { return _mm512_add_ps(x, y); }
};

// How line_tile writes its tile: streamed past the cache (whole aligned lines, no read), or
// in place, set or added to what is there.
enum class LineWrite { stream, set, add };

// The tile of the packed panels `a` (2W rows per summed element) and `b` (NR columns per summed
// element) summed over `depth` elements, its columns j < `columns` written: rows [0, W) to
// top + column(j) and rows [W, 2W) to bottom + column(j). Streamed, each address is a whole
// line (64-byte aligned; the caller checks). In place, the tile's lines are fetched during the
// sum: into L2 spread over its first part, into L1 over its last kTail elements, one line per
// element. Fetched at the start, as BLIS's kernel does, they would be evicted again by the
// panels it reads (an A panel of 32 floats by KC = 384 is 48 KB, all of L1), and a tile in
// memory would be read at the end, with the FMA units idle.
template <typename T, LineWrite write, typename Column>
inline void line_tile(std::int64_t depth, const T* a, const T* b, T* top, T* bottom, Column column,
                      std::int64_t columns) {
  using L = LineVector<T>;
  constexpr int W = L::width, NR = static_cast<int>(kLineTileColumns<T>), kLines = 2 * NR;
  constexpr std::int64_t kTail = 32;
  typename L::V up[NR], down[NR];
  for (int j = 0; j < NR; ++j) up[j] = L::zero(), down[j] = L::zero();
  const auto line = [&](int q) { return (q % 2 ? bottom : top) + column(q / 2); };
  const auto step = [&]() __attribute__((always_inline)) {
    const auto a0 = L::load(a), a1 = L::load(a + W);
#pragma GCC unroll 14
    for (int j = 0; j < NR; ++j) {
      up[j] = L::fma(a0, b + j, up[j]);
      down[j] = L::fma(a1, b + j, down[j]);
    }
    a += 2 * W;
    b += NR;
  };
  std::int64_t p = 0;
  if constexpr (write != LineWrite::stream) {
    const std::int64_t head = depth > kTail ? depth - kTail : 0;
    const std::int64_t every = head / kLines;
    for (int q = 0; q < kLines && every > 0; ++q) {
      if (q / 2 < columns) __builtin_prefetch(line(q), 1, 2);
#pragma GCC unroll 4
      for (const std::int64_t end = p + every; p < end;) step(), ++p;
    }
#pragma GCC unroll 4
    for (; p < head;) step(), ++p;
    for (int q = 0; p < depth; ++q) {
      if (q < kLines && q / 2 < columns) __builtin_prefetch(line(q), 1, 3);
      step(), ++p;
    }
  } else {
#pragma GCC unroll 4
    for (; p < depth;) step(), ++p;
  }
  for (int j = 0; j < NR; ++j)
    if (j < columns) {
      T* const t = top + column(j);
      T* const d = bottom + column(j);
      if constexpr (write == LineWrite::stream) {
        L::stream(t, up[j]);
        L::stream(d, down[j]);
      } else if constexpr (write == LineWrite::add) {
        L::storeu(t, L::add(up[j], L::loadu(t)));
        L::storeu(d, L::add(down[j], L::loadu(d)));
      } else {
        L::storeu(t, up[j]);
        L::storeu(d, down[j]);
      }
    }
}

}  // namespace
}  // namespace einsumdb::tensor_gemm
EINSUMDB_TARGET_END
#endif  // EINSUMDB_AVX512
