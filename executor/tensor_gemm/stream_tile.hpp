// tensor_gemm's own micro-kernel for BLIS's AVX2 (Haswell) tile written around the cache: 6 rows
// by a cache line of columns (16 floats, 8 doubles), each row contiguous in the output and starting
// a line of it, the rows evenly spaced or not, from BLIS's
// packed micro-panels (the tile's 6 rows' values, then its line of columns', at each summed
// element), summed in 12 of the 16 registers; each row's line then goes from its two registers
// straight into the output in non-temporal stores. BLIS's kernel writes such a tile in place with
// ordinary stores, which read each line from memory first, and through the buffer (copy_run) a copy
// comes on top of the kernel's stores. The AVX-512 micro-kernels' tiles are column-major and go
// around the cache through libxsmm's kernels (Gemm::write_around) or ours (line_kernel.hpp).
// Compiled for AVX2 and AVX-512 (isa_target.hpp). Internal to executor/.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "einsumdb/executor/isa_target.hpp"
#include "einsumdb/executor/tensor_gemm/blocking.hpp"   // haswell_tile
#include "einsumdb/executor/tensor_gemm/transpose.hpp"  // Ymm

#if EINSUMDB_AVX2
EINSUMDB_TARGET_BEGIN
namespace einsumdb::tensor_gemm {
// Internal linkage, as for everything the driver alone instantiates (tensor_gemm.cpp says why).
namespace {

inline constexpr std::int64_t kStreamTileRows = 6;

// Whether BLIS's micro-kernel k has the tile stream_tile computes: its Haswell tile (6 rows by a
// line of columns, packed to exactly that), written row by row.
template <typename T, typename Kernel>
bool stream_tile_fits(const Kernel& k) {
  static_assert(kStreamTileRows == 6);  // haswell_tile's rows
  return k.prefers_rows && haswell_tile<T>(k);
}

// c[row[i] + j] = Σ_p a[p·6 + i] · b[p·L + j] for the tile's 6 rows i and the L elements j of a
// line, each row streamed whole: c and row[i] put every row on a line's start, evenly spaced or
// not (TCCG case 43, geab,dfgc->abcdef: rows along e's 16 values, 16 elements apart, and in two
// panels of every eight across into the next value of b, 98,304 elements on).
template <typename T>
inline void stream_tile(std::int64_t k, const T* a, const T* b, T* c, const std::int64_t* row) {
  using Y = Ymm<T>;
  constexpr std::int64_t half = 32 / static_cast<std::int64_t>(sizeof(T));
  typename Y::R acc[kStreamTileRows][2];
  for (auto& row : acc) row[0] = row[1] = Y::zero();
  for (std::int64_t p = 0; p < k; ++p, a += kStreamTileRows, b += 2 * half) {
    const auto b0 = Y::loadu(b), b1 = Y::loadu(b + half);
#pragma GCC unroll 6
    for (int i = 0; i < kStreamTileRows; ++i) {
      const auto ai = Y::broadcast(a + i);
      acc[i][0] = Y::fma(ai, b0, acc[i][0]);
      acc[i][1] = Y::fma(ai, b1, acc[i][1]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < kStreamTileRows; ++i)
    Y::stream(c + row[i], acc[i][0]), Y::stream(c + row[i] + half, acc[i][1]);
}

}  // namespace
}  // namespace einsumdb::tensor_gemm
EINSUMDB_TARGET_END
#endif
