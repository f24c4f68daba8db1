// tensor_gemm's own micro-kernel (AVX-512): a tile of two registers' rows (MR = 2 lines: 32
// floats, 16 doubles) by NR columns, from the panels BLIS's packing layout gives (packing.hpp),
// kept in registers over the whole sum and written straight to the output a line at a time: rows
// [0, W) and [W, 2W) of column j, each one whole aligned cache line, to wherever they lie.
// BLIS's micro-kernel writes a tile along two strides and libxsmm's along one column stride, both
// with the tile's rows contiguous; where they are not (a float tile of 32 rows over an output
// index of 16, TCCG cases 31-36 and 43-48), the tile goes through a buffer (write_out.hpp), and two
// libxsmm kernels of a line's rows each would read the packed B panel twice, with half the FMAs
// per element of B. Here each element of B feeds both halves, as in BLIS's kernel, and the stores
// go around the cache (non-temporal): a tile written once, whose lines need no read of their old
// contents. Compiled only for AVX-512 (isa_target.hpp). Internal to executor/.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "einsumdb/executor/isa_target.hpp"

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
};
template <>
struct LineVector<float> {
  using V = __m512;
  static constexpr int width = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_load_ps(p); }
  static V fma(V a, const float* b, V c) { return _mm512_fmadd_ps(a, _mm512_set1_ps(*b), c); }
  static void stream(float* p, V v) { _mm512_stream_ps(p, v); }
};

// The NR tiles' column counts this kernel is compiled for: BLIS's AVX-512 register tiles (32 × 12
// floats, 16 × 14 doubles on skx and zen4).
template <typename T>
inline constexpr int kLineKernelColumns = sizeof(T) == 4 ? 12 : 14;

// Whether line_tile computes a micro-kernel's tile of `mr` × `nr` packed `packmr` and `packnr`
// per summed element (the panels' starts aligned to a line, as the packing buffers are).
template <typename T>
bool line_tile_fits(std::int64_t mr, std::int64_t nr, std::int64_t packmr, std::int64_t packnr) {
  return mr == 2 * LineVector<T>::width && packmr == mr && nr == kLineKernelColumns<T> &&
         packnr == nr;
}

// The tile of the packed panels `a` (2W rows per summed element) and `b` (NR columns per summed
// element) summed over `depth` elements, its columns j < `columns` written: rows [0, W) to
// c + cm0 + cn[j] and rows [W, 2W) to c + cm1 + cn[j], each address a whole line (64-byte
// aligned; the caller checks).
template <typename T>
inline void line_tile(std::int64_t depth, const T* a, const T* b, T* c, std::int64_t cm0,
                      std::int64_t cm1, const std::int64_t* cn, std::int64_t columns) {
  using L = LineVector<T>;
  constexpr int W = L::width, NR = kLineKernelColumns<T>;
  typename L::V top[NR], bottom[NR];
  for (int j = 0; j < NR; ++j) top[j] = L::zero(), bottom[j] = L::zero();
#pragma GCC unroll 4
  for (std::int64_t p = 0; p < depth; ++p) {
    const auto a0 = L::load(a), a1 = L::load(a + W);
#pragma GCC unroll 14
    for (int j = 0; j < NR; ++j) {
      top[j] = L::fma(a0, b + j, top[j]);
      bottom[j] = L::fma(a1, b + j, bottom[j]);
    }
    a += 2 * W;
    b += NR;
  }
  T* const c0 = c + cm0;
  T* const c1 = c + cm1;
  for (int j = 0; j < NR; ++j)
    if (j < columns) {
      L::stream(c0 + cn[j], top[j]);
      L::stream(c1 + cn[j], bottom[j]);
    }
}

}  // namespace
}  // namespace einsumdb::tensor_gemm
EINSUMDB_TARGET_END
#endif  // EINSUMDB_AVX512
