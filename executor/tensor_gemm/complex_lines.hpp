// tensor_gemm's streamed lines and rows (streamed.hpp) on complex operands, without the real
// form's expanded operand: TCCG cases 1-11 in complex numbers. Internal to executor/.
//
// In the real form (real_form.hpp), X's parts q are summed: X's fastest index lies 2 apart, and
// no streamed plan can read X as it lies. Here X's parts stay rows instead, and W's parts s become
// columns, with no expansion: the real product
//
//   T[(i, q), (j, s)] = Σ_l X[i, l]_q · W[l, j]_s        (X's rows i, W's columns j, parts q, s)
//
// runs in X's rows as they lie, two parts a row, at 4 real FLOPs per complex element and summed
// index on each side, 8 per complex multiply-add, no more. Each complex result is then two pairs of
// T's elements:
//
//   Z[i, j] = (T[(i,0),(j,0)] − T[(i,1),(j,1)]) + i·(T[(i,1),(j,0)] + T[(i,0),(j,1)]),
//
// combined in registers as a piece's tiles are written out: the columns (j,0) and (j,1) of a block
// of rows, the second with its parts swapped, subtracted in the real lanes and added in the
// imaginary ones. The plan is streamed_lines's, in complex elements: pieces of X's unit-stride
// index ux, a line's worth of the output's unit-stride index uz at a time, each value's tile
// computed by a libxsmm kernel from X as it lies into a buffer, transposed on the way out (in
// place, where ux is uz, a tile per piece whose rows are the output's, no transposition). With
// AVX2 alone, our streamed-rows tiles (rows_kernel.hpp) compute the tiles instead where
// own_lines_avx2 says.
//
// Streamed rows (TCCG case 1, bda,dc->abc) go the same way where X's rows are contiguous at each
// summed element: the kernel computes T' = W'·X' for a piece of X's rows, each row's two parts
// two columns of T', and each row of the output is combined from them, a row of W's columns'
// parts long.
#pragma once

#include <algorithm>
#include <complex>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "einsumdb/executor/tensor_gemm/streamed.hpp"

EINSUMDB_TARGET_BEGIN
namespace einsumdb::tensor_gemm {
namespace {

// The plan of a complex product (R: its parts' type), in complex elements, or nothing where none
// applies. Every tile goes through the buffer, to be combined: in place too (X running along the
// output's unit-stride index, TCCG cases 5 and 9-11), where the buffer's rows are the output's
// and its columns go out one by one. In place, the summed elements may take several passes (TCCG
// case 19, adec,ebd->abc: W's 5184 summed elements by 72 columns are 6 MB of complex doubles),
// each pass's combined tile added to the output, as the combination is linear in T.
template <typename R>
std::optional<StreamedLines> complex_lines(
    const std::string& xl, const std::vector<std::int64_t>& xs, const std::string& yl,
    const std::vector<std::int64_t>& ys, const std::string& zl, const std::vector<std::int64_t>& zs,
    const std::map<char, std::int64_t>& len) {
  auto s = streamed_lines<std::complex<R>>(xl, xs, yl, ys, zl, zs, len);
  if (!s || (!s->in_place && s->kc != static_cast<std::int64_t>(s->wk.size()))) return std::nullopt;
  return s;
}

// The streamed-rows plan of a complex product, in complex elements, where X's rows are contiguous
// at each summed element (read transposed: a row's parts are then two of X's rows).
template <typename R>
std::optional<Streamed> complex_rows(const std::string& xl, const std::vector<std::int64_t>& xs,
                                     const std::string& yl, const std::vector<std::int64_t>& ys,
                                     const std::string& zl, const std::vector<std::int64_t>& zs,
                                     const std::map<char, std::int64_t>& len) {
  auto s = streamed<std::complex<R>>(xl, xs, yl, ys, zl, zs, len);
  if (!s || s->x_rs != 1 || s->x_ds == 1) return std::nullopt;
  return s;
}

#if EINSUMDB_AVX512
// Lanes of complex numbers: a block of a line's complex rows (one column of each of a line's
// tiles) combined from T's two columns (combine), and that block transposed in registers, complex
// element by complex element (transpose_pairs). With AVX-512 a line is one register.
inline __m512d combine(__m512d re, __m512d im) {  // re − swap(im) in real lanes, + in imaginary
  return _mm512_fmaddsub_pd(re, _mm512_set1_pd(1.0), _mm512_maskz_permute_pd(0xFF, im, 0x55));
}
inline __m512 combine(__m512 re, __m512 im) {
  return _mm512_fmaddsub_ps(re, _mm512_set1_ps(1.0f), _mm512_maskz_permute_ps(0xFFFF, im, 0xB1));
}
// 4 × 4 complex doubles: r[i] <- element i of each of r[0..3], in 128-bit units.
inline void transpose_pairs(__m512d* r) {
  constexpr __mmask8 all = 0xFF;
  const __m512d t0 = _mm512_maskz_shuffle_f64x2(all, r[0], r[1], 0x44);
  const __m512d t1 = _mm512_maskz_shuffle_f64x2(all, r[0], r[1], 0xEE);
  const __m512d t2 = _mm512_maskz_shuffle_f64x2(all, r[2], r[3], 0x44);
  const __m512d t3 = _mm512_maskz_shuffle_f64x2(all, r[2], r[3], 0xEE);
  r[0] = _mm512_maskz_shuffle_f64x2(all, t0, t2, 0x88);
  r[1] = _mm512_maskz_shuffle_f64x2(all, t0, t2, 0xDD);
  r[2] = _mm512_maskz_shuffle_f64x2(all, t1, t3, 0x88);
  r[3] = _mm512_maskz_shuffle_f64x2(all, t1, t3, 0xDD);
}
// 8 × 8 complex floats: a complex float is 64 bits, a double's width.
inline void transpose_pairs(__m512* r) {
  __m512d d[8];
  for (int u = 0; u < 8; ++u) d[u] = _mm512_castps_pd(r[u]);
  transpose8(d);
  for (int u = 0; u < 8; ++u) r[u] = _mm512_castpd_ps(d[u]);
}
#elif EINSUMDB_AVX2
// The same with a line in two 256-bit registers (transpose.hpp's Line).
inline __m256d combine(__m256d re, __m256d im) {
  return _mm256_fmaddsub_pd(re, _mm256_set1_pd(1.0), _mm256_permute_pd(im, 0x5));
}
inline __m256 combine(__m256 re, __m256 im) {
  return _mm256_fmaddsub_ps(re, _mm256_set1_ps(1.0f), _mm256_permute_ps(im, 0xB1));
}
template <typename R>
inline Line<R> combine(Line<R> re, Line<R> im) {
  return {combine(re.lo, im.lo), combine(re.hi, im.hi)};
}
// 4 × 4 complex doubles, a row in two registers of two complex numbers each: as a 2 × 2 square of
// such registers' squares, each register taking the low or the high 128-bit halves of two rows'.
inline __m256d low_halves(__m256d a, __m256d b) {
  return _mm256_permute2f128_pd(a, b, 0x20);
}
inline __m256d high_halves(__m256d a, __m256d b) {
  return _mm256_permute2f128_pd(a, b, 0x31);
}
inline void transpose_pairs(Line<double>* r) {
  const Line<double> t[4] = {{low_halves(r[0].lo, r[1].lo), low_halves(r[2].lo, r[3].lo)},
                             {high_halves(r[0].lo, r[1].lo), high_halves(r[2].lo, r[3].lo)},
                             {low_halves(r[0].hi, r[1].hi), low_halves(r[2].hi, r[3].hi)},
                             {high_halves(r[0].hi, r[1].hi), high_halves(r[2].hi, r[3].hi)}};
  std::copy(t, t + 4, r);
}
// 8 × 8 complex floats, as the 8 × 8 doubles of the same bits.
inline void transpose_pairs(Line<float>* r) {
  Line<double> d[8];
  for (int u = 0; u < 8; ++u) d[u] = {_mm256_castps_pd(r[u].lo), _mm256_castps_pd(r[u].hi)};
  transpose_block(d);
  for (int u = 0; u < 8; ++u) r[u] = {_mm256_castpd_ps(d[u].lo), _mm256_castpd_ps(d[u].hi)};
}
#endif

// d[0, n) = the complex results of n / 2 rows of T, whose columns (j, 0) and (j, 1) are re and
// im: element 2i + q of each the row (i, q)'s (or, transposed, the column (j, s)'s of T's rows
// (i, 0) and (i, 1); either way each result is re[2i] − im[2i + 1] + i·(re[2i + 1] + im[2i])).
// Added to d's where `add`.
template <typename R>
void combine_run(const R* re, const R* im, R* d, std::int64_t n, bool stream, bool add = false) {
  std::int64_t v = 0;
#if EINSUMDB_AVX2
  using V = Lanes<R>;
  for (; v < n; v += V::width) {
    const auto mask = V::first(std::min<std::int64_t>(V::width, n - v));
    put(d + v, combine(V::load(mask, re + v), V::load(mask, im + v)), mask, add, stream);
  }
#endif
  (void)stream;
  for (; v < n; v += 2) {
    const R a = re[v] - im[v + 1], b = re[v + 1] + im[v];
    d[v] = add ? d[v] + a : a;
    d[v + 1] = add ? d[v + 1] + b : b;
  }
}

// W of batch point q by its parts (w: the complex tensor's), its summed elements l0 + l for l in
// [0, depth): the part p of W's column j at l into to[(2j + p)·js + l·ls].
template <typename R>
void pack_parts(const StreamedOperands& s, const R* w, std::int64_t q, std::int64_t js,
                std::int64_t ls, std::int64_t l0, std::int64_t depth, std::vector<R>& to) {
  const std::int64_t N = s.wn.size();
  to.resize(static_cast<std::size_t>((2 * N - 1) * js + (depth - 1) * ls + 1));
  const R* from = w + 2 * s.wb[q];
  for (std::int64_t j = 0; j < N; ++j)
    for (std::int64_t l = 0; l < depth; ++l)
      for (std::int64_t part = 0; part < 2; ++part)
        to[static_cast<std::size_t>((2 * j + part) * js + l * ls)] =
            from[2 * (s.wn[j] + s.wk[l0 + l]) + part];
}

// Writes a piece's combined tiles out: tile u at buf + u·tile, T's element ((i, q), (j, s)) at
// 2i + q + (2j + s)·ld (ld: 2P, or more); the complex result (i, j) of the piece's `lines` tiles
// one run of the output, at z + 2·(p.c + row(i) + cn[j]) in parts (row: write_lines_out's). In
// place, added to the output's where `add` (a pass of the summed elements after the first).
template <typename R>
void write_complex_lines_out(const R* buf, std::int64_t tile, std::int64_t ld, const Piece& p,
                             std::int64_t N, R* z, const std::int64_t* cn, const StreamedLines& s,
                             bool stream, bool add) {
  if (s.in_place) {  // one tile, its rows a run of the output's, its columns cn[j] apart
    for (std::int64_t j = 0; j < N; ++j)
      combine_run(buf + 2 * j * ld, buf + (2 * j + 1) * ld, z + 2 * (p.c + cn[j]), 2 * p.rows,
                  stream, add);
    return;
  }
  std::int64_t i0 = 0;
#if EINSUMDB_AVX2
  using V = Lanes<R>;
  constexpr std::int64_t L = V::width / 2;  // complex numbers in a line
  // Blocks of up to L rows, within one value of vx, by a line's L tiles: L lines of the output.
  // Where a piece's rows or its values of uz leave a block or a line part full (TCCG case 4 in
  // c64, deca,be->abcd: a's 36 values, four past the last whole block), the block goes the same
  // way under masks.
  // A piece of more than a line's values of uz (StreamedLines::whole_runs) goes a line's at a time,
  // each row and column's lines one after the other.
  while (i0 < p.rows) {
    const std::int64_t h = std::min({L, p.rows - i0, s.span - i0 % s.span});
    const auto rows = V::first(2 * h);
    R* const zi = z + 2 * (p.c + s.row(i0));
    for (std::int64_t j = 0; j < N; ++j)
      for (std::int64_t u0 = 0; u0 < p.lines; u0 += L) {
        const std::int64_t lines = std::min(L, p.lines - u0);
        decltype(V::loadu(buf)) r[L];
        for (std::int64_t u = 0; u < L; ++u) {
          const R* t = buf + (u0 + u) * tile + 2 * i0 + 2 * j * ld;
          r[u] = u < lines ? combine(V::load(rows, t), V::load(rows, t + ld)) : V::zero();
        }
        transpose_pairs(r);
        const auto part = V::first(2 * lines);  // the parts of these values of uz in a line
        for (std::int64_t i = 0; i < h; ++i)
          put(zi + 2 * (i * s.c_rs + cn[j] + u0), r[i], part, false, stream);
      }
    i0 += h;
  }
#endif
  (void)stream;
  for (std::int64_t i = i0; i < p.rows; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      R* d = z + 2 * (p.c + s.row(i) + cn[j]);
      for (std::int64_t u = 0; u < p.lines; ++u) {
        const R* t = buf + u * tile + 2 * i + 2 * j * ld;
        d[2 * u] = t[0] - t[ld + 1];
        d[2 * u + 1] = t[1] + t[ld];
      }
    }
}

#if EINSUMDB_AVX2
// Plan s through rows_line, own_lines_avx2 having said so (in complex elements: TCCG cases 2-4
// and 7 in c64 and c128): for each value u of uz in a
// piece, its rows' parts (2·rows reals, contiguous at each summed element) a line at a time by
// every column (j, s) of W' in blocks of kRowColumns, W' packed block by block, into T's tile of u
// (write_complex_lines_out's layout, its columns whole lines apart, so that a line of rows part
// full stays within its column), then combined and written out as libxsmm's tiles are. The lines
// of rows go by u first, as in run_streamed_lines_avx2, each fetching the next one's panel.
template <typename R>
void run_complex_lines_avx2(const StreamedLines& s, const R* x, const R* w, R* z, int threads,
                            bool stream) {
  constexpr std::int64_t L = 64 / sizeof(R), J = kRowColumns;
  const std::int64_t N = s.wn.size(), K = s.wk.size();
  const std::int64_t blocks = (2 * N + J - 1) / J;
  const std::int64_t ld = (2 * s.longest + L - 1) / L * L;  // T's column spacing
  const std::int64_t tile = ld * blocks * J;
  // W' by blocks of J columns, column (j, part) at 2j + part.
  const auto pack = [&](std::int64_t q, std::vector<R>& to) {
    s.pack_w(w, q, blocks * J, to, J, 2);
  };
  const auto piece = [&](std::int64_t q, const R* packed, const Piece& p, const Piece& next) {
    const R* xq = x + 2 * s.xb[q];
    thread_local std::vector<R> buffer;
    R* const buf = line_aligned(buffer, p.lines * tile);
    const std::int64_t rows = 2 * p.rows;  // reals
    for (std::int64_t u = 0; u < p.lines; ++u) {
      const R* a = xq + 2 * (p.x + u * s.x_us);
      for (std::int64_t r0 = 0; r0 < rows; r0 += L) {
        const R* fetch = r0 + L < rows     ? a + r0 + L
                         : u + 1 < p.lines ? a + 2 * s.x_us
                                           : xq + 2 * next.x;
        rows_line(a + r0, K, 2 * s.x_ds, packed, blocks, buf + u * tile + r0, ld,
                  std::min(L, rows - r0), fetch);
      }
    }
    write_complex_lines_out(buf, tile, ld, p, N, z + 2 * s.cb[q], s.cn.data(), s, stream,
                            false);  // (fenced: over_pieces)
  };
  over_pieces<R>(s.xb.size(), s.whole_runs ? s.whole : s.pieces, threads, pack, piece);
}
#endif

// Runs a complex-lines plan into z (x, w and z: the complex tensors' parts): through our own AVX2
// tiles where `own` asks and own_lines_avx2 says, otherwise through libxsmm's kernel;
// false, where libxsmm has no kernel for it, having computed nothing.
template <typename R>
bool run_complex_lines(const StreamedLines& s, const R* x, const R* w, R* z, int threads,
                       bool stream, bool own) {
#if EINSUMDB_AVX2
  if (own && own_lines_avx2<std::complex<R>>(s)) {
    run_complex_lines_avx2(s, x, w, z, threads, stream);
    return true;
  }
#endif
  (void)own;
  using Kernel = kernels::StreamKernel<R>;
  const std::int64_t N = s.wn.size(), K = s.wk.size(), P = s.longest, kc = s.kc;
  const std::int64_t tail = s.pieces.empty() ? P : s.pieces.back().rows;
  // T' [2·rows × 2N] = X' [2·rows × depth] · W' [depth × 2N], X' as it lies (its parts a row's
  // two), for both lengths of piece and each pass's summed elements (the last pass's may be
  // fewer), all made first.
  std::map<std::pair<std::int64_t, std::int64_t>, Kernel> kernels;
  for (const std::int64_t rows : {P, tail})
    for (std::int64_t l0 = 0; l0 < K; l0 += kc) {
      const auto key = std::make_pair(rows, std::min(kc, K - l0));
      if (kernels.count(key)) continue;
      const Kernel k(2 * rows, 2 * N, key.second, 2 * s.x_ds, kc, 2 * P, false,
                     Kernel::Ahead::a_into_l2, Kernel::Write::cached);
      if (!k) return false;
      kernels.emplace(key, k);
    }
  const std::int64_t tile = 2 * P * 2 * N;  // T's elements
  // Several passes add to the output, which the first therefore leaves in the cache.
  const bool around = stream && kc == K;
  for (std::int64_t l0 = 0; l0 < K; l0 += kc) {
    const std::int64_t depth = std::min(kc, K - l0);
    const Kernel& full = kernels.at({P, depth});
    const Kernel& last = kernels.at({tail, depth});
    // W of batch point q, this pass's summed elements by its parts: column (j, s) of W' the part
    // s of W's column j.
    const auto pack = [&](std::int64_t q, std::vector<R>& to) {
      pack_parts(s, w, q, kc, 1, l0, depth, to);
    };
    const auto piece = [&](std::int64_t q, const R* packed, const Piece& p, const Piece& next) {
      const R* xq = x + 2 * (s.xb[q] + l0 * s.x_ds);
      const Kernel& k = p.rows == P ? full : last;
      thread_local std::vector<R> buffer;
      R* const buf = line_aligned(buffer, p.lines * tile);  // the piece's tiles
      for (std::int64_t u = 0; u < p.lines; ++u) {
        const R* a = xq + 2 * (p.x + u * s.x_us);
        const R* next_a = u + 1 < p.lines ? a + 2 * s.x_us : xq + 2 * next.x;
        k(a, packed, buf + u * tile, next_a, packed, buf);
      }
      write_complex_lines_out(buf, tile, 2 * P, p, N, z + 2 * s.cb[q], s.cn.data(), s, around,
                              l0 > 0);  // (fenced: over_pieces)
    };
    over_pieces<R>(s.xb.size(), s.whole_runs ? s.whole : s.pieces, threads, pack, piece);
  }
  return true;
}

// Runs a complex streamed-rows plan into z (x, w and z: the complex tensors' parts); false, where
// libxsmm has no kernel for it, having computed nothing.
template <typename R>
bool run_complex_rows(const Streamed& s, const R* x, const R* w, R* z, int threads, bool stream) {
  using Kernel = kernels::StreamKernel<R>;
  const std::int64_t N = s.wn.size(), K = s.wk.size();
  // T' [2N × 2·rows] = W' [2N × K] · X' [K × 2·rows], X' read transposed (its rows contiguous at
  // each summed element, each row's parts two of them), for each length of piece.
  std::map<std::int64_t, Kernel> by_rows;
  std::int64_t longest = 0;
  for (const Piece& p : s.pieces)
    if (!by_rows.count(p.rows)) {
      const Kernel k(2 * N, 2 * p.rows, K, 2 * N, 2 * s.x_ds, 2 * N, true, Kernel::Ahead::b_into_l1,
                     Kernel::Write::cached);
      if (!k) return false;
      by_rows.emplace(p.rows, k);
      longest = std::max(longest, p.rows);
    }
  // W of batch point q, by its parts: row (j, s) of W' the part s of W's column j.
  const auto pack = [&](std::int64_t q, std::vector<R>& to) {
    pack_parts(s, w, q, 1, 2 * N, 0, K, to);
  };
  over_pieces<R>(s.xb.size(), s.pieces, threads, pack,
                 [&](std::int64_t q, const R* packed, const Piece& p, const Piece& next) {
                   const R* xq = x + 2 * s.xb[q];
                   thread_local std::vector<R> buffer;
                   R* const buf = line_aligned(buffer, 4 * N * longest);  // T' of the piece
                   by_rows.at(p.rows)(packed, xq + 2 * p.x, buf, packed, xq + 2 * next.x, buf);
                   for (std::int64_t i = 0; i < p.rows; ++i)  // T' columns (i, 0) and (i, 1)
                     combine_run(buf + 2 * i * 2 * N, buf + (2 * i + 1) * 2 * N,
                                 z + 2 * (s.cb[q] + p.c + i * s.c_rs), 2 * N, stream);
                 });  // (fenced: over_pieces)
  return true;
}

}  // namespace
}  // namespace einsumdb::tensor_gemm
EINSUMDB_TARGET_END
