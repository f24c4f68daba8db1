// tensor_gemm's own kernel for streamed rows (streamed.hpp), AVX-512: a tile of R rows of X, read
// in place, by all N columns of W, packed once, summed over all of X's summed elements and kept in
// registers. Each element of X is broadcast against a row of W, and each of the tile's rows goes
// out whole. The row of W takes half-width registers only, up to four, where the processor runs a
// 512-bit operation in two halves (Zen 4), otherwise full ones with at most one half-width last
// (24 floats: one and one); machine_rows_shape measures which. There, where X's rows are
// contiguous at each summed element and W's row is 17 to 24 floats, a tile runs along the rows
// instead, transposed on its way out (rows_across_tile).
//
// Where X's rows are contiguous at each summed element (TCCG case 1, bda,dc->abc: the rows along
// a), each step of the sum reads its R elements from a line of its own, 1,248 bytes (floats) from
// the last one, and the hardware's prefetchers do not fetch such a stream ahead: each step fetches
// the line of the rows a tile or two on (kRowsFetchBytes) into L2, in this piece of rows or the
// next. Where each row's summed elements are contiguous, each step fetches a line on in one of the
// next tile's rows, in turn. Compiled only for AVX-512 (isa_target.hpp). A second kernel, below,
// takes the first layout where the kernels run AVX2 alone. Internal to executor/.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "einsumdb/executor/isa_target.hpp"
#include "einsumdb/executor/tensor_gemm/transpose.hpp"  // transpose_block

namespace einsumdb::tensor_gemm {
// The widest row of W our kernel takes: four full vectors (R rows of one to four vectors each, at
// most 24 accumulators of the 32 registers).
inline constexpr std::int64_t kOwnRowBytes = 256;
// The most columns of floats rows_across_tile takes (below).
inline constexpr int kAcrossColumns = 24;
// Whether streamed rows of floats whose rows are contiguous at each summed element, n columns, go
// through rows_across_tile rather than rows_tile: where the processor runs 512-bit operations
// whole (`wide`) and W's row ends in a half-width register of rows_tile's (17 to 24 columns).
inline bool rows_across_floats(std::int64_t n, bool wide) {
  return wide && n > 16 && n <= kAcrossColumns;
}
namespace {

// Fetches into L2 the n elements of T at p (at most a line's bytes): the line p starts in, and the
// line after it where they run into that one. Once: each line once, where a tile's consecutive
// summed elements lie less than a page apart (fetch_once: TCCG case 1, bda,dc->abc, 1,248 bytes in
// floats; case 3, dbea,ec->abcd, 288), where a second prefetch of a line already on its way only
// slowed the kernel down. Where they lie further apart (case 2, dca,bd->abc: 369 KB), the second
// prefetch goes out all the same, on p's own line: without it case 2 ran slower
// (docs/performance/tccg-fetch-once.md).
template <bool Once, typename T>
inline void fetch_span(const T* p, std::int64_t n) {
  _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T1);
  if (!Once ||
      (reinterpret_cast<std::uintptr_t>(p) & 63) + static_cast<std::uintptr_t>(n) * sizeof(T) > 64)
    _mm_prefetch(reinterpret_cast<const char*>(p + n - 1), _MM_HINT_T1);
}

// Whether fetch_span fetches each line once along summed elements ds elements of T apart.
template <typename T>
inline bool fetch_once(std::int64_t ds) {
  return ds * static_cast<std::int64_t>(sizeof(T)) < 4096;
}

}  // namespace
}  // namespace einsumdb::tensor_gemm

#if EINSUMDB_AVX512
EINSUMDB_TARGET_BEGIN
namespace einsumdb::tensor_gemm {
// Internal linkage, as for everything the driver alone instantiates (tensor_gemm.cpp says why).
namespace {

// A full vector (zmm) and a half one (ymm) of T.
template <typename T>
struct Halves;
template <>
struct Halves<float> {
  using Z = __m512;
  using Y = __m256;
  static constexpr int z = 16;
  static Z zero_z() { return _mm512_setzero_ps(); }
  static Y zero_y() { return _mm256_setzero_ps(); }
  static Z load_z(const float* p) { return _mm512_loadu_ps(p); }
  static Y load_y(const float* p) { return _mm256_loadu_ps(p); }
  static Z splat(const float* p) { return _mm512_set1_ps(*p); }
  static Y splat_y(const float* p) { return _mm256_set1_ps(*p); }
  static Z fma(Z a, Z b, Z c) { return _mm512_fmadd_ps(a, b, c); }
  static Y fma(Y a, Y b, Y c) { return _mm256_fmadd_ps(a, b, c); }
  static void store(float* p, Z v, unsigned mask) {
    _mm512_mask_storeu_ps(p, static_cast<__mmask16>(mask), v);
  }
  static void store(float* p, Y v, unsigned mask) {
    _mm256_mask_storeu_ps(p, static_cast<__mmask8>(mask), v);
  }
};
template <>
struct Halves<double> {
  using Z = __m512d;
  using Y = __m256d;
  static constexpr int z = 8;
  static Z zero_z() { return _mm512_setzero_pd(); }
  static Y zero_y() { return _mm256_setzero_pd(); }
  static Z load_z(const double* p) { return _mm512_loadu_pd(p); }
  static Y load_y(const double* p) { return _mm256_loadu_pd(p); }
  static Z splat(const double* p) { return _mm512_set1_pd(*p); }
  static Y splat_y(const double* p) { return _mm256_set1_pd(*p); }
  static Z fma(Z a, Z b, Z c) { return _mm512_fmadd_pd(a, b, c); }
  static Y fma(Y a, Y b, Y c) { return _mm256_fmadd_pd(a, b, c); }
  static void store(double* p, Z v, unsigned mask) {
    _mm512_mask_storeu_pd(p, static_cast<__mmask8>(mask), v);
  }
  static void store(double* p, Y v, unsigned mask) {
    _mm256_mask_storeu_pd(p, static_cast<__mmask8>(mask), v);
  }
};

// Where a tile reads X and writes its rows. Row i's summed element l is x[i·rs + l·ds]; W's row l
// is w[l·width, (l + 1)·width), zero past the columns; row i of the tile goes to c + i·c_rs, its
// last vector under `last` (a lane mask). Step l fetches fetch + l·ds + q·fetch_rs, q counting
// through the tile's rows (fetch: RowsKernel).
template <typename T>
struct RowsTile {
  std::int64_t depth, rs, ds;
  std::int64_t fetch_rs;
  const T* w;
  std::int64_t width;
  std::int64_t c_rs;
  unsigned last;
};

// The tile of rows [0, R) from x into c: Z full vectors of columns, then Y half ones. Its
// fetches go into L2, or with L1 into L1 as well ("rows_fetch": "l1", RowOptions::rows_fetch_l1).
template <typename T, int R, int Z, int Y, bool L1>
void rows_tile(const RowsTile<T>& t, const T* x, T* c, const T* fetch) {
  using H = Halves<T>;
  constexpr int V = Z + Y;
  typename H::Z full[R][Z > 0 ? Z : 1];
  typename H::Y half[R][Y > 0 ? Y : 1];
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < Z; ++v) full[i][v] = H::zero_z();
#pragma GCC unroll 4
    for (int v = 0; v < Y; ++v) half[i][v] = H::zero_y();
  }
  const T* w = t.w;
  int q = 0;
  for (std::int64_t l = 0; l < t.depth; ++l, w += t.width) {
    const T* xl = x + l * t.ds;
    _mm_prefetch(reinterpret_cast<const char*>(fetch + l * t.ds + q * t.fetch_rs),
                 L1 ? _MM_HINT_T0 : _MM_HINT_T1);
    q = q + 1 == R ? 0 : q + 1;
    typename H::Z wz[Z > 0 ? Z : 1];
    typename H::Y wy[Y > 0 ? Y : 1];
#pragma GCC unroll 4
    for (int v = 0; v < Z; ++v) wz[v] = H::load_z(w + v * H::z);
#pragma GCC unroll 4
    for (int v = 0; v < Y; ++v) wy[v] = H::load_y(w + Z * H::z + v * (H::z / 2));
#pragma GCC unroll 12
    for (int i = 0; i < R; ++i) {
      // (Each width's broadcast a load of its own, which GCC folds into the FMAs.)
      if constexpr (Z > 0) {
        const typename H::Z s = H::splat(xl + i * t.rs);
#pragma GCC unroll 4
        for (int v = 0; v < Z; ++v) full[i][v] = H::fma(s, wz[v], full[i][v]);
      }
      if constexpr (Y > 0) {
        const typename H::Y s = H::splat_y(xl + i * t.rs);
#pragma GCC unroll 4
        for (int v = 0; v < Y; ++v) half[i][v] = H::fma(s, wy[v], half[i][v]);
      }
    }
  }
  constexpr unsigned all = ~0u;
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i) {
    T* ci = c + i * t.c_rs;
#pragma GCC unroll 4
    for (int v = 0; v < Z; ++v) H::store(ci + v * H::z, full[i][v], v + 1 == V ? t.last : all);
#pragma GCC unroll 4
    for (int v = 0; v < Y; ++v)
      H::store(ci + Z * H::z + v * (H::z / 2), half[i][v], Z + v + 1 == V ? t.last : all);
  }
}

// How far ahead a tile fetches X where its rows are contiguous at each summed element: a line
// along them (the tile after next, or the one after that), into L2 by default: in L1, the lines
// of the tiles between may evict them. Which is faster depends on the processor (on an Intel Xeon,
// into L1: docs/performance/tccg-rows-fetch.md), and the tuner measures both (rows_fetch).
inline constexpr std::int64_t kRowsFetchBytes = 64;

// The kernels of one shape of columns: R rows at a time, and one for the rows left over.
template <typename T>
struct RowsKernel {
  using Fn = void (*)(const RowsTile<T>&, const T*, T*, const T*);
  Fn tile = nullptr, one = nullptr;
  int rows = 0;
  std::int64_t width = 0;  // W's packed row, in elements
  unsigned last = 0;
  explicit operator bool() const { return tile != nullptr; }

  // Rows [0, count) of a piece from x into c; the next piece's `next` rows are at next_x.
  void operator()(RowsTile<T> t, const T* x, T* c, std::int64_t count, const T* next_x,
                  std::int64_t next) const {
    constexpr std::int64_t line = 64 / sizeof(T);
    // Contiguous rows: row i + lead, past this piece's rows in the next piece's. Otherwise the
    // next tile's rows, a line on along each.
    const bool across = t.rs == 1;
    const std::int64_t lead =
        across ? kRowsFetchBytes / static_cast<std::int64_t>(sizeof(T)) : rows;
    t.fetch_rs = across ? 0 : t.rs;
    const auto fetch = [&](std::int64_t i) {
      const std::int64_t r = i + lead;
      const T* at = r < count ? x + r * t.rs : next_x + std::min(r - count, next - 1) * t.rs;
      return across ? at : at + line;
    };
    std::int64_t i = 0;
    for (; i + rows <= count; i += rows) tile(t, x + i * t.rs, c + i * t.c_rs, fetch(i));
    for (; i < count; ++i) one(t, x + i * t.rs, c + i * t.c_rs, fetch(i));
  }
};

template <typename T, int Z, int Y>
RowsKernel<T> rows_kernel_of(std::int64_t n, bool l1) {
  using H = Halves<T>;
  // At most 24 accumulators, of the 32 registers: the rest hold W's row and the broadcasts.
  constexpr int V = Z + Y;
  constexpr int R = V <= 2 ? 12 : V == 3 ? 8 : 6;
  static_assert(V >= 1 && V <= 4);
  RowsKernel<T> k;
  k.tile = l1 ? rows_tile<T, R, Z, Y, true> : rows_tile<T, R, Z, Y, false>;
  k.one = l1 ? rows_tile<T, 1, Z, Y, true> : rows_tile<T, 1, Z, Y, false>;
  k.rows = R;
  k.width = Z * H::z + Y * (H::z / 2);
  const std::int64_t rest = n - (k.width - (Y ? H::z / 2 : H::z));  // lanes of the last vector
  k.last = rest >= 32 ? ~0u : (1u << rest) - 1;
  return k;
}

// Which registers a tile's columns take: half-width ones only (where the processor runs a 512-bit
// operation as two 256-bit halves, as Zen 4 does, a 512-bit register is no faster, and a tile of
// 24 floats in three of them has eight rows against twelve in one full and one half), or full ones
// with at most one half-width last (where it runs 512 bits at once, twice the FMAs per
// instruction).
enum class RowsShape { narrow, wide };

// Where X's rows are contiguous at each summed element (rs 1: TCCG case 1, bda,dc->abc) and the
// tile above would end W's row of floats in a half-width register (17 to 24 columns: streamed()
// takes 24) on a processor that runs 512 bits at once, where a half-width FMA does half the work
// of a full one and that tile at most 3/4 of the FMAs the processor can: a tile of 16 rows in one
// full register by 24 columns, each element of W's row broadcast against X's 16 rows (a line of X
// a step), then transposed in registers on its way out, 16 columns at a time: row i's columns
// [b, b + 16) to c + i·c_rs + b, the lanes past n masked off. Rows [0, h) only (h at most 16: the
// last tile of a piece; X's lanes past h are never read). A tile of all 16 rows (Whole) loads X
// without a mask: on a Zen 5, with a mask of all its lanes, TCCG case 1 in floats took 1.14 times
// as long on the median of eight rounds (docs/performance/tccg-unmasked.md).
template <bool Whole>
void rows_across_tile(const RowsTile<float>& t, const float* x, float* c, const float* fetch, int h,
                      int n) {
  constexpr int NC = kAcrossColumns;
  __m512 acc[NC];
#pragma GCC unroll 24
  for (int j = 0; j < NC; ++j) acc[j] = _mm512_setzero_ps();
  const auto rows = static_cast<__mmask16>((1u << h) - 1);
  const auto sum = [&](auto once) {
    const float* w = t.w;
    for (std::int64_t l = 0; l < t.depth; ++l, w += t.width) {
      // The next tile's 16 floats: off a line's start they span two lines.
      fetch_span<decltype(once)::value>(fetch + l * t.ds, 16);
      const __m512 xv =
          Whole ? _mm512_loadu_ps(x + l * t.ds) : _mm512_maskz_loadu_ps(rows, x + l * t.ds);
#pragma GCC unroll 24
      for (int j = 0; j < NC; ++j) acc[j] = _mm512_fmadd_ps(xv, _mm512_set1_ps(w[j]), acc[j]);
    }
  };
  if (fetch_once<float>(t.ds))
    sum(std::true_type{});
  else
    sum(std::false_type{});
#pragma GCC unroll 2
  for (int b = 0; b < NC; b += 16) {
    __m512 block[16];
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) block[j] = b + j < NC ? acc[b + j] : _mm512_setzero_ps();
    transpose_block(block);  // block[i]: row i's columns [b, b + 16)
    const int cols = std::min(16, n - b);
    const auto keep = static_cast<__mmask16>(cols >= 16 ? 0xFFFFu : (1u << cols) - 1);
    for (int i = 0; i < h; ++i) _mm512_mask_storeu_ps(c + i * t.c_rs + b, keep, block[i]);
  }
}

// Whether rows_across_tile takes n columns of floats on registers of this shape.
inline bool rows_across(std::int64_t n, RowsShape shape) {
  return rows_across_floats(n, shape == RowsShape::wide);
}

// The kernel for n columns (kOwnRowBytes at most; narrow, half that), or none; its fetches into
// L1 as well as L2 where `l1` says.
template <typename T>
RowsKernel<T> rows_kernel(std::int64_t n, RowsShape shape, bool l1 = false) {
  constexpr std::int64_t z = Halves<T>::z, y = z / 2;
  if (n < 1 || n * static_cast<std::int64_t>(sizeof(T)) > kOwnRowBytes) return {};
  if (shape == RowsShape::narrow) {
    switch ((n + y - 1) / y) {
      case 1:
        return rows_kernel_of<T, 0, 1>(n, l1);
      case 2:
        return rows_kernel_of<T, 0, 2>(n, l1);
      case 3:
        return rows_kernel_of<T, 0, 3>(n, l1);
      case 4:
        return rows_kernel_of<T, 0, 4>(n, l1);
      default:
        break;  // wider: full registers
    }
  }
  const std::int64_t full = n / z, rest = n % z;
  const bool half = rest > 0 && rest <= y;  // the last columns in a half vector
  const std::int64_t zs = full + (rest > y ? 1 : 0);
  switch (zs * 2 + (half ? 1 : 0)) {
    case 1:
      return rows_kernel_of<T, 0, 1>(n, l1);
    case 2:
      return rows_kernel_of<T, 1, 0>(n, l1);
    case 3:
      return rows_kernel_of<T, 1, 1>(n, l1);
    case 4:
      return rows_kernel_of<T, 2, 0>(n, l1);
    case 5:
      return rows_kernel_of<T, 2, 1>(n, l1);
    case 6:
      return rows_kernel_of<T, 3, 0>(n, l1);
    case 7:
      return rows_kernel_of<T, 3, 1>(n, l1);
    case 8:
      return rows_kernel_of<T, 4, 0>(n, l1);
    default:
      return {};
  }
}

// Whether this processor runs a 512-bit FMA as two halves: measured once per process, on first
// use, as the time of a run of independent FMAs on 512-bit registers against the same number on
// 256-bit ones (480,000 each: at one 512-bit FMA a cycle and 4 GHz, 0.12 ms), in turn, the fastest
// of kShapeRounds of each: at full width the two take the same time, in halves twice as long, and
// kHalvesMargin lies between. A round that another process interrupts is slower; all of one
// width's, on a machine shared with as many busy processes as cores, seldom. Either answer computes
// the same result.
inline constexpr double kHalvesMargin = 1.5;
inline constexpr int kShapeRounds = 9;
inline constexpr int kShapeChains = 12;  // at least the FMA units' latency times their number

// The time of one run of FMAs on registers of type V, `fma` applied to each of kShapeChains chains.
template <typename V, typename Fma>
double time_fmas(V* chains, Fma fma) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 40000; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < kShapeChains; ++j) chains[j] = fma(chains[j]);
  }
  for (int j = 0; j < kShapeChains; ++j) asm volatile("" : "+x"(chains[j]));
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

inline RowsShape machine_rows_shape() {
  static const RowsShape shape = [] {
    const __m512 m = _mm512_set1_ps(1.0f), a = _mm512_set1_ps(1e-7f);
    const __m256 m8 = _mm256_set1_ps(1.0f), a8 = _mm256_set1_ps(1e-7f);
    __m512 full[kShapeChains];
    __m256 half[kShapeChains];
    for (int j = 0; j < kShapeChains; ++j) full[j] = m, half[j] = m8;
    double wide = 1e300, narrow = 1e300;
    for (int round = 0; round < kShapeRounds; ++round) {
      wide = std::min(wide, time_fmas(full, [&](__m512 v) { return _mm512_fmadd_ps(v, m, a); }));
      narrow =
          std::min(narrow, time_fmas(half, [&](__m256 v) { return _mm256_fmadd_ps(v, m8, a8); }));
    }
    return wide > kHalvesMargin * narrow ? RowsShape::narrow : RowsShape::wide;
  }();
  return shape;
}

}  // namespace
}  // namespace einsumdb::tensor_gemm
EINSUMDB_TARGET_END
#endif  // EINSUMDB_AVX512

// ---- With AVX2 alone, where X's rows are contiguous at each summed element (TCCG case 1,
// bda,dc->abc: a's values at each d). A tile is a line of rows (8 doubles, 16 floats: two 256-bit
// registers) by kRowColumns columns of W, summed over all of X's summed elements in 12
// accumulators, W's values broadcast from a copy packed block by block (each block's columns at
// every summed element one after another: in case 1, 312 × 6 doubles, 15 KB, read from L1 beside
// the line of rows' panel, 312 lines). A line of rows' blocks go by columns into a staging block,
// which goes out transposed a line square at a time, each row a run of the output. The blocks
// share out the fetching of the next line of rows' panel into L2: its lines lie a row of X apart
// (2,496 bytes in case 1), and the hardware's prefetchers do not follow them.
// The same tiles, one value of the output's unit-stride index at a time, compute streamed lines
// (run_streamed_lines_avx2, streamed.hpp: TCCG cases 2-4 and 7), and the real products of complex
// ones (run_complex_lines_avx2, complex_lines.hpp).

#if EINSUMDB_AVX2
EINSUMDB_TARGET_BEGIN
namespace einsumdb::tensor_gemm {
// Internal linkage, as for everything the driver alone instantiates (tensor_gemm.cpp says why).
namespace {

inline constexpr int kRowColumns = 6;  // columns of W in a tile

// Which of the next line of rows' elements a tile fetches: at steps start, start + every, ...,
// step l fetches at + l·ds and the line's last element after it (two lines where the line of rows
// does not start one).
template <typename T>
struct RowsFetch {
  const T* at;
  std::int64_t start, every;
};

// The tile of rows [0, h) (all of a line where Whole) from x, row i's summed element l at
// x[i + l·ds], by the block of W at w (summed element l's columns at w[l·kRowColumns, ...)), into
// staged (column j's line of rows at staged + j·cs), fetching as `fetch` says.
template <typename T, bool Whole>
void rows_line_block(const T* x, std::int64_t depth, std::int64_t ds, const T* w, T* staged,
                     std::int64_t cs, std::int64_t h, RowsFetch<T> fetch) {
  using Y = Ymm<T>;
  constexpr std::int64_t half = 32 / sizeof(T);
  typename Y::R lo[kRowColumns], hi[kRowColumns];
#pragma GCC unroll 6
  for (int j = 0; j < kRowColumns; ++j) lo[j] = Y::zero(), hi[j] = Y::zero();
  const __m256i first = Y::first(h), second = Y::first(h - half);
  std::int64_t until = fetch.start;  // steps until the next fetch
  for (std::int64_t l = 0; l < depth; ++l, x += ds, w += kRowColumns) {
    if (until-- == 0) {
      until = fetch.every - 1;
      fetch_span<false>(fetch.at + l * ds, 2 * half);  // (each line once: measured in AVX-512 only)
    }
    const auto x0 = Whole ? Y::loadu(x) : Y::maskload(x, first);
    const auto x1 = Whole ? Y::loadu(x + half) : Y::maskload(x + half, second);
#pragma GCC unroll 6
    for (int j = 0; j < kRowColumns; ++j) {
      const auto b = Y::broadcast(w + j);
      lo[j] = Y::fma(x0, b, lo[j]);
      hi[j] = Y::fma(x1, b, hi[j]);
    }
  }
#pragma GCC unroll 6
  for (int j = 0; j < kRowColumns; ++j) {
    Y::storeu(staged + cs * j, lo[j]);
    Y::storeu(staged + cs * j + half, hi[j]);
  }
}

// A line of rows (h of them: all of a line where h is one) from x by every block of W, `blocks` of
// them packed at w (block b's summed element l's columns at w[(b·depth + l)·kRowColumns, ...)),
// into staged, column j's line at staged + j·cs (cs ≥ a line); the blocks share out the fetching
// of the next line of rows at `fetch`, block b at its summed elements b, b + blocks, ...
template <typename T>
void rows_line(const T* x, std::int64_t depth, std::int64_t ds, const T* w, std::int64_t blocks,
               T* staged, std::int64_t cs, std::int64_t h, const T* fetch) {
  constexpr std::int64_t line = 64 / sizeof(T);
  for (std::int64_t b = 0; b < blocks; ++b) {
    const T* wb = w + b * depth * kRowColumns;
    T* const sb = staged + b * kRowColumns * cs;
    if (h == line)
      rows_line_block<T, true>(x, depth, ds, wb, sb, cs, h, {fetch, b, blocks});
    else
      rows_line_block<T, false>(x, depth, ds, wb, sb, cs, h, {fetch, b, blocks});
  }
}

}  // namespace
}  // namespace einsumdb::tensor_gemm
EINSUMDB_TARGET_END
#endif  // EINSUMDB_AVX2
