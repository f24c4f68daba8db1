// tensor_gemm's write-out stage: a tile the micro-kernel computed into a buffer, written to the
// output where the micro-kernel could not write it in place (rows or columns unevenly spaced
// there, or contiguous across the tile): along whichever of its directions is evenly spaced, a
// line per run, transposed through registers (AVX2 and AVX-512), or a line group's tiles a whole
// line at a time; whole aligned lines streamed past the cache where the output is written once.
// Internal to executor/.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "einsumdb/executor/isa_target.hpp"
#include "einsumdb/executor/tensor_gemm/blocking.hpp"
#include "einsumdb/executor/tensor_gemm/transpose.hpp"

EINSUMDB_TARGET_BEGIN
namespace einsumdb::tensor_gemm {
// Internal linkage, as for everything the driver alone instantiates (tensor_gemm.cpp says why).
namespace {

// d[0, n) = t[0, n), or += with `accumulate`; with `stream`, whole aligned cache lines go around
// the cache (non-temporal stores, AVX2 and AVX-512): their tile will not be read again, and a line
// written there needs no read of its old contents first. Where d does not start a line, the part
// before its first whole line goes first, under a mask, so that the whole lines after it stream.
// The micro-kernel prefetches the lines of the tile it writes, here the buffer's; the output's
// lines would miss one by one.
template <typename T>
inline void copy_run(const T* t, std::int64_t n, T* d, bool accumulate, bool stream) {
#if EINSUMDB_AVX2
  using V = Lanes<T>;
  const auto part = [&](std::int64_t i, std::int64_t k) {  // d[i, i + k), k at most a line
    const auto mask = V::first(k);
    auto v = V::load(mask, t + i);
    if (accumulate) v = V::add(v, V::load(mask, d + i));
    if (stream && k == V::width && reinterpret_cast<std::uintptr_t>(d + i) % 64 == 0)
      V::stream(d + i, v);
    else
      V::store(d + i, mask, v);
  };
  std::int64_t i = 0;
  if (stream) {
    const auto off =
        static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(d) % 64 / sizeof(T));
    i = std::min(n, (V::width - off) % V::width);
    if (i > 0) part(0, i);
  }
  for (; i < n; i += V::width) part(i, std::min(V::width, n - i));
#else
  (void)stream;
  if (accumulate)
    for (std::int64_t i = 0; i < n; ++i) d[i] += t[i];
  else
    for (std::int64_t i = 0; i < n; ++i) d[i] = t[i];
#endif
}

// Writes (or adds, `accumulate`) a tile computed into `tile` to the output, where one of its two
// directions, the `run` direction (`length` elements `run_step` apart in the tile), is evenly
// spaced in the output (`step` apart) and the other is not (`lines` of them, `line_step` apart in
// the tile, at offsets `at` from `base`), line by line: a run along the even direction is whole
// cache lines where the step is 1, where element by element along the uneven direction each store
// lands on another line. Such tiles are common where a panel straddles two values of an index (TCCG
// case 34, dfga,gebc->abcdef: e = 16 is the columns' fastest index, so three column panels of 14
// in four straddle two values of c), and scattered, they took longer than the micro-kernel.
// Two lines side by side in the output (a complex result's parts in real form, real_form.hpp) go
// out together, each row's pair of elements at once: one pass over the rows' cache lines, not two
// (where the rows lie 2 apart, the pair's run goes on into the next row's, and that is left to the
// line-by-line loop).
template <typename T>
inline void write_along(const T* tile, std::int64_t run_step, std::int64_t line_step,
                        std::int64_t length, std::int64_t lines, T* base, std::int64_t step,
                        const std::int64_t* at, bool accumulate, bool stream) {
  for (std::int64_t j = 0; j < lines; ++j) {
    T* d = base + at[j];
    const T* t = tile + j * line_step;
    if (step > 2 && j + 1 < lines && at[j + 1] == at[j] + 1) {  // two lines side by side
      const T* u = t + line_step;
      if (accumulate)
        for (std::int64_t i = 0; i < length; ++i)
          d[i * step] += t[i * run_step], d[i * step + 1] += u[i * run_step];
      else
        for (std::int64_t i = 0; i < length; ++i)
          d[i * step] = t[i * run_step], d[i * step + 1] = u[i * run_step];
      ++j;
    } else if (step == 1 && run_step == 1) {
      copy_run(t, length, d, accumulate, stream);
    } else if (accumulate) {
      for (std::int64_t i = 0; i < length; ++i) d[i * step] += t[i * run_step];
    } else {
      for (std::int64_t i = 0; i < length; ++i) d[i * step] = t[i * run_step];
    }
  }
}

// Writes the `mrb` × `nrb` corner of a column-major tile of `mr` rows (the micro-kernel's, where
// transposes) whose columns are contiguous in the output (row i at base + rows[i], evenly spaced or
// not): blocks of a cache line square through registers, each row's run of a line at once.
template <typename T>
inline void transpose_out(const T* tile, std::int64_t mr, std::int64_t mrb, std::int64_t nrb,
                          T* base, const std::int64_t* rows, bool accumulate,
                          [[maybe_unused]] bool stream) {
#if EINSUMDB_AVX2
  if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>) {
    using V = Lanes<T>;
    constexpr std::int64_t L = V::width;
    for (std::int64_t n0 = 0; n0 < nrb; n0 += L) {
      const std::int64_t w = std::min(L, nrb - n0);
      const auto mask = V::first(w);
      for (std::int64_t h = 0; h < mrb; h += L) {
        decltype(V::loadu(tile)) r[L];  // past the tile's rows, the buffer's stale elements
        if (w == L) {
          load_transposed(tile + n0 * mr + h, mr, r);
        } else {
          for (std::int64_t j = 0; j < L; ++j)
            r[j] = V::load(V::first(j < w ? L : 0), tile + (n0 + j) * mr + h);
          transpose_block(r);
        }
        for (std::int64_t i = 0; i < std::min(L, mrb - h); ++i)
          put(base + rows[h + i] + n0, r[i], mask, accumulate, stream);
      }
    }
    return;
  }
#endif
  for (std::int64_t i = 0; i < mrb; ++i)
    for (std::int64_t n = 0; n < nrb; ++n)
      base[rows[i] + n] = tile[n * mr + i] + (accumulate ? base[rows[i] + n] : T{0});
}

// Writes a line group (line_groups): kLineElements<T> tiles of `mr` rows, row i of tile j at
// cm[i] + j in the output, so that row i and column n of all of them make one whole line at
// cm[i] + cn[n], and the line is written at once (streamed with `stream`). Each tile went
// column-major into `group`, one after the other (`transposed`, AVX2 and AVX-512), or
// interleaved, each line contiguous: element (i, n) of tile j at group[(i + n·mr)·line + j].
template <typename T>
inline void write_lines(const T* group, std::int64_t mr, [[maybe_unused]] std::int64_t nr,
                        [[maybe_unused]] bool transposed, std::int64_t nrb, T* c,
                        const std::int64_t* cm, const std::int64_t* cn, bool accumulate,
                        bool stream) {
  constexpr std::int64_t line = kLineElements<T>;
#if EINSUMDB_AVX2
  if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>) {
    if (transposed) {
      using V = Lanes<T>;
      const std::int64_t tile = mr * nr;
      for (std::int64_t n = 0; n < nrb; ++n)
        for (std::int64_t h = 0; h < mr; h += line) {
          decltype(V::loadu(group)) r[line];
          load_transposed(group + n * mr + h, tile, r);
          for (std::int64_t i = 0; i < line; ++i)
            put(c + cm[h + i] + cn[n], r[i], V::first(line), accumulate, stream);
        }
      return;
    }
  }
#endif
  for (std::int64_t n = 0; n < nrb; ++n)
    for (std::int64_t i = 0; i < mr; ++i)
      copy_run(group + (i + n * mr) * line, line, c + cm[i] + cn[n], accumulate, stream);
}

}  // namespace
}  // namespace einsumdb::tensor_gemm
EINSUMDB_TARGET_END
