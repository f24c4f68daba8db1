// tensor_gemm's register blocks: a cache line of T under a lane mask (Lanes) and transposes of a
// cache line square (8 × 8 doubles, 16 × 16 floats), through which tiles and panels change
// direction on their way between the tensors and the micro-kernel. With AVX-512 a line is one
// register; with AVX2 it is two 256-bit ones, and a mask is the number of leading lanes it selects
// (every mask the write-out uses selects a line's first lanes). Compiled for AVX2 and AVX-512
// (isa_target.hpp). Internal to executor/.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "einsumdb/executor/isa_target.hpp"
#include "einsumdb/executor/line_transpose.hpp"  // 16 × 16 floats; 4 × 4 doubles, 8 × 8 floats

#if EINSUMDB_AVX2
EINSUMDB_TARGET_BEGIN
namespace einsumdb::tensor_gemm {
// Internal linkage, as for everything the driver alone instantiates (tensor_gemm.cpp says why).
namespace {

// One 256-bit register of T and the operations the AVX2 routines take on it (Lanes,
// stream_tile.hpp), a mask being all ones in each lane it selects.
template <typename T>
struct Ymm;
template <>
struct Ymm<double> {
  using R = __m256d;
  static R zero() { return _mm256_setzero_pd(); }
  static R load(const double* p) { return _mm256_load_pd(p); }
  static R loadu(const double* p) { return _mm256_loadu_pd(p); }
  static R broadcast(const double* p) { return _mm256_broadcast_sd(p); }
  static void storeu(double* p, R v) { _mm256_storeu_pd(p, v); }
  static void stream(double* p, R v) { _mm256_stream_pd(p, v); }
  static R add(R x, R y) { return _mm256_add_pd(x, y); }
  static R fma(R a, R b, R c) { return _mm256_fmadd_pd(a, b, c); }
  static __m256i first(std::int64_t n) {  // lanes i < n
    return _mm256_cmpgt_epi64(_mm256_set1_epi64x(std::clamp<std::int64_t>(n, 0, 4)),
                              _mm256_setr_epi64x(0, 1, 2, 3));
  }
  static R maskload(const double* p, __m256i m) { return _mm256_maskload_pd(p, m); }
  static void maskstore(double* p, __m256i m, R v) { _mm256_maskstore_pd(p, m, v); }
  // The even elements of x then y (evens), the odd ones (odds): in-lane unpacks, then the middle
  // quarters trade places.
  static R evens(R x, R y) { return _mm256_permute4x64_pd(_mm256_unpacklo_pd(x, y), 0xD8); }
  static R odds(R x, R y) { return _mm256_permute4x64_pd(_mm256_unpackhi_pd(x, y), 0xD8); }
};
template <>
struct Ymm<float> {
  using R = __m256;
  static R zero() { return _mm256_setzero_ps(); }
  static R load(const float* p) { return _mm256_load_ps(p); }
  static R loadu(const float* p) { return _mm256_loadu_ps(p); }
  static R broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static void storeu(float* p, R v) { _mm256_storeu_ps(p, v); }
  static void stream(float* p, R v) { _mm256_stream_ps(p, v); }
  static R add(R x, R y) { return _mm256_add_ps(x, y); }
  static R fma(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  static __m256i first(std::int64_t n) {
    return _mm256_cmpgt_epi32(
        _mm256_set1_epi32(static_cast<int>(std::clamp<std::int64_t>(n, 0, 8))),
        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static R maskload(const float* p, __m256i m) { return _mm256_maskload_ps(p, m); }
  static void maskstore(float* p, __m256i m, R v) { _mm256_maskstore_ps(p, m, v); }
  static R evens(R x, R y) { return quarters(_mm256_shuffle_ps(x, y, _MM_SHUFFLE(2, 0, 2, 0))); }
  static R odds(R x, R y) { return quarters(_mm256_shuffle_ps(x, y, _MM_SHUFFLE(3, 1, 3, 1))); }
  static R quarters(R v) {  // its middle quarters (64 bits each) trade places
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(v), 0xD8));
  }
};

#if EINSUMDB_AVX512

// One AVX-512 register of T, its lanes under a mask.
template <typename T>
struct Lanes;
template <>
struct Lanes<double> {
  using V = __m512d;
  static constexpr std::int64_t width = 8;
  static V zero() { return _mm512_setzero_pd(); }
  static V load(const double* p) { return _mm512_load_pd(p); }  // aligned
  static void storeu(double* p, V v) { _mm512_storeu_pd(p, v); }
  // c + a · *b, *b in every lane.
  static V fma(V a, const double* b, V c) { return _mm512_fmadd_pd(a, _mm512_set1_pd(*b), c); }
  static __mmask8 first(std::int64_t n) { return static_cast<__mmask8>((1u << n) - 1); }
  static __m512d load(__mmask8 m, const double* p) { return _mm512_maskz_loadu_pd(m, p); }
  static __m512d loadu(const double* p) { return _mm512_loadu_pd(p); }
  static __m512d add(__m512d x, __m512d y) { return _mm512_add_pd(x, y); }
  static void store(double* p, __mmask8 m, __m512d v) { _mm512_mask_storeu_pd(p, m, v); }
  static void stream(double* p, __m512d v) { _mm512_stream_pd(p, v); }
  // The even elements of x then y (evens), the odd ones (odds): two interleaved runs apart.
  static __m512d evens(__m512d x, __m512d y) {
    return _mm512_permutex2var_pd(x, _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14), y);
  }
  static __m512d odds(__m512d x, __m512d y) {
    return _mm512_permutex2var_pd(x, _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15), y);
  }
};
template <>
struct Lanes<float> {
  using V = __m512;
  static constexpr std::int64_t width = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_load_ps(p); }
  static void storeu(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V fma(V a, const float* b, V c) { return _mm512_fmadd_ps(a, _mm512_set1_ps(*b), c); }
  static __mmask16 first(std::int64_t n) { return static_cast<__mmask16>((1u << n) - 1); }
  static __m512 load(__mmask16 m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
  static __m512 loadu(const float* p) { return _mm512_loadu_ps(p); }
  static __m512 add(__m512 x, __m512 y) { return _mm512_add_ps(x, y); }
  static void store(float* p, __mmask16 m, __m512 v) { _mm512_mask_storeu_ps(p, m, v); }
  static void stream(float* p, __m512 v) { _mm512_stream_ps(p, v); }
  static __m512 evens(__m512 x, __m512 y) {
    return _mm512_permutex2var_ps(
        x, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), y);
  }
  static __m512 odds(__m512 x, __m512 y) {
    return _mm512_permutex2var_ps(
        x, _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31), y);
  }
};

// Columns p and p + 1 of rows h to h + 3 of the 8 × 8 block of doubles whose row u is at q + u·ld:
// from two 128-bit loads per register and one in-lane unpack each, no lane-crossing shuffle.
inline void transposed_quarter(const double* q, std::int64_t ld, int p, int h, __m256d& column_p,
                               __m256d& column_next) {
  const double* a = q + h * ld + p;
  const __m256d x0 = _mm256_insertf128_pd(_mm256_castpd128_pd256(_mm_loadu_pd(a)),
                                          _mm_loadu_pd(a + 2 * ld), 1);  // rows h, h + 2
  const __m256d x1 = _mm256_insertf128_pd(_mm256_castpd128_pd256(_mm_loadu_pd(a + ld)),
                                          _mm_loadu_pd(a + 3 * ld), 1);  // rows h + 1, h + 3
  column_p = _mm256_unpacklo_pd(x0, x1);
  column_next = _mm256_unpackhi_pd(x0, x1);
}

// d[i·ldd + u] <- q[u·ld + i] for an 8 × 8 block of doubles, each row of d written in two halves.
// The block goes in 4 × 4 quarters from 128-bit loads: Zen 4 runs AVX-512's lane-crossing shuffles
// at a fraction of the in-lane rate, so loading whole rows and transposing them in registers
// (transpose8) is slower there.
inline void transpose8_to(const double* q, std::int64_t ld, double* d, std::int64_t ldd) {
  for (int p = 0; p < 8; p += 2)
    for (int h = 0; h < 8; h += 4) {
      __m256d a, b;
      transposed_quarter(q, ld, p, h, a, b);
      _mm256_storeu_pd(d + p * ldd + h, a);
      _mm256_storeu_pd(d + (p + 1) * ldd + h, b);
    }
}

// r[i] <- column i of the 8 × 8 block of doubles whose row u is at q + u·ld, in quarters
// (transposed_quarter), each pair of halves joined once (the zero-masking form with every lane
// selected, as in transpose8).
inline void load_transposed8(const double* q, std::int64_t ld, __m512d* r) {
  for (int p = 0; p < 8; p += 2) {
    __m256d a0, b0, a1, b1;
    transposed_quarter(q, ld, p, 0, a0, b0);
    transposed_quarter(q, ld, p, 4, a1, b1);
    r[p] = _mm512_maskz_insertf64x4(0xFF, _mm512_castpd256_pd512(a0), a1, 1);
    r[p + 1] = _mm512_maskz_insertf64x4(0xFF, _mm512_castpd256_pd512(b0), b1, 1);
  }
}

// r[i][j] <- r[j][i] for an 8 × 8 block of doubles, one row per register. (The zero-masking forms
// with every lane selected: GCC 12 warns of the plain forms' undefined source register.) Inlined
// wherever it is used, so that its block stays in registers: called, it goes through memory both
// ways, and complex floats' lines (complex_lines.hpp) went out slower.
__attribute__((always_inline)) inline void transpose8(__m512d* r) {
  constexpr __mmask8 all = 0xFF;
  __m512d t[8];
  for (int k = 0; k < 8; k += 2) {
    t[k] = _mm512_maskz_unpacklo_pd(all, r[k],
                                    r[k + 1]);  // r[k][0], r[k+1][0], r[k][2], r[k+1][2], ...
    t[k + 1] = _mm512_maskz_unpackhi_pd(all, r[k], r[k + 1]);
  }
  const __m512i even = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
  const __m512i odd = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
  // u[0]: the columns 0 and 4 of rows 0-3, u[1]: 2 and 6, u[2]: 1 and 5, u[3]: 3 and 7; v: rows
  // 4-7.
  const __m512d u[4] = {
      _mm512_permutex2var_pd(t[0], even, t[2]), _mm512_permutex2var_pd(t[0], odd, t[2]),
      _mm512_permutex2var_pd(t[1], even, t[3]), _mm512_permutex2var_pd(t[1], odd, t[3])};
  const __m512d v[4] = {
      _mm512_permutex2var_pd(t[4], even, t[6]), _mm512_permutex2var_pd(t[4], odd, t[6]),
      _mm512_permutex2var_pd(t[5], even, t[7]), _mm512_permutex2var_pd(t[5], odd, t[7])};
  constexpr int column[4] = {0, 2, 1, 3};
  for (int k = 0; k < 4; ++k) {
    r[column[k]] = _mm512_maskz_shuffle_f64x2(all, u[k], v[k], 0x44);      // the low halves of both
    r[column[k] + 4] = _mm512_maskz_shuffle_f64x2(all, u[k], v[k], 0xEE);  // the high halves
  }
}

// The same for 16 × 16 floats, whose rows are loaded whole (line_transpose.hpp).
inline void load_transposed16(const float* q, std::int64_t ld, __m512* r) {
  __m512 rows[16];
  for (int u = 0; u < 16; ++u) rows[u] = _mm512_loadu_ps(q + u * ld);
  kernels::transpose16(rows, r);
}

// A cache line square by element type: r[i] <- column i of the block whose row u is at q + u·ld
// (load_transposed), or whose row u is r[u] (transpose_block).
inline void load_transposed(const double* q, std::int64_t ld, __m512d* r) {
  load_transposed8(q, ld, r);
}
inline void load_transposed(const float* q, std::int64_t ld, __m512* r) {
  load_transposed16(q, ld, r);
}
inline void transpose_block(__m512d* r) {
  transpose8(r);
}
inline void transpose_block(__m512* r) {
  __m512 rows[16];
  std::copy(r, r + 16, rows);
  kernels::transpose16(rows, r);
}

#else
// A cache line of T in two AVX2 registers (Ymm<T>): its first half and its second.
template <typename T>
struct Line {
  typename Ymm<T>::R lo, hi;
};

// One cache line of T in two AVX2 registers, its first `mask` lanes selected. The same operations
// as AVX-512's Lanes, for the write-out's routines.
template <typename T>
struct Lanes {
  using Y = Ymm<T>;
  using V = Line<T>;
  static constexpr std::int64_t width = 64 / sizeof(T), half = width / 2;
  static V zero() { return {Y::zero(), Y::zero()}; }
  static V load(const T* p) { return {Y::load(p), Y::load(p + half)}; }
  static V loadu(const T* p) { return {Y::loadu(p), Y::loadu(p + half)}; }
  static void storeu(T* p, V v) { Y::storeu(p, v.lo), Y::storeu(p + half, v.hi); }
  static std::int64_t first(std::int64_t n) { return n; }
  // Masked loads touch no memory outside their lanes; a half wholly selected loads plainly.
  static typename Y::R half_load(std::int64_t n, const T* p) {
    return n >= half ? Y::loadu(p) : n <= 0 ? Y::zero() : Y::maskload(p, Y::first(n));
  }
  static V load(std::int64_t n, const T* p) {
    return {half_load(n, p), half_load(n - half, p + half)};
  }
  static V add(V x, V y) { return {Y::add(x.lo, y.lo), Y::add(x.hi, y.hi)}; }
  static void half_store(T* p, std::int64_t n, typename Y::R v) {
    if (n >= half)
      Y::storeu(p, v);
    else if (n > 0)
      Y::maskstore(p, Y::first(n), v);
  }
  static void store(T* p, std::int64_t n, V v) {
    half_store(p, n, v.lo), half_store(p + half, n - half, v.hi);
  }
  static void stream(T* p, V v) { Y::stream(p, v.lo), Y::stream(p + half, v.hi); }
  // The even elements of x then y (evens), the odd ones (odds): two interleaved runs apart.
  static V evens(V x, V y) { return {Y::evens(x.lo, x.hi), Y::evens(y.lo, y.hi)}; }
  static V odds(V x, V y) { return {Y::odds(x.lo, x.hi), Y::odds(y.lo, y.hi)}; }
};

// A cache line square as four squares of a register's lanes: r[i] <- column i of the block whose
// row u is r[u] (transpose_block), or is at q + u·ld (load_transposed). The two squares off the
// diagonal trade places.
template <typename T>
inline void transpose_block(Line<T>* r) {
  constexpr int n = static_cast<int>(Lanes<T>::half);  // a register's lanes
  typename Ymm<T>::R s[4][n], t[4][n];
  for (int u = 0; u < n; ++u)
    s[0][u] = r[u].lo, s[1][u] = r[u].hi, s[2][u] = r[n + u].lo, s[3][u] = r[n + u].hi;
  for (int q = 0; q < 4; ++q) {
    if constexpr (n == 4)
      kernels::transpose4(s[q], t[q]);
    else
      kernels::transpose8(s[q], t[q]);
  }
  for (int i = 0; i < n; ++i) r[i] = {t[0][i], t[2][i]}, r[n + i] = {t[1][i], t[3][i]};
}
template <typename T>
inline void load_transposed(const T* q, std::int64_t ld, Line<T>* r) {
  for (std::int64_t u = 0; u < Lanes<T>::width; ++u) r[u] = Lanes<T>::loadu(q + u * ld);
  transpose_block(r);
}
#endif

// d[0, width) under `mask` = v, or += with `accumulate`; a whole aligned line streamed with
// `stream`.
template <typename T, typename R, typename Mask>
inline void put(T* d, R v, Mask mask, bool accumulate, bool stream) {
  using V = Lanes<T>;
  if (accumulate) v = V::add(v, V::load(mask, d));
  if (stream && mask == V::first(V::width) && reinterpret_cast<std::uintptr_t>(d) % 64 == 0)
    V::stream(d, v);
  else
    V::store(d, mask, v);
}
}  // namespace
}  // namespace einsumdb::tensor_gemm
EINSUMDB_TARGET_END
#endif
