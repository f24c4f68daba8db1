// Register transposes of a cache line square, one line per AVX-512 register: the micro-blocks of
// copy_layout (permute.cpp) and of tensor_gemm's write-out of streamed lines (16 × 16 floats; 4 ×
// 4 lanes of 128 bits, the last stage of every element size). Two shuffle stages within 128-bit
// lanes, then the transpose of the lanes: no lane-crossing shuffle but the last stage's. With
// AVX2, the squares of a 256-bit register (4 × 4 doubles, 8 × 8 floats), of which copy_layout's
// micro-blocks are made and tensor_gemm's write-out builds a line's square (transpose.hpp).
// Compiled for AVX2 and AVX-512 (isa_target.hpp), with internal linkage. Internal to executor/.
#pragma once

#include <immintrin.h>

#include "einsumdb/executor/isa_target.hpp"

#if EINSUMDB_AVX2
EINSUMDB_TARGET_BEGIN
namespace einsumdb::kernels {
namespace {

// out[i][j] <- r[j][i] for a 4 × 4 block of doubles, one row per register.
inline void transpose4(const __m256d r[4], __m256d out[4]) {
  const __m256d t0 = _mm256_unpacklo_pd(r[0], r[1]), t1 = _mm256_unpackhi_pd(r[0], r[1]),
                t2 = _mm256_unpacklo_pd(r[2], r[3]), t3 = _mm256_unpackhi_pd(r[2], r[3]);
  out[0] = _mm256_permute2f128_pd(t0, t2, 0x20);
  out[1] = _mm256_permute2f128_pd(t1, t3, 0x20);
  out[2] = _mm256_permute2f128_pd(t0, t2, 0x31);
  out[3] = _mm256_permute2f128_pd(t1, t3, 0x31);
}

// out[i][j] <- r[j][i] for an 8 × 8 block of floats, one row per register.
inline void transpose8(const __m256 r[8], __m256 out[8]) {
  __m256 t[8], u[8];
  for (int j = 0; j < 8; j += 2) {
    t[j] = _mm256_unpacklo_ps(r[j], r[j + 1]);      // columns 0, 1 | 4, 5 of rows j, j + 1
    t[j + 1] = _mm256_unpackhi_ps(r[j], r[j + 1]);  // columns 2, 3 | 6, 7
  }
  for (int h = 0; h < 8; h += 4) {  // rows h..h+3, columns q | q + 4
    u[h + 0] = _mm256_shuffle_ps(t[h], t[h + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[h + 1] = _mm256_shuffle_ps(t[h], t[h + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[h + 2] = _mm256_shuffle_ps(t[h + 1], t[h + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[h + 3] = _mm256_shuffle_ps(t[h + 1], t[h + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int q = 0; q < 4; ++q) {
    out[q] = _mm256_permute2f128_ps(u[q], u[q + 4], 0x20);
    out[q + 4] = _mm256_permute2f128_ps(u[q], u[q + 4], 0x31);
  }
}

#if EINSUMDB_AVX512

// (The zero-masking forms with every lane selected: GCC 12 warns of the plain forms' undefined
// source register wherever they are inlined.)
constexpr __mmask8 kAll8 = 0xFF;
constexpr __mmask16 kAll16 = 0xFFFF;

// Given u[k] (k < 4) whose 128-bit lane l holds piece l of row group k, out[l] = piece l of every
// group, groups in order (a 4 × 4 transpose of lanes; the bits are moved as they are, whatever the
// element type).
inline void transpose_lanes(__m512i u0, __m512i u1, __m512i u2, __m512i u3, __m512i out[4]) {
  const __m512i x0 = _mm512_maskz_shuffle_i64x2(kAll8, u0, u1, 0x44),
                x1 = _mm512_maskz_shuffle_i64x2(kAll8, u0, u1, 0xEE),
                x2 = _mm512_maskz_shuffle_i64x2(kAll8, u2, u3, 0x44),
                x3 = _mm512_maskz_shuffle_i64x2(kAll8, u2, u3, 0xEE);
  out[0] = _mm512_maskz_shuffle_i64x2(kAll8, x0, x2, 0x88);
  out[1] = _mm512_maskz_shuffle_i64x2(kAll8, x0, x2, 0xDD);
  out[2] = _mm512_maskz_shuffle_i64x2(kAll8, x1, x3, 0x88);
  out[3] = _mm512_maskz_shuffle_i64x2(kAll8, x1, x3, 0xDD);
}

// out[i][j] <- r[j][i] for a 16 × 16 block of floats, one row per register.
inline void transpose16(const __m512 r[16], __m512 out[16]) {
  __m512 t[16], u[16];
  for (int j = 0; j < 16; j += 2) {  // lane l of t[j + e]: columns 4l + 2e, +1 of rows j, j + 1
    t[j] = _mm512_maskz_unpacklo_ps(kAll16, r[j], r[j + 1]);
    t[j + 1] = _mm512_maskz_unpackhi_ps(kAll16, r[j], r[j + 1]);
  }
  for (int h = 0; h < 16; h += 4) {  // lane l of u[h + q]: column 4l + q of rows h..h+3
    u[h + 0] = _mm512_maskz_shuffle_ps(kAll16, t[h], t[h + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[h + 1] = _mm512_maskz_shuffle_ps(kAll16, t[h], t[h + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[h + 2] = _mm512_maskz_shuffle_ps(kAll16, t[h + 1], t[h + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[h + 3] = _mm512_maskz_shuffle_ps(kAll16, t[h + 1], t[h + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int q = 0; q < 4; ++q) {  // columns 4l + q
    __m512i o[4];
    transpose_lanes(_mm512_castps_si512(u[q]), _mm512_castps_si512(u[4 + q]),
                    _mm512_castps_si512(u[8 + q]), _mm512_castps_si512(u[12 + q]), o);
    for (int l = 0; l < 4; ++l) out[4 * l + q] = _mm512_castsi512_ps(o[l]);
  }
}

#endif  // EINSUMDB_AVX512

}  // namespace
}  // namespace einsumdb::kernels
EINSUMDB_TARGET_END
#endif
