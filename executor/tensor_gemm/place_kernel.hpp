// tensor_gemm's own kernel for streamed lines in place (streamed.hpp), AVX-512, in floats: where
// the output's unit-stride index belongs to X and X runs along it too, each run of it (up to
// kPlaceVectors half-width registers: TCCG case 11's 72 floats in nine) is summed whole against a
// few columns of W, packed once, and written where it lies. libxsmm's kernel takes the run in
// 512-bit registers, in pieces of whole registers (72 floats: 48 and 24, the second one and a half
// registers); where the processor runs a 512-bit operation as two 256-bit halves (Zen 4), 256-bit
// registers compute as many FMAs a cycle and fit such a run exactly. Where it runs them at full
// width (Zen 5), a run of 72 floats goes whole in five 512-bit registers, the last under a mask:
// libxsmm's kernel, whole or in pieces, takes a run that leaves a register part full at about two
// thirds of the rate it takes one of whole registers (docs/performance/tccg-place-wide.md).
//
// A tile is the run by J columns: J·V accumulators and V registers of X (at most 30 of the 32), W's
// values broadcast from memory. Where the tile's part of the output is whole aligned lines (TCCG
// case 11: two columns of 72 floats, 576 bytes, one after the other), a tile of 256-bit registers
// goes out in streaming stores, around the cache; otherwise in ordinary ones, the last register
// under a mask. Each tile fetches into L1 a share of the next piece's panel of X. Compiled only
// for AVX-512 (isa_target.hpp), for its 32 registers and masks. A second kernel, below, takes the
// plans whose summed elements lie apart in X where the kernels run AVX2 alone, in floats and
// doubles. Internal to executor/.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "einsumdb/executor/isa_target.hpp"
#include "einsumdb/executor/tensor_gemm/transpose.hpp"  // Ymm

namespace einsumdb::tensor_gemm {
// The longest run our kernel takes: ten 256-bit registers of floats.
inline constexpr std::int64_t kPlaceVectors = 10;

// The columns of a tile whose run takes v registers: as many as keep J·v accumulators and the v
// registers of X within 30 registers, up to 8 (24 accumulators at v = 3).
constexpr int place_columns(std::int64_t v) {
  return static_cast<int>(std::min<std::int64_t>(8, (30 - v) / v));
}
}  // namespace einsumdb::tensor_gemm

#if EINSUMDB_AVX512
EINSUMDB_TARGET_BEGIN
namespace einsumdb::tensor_gemm {
// Internal linkage, as for everything the driver alone instantiates (tensor_gemm.cpp says why).
namespace {

// Where a tile reads X and W and writes the output. The run's element i at summed element l is
// x[i + l·ds], i < rows; W's row l is w[l·width, l·width + J); column j of the run goes to
// z[i + j·ldz]. The tile fetches `fetches` runs of the next panel, the first at `fetch`, each
// `rows` elements at spacing ds.
struct PlaceTile {
  std::int64_t depth, ds, width, ldz, rows;
  std::uint32_t last;  // the last register's elements in the run, a bit each
  bool stream;         // whole aligned lines: streaming stores (256-bit registers only)
};

// A tile's registers: 256-bit ones (8 floats) or 512-bit ones (16).
template <int L>
struct PlaceRegs;

template <>
struct PlaceRegs<8> {
  using R = __m256;
  static R zero() { return _mm256_setzero_ps(); }
  static R load(const float* p) { return _mm256_loadu_ps(p); }
  static R load(std::uint32_t m, const float* p) { return _mm256_maskz_loadu_ps(m, p); }
  static R broadcast(float v) { return _mm256_set1_ps(v); }
  static R fma(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  static void store(float* p, R v) { _mm256_storeu_ps(p, v); }
  static void store(std::uint32_t m, float* p, R v) { _mm256_mask_storeu_ps(p, m, v); }
  static void stream(float* p, R v) { _mm256_stream_ps(p, v); }
};

template <>
struct PlaceRegs<16> {
  using R = __m512;
  static R zero() { return _mm512_setzero_ps(); }
  static R load(const float* p) { return _mm512_loadu_ps(p); }
  static R load(std::uint32_t m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
  static R broadcast(float v) { return _mm512_set1_ps(v); }
  static R fma(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static void store(float* p, R v) { _mm512_storeu_ps(p, v); }
  static void store(std::uint32_t m, float* p, R v) { _mm512_mask_storeu_ps(p, m, v); }
};

// A tile of V registers of L floats by J columns.
template <int V, int J, int L = 8>
void place_tile(const PlaceTile& t, const float* x, const float* w, float* z, int cols,
                const float* fetch, std::int64_t fetches) {
  using P = PlaceRegs<L>;
  for (std::int64_t f = 0; f < fetches; ++f)
    for (std::int64_t i = 0; i < t.rows + 15; i += 16)
      _mm_prefetch(reinterpret_cast<const char*>(fetch + f * t.ds + std::min(i, t.rows - 1)),
                   _MM_HINT_T0);
  typename P::R acc[J][V];
#pragma GCC unroll 8
  for (int j = 0; j < J; ++j)
#pragma GCC unroll 10
    for (int v = 0; v < V; ++v) acc[j][v] = P::zero();
  for (std::int64_t l = 0; l < t.depth; ++l, x += t.ds, w += t.width) {
    typename P::R xv[V];
#pragma GCC unroll 10
    for (int v = 0; v < V; ++v) xv[v] = v + 1 < V ? P::load(x + L * v) : P::load(t.last, x + L * v);
      // In registers, each loaded once: folded into each of its J FMAs instead, the loads would
      // outnumber what the load ports take in the FMAs' time (19 against 18 at V = 9, J = 2).
#pragma GCC unroll 10
    for (int v = 0; v < V; ++v) asm("" : "+v"(xv[v]));
#pragma GCC unroll 8
    for (int j = 0; j < J; ++j) {
      const auto b = P::broadcast(w[j]);
#pragma GCC unroll 10
      for (int v = 0; v < V; ++v) acc[j][v] = P::fma(b, xv[v], acc[j][v]);
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < J; ++j) {
    if (j >= cols) break;
    float* const zj = z + j * t.ldz;
#pragma GCC unroll 10
    for (int v = 0; v < V; ++v) {
      if constexpr (L == 8) {
        if (t.stream) {
          P::stream(zj + L * v, acc[j][v]);
          continue;
        }
      }
      if (v + 1 < V)
        P::store(zj + L * v, acc[j][v]);
      else
        P::store(t.last, zj + L * v, acc[j][v]);
    }
  }
}

}  // namespace
}  // namespace einsumdb::tensor_gemm
EINSUMDB_TARGET_END
#endif

// ---- With AVX2 alone, in floats and doubles, where the summed elements lie apart in X (TCCG case
// 5, ebad,ce->abcd: e's rows 3 MB apart in doubles, a multiple of 4 KB). 16 registers do not hold a
// run of 72 doubles, so a tile is a chunk of V registers of it by J columns: V·J accumulators, the
// chunk's V registers of X and one of W's values broadcast (V = 3, J = 4: all 16). Each piece's
// panel (the run at every summed element) is first copied into a buffer chunk by chunk, each
// chunk's rows one after another: read in place, the rows of a chunk, all on one set of L1, would
// evict each other before its next tile reads them again. The buffer's rows are padded with zeros
// to whole chunks. Each tile fetches its share of the next piece's panel into L2: each row of a
// panel lies in a page of its own, and the hardware's prefetchers do not follow such a stream.

#if EINSUMDB_AVX2
EINSUMDB_TARGET_BEGIN
namespace einsumdb::tensor_gemm {
// Internal linkage, as for everything the driver alone instantiates (tensor_gemm.cpp says why).
namespace {

inline constexpr int kChunkRegisters = 3;  // V
inline constexpr int kChunkColumns = 4;    // J

// Where a chunk's tile reads X and W and writes the output: the chunk's element i at summed
// element l is x[i + l·ds] (the buffer); W's row l is w[l·width, l·width + J); column j of the
// chunk goes to z[i + j·ldz], its last register under `last` where the run ends inside it. The
// tile fetches `fetches` rows of the next panel of X, the first at `fetch`, each `run` elements at
// spacing fetch_ds.
template <typename T>
struct PlaceChunk {
  std::int64_t depth, ds, width, ldz, run, fetch_ds;
  __m256i last;
};

template <typename T, int V, int J, bool Whole>
void place_chunk(const PlaceChunk<T>& t, const T* x, const T* w, T* z, int cols, const T* fetch,
                 std::int64_t fetches) {
  using Y = Ymm<T>;
  constexpr std::int64_t lanes = 32 / sizeof(T), line = 64 / sizeof(T);
  for (std::int64_t f = 0; f < fetches; ++f)
    for (std::int64_t i = 0; i < t.run + line - 1; i += line)
      _mm_prefetch(reinterpret_cast<const char*>(fetch + f * t.fetch_ds + std::min(i, t.run - 1)),
                   _MM_HINT_T1);
  typename Y::R acc[J][V];
#pragma GCC unroll 6
  for (int j = 0; j < J; ++j)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[j][v] = Y::zero();
  for (std::int64_t l = 0; l < t.depth; ++l, x += t.ds, w += t.width) {
    typename Y::R xv[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) xv[v] = Y::loadu(x + lanes * v);
#pragma GCC unroll 6
    for (int j = 0; j < J; ++j) {
      const auto b = Y::broadcast(w + j);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[j][v] = Y::fma(b, xv[v], acc[j][v]);
    }
  }
#pragma GCC unroll 6
  for (int j = 0; j < J; ++j) {
    if (j >= cols) break;
    T* const zj = z + j * t.ldz;
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      if (Whole || v + 1 < V)
        Y::storeu(zj + lanes * v, acc[j][v]);
      else
        Y::maskstore(zj + lanes * v, t.last, acc[j][v]);
    }
  }
}

}  // namespace
}  // namespace einsumdb::tensor_gemm
EINSUMDB_TARGET_END
#endif
