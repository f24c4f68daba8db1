// tensor_gemm's packing stage: an operand's block of rows by summed elements gathered from the
// tensor as it lies, through its scatter tables, into the micro-panels the micro-kernel reads (MR
// or NR rows each, zero past the last row; BLIS's packm). Internal to executor/.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "einsumdb/executor/isa_target.hpp"
#include "einsumdb/executor/tensor_gemm/blocking.hpp"
#include "einsumdb/executor/tensor_gemm/transpose.hpp"

EINSUMDB_TARGET_BEGIN
namespace einsumdb::tensor_gemm {
// Internal linkage, as for everything the driver alone instantiates (tensor_gemm.cpp says why).
namespace {

// Depths ahead whose rows a packing routine prefetches.
inline constexpr std::int64_t kAhead = 4;
// Rows ahead whose elements a packing routine that gathers row by row prefetches: a row's
// elements lie on as many cache lines as it has runs along the tensor's memory, and without it
// each of those lines was fetched only when the row came to be read.
inline constexpr std::int64_t kRowsAhead = 4;

// Packs together the runs of eight rows (half a panel of 16, in panels not packed `along` their
// rows) that lie on the same cache lines of the tensor: run j's row i is element j of the line
// that holds the row i of each of the others (up to eight runs, one for each element of the
// line). At each depth, the eight lines of rows 0-7 are loaded whole, transposed in registers,
// and stored as the runs' eight rows each. Gathered element by element instead, each line was
// read once for each run it serves, eight loads for a line's worth, and at the lengths where it
// matters, read again from memory each time (packing_span). Returns which rows it packed: none
// but for doubles with AVX-512 and a panel width of whole runs, and only runs that share their
// lines with at least one other.
template <typename T>
inline std::vector<char> pack_across(
    [[maybe_unused]] const T* src, [[maybe_unused]] const std::int64_t* row,
    [[maybe_unused]] std::int64_t rows, [[maybe_unused]] const std::int64_t* col,
    [[maybe_unused]] std::int64_t depth, [[maybe_unused]] std::int64_t width,
    [[maybe_unused]] std::int64_t pack_width, [[maybe_unused]] T* dst,
    [[maybe_unused]] const std::vector<char>& along) {
#if EINSUMDB_AVX512
  if constexpr (std::is_same_v<T, double>) {
    constexpr std::int64_t run = 8;
    if (width % run || pack_width % run || depth < 1) return {};
    // Each whole run's line: the element offset where the line of its first row starts, and
    // its place on that line.
    struct Run {
      std::int64_t r0, base, slot;
    };
    std::vector<Run> runs;
    for (std::int64_t r0 = 0; r0 + run <= rows; r0 += run) {
      if (along[static_cast<std::size_t>(r0 / width)]) continue;
      const auto address = reinterpret_cast<std::uintptr_t>(src + row[r0] + col[0]);
      const auto slot = static_cast<std::int64_t>(address / sizeof(T) % run);
      runs.push_back({r0, row[r0] - slot, slot});
    }
    std::stable_sort(runs.begin(), runs.end(),
                     [](const Run& x, const Run& y) { return x.base < y.base; });
    // Runs on the same lines: the same base, their rows the same distance from it.
    const auto same_lines = [&](const Run& x, const Run& y) {
      if (x.base != y.base || x.slot == y.slot) return false;
      for (std::int64_t i = 1; i < run; ++i)
        if (row[x.r0 + i] - x.slot != row[y.r0 + i] - y.slot) return false;
      return true;
    };
    std::vector<char> done;
    for (std::size_t g = 0, next; g < runs.size(); g = next) {
      __mmask8 present = static_cast<__mmask8>(1u << runs[g].slot);
      const Run* at[run] = {};
      at[runs[g].slot] = &runs[g];
      for (next = g + 1; next < runs.size() && same_lines(runs[g], runs[next]) &&
                         !(present >> runs[next].slot & 1u);
           ++next) {
        present = static_cast<__mmask8>(present | 1u << runs[next].slot);
        at[runs[next].slot] = &runs[next];
      }
      if (next - g < 2) continue;
      if (done.empty()) done.assign(static_cast<std::size_t>(rows), 0);
      std::int64_t line[run];  // row i's line, from `base`
      for (std::int64_t i = 0; i < run; ++i) line[i] = row[runs[g].r0 + i] - runs[g].slot;
      T* to[run] = {};  // where each run's eight rows go at depth 0
      for (std::int64_t j = 0; j < run; ++j) {
        if (!at[j]) continue;
        const std::int64_t r0 = at[j]->r0;
        to[j] = dst + r0 / width * pack_width * depth + r0 % width;
        std::fill_n(done.begin() + r0, run, 1);
      }
      for (std::int64_t p = 0; p < depth; ++p) {
        const T* s = src + col[p];
        const T* ahead = src + col[std::min(depth - 1, p + kAhead)];
        __m512d v[run];
        for (std::int64_t i = 0; i < run; ++i) {
          __builtin_prefetch(ahead + line[i]);
          v[i] = Lanes<double>::load(present, s + line[i]);
        }
        transpose8(v);
        for (std::int64_t j = 0; j < run; ++j)
          if (to[j]) _mm512_storeu_pd(to[j] + p * pack_width, v[j]);
      }
    }
    return done;
  }
#endif
  return {};
}

// Per panel of `width` of the `rows` rows: whether its rows lie `step` apart in the tensor (not a
// panel of one row).
inline std::vector<char> panels_spaced(const std::int64_t* row, std::int64_t rows,
                                       std::int64_t width, std::int64_t step) {
  std::vector<char> spaced(static_cast<std::size_t>((rows + width - 1) / width));
  for (std::size_t q = 0; q < spaced.size(); ++q) {
    const std::int64_t r0 = static_cast<std::int64_t>(q) * width, w = std::min(width, rows - r0);
    bool even = w > 1;
    for (std::int64_t i = r0 + 1; i < r0 + w && even; ++i) even = row[i] - row[i - 1] == step;
    spaced[q] = even;
  }
  return spaced;
}

// Packs the panels whose rows are 2 apart in the tensor, where the depths come in pairs 1 apart
// (an operand of a complex product in real form: each row's real and imaginary parts at a summed
// element, real_form.hpp): at each pair, a panel's rows and their partners are one run of the
// tensor, loaded whole and split in registers into the two depths' rows. Gathered element by
// element instead, each line was read once for each of its elements. Returns which panels it
// packed (AVX2 and AVX-512; none where the depths are not all in such pairs).
template <typename T>
inline std::vector<char> pack_pairs(
    [[maybe_unused]] const T* src, [[maybe_unused]] const std::int64_t* row,
    [[maybe_unused]] std::int64_t rows, [[maybe_unused]] const std::int64_t* col,
    [[maybe_unused]] std::int64_t depth, [[maybe_unused]] std::int64_t width,
    [[maybe_unused]] std::int64_t pack_width, [[maybe_unused]] T* dst) {
#if EINSUMDB_AVX2
  using V = Lanes<T>;
  constexpr std::int64_t W = V::width;
  if (depth % 2) return {};
  for (std::int64_t p = 0; p < depth; p += 2)
    if (col[p + 1] != col[p] + 1) return {};
  const std::int64_t panels = (rows + width - 1) / width;
  const std::vector<char> done = panels_spaced(row, rows, width, 2);
  if (std::none_of(done.begin(), done.end(), [](char two) { return two; })) return {};
  for (std::int64_t p = 0; p < depth; p += 2) {
    const T* s = src + col[p];
    const T* ahead = src + col[std::min(depth - 2, p + 2 * kAhead)];
    for (std::int64_t q = 0; q < panels; ++q) {
      if (!done[static_cast<std::size_t>(q)]) continue;
      const std::int64_t r0 = q * width, w = std::min(width, rows - r0);
      const T* from = s + row[r0];  // rows r0.. and their partners: 2w elements
      for (std::int64_t i = 0; i < 2 * w; i += kLineElements<T>)
        __builtin_prefetch(ahead + row[r0] + i);
      __builtin_prefetch(ahead + row[r0] + 2 * w - 1);
      T* d = dst + q * pack_width * depth + p * pack_width;  // depth p; p + 1 follows
      for (std::int64_t i = 0; i < pack_width; i += W) {     // rows i.. (zero past w)
        const std::int64_t h = std::clamp<std::int64_t>(w - i, 0, W);
        const std::int64_t lo = std::min(W, 2 * h), hi = std::max<std::int64_t>(0, 2 * h - W);
        const auto a = V::load(V::first(lo), from + 2 * i),
                   b = V::load(V::first(hi), from + 2 * i + W);
        const std::int64_t n = std::min(W, pack_width - i);
        V::store(d + i, V::first(n), V::evens(a, b));
        V::store(d + pack_width + i, V::first(n), V::odds(a, b));
      }
    }
  }
  return done;
#else
  return {};
#endif
}

// Whether the depths p, p + step, ..., p + (n - 1)·step lie one after another in the tensor.
inline bool consecutive(const std::int64_t* col, std::int64_t p, std::int64_t n,
                        std::int64_t step) {
  for (std::int64_t j = 1; j < n; ++j)
    if (col[p + j * step] != col[p] + j) return false;
  return true;
}

// The depths p, p + step, ... before `end` of `w` rows, gathered element by element: those of a
// run whose depths do not lie one after another (pack_runs).
template <typename T>
void gather_run(const T* src, const std::int64_t* row, std::int64_t w, const std::int64_t* col,
                std::int64_t p, std::int64_t end, std::int64_t step, std::int64_t pack_width,
                T* panel) {
  for (std::int64_t d = p; d < end; d += step)
    for (std::int64_t i = 0; i < w; ++i) panel[d * pack_width + i] = src[row[i] + col[d]];
}

// A run of a block's depths whose elements lie one after another in the tensor: depths p,
// p + step, ..., p + (count - 1)·step at col[p], col[p] + 1, .... In pairs (`pairs`), the run's
// elements 2j and 2j + 1 are depths p + j·step and p + j·step + 1: the two parts of a complex
// element in real form, side by side in both operands, in tiles of the summed indices above them
// (tiles(): TCCG case 13 in complex numbers).
struct DepthRun {
  std::int64_t p, step, count, at;  // at: col[p]
  bool pairs = false;
  // The depth of the run's element j, from p.
  std::int64_t depth(std::int64_t j) const { return pairs ? j / 2 * step + j % 2 : j * step; }
};

// The depths after a depth among which its successor in the tensor is looked for: as many as the
// widest spacing a tile of summed indices gives (sum_tile: a line's elements, 16 floats).
inline constexpr std::int64_t kRunReach = 16;

// The depths as runs of up to n (DepthRun), each depth in one, in order of their first depth: from
// each depth not yet in a run, its successor in the tensor within kRunReach depths and every
// further depth at that spacing that continues it. A block of KC summed elements that starts or
// ends inside a tile of them (sum_tile; KC = 384 floats against tiles of 16 × 16 = 256) cuts the
// runs at its edges short, into shorter runs. A run of two depths one apart that further pairs
// continue within kRunReach depths goes in pairs (DepthRun::pairs: the parts of complex elements
// in real form, the summed indices in tiles: tiles()). Computed once per block: every panel's
// depths are the block's.
inline std::vector<DepthRun> depth_runs(const std::int64_t* col, std::int64_t depth,
                                        std::int64_t n) {
  std::vector<char> taken(static_cast<std::size_t>(depth), 0);
  const auto free = [&](std::int64_t q) { return !taken[static_cast<std::size_t>(q)]; };
  std::vector<DepthRun> runs;
  for (std::int64_t p = 0; p < depth; ++p) {
    if (!free(p)) continue;
    const std::int64_t reach = std::min(depth - p, kRunReach + 1);
    std::int64_t step = 1;
    while (step < reach && !(free(p + step) && col[p + step] == col[p] + 1)) ++step;
    std::int64_t count = 1;
    if (step < reach)
      while (count < n && p + count * step < depth && free(p + count * step) &&
             col[p + count * step] == col[p] + count)
        ++count;
    DepthRun run{p, count > 1 ? step : 1, count, col[p]};
    if (count == 2 && step == 1 && n >= 4) {  // a pair: the next pairs within reach continue it?
      const auto pair_at = [&](std::int64_t d, std::int64_t c) {
        return d + 1 < depth && free(d) && free(d + 1) && col[d] == col[p] + c &&
               col[d + 1] == col[p] + c + 1;
      };
      std::int64_t s = 2;
      while (s < reach && !pair_at(p + s, 2)) ++s;
      if (s < reach) {
        run = {p, s, 2, col[p], true};
        while (run.count + 2 <= n && pair_at(p + run.count / 2 * s, run.count)) run.count += 2;
      }
    }
    for (std::int64_t j = 0; j < run.count; ++j)
      taken[static_cast<std::size_t>(p + run.depth(j))] = 1;
    runs.push_back(run);
  }
  return runs;
}

// The runs pack_run_lines packs a block's panels from (depth_runs of a line's elements), or none
// where it does not apply: without AVX-512; where most depths are single (each panel is then
// gathered row by row); and where every run's depths are adjacent (the rows of ik in ik,kj->ij),
// which pack_runs's AVX2 routine packs with whole stores: on TCCG case 13 (acd,dbc->ab, whose
// acd has such runs) pack_run_lines was no faster there.
template <typename T>
std::vector<DepthRun> line_runs([[maybe_unused]] const std::int64_t* col,
                                [[maybe_unused]] std::int64_t depth) {
#if EINSUMDB_AVX512
  std::vector<DepthRun> runs = depth_runs(col, depth, kLineElements<T>);
  const bool adjacent =
      std::all_of(runs.begin(), runs.end(), [](const DepthRun& r) { return r.step == 1; });
  if (!adjacent && 2 * static_cast<std::int64_t>(runs.size()) <= depth) return runs;
#endif
  return {};
}

#if EINSUMDB_AVX512
// pack_runs with AVX-512, from the block's runs of up to a register's lanes (a cache line: 8
// doubles or 16 floats; depth_runs): each run loaded as one load per row (under a mask where it is
// shorter), n rows at a time transposed in registers into the run's depths of n rows each. A line
// of the tensor is then loaded whole, in one load, where the runs are whole lines. TCCG case 13,
// acd,dbc->ab: one operand's runs lie a line's depths apart (a tile of summed elements, a line of c
// for each line of d: sum_tile), and a block of KC = 384 float depths ends inside every other
// tile, where its runs are half a line (docs/performance/tccg-block-runs.md). Single depths are
// gathered element by element. The next panel's rows (`next`, `next_w` of them) are
// fetched at each run meanwhile.
template <typename T>
bool pack_run_lines(const T* src, const std::int64_t* row, std::int64_t w, const std::int64_t* next,
                    std::int64_t next_w, const std::vector<DepthRun>& runs, std::int64_t pack_width,
                    T* panel) {
  using V = Lanes<T>;
  constexpr std::int64_t n = V::width;
  constexpr std::int64_t kGroups = 2;  // at most 2·n rows: the widest panel a kernel packs
  const std::int64_t groups = (w + n - 1) / n;
  if (w < 2 || groups > kGroups) return false;
  for (const DepthRun& r : runs) {
    const T* const s = src + r.at;
    for (std::int64_t i = 0; i < next_w; ++i) __builtin_prefetch(s + next[i]);
    if (r.count == 1) {
      for (std::int64_t i = 0; i < w; ++i) panel[r.p * pack_width + i] = s[row[i]];
      continue;
    }
    const auto lanes = V::first(r.count);
    for (std::int64_t g = 0; g < groups; ++g) {
      typename V::V v[n];
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t at = g * n + i;
        v[i] = at >= w        ? V::zero()
               : r.count == n ? V::loadu(s + row[at])
                              : V::load(lanes, s + row[at]);
      }
      transpose_block(v);
      T* const to = panel + r.p * pack_width + g * n;
      if (w - g * n >= n) {
        for (std::int64_t j = 0; j < r.count; ++j) V::storeu(to + r.depth(j) * pack_width, v[j]);
      } else {
        const auto rows = V::first(w - g * n);
        for (std::int64_t j = 0; j < r.count; ++j)
          V::store(to + r.depth(j) * pack_width, rows, v[j]);
      }
    }
  }
  return true;
}
#endif

// Packs a panel of `w` rows gathered row by row (their rows not consecutive in the tensor) where
// its depths come in runs of a 256-bit register's lanes (n) that lie one after another in the
// tensor, the depths of a run `step` apart: n rows' runs are loaded as n registers and transposed
// in registers into the run's n depths of n rows each. The summed elements of ik in ik,kj->ij are
// such runs one depth apart; where the summed indices go in tiles (tiles(), TCCG case 13,
// acd,dbc->ab), the operand that runs along the tile's slower index has them a tile's width
// apart. Gathered element by element instead, each element took a load, a store and a prefetch of
// its own. Depths outside such runs are gathered element by element; rows w to pack_width are left
// to the caller. Where the block has runs for pack_run_lines (`runs`, line_runs: AVX-512), that
// packs the panel instead. Returns whether the panel was packed (AVX2 and AVX-512; not where no n
// depths at the spacing of the first run lie one after another).
template <typename T>
inline bool pack_runs([[maybe_unused]] const T* src, [[maybe_unused]] const std::int64_t* row,
                      [[maybe_unused]] std::int64_t w, [[maybe_unused]] const std::int64_t* next,
                      [[maybe_unused]] std::int64_t next_w,
                      [[maybe_unused]] const std::vector<DepthRun>& runs,
                      [[maybe_unused]] const std::int64_t* col, [[maybe_unused]] std::int64_t depth,
                      [[maybe_unused]] std::int64_t pack_width, [[maybe_unused]] T* panel) {
#if EINSUMDB_AVX512
  if (!runs.empty() && pack_run_lines(src, row, w, next, next_w, runs, pack_width, panel))
    return true;
#endif
#if EINSUMDB_AVX2
  using Y = Ymm<T>;
  using R = typename Y::R;
  constexpr std::int64_t n = 32 / sizeof(T);
  constexpr std::int64_t kGroups = 4;  // at most 4·n rows: the widest panel a kernel packs
  const std::int64_t groups = (w + n - 1) / n;
  if (w < 2 || groups > kGroups || depth < n) return false;
  // The depths' spacing within a run: where the first depth's successor in the tensor is.
  std::int64_t step = 1;
  while (step < depth && col[step] != col[0] + 1) ++step;
  if ((n - 1) * step >= depth || !consecutive(col, 0, n, step)) return false;
  // With runs one depth apart, each depth's rows of a group are stored whole, in order of depth
  // then group: what a store writes past the panel's rows belongs to a later depth or to rows past
  // w, which the caller zeroes, and only a store that would run past the panel's end stores just
  // its rows. Runs farther apart store just their rows.
  const std::int64_t last = (depth - 1) * pack_width + w;
  const auto store = [&](T* d, R v, std::int64_t rows) {
    if (rows == n || (step == 1 && d + n <= panel + depth * pack_width))
      Y::storeu(d, v);
    else
      Y::maskstore(d, Y::first(std::min(rows, panel + last - d)), v);
  };
  for (std::int64_t b = 0; b < depth; b += n * step)
    for (std::int64_t p = b; p < std::min(depth, b + step); ++p) {
      if (p + (n - 1) * step >= depth || !consecutive(col, p, n, step)) {
        gather_run(src, row, w, col, p, std::min(depth, b + n * step), step, pack_width, panel);
        continue;
      }
      R t[kGroups][n];
      for (std::int64_t g = 0; g < groups; ++g) {
        R r[n];
        for (std::int64_t i = 0; i < n; ++i) {
          const std::int64_t at = g * n + i;
          if (at < next_w) __builtin_prefetch(src + next[at] + col[p]);
          r[i] = at < w ? Y::loadu(src + row[at] + col[p]) : Y::zero();
        }
        if constexpr (n == 4)
          kernels::transpose4(r, t[g]);
        else
          kernels::transpose8(r, t[g]);
      }
      for (std::int64_t j = 0; j < n; ++j)
        for (std::int64_t g = 0; g < groups; ++g)
          store(panel + (p + j * step) * pack_width + g * n, t[g][j], std::min(n, w - g * n));
    }
  return true;
#else
  return false;
#endif
}

// Packs `rows` × `depth` elements into micro-panels of `width` rows (`pack_width` apart, zero
// past the last row): panel[p * pack_width + i] = src[row[i] + col[p]].
template <typename T>
inline void pack(const T* src, const std::int64_t* row, std::int64_t rows, const std::int64_t* col,
                 std::int64_t depth, std::int64_t width, std::int64_t pack_width, T* dst,
                 bool across = false) {
  const std::int64_t panels = (rows + width - 1) / width;
  // A panel whose rows are consecutive in the tensor is copied along them, the loop over the
  // depth outside the loop over the panels: the block's rows are read in order at each depth,
  // and the rows kAhead depths on (elsewhere in the tensor, where the hardware's prefetchers
  // do not look) are fetched meanwhile. Other panels go across lines (pack_across), in pairs of
  // depths (pack_pairs) or in runs of depths (pack_runs) where they can, and are otherwise
  // gathered element by element.
  const std::vector<char> along = panels_spaced(row, rows, width, 1);
  if (std::any_of(along.begin(), along.end(), [](char a) { return a; }))
    for (std::int64_t p = 0; p < depth; ++p) {
      const T* s = src + col[p];
      const T* ahead = src + col[std::min(depth - 1, p + kAhead)];
      for (std::int64_t q = 0; q < panels; ++q) {
        if (!along[static_cast<std::size_t>(q)]) continue;
        const std::int64_t r0 = q * width, w = std::min(width, rows - r0);
        const T* from = s + row[r0];
        for (std::int64_t i = 0; i < w; i += kLineElements<T>)
          __builtin_prefetch(ahead + row[r0] + i);
        __builtin_prefetch(ahead + row[r0] + w - 1);
        T* d = dst + q * pack_width * depth + p * pack_width;
        for (std::int64_t i = 0; i < w; ++i) d[i] = from[i];
        for (std::int64_t i = w; i < pack_width; ++i) d[i] = 0;
      }
    }
  const std::vector<char> done =
      across ? pack_across(src, row, rows, col, depth, width, pack_width, dst, along)
             : std::vector<char>{};
  const std::vector<char> paired =
      done.empty() ? pack_pairs(src, row, rows, col, depth, width, pack_width, dst)
                   : std::vector<char>{};
  std::vector<DepthRun> lines;  // the block's runs (line_runs), once a panel gathers row by row
  bool lines_known = false;
  for (std::int64_t q = 0; q < panels; ++q) {
    if (along[static_cast<std::size_t>(q)]) continue;
    if (!paired.empty() && paired[static_cast<std::size_t>(q)]) continue;
    if (!lines_known) lines = line_runs<T>(col, depth), lines_known = true;
    const std::int64_t r0 = q * width, w = std::min(width, rows - r0);
    T* panel = dst + q * pack_width * depth;
    const bool runs = (done.empty() || std::none_of(done.begin() + r0, done.begin() + r0 + w,
                                                    [](char d) { return d; })) &&
                      pack_runs(src, row + r0, w, row + std::min(rows, r0 + width),
                                std::clamp<std::int64_t>(rows - r0 - width, 0, width), lines, col,
                                depth, pack_width, panel);
    for (std::int64_t i = 0; i < w && !runs; ++i) {
      if (!done.empty() && done[static_cast<std::size_t>(r0 + i)]) continue;
      const T* s = src + row[r0 + i];
      const T* next = src + row[std::min(rows - 1, r0 + i + kRowsAhead)];
      for (std::int64_t p = 0; p < depth; ++p) {
        __builtin_prefetch(next + col[p]);
        panel[p * pack_width + i] = s[col[p]];
      }
    }
    for (std::int64_t p = 0; p < depth; ++p)
      for (std::int64_t i = w; i < pack_width; ++i) panel[p * pack_width + i] = 0;
  }
}

}  // namespace
}  // namespace einsumdb::tensor_gemm
EINSUMDB_TARGET_END
