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

#include <algorithm>
#include <cstdint>

#include "einsumdb/executor/isa_target.hpp"
#include "einsumdb/executor/tensor_gemm/micro_kernel.hpp"
#include "einsumdb/executor/tensor_gemm/transpose.hpp"  // Lanes

#if EINSUMDB_AVX512
EINSUMDB_TARGET_BEGIN
namespace einsumdb::tensor_gemm {
// Internal linkage, as for everything the driver alone instantiates (tensor_gemm.cpp says why).
namespace {

// How line_tile writes its tile: streamed past the cache (whole aligned lines, no read), stored
// (whole lines, through the cache), or in place, set or added to what is there, its lines fetched
// during the sum.
enum class LineWrite { stream, store, set, add };

// Where one register's W rows of a column go, from the column's offset: lanes [0, split) from
// `at`, lanes [split, W) from `rest` (lane k at rest + k), the rows in two runs where a panel
// straddles two values of an index; split W, all from `at`.
template <typename T>
struct LineRows {
  T* at;
  T* rest;
  int split;
};

// The tile of the packed panels `a` (2W rows per summed element) and `b` (NR columns per summed
// element) summed over `depth` elements, its columns j < `columns` written (all NR where
// `whole`, with no test per column): rows [0, W) as `top`
// says and rows [W, 2W) as `bottom` says (LineRows), each moved by column(j). Streamed or stored,
// each is a whole line (64-byte aligned, not split; the caller checks). In place, the tile's first
// and last element of each run of rows are fetched during the sum: into L2 spread over its first
// part, into L1 over its last kTail elements. Fetched at the start, as BLIS's kernel does, they
// would be evicted again by the panels it reads (an A panel of 32 floats by KC = 384 is 48 KB, all
// of L1), and a tile in memory would be read at the end, with the FMA units idle.
template <typename T, LineWrite write, bool whole = false, typename Column>
[[gnu::always_inline]] inline void line_tile(std::int64_t depth, const T* a, const T* b,
                                             LineRows<T> top, LineRows<T> bottom, Column column,
                                             std::int64_t columns) {
  using L = Lanes<T>;
  constexpr int W = L::width, NR = static_cast<int>(kLineTileColumns<T>);
  constexpr std::int64_t kTail = 32;
  typename L::V up[NR], down[NR];
#pragma GCC unroll 14
  for (int j = 0; j < NR; ++j) up[j] = L::zero(), down[j] = L::zero();
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
  if constexpr (write == LineWrite::set || write == LineWrite::add) {
    // Each run's first and last element, per column: the lines the stores touch.
    const T* fetch[8 * NR];
    int fetches = 0;
    for (int j = 0; j < NR && (whole || j < columns); ++j)
      for (const LineRows<T>& rows : {top, bottom}) {
        const std::int64_t o = column(j);
        fetch[fetches++] = rows.at + o;
        fetch[fetches++] = rows.split < W ? rows.at + o + rows.split - 1 : rows.at + o + W - 1;
        if (rows.split < W) {
          fetch[fetches++] = rows.rest + o + rows.split;
          fetch[fetches++] = rows.rest + o + W - 1;
        }
      }
    const std::int64_t head = depth > kTail ? depth - kTail : 0;
    const std::int64_t every = fetches > 0 ? head / fetches : 0;
    for (int q = 0; q < fetches && every > 0; ++q) {
      __builtin_prefetch(fetch[q], 1, 2);
#pragma GCC unroll 4
      for (const std::int64_t end = p + every; p < end;) step(), ++p;
    }
#pragma GCC unroll 4
    for (; p < head;) step(), ++p;
    const std::int64_t per = (fetches + kTail - 1) / kTail;
    for (int q = 0; p < depth;) {
      for (const int end = std::min<int>(fetches, q + static_cast<int>(per)); q < end; ++q)
        __builtin_prefetch(fetch[q], 1, 3);
      step(), ++p;
    }
  } else {
#pragma GCC unroll 4
    for (; p < depth;) step(), ++p;
  }
  const auto put = [](const LineRows<T>& rows, std::int64_t o, typename L::V v) {
    if constexpr (write == LineWrite::stream) {
      L::stream(rows.at + o, v);
    } else if constexpr (write == LineWrite::store) {
      L::storeu(rows.at + o, v);
    } else if (rows.split == W) {
      L::storeu(rows.at + o, write == LineWrite::add ? L::add(v, L::loadu(rows.at + o)) : v);
    } else {
      const auto first = L::first(rows.split);
      const auto rest = static_cast<decltype(first)>(~first);
      T* const at = rows.at + o;
      T* const more = rows.rest + o;
      if constexpr (write == LineWrite::add) {
        L::store(at, first, L::add(v, L::load(first, at)));
        L::store(more, rest, L::add(v, L::load(rest, more)));
      } else {
        L::store(at, first, v);
        L::store(more, rest, v);
      }
    }
  };
#pragma GCC unroll 14
  for (int j = 0; j < NR; ++j)
    if (whole || j < columns) {
      const std::int64_t o = column(j);
      put(top, o, up[j]);
      put(bottom, o, down[j]);
    }
}

}  // namespace
}  // namespace einsumdb::tensor_gemm
EINSUMDB_TARGET_END
#endif  // EINSUMDB_AVX512
