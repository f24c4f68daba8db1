// tensor_gemm's streamed algorithm. Where one operand W has only a few free elements (the columns)
// and the other, X, runs at unit stride along its rows or its summed indices, X is not packed at
// all: kernels stream it in place, a few lines at a time, against W packed once (libxsmm's, or
// where they run, our own). Where the output's unit-stride index is among the columns, each kernel
// call writes its rows in place (streamed rows: a tall, skinny product such as TCCG case 1); where
// it is among X's rows and X runs along another of them, the calls go a line's worth of its values
// at a time into a buffer, transposed on the way out, or in floats through our kernel, which
// transposes its tiles in registers, or with AVX2 alone through our streamed-rows tiles, one value
// of that index at a time, staged (streamed lines: TCCG cases 2-4 and 6-8); and where X runs
// along that index itself, the calls write in place (TCCG cases 5, 9, 10, 11, 19), in floats on a
// processor that runs 512-bit operations in halves through our kernel where each run fits a few
// 256-bit registers (place_kernel.hpp: case 11), at full width where it fills four to five 512-bit
// ones, the last part full (cases 5 and 11), and with AVX2 alone through our kernel in chunks
// of a run where the summed elements lie apart (place_kernel.hpp: case 5). An output larger than
// the cache is written in non-temporal stores, around it. Internal to executor/.
#pragma once

#include <xmmintrin.h>

#include <algorithm>
#include <complex>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "einsumdb/executor/isa_target.hpp"
#include "einsumdb/executor/kernels.hpp"
#include "einsumdb/executor/small_gemm.hpp"
#include "einsumdb/executor/tensor_gemm/blocking.hpp"
#include "einsumdb/executor/tensor_gemm/lines_kernel.hpp"
#include "einsumdb/executor/tensor_gemm/place_kernel.hpp"
#include "einsumdb/executor/tensor_gemm/rows_kernel.hpp"
#include "einsumdb/executor/tensor_gemm/scatter.hpp"
#include "einsumdb/executor/tensor_gemm/transpose.hpp"
#include "einsumdb/executor/tensor_gemm/write_out.hpp"  // copy_run

EINSUMDB_TARGET_BEGIN
namespace einsumdb::tensor_gemm {
// Internal linkage, as for everything the driver alone instantiates (tensor_gemm.cpp says why).
namespace {

// ---- Streamed rows
// Where the output's unit-stride index belongs to an operand W with few free elements (the columns,
// contiguous in each row of the output) and the other operand X runs at unit stride along its rows
// or along its summed indices, each evenly spaced, X is not packed at all: W is packed once (a few
// KB to a few hundred), and a libxsmm kernel computes each piece of a few lines of X's rows, all
// columns and all summed elements at once, reading X's lines as they lie, once each, while
// prefetching the next piece's (kernels::StreamKernel). Packing a large X in blocks, as BLIS does,
// reads it from memory and writes it to the cache before the FMA units see it, and a few columns do
// not give the micro-kernel time enough to hide that. A plain product of a tall, skinny matrix
// (ik,kj->ij with few j) streams the same way.
inline constexpr std::int64_t kStreamedRowBytes =
    1024;                                       // at most a row of the output's columns this wide
inline constexpr std::int64_t kPieceLines = 3;  // rows per piece: three cache lines' worth
// Streamed lines: the most bytes of X a kernel call reads where its summed elements lie apart.
inline constexpr std::int64_t kApartPanel = 64 << 10;

// What both streamed plans (rows and lines) address W and the batch points by.
struct StreamedOperands {
  bool swap = false;  // W (the columns' operand) is the einsum's left operand
  Table wn, wk;       // W's offset per column, per summed element
  Table xb, wb, cb;   // per batch point: in X, W and the output

  // The tables of these groups of indices (the columns in the output's order, the summed in X's).
  void address(const std::string& cols, const std::string& sum, const std::string& batch,
               const std::map<char, std::int64_t>& len, const std::string& Xl,
               const std::vector<std::int64_t>& Xs, const std::string& Wl,
               const std::vector<std::int64_t>& Ws, const std::string& zl,
               const std::vector<std::int64_t>& zs) {
    wn = offsets(cols, len, Wl, Ws);
    wk = offsets(sum, len, Wl, Ws);
    xb = offsets(batch, len, Xl, Xs);
    wb = offsets(batch, len, Wl, Ws);
    cb = offsets(batch, len, zl, zs);
  }

  // W of batch point q packed for a kernel, in blocks of `block` columns (all `width` in one by
  // default): block b's summed element l's values at to[(b·K + l)·block, ...), zero past the N
  // columns to width (≥ N, a multiple of block). In one block, summed element l's values of the
  // columns are at to[l·width, l·width + N). With `parts` (2: W complex, w its parts), column j's
  // parts are columns parts·j, parts·j + 1, ... (≤ width).
  template <typename T>
  void pack_w(const T* w, std::int64_t q, std::int64_t width, std::vector<T>& to,
              std::int64_t block = 0, std::int64_t parts = 1) const {
    const std::int64_t N = wn.size(), K = wk.size();
    if (block == 0) block = width;
    to.assign(static_cast<std::size_t>(K * width), T{0});
    const T* from = w + parts * wb[q];
    for (std::int64_t l = 0; l < K; ++l)
      for (std::int64_t j = 0; j < N; ++j)
        for (std::int64_t part = 0; part < parts; ++part) {
          const std::int64_t c = parts * j + part;
          to[static_cast<std::size_t>((c / block * K + l) * block + c % block)] =
              from[parts * (wn[j] + wk[l]) + part];
        }
  }
};

// n elements of `buffer` (a thread's scratch for a piece's tiles) from a cache line on.
template <typename T>
T* line_aligned(std::vector<T>& buffer, std::int64_t n) {
  buffer.resize(static_cast<std::size_t>(n) + 64 / sizeof(T));
  return reinterpret_cast<T*>((reinterpret_cast<std::uintptr_t>(buffer.data()) + 63) / 64 * 64);
}

// A piece of a streamed plan: `rows` rows from offset x in X and c in the output, for `lines`
// values of the output's unit-stride index (streamed lines; 1 otherwise).
struct Piece {
  std::int64_t x, c, rows, lines;
};

// A plan's pieces, held in a Table's memory (scatter.hpp, which says why), up to the capacity they
// are made with: a plan is made afresh on every run, and a vector of tens of thousands of pieces
// (TCCG case 5, ebad,ce->abcd: 15,552, and 5,184 runs) grew in pages that glibc mapped afresh each
// time, each faulted in and the whole copied as it grew (docs/performance/tccg-pieces.md).
class Pieces {
 public:
  explicit Pieces(std::int64_t capacity = 0) : t_(kFields * capacity), capacity_(capacity) {}
  bool full() const { return n_ == capacity_; }
  void push_back(const Piece& p) {
    if (full()) throw Error("tensor_gemm: more pieces than the plan counted");
    data()[n_++] = p;
  }
  std::size_t size() const { return static_cast<std::size_t>(n_); }
  bool empty() const { return n_ == 0; }
  const Piece& operator[](std::size_t i) const { return begin()[i]; }
  const Piece& front() const { return begin()[0]; }
  const Piece& back() const { return begin()[n_ - 1]; }
  Piece& back() { return data()[n_ - 1]; }
  const Piece* begin() const { return reinterpret_cast<const Piece*>(t_.data()); }
  const Piece* end() const { return begin() + n_; }

 private:
  static constexpr std::int64_t kFields = 4;  // a Piece's int64s, a Table entry each
  static_assert(sizeof(Piece) == kFields * sizeof(std::int64_t));
  Piece* data() { return reinterpret_cast<Piece*>(t_.data()); }
  Table t_;
  std::int64_t capacity_, n_ = 0;
};

struct Streamed : StreamedOperands {
  std::int64_t x_rs = 0, x_ds = 0, c_rs = 0;
  Pieces pieces;
  bool around = false;  // the output written around the cache (writes_around)
  bool large = false;   // the output larger than the cache (kCachedBytes)
};

// Runs body(q, packed, piece, next piece) on every piece of each batch point q, with W packed
// for q by pack(q, packed), checking the deadline every kPiecesPerCheck pieces: over the batch
// points where there are as many as threads, each thread packing its own W, otherwise over the
// pieces of each point.
inline constexpr std::int64_t kPiecesPerCheck = 256;
template <typename T, typename Pack, typename Body>
void over_pieces(std::int64_t nb, const Pieces& pieces, int threads, const Pack& pack,
                 const Body& body) {
  const auto count = static_cast<std::int64_t>(pieces.size());
  const auto run = [&](std::int64_t q, const T* packed, std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) {
      if ((i - lo) % kPiecesPerCheck == 0) check_deadline();
      body(q, packed, pieces[static_cast<std::size_t>(i)],
           pieces[static_cast<std::size_t>(std::min(count - 1, i + 1))]);
    }
    _mm_sfence();  // any streamed stores, visible before this thread is joined
  };
  const std::int64_t t = std::max(1, threads);
  if (nb >= t) {
    kernels::parallel_for(nb, static_cast<int>(t), [&](std::int64_t lo, std::int64_t hi) {
      std::vector<T> packed;
      for (std::int64_t q = lo; q < hi; ++q) {
        pack(q, packed);
        run(q, packed.data(), 0, count);
      }
    });
    return;
  }
  std::vector<T> packed;
  for (std::int64_t q = 0; q < nb; ++q) {
    pack(q, packed);
    kernels::parallel_for(count, static_cast<int>(t),
                          [&](std::int64_t lo, std::int64_t hi) { run(q, packed.data(), lo, hi); });
  }
}

// Whether an output of layout zl is larger than the cache (kCachedBytes), in elements of T.
template <typename T>
bool larger_than_cache(const std::string& zl, const std::map<char, std::int64_t>& len) {
  double bytes = sizeof(T);
  for (char c : zl) bytes *= static_cast<double>(len.at(c));
  return bytes > static_cast<double>(kCachedBytes);
}

// Whether a streamed plan's kernels write the output around the cache, in non-temporal stores:
// where it is too large for the cache and each kernel call's columns start on a cache line
// (`column` and `step` elements of T apart, each of its columns whole lines, at the pieces' offsets
// from each batch point's). An ordinary store reads its line from memory before writing it, and the
// output is written once. Real tiles are written around the cache by the kernels that run with
// AVX-512 (streams()); complex results by our own write-out, which streams with AVX2 too
// (complex_lines.hpp).
template <typename T>
bool writes_around(const std::string& zl, const std::map<char, std::int64_t>& len,
                   std::int64_t column, std::int64_t step, const Pieces& pieces, const Table& cb) {
  constexpr std::int64_t line = 64 / sizeof(T);
  const bool complex_results = !std::is_floating_point_v<T>;  // (T: std::complex<R>)
  if (!(complex_results ? writes_stream() : streams()) || !larger_than_cache<T>(zl, len) ||
      column % line || step % line)
    return false;
  for (const Piece& p : pieces)
    if (p.c % line) return false;
  for (std::int64_t q = 0; q < cb.size(); ++q)
    if (cb[q] % line) return false;
  return true;
}

// The streamed plan of a contraction, or nothing where it does not apply.
template <typename T>
std::optional<Streamed> streamed(const std::string& xl, const std::vector<std::int64_t>& xs,
                                 const std::string& yl, const std::vector<std::int64_t>& ys,
                                 const std::string& zl, const std::vector<std::int64_t>& zs,
                                 const std::map<char, std::int64_t>& len) {
  if (zl.empty()) return std::nullopt;
  const char unit = zl.back();
  Streamed s;
  if (contains(xl, unit) == contains(yl, unit)) return std::nullopt;
  s.swap = contains(xl, unit);
  const std::string& Xl = s.swap ? yl : xl;
  const std::string& Wl = s.swap ? xl : yl;
  const auto& Xs = s.swap ? ys : xs;
  const auto& Ws = s.swap ? xs : ys;
  auto [batch, rows, cols, sum] = gemm_groups(Xl, Wl, zl);
  // The columns: contiguous in the output, a few vectors' worth, filling them well.
  constexpr std::int64_t lanes = 64 / sizeof(T);
  cols = by_stride(cols, zl, zs);
  const Table cn = offsets(cols, len, zl, zs);
  const std::int64_t N = cn.size();
  if (N < 1 || N * static_cast<std::int64_t>(sizeof(T)) > kStreamedRowBytes ||
      4 * N < 3 * ((N + lanes - 1) / lanes * lanes))
    return std::nullopt;
  for (std::int64_t j = 0; j < N; ++j)
    if (cn[j] != j) return std::nullopt;
  // The summed elements, evenly spaced in X; W packed from the cache (half of L2 at most).
  sum = by_stride(sum, Xl, Xs);
  const Table ak = offsets(sum, len, Xl, Xs);
  const std::int64_t K = ak.size();
  if (K < 1 || N * K * static_cast<std::int64_t>(sizeof(T)) > l2_bytes() / 2) return std::nullopt;
  const std::int64_t sa = K > 1 ? ak[1] : 1;
  for (std::int64_t l = 0; l < K; ++l)
    if (ak[l] != l * sa) return std::nullopt;
  // The rows in X's order, cut into pieces evenly spaced in X and in the output.
  rows = by_stride(rows, Xl, Xs);
  const Table am = offsets(rows, len, Xl, Xs), cm = offsets(rows, len, zl, zs);
  const std::int64_t M = am.size();
  if (M < 1) return std::nullopt;
  const std::int64_t ra = M > 1 ? am[1] - am[0] : std::max<std::int64_t>(K, 1);
  const std::int64_t rs = M > 1 ? cm[1] - cm[0] : N;
  std::int64_t longest = kPieceLines * lanes;
  if (K == 1 || sa == 1) {  // each row's summed elements contiguous: X' read as it lies
    if (ra < K) return std::nullopt;
    s.x_rs = ra, s.x_ds = 1;
  } else if (ra == 1) {  // the rows contiguous at each summed element: X' read transposed
    s.x_rs = 1, s.x_ds = sa;
    longest = std::min(longest, sa);
  } else {
    return std::nullopt;
  }
  if (rs < N) return std::nullopt;
  s.c_rs = rs;
  // Pieces of a line's worth of rows or more on average (or all of them, where there are fewer):
  // at most M / min(M, lanes) of them.
  s.pieces = Pieces(M / std::min(M, lanes));
  for (std::int64_t i = 0; i < M;) {
    const std::int64_t start = i++;
    while (i < M && i - start < longest && am[i] - am[i - 1] == ra && cm[i] - cm[i - 1] == rs) ++i;
    if (s.pieces.full()) return std::nullopt;
    s.pieces.push_back({am[start], cm[start], i - start, 1});
  }
  s.address(cols, sum, batch, len, Xl, Xs, Wl, Ws, zl, zs);
  s.around = writes_around<T>(zl, len, N, s.c_rs, s.pieces, s.cb);
  s.large = larger_than_cache<T>(zl, len);
  return s;
}

// Whether our AVX2 streamed-rows kernel (rows_line_block, rows_kernel.hpp) takes plan s: where the
// kernels run AVX2 and not AVX-512 (there, rows_tile and rows_across_tile take it), and X's rows
// are contiguous at each summed element, which lie apart (TCCG case 1, bda,dc->abc). Where each
// row's summed elements are contiguous instead, libxsmm's kernel reads X as it lies.
template <typename T>
bool own_rows_avx2(const Streamed& s) {
  return std::is_floating_point_v<T> && writes_stream() && !streams() && s.x_rs == 1 &&
         s.wk.size() > 1;
}

#if EINSUMDB_AVX2
// Plan s through rows_line_block: each piece a line of rows at a time, its blocks of kRowColumns
// columns into a staging block (column j's line of rows at j·line), then out a line square at a
// time, row i's columns a run of the output (whole aligned lines streamed around the cache where
// the output is larger than the cache). Block b fetches the next line of rows at its summed
// elements b, b + blocks, ...: the blocks between them fetch all of it.
template <typename T>
void run_streamed_rows_avx2(const Streamed& s, const T* x, const T* w, T* z, int threads) {
  using V = Lanes<T>;
  constexpr std::int64_t L = 64 / sizeof(T), J = kRowColumns;
  const std::int64_t N = s.wn.size(), K = s.wk.size();
  const std::int64_t blocks = (N + J - 1) / J;
  const std::int64_t staged_columns = (blocks * J + L - 1) / L * L;  // whole line squares
  const auto pack = [&](std::int64_t q, std::vector<T>& to) { s.pack_w(w, q, blocks * J, to, J); };
  const auto piece = [&](std::int64_t q, const T* packed, const Piece& p, const Piece& next) {
    const T* xq = x + s.xb[q] + p.x;
    T* const zq = z + s.cb[q] + p.c;
    thread_local std::vector<T> buffer;
    T* const staged = line_aligned(buffer, staged_columns * L);
    for (std::int64_t r0 = 0; r0 < p.rows; r0 += L) {
      const std::int64_t h = std::min(L, p.rows - r0);
      // The next line of rows, in this piece or the next, its summed elements shared out among
      // the blocks. Fetched by the first block alone, a line a step, it would ask memory for more
      // than a core draws (TCCG case 1 in doubles: 312 lines, 20 KB, in 312 steps of 12 FMAs,
      // about 1,900 cycles, over 30 GB/s); the four blocks fetch a line every fourth step.
      const T* fetch = r0 + L < p.rows ? xq + r0 + L : x + s.xb[q] + next.x;
      rows_line(xq + r0, K, s.x_ds, packed, blocks, staged, L, h, fetch);
      for (std::int64_t j0 = 0; j0 < N; j0 += L) {
        decltype(V::loadu(staged)) r[L];
        load_transposed(staged + j0 * L, L, r);
        const auto cols = V::first(std::min(L, N - j0));
        T* const zr = zq + r0 * s.c_rs + j0;
        for (std::int64_t i = 0; i < h; ++i) put(zr + i * s.c_rs, r[i], cols, false, s.large);
      }
    }
  };
  over_pieces<T>(s.xb.size(), s.pieces, threads, pack, piece);
}
#endif

// Runs a streamed plan into z through our own kernel (rows_kernel.hpp), where it runs and `own`
// asks for it: with AVX2 alone, rows_line_block where own_rows_avx2 says; with AVX-512, its
// registers half-width or full as `narrow` says (by default as this processor runs fastest,
// machine_rows_shape), the tiles of rows_tile fetching X into L1 as well as L2 where `fetch_l1`
// says ("rows_fetch"). False, having computed nothing, otherwise.
template <typename T>
bool run_streamed_own(const Streamed& s, const T* x, const T* w, T* z, int threads, bool own,
                      [[maybe_unused]] std::optional<bool> narrow = std::nullopt,
                      [[maybe_unused]] bool fetch_l1 = false) {
#if EINSUMDB_AVX2
  if constexpr (std::is_floating_point_v<T>) {
    if (own && own_rows_avx2<T>(s)) {
      run_streamed_rows_avx2<T>(s, x, w, z, threads);
      return true;
    }
  }
#endif
#if EINSUMDB_AVX512
  const std::int64_t N = s.wn.size(), K = s.wk.size();
  if (!own || !streams()) return false;
  const RowsShape shape = !narrow   ? machine_rows_shape()
                          : *narrow ? RowsShape::narrow
                                    : RowsShape::wide;
  if constexpr (std::is_same_v<T, float>) {
    if (s.x_rs == 1 && rows_across(N, shape)) {
      RowsTile<T> t{};
      t.depth = K, t.rs = 1, t.ds = s.x_ds, t.width = kAcrossColumns, t.c_rs = s.c_rs;
      const auto pack = [&](std::int64_t q, std::vector<T>& to) {
        s.pack_w(w, q, kAcrossColumns, to);
      };
      over_pieces<T>(
          s.xb.size(), s.pieces, threads, pack,
          [&](std::int64_t q, const T* packed, const Piece& p, const Piece& next) {
            RowsTile<T> tq = t;
            tq.w = packed;
            const T* xq = x + s.xb[q] + p.x;
            T* zq = z + s.cb[q] + p.c;
            for (std::int64_t i = 0; i < p.rows; i += 16) {
              // The next tile's lines, in this piece or the next.
              const std::int64_t r = i + 16;
              const T* fetch =
                  r < p.rows ? xq + r : x + s.xb[q] + next.x + std::min(r - p.rows, next.rows - 1);
              const auto h = static_cast<int>(std::min<std::int64_t>(16, p.rows - i));
              if (h == 16)
                rows_across_tile<true>(tq, xq + i, zq + i * s.c_rs, fetch, h, static_cast<int>(N));
              else
                rows_across_tile<false>(tq, xq + i, zq + i * s.c_rs, fetch, h, static_cast<int>(N));
            }
          });
      return true;
    }
  }
  const RowsKernel<T> k = rows_kernel<T>(N, shape, fetch_l1);
  if (!k) return false;
  RowsTile<T> t{};
  t.depth = K, t.rs = s.x_rs, t.ds = s.x_ds, t.width = k.width, t.c_rs = s.c_rs, t.last = k.last;
  const auto pack = [&](std::int64_t q, std::vector<T>& to) { s.pack_w(w, q, k.width, to); };
  over_pieces<T>(s.xb.size(), s.pieces, threads, pack,
                 [&](std::int64_t q, const T* packed, const Piece& p, const Piece& next) {
                   RowsTile<T> tq = t;
                   tq.w = packed;
                   const T* xq = x + s.xb[q];
                   k(tq, xq + p.x, z + s.cb[q] + p.c, p.rows, xq + next.x, next.rows);
                 });
  return true;
#else
  (void)s, (void)x, (void)w, (void)z, (void)threads, (void)own;
  return false;
#endif
}

// Runs a streamed plan into z: through our own kernel where `own` asks and it runs, otherwise
// through libxsmm's; false, having computed nothing, where libxsmm has no kernel for it either.
template <typename T>
bool run_streamed(const Streamed& s, const T* x, const T* w, T* z, int threads, bool own,
                  bool fetch_l1 = false) {
  if (run_streamed_own(s, x, w, z, threads, own, std::nullopt, fetch_l1)) return true;
  using Kernel = kernels::StreamKernel<T>;
  const std::int64_t N = s.wn.size(), K = s.wk.size();
  // libxsmm's C'[N × rows] = W'[N × K] · X'[K × rows]: X' as it lies where its summed elements
  // are contiguous, otherwise transposed. One kernel per length of piece (whole runs and their
  // ends), all made first.
  const bool transposed = s.x_ds != 1;
  std::map<std::int64_t, Kernel> by_rows;
  for (const Piece& p : s.pieces)
    if (!by_rows.count(p.rows)) {
      const Kernel k(N, p.rows, K, N, transposed ? s.x_ds : s.x_rs, s.c_rs, transposed,
                     Kernel::Ahead::b_into_l1,
                     s.around ? Kernel::Write::around : Kernel::Write::cached);
      if (!k) return false;
      by_rows.emplace(p.rows, k);
    }
  const auto pack = [&](std::int64_t q, std::vector<T>& to) { s.pack_w(w, q, N, to); };
  over_pieces<T>(s.xb.size(), s.pieces, threads, pack,
                 [&](std::int64_t q, const T* packed, const Piece& p, const Piece& next) {
                   const T* xq = x + s.xb[q];
                   T* zq = z + s.cb[q];
                   by_rows.at(p.rows)(packed, xq + p.x, zq + p.c, packed, xq + next.x, zq + next.c);
                 });
  return true;
}

// ---- Streamed lines
// Where the output's unit-stride index uz belongs to the large operand X but X runs at unit stride
// along another of its rows, ux, X need not be packed either: for kLine values of uz at a time, a
// libxsmm kernel computes a tile per value from X as it lies (rows along ux, each summed element a
// column of X' at its even spacing), against the few columns of W packed once, into a buffer; the
// tiles, transposed, then give each row and column a whole line of the output along uz (or all of
// uz's values at a time, a run of whole lines, where StreamedLines::whole_runs). Each call
// fetches the next call's part of X into L2. In floats, our own kernel (lines_kernel.hpp) takes the
// plan where own_lines says, its tiles transposed in registers; with AVX2 alone, our streamed-rows
// tiles (rows_line_block) take it in floats and doubles where own_lines_avx2 says.

struct StreamedLines : StreamedOperands {
  Table cn;               // the output's offset per column
  std::int64_t x_ds = 0;  // X: the spacing of the summed elements
  std::int64_t x_us = 0;  // X: the spacing of uz's values (the lines' elements)
  std::int64_t c_rs = 0;  // the output: the spacing of ux's values (the rows)
  std::int64_t span = 0;  // a piece's rows: ux's values of `span` at a time, then vx's
  std::int64_t c_vs = 0;  // the output: the spacing of vx's values (a piece's rows past span)
  std::int64_t c_cs = 0;  // in place: the output's spacing of the columns
  bool in_place = false;  // ux is uz: each tile is written where it belongs, one line per piece
  bool around = false;    // in place, around the cache (writes_around)
  std::int64_t kc = 0;    // summed elements per pass (in place, several passes may add up)
  std::int64_t longest = 0;
  std::int64_t run = 0;  // ux's values and the rows that run on with them in X and the output
  Pieces pieces;
  // In place: each run in one piece (our kernel's, place_kernel.hpp).
  Pieces runs;
  // Not in place: the same rows as `pieces` with all of uz's values each (our kernel's, where a
  // few rows' worth fit its staging block; libxsmm's, where whole_runs).
  Pieces whole;
  bool whole_runs = false;  // libxsmm's kernel runs `whole` rather than `pieces` (streamed_lines)
  // The output's offset of a piece's row i: ux's values `span` at a time, then vx's.
  std::int64_t row(std::int64_t i) const { return i % span * c_rs + i / span * c_vs; }
};

template <typename T>
std::optional<StreamedLines> streamed_lines(
    const std::string& xl, const std::vector<std::int64_t>& xs, const std::string& yl,
    const std::vector<std::int64_t>& ys, const std::string& zl, const std::vector<std::int64_t>& zs,
    const std::map<char, std::int64_t>& len) {
  if (zl.empty()) return std::nullopt;
  const char uz = zl.back();
  if (contains(xl, uz) == contains(yl, uz)) return std::nullopt;
  StreamedLines s;
  s.swap = contains(yl, uz);  // X holds uz
  const std::string& Xl = s.swap ? yl : xl;
  const std::string& Wl = s.swap ? xl : yl;
  const auto& Xs = s.swap ? ys : xs;
  const auto& Ws = s.swap ? xs : ys;
  constexpr std::int64_t lanes = 64 / sizeof(T), line = 64 / sizeof(T);
  char ux = '\0';
  for (std::size_t a = 0; a < Xl.size(); ++a)
    if (Xs[a] == 1 && len.at(Xl[a]) > 1) ux = Xl[a];
  if (ux == '\0' || contains(Wl, ux) || !contains(zl, ux) || len.at(ux) < lanes || len.at(uz) < 2)
    return std::nullopt;
  s.in_place = ux == uz;
  auto [batch, others, cols, sum] = gemm_groups(Xl, Wl, zl);
  others.erase(
      std::remove_if(others.begin(), others.end(), [&](char c) { return c == ux || c == uz; }),
      others.end());
  s.cn = offsets(cols, len, zl, zs);
  const std::int64_t N = s.cn.size();
  // Complex columns (complex_lines.hpp) up to twice as wide: in c128, TCCG cases 10 and 11's 72
  // columns (1152 bytes) go faster streamed than in real form.
  const std::int64_t widest =
      std::is_same_v<T, std::complex<double>> ? 2 * kStreamedRowBytes : kStreamedRowBytes;
  if (N < 1 || N * static_cast<std::int64_t>(sizeof(T)) > widest) return std::nullopt;
  if (s.in_place) {  // the columns evenly spaced in the output, the tiles' rows between them
    s.c_cs = N > 1 ? s.cn[1] : len.at(ux);
    for (std::int64_t j = 0; j < N; ++j)
      if (s.cn[j] != j * s.c_cs) return std::nullopt;
  }
  // In place, where ux's values leave a line part full, the rows' indices that continue ux's run in
  // both X and the output, up to the columns' spacing, make one run of rows with it, cut into
  // pieces of whole lines wherever they fall (TCCG case 9 in floats, ea,ebcd->abcd: d's 72 values
  // are four and a half lines, and d, c and b run on together in both). A piece's last line is then
  // whole, and its stores may go around the cache.
  const std::int64_t nx = len.at(ux);
  std::int64_t run = nx;
  if (s.in_place && nx % lanes != 0)
    for (auto c = others.begin(); c != others.end();) {
      if (Xs[Xl.find(*c)] == run && zs[zl.find(*c)] == run && run * len.at(*c) <= s.c_cs) {
        run *= len.at(*c);
        others.erase(c);
        c = others.begin();
      } else {
        ++c;
      }
    }
  if (s.in_place && s.c_cs < run) return std::nullopt;
  s.run = run;
  sum = by_stride(sum, Xl, Xs);
  const Table ak = offsets(sum, len, Xl, Xs);
  const std::int64_t K = ak.size();
  // W is packed once per pass and read from the cache: at most half of L2 of it. In place, the
  // summed elements go in as many passes as that takes, each adding to the tiles the first wrote.
  const std::int64_t fit = l2_bytes() / 2 / (N * static_cast<std::int64_t>(sizeof(T)));
  if (K < 1 || fit < 1 || (K > fit && !s.in_place)) return std::nullopt;
  const std::int64_t passes = (K + fit - 1) / fit;
  s.kc = (K + passes - 1) / passes;
  // Pieces of ux in equal shares of whole vectors, at most four: TCCG case 6's 32 values of d
  // (efbad,cf->abcde) in one piece rather than 24 + 8, cases 3 and 4's 72 in 24s in doubles. Each
  // kernel call reads a run of a piece's lines at each summed element; where those lie further
  // apart in X than ux's values reach (case 4, deca,be->abcd), the calls' runs are all the hardware
  // sees to fetch ahead, and in floats 72 values go faster whole (five vectors, the last half
  // full, runs of 288 bytes) than as 48 + 24; where the summed elements continue ux's run (case
  // 19, adec,ebd->abc), X is read as one stream whatever the pieces, and 48 + 24 go faster.
  // (Doubles: 72 as 40 + 32 went slower than as 3 × 24 in cases 3 and 4; bench/tccg.py cases 2-5,
  // 19.) Complex floats (complex_lines.hpp), whose parts are the kernel's floats: a run of 288
  // bytes goes whole likewise (case 4's 36 values), a longer one in shares of four vectors (case
  // 2's 156 went slower in shares of five). Where the summed elements lie apart and are many, so
  // that a call's runs of four vectors at all of them (its panel of X) would pass kApartPanel
  // bytes, runs of three go faster: case 2's 312 (dca,bd->abc) in f64, c128 and c64, and 1200 in
  // f64 and c64, where runs of two were slower than three. (Floats' runs of five were not.)
  const bool apart = K > 1 && ak[1] > run;
  const bool five = std::is_same_v<T, std::complex<float>> ? run <= 5 * lanes : sizeof(T) == 4;
  std::int64_t vectors = five && apart ? 5 : 4;
  if (apart && vectors == 4 && vectors * 64 * s.kc > kApartPanel) vectors = 3;
  const std::int64_t shares = (run + vectors * lanes - 1) / (vectors * lanes);
  s.longest = std::min(run, ((run + shares - 1) / shares + lanes - 1) / lanes * lanes);
  const std::int64_t sa = K > 1 ? ak[1] : s.longest;
  for (std::int64_t l = 0; l < K; ++l)
    if (ak[l] != l * sa) return std::nullopt;
  if (sa < s.longest) return std::nullopt;
  s.x_ds = sa;
  s.span = s.longest;
  // Where ux's values are whole vectors in one piece and the next index of the tiles' rows, vx,
  // follows them in X, a piece takes up to eight lines of rows over several of vx's values: each
  // kernel call then reads runs of X twice as long or more, which the hardware fetches ahead (a
  // run of one line is over before a prefetcher has seen enough of it to follow).
  char vx = '\0';
  std::int64_t per = 1;  // vx's values per piece
  const auto next = std::find_if(others.begin(), others.end(),
                                 [&](char c) { return Xs[Xl.find(c)] == nx && len.at(c) > 1; });
  if (!s.in_place && s.longest == nx && nx % lanes == 0 && next != others.end())
    for (std::int64_t r = std::min(8 * lanes, sa) / nx; r > 1; --r)  // (lda ≥ rows: r·nx ≤ sa)
      if (len.at(*next) % r == 0) {
        vx = *next, per = r;
        break;
      }
  // Where ux's values in one piece leave its last vector part full, a piece takes the fewest of
  // vx's values that fill whole vectors, up to ten: each kernel call's rows are then whole
  // vectors, no masked one. TCCG case 4, deca,be->abcd: a's 72 floats (or 36 complex floats),
  // four and a half vectors, go two values of c at a time, nine vectors.
  if (!s.in_place && s.longest == nx && nx % lanes != 0 && next != others.end()) {
    const std::int64_t r = lanes / std::gcd(nx, lanes);
    if (r * nx <= std::min(10 * lanes, sa) && len.at(*next) % r == 0) vx = *next, per = r;
  }
  const auto stride_in = [](char c, const std::string& layout,
                            const std::vector<std::int64_t>& st) { return st[layout.find(c)]; };
  s.x_us = stride_in(uz, Xl, Xs);
  s.c_rs = stride_in(ux, zl, zs);
  if (stride_in(uz, zl, zs) != 1) return std::nullopt;
  std::int64_t nv = 1;  // vx's values, `per` to a piece
  if (vx != '\0') {
    others.erase(std::find(others.begin(), others.end(), vx));
    nv = len.at(vx);
    s.c_vs = stride_in(vx, zl, zs);
    s.longest = per * nx;
  }
  others = by_stride(others, Xl, Xs);
  const Table ox = offsets(others, len, Xl, Xs), oz = offsets(others, len, zl, zs);
  const std::int64_t nu = len.at(uz);
  const std::int64_t each = ox.size() * ((nv + per - 1) / per);  // (o, v0) pairs
  const std::int64_t cuts = (run + s.span - 1) / s.span;         // values of i0
  s.pieces = Pieces(each * (s.in_place ? 1 : (nu + line - 1) / line) * cuts);
  s.whole = Pieces(s.in_place ? 0 : each * cuts);
  s.runs = Pieces(s.in_place ? each : 0);
  for (std::int64_t o = 0; o < ox.size(); ++o)
    for (std::int64_t v0 = 0; v0 < nv; v0 += per)
      for (std::int64_t u0 = 0; u0 < (s.in_place ? 1 : nu); u0 += line)
        for (std::int64_t i0 = 0; i0 < run; i0 += s.span) {
          s.pieces.push_back({ox[o] + v0 * nx + u0 * s.x_us + i0,
                              oz[o] + v0 * s.c_vs + u0 + i0 * s.c_rs,
                              vx != '\0' ? s.longest : std::min(s.span, run - i0),
                              s.in_place ? 1 : std::min(line, nu - u0)});
          if (!s.in_place && u0 == 0) s.whole.push_back(s.pieces.back()), s.whole.back().lines = nu;
          if (s.in_place && i0 == 0) s.runs.push_back(s.pieces.back()), s.runs.back().rows = run;
        }
  s.address(cols, sum, batch, len, Xl, Xs, Wl, Ws, zl, zs);
  // Through libxsmm's kernel, a piece's tiles go out from a buffer, a line (or what is left of
  // uz's values) for each of its rows and columns (write_lines_out). Where those lines lie 4 KB or
  // more apart in the output along both, each is alone in its page: pieces of a line's values
  // write the output a line here and there all over it, and the next line of each run comes a
  // piece later. Such pieces take all of uz's values instead, each row and column then a whole
  // run of the output, where the buffer and W fit three quarters of L2: TCCG case 4 in doubles
  // (deca,be->abcd: rows 995 KB apart, columns 41 KB; runs of d's 72 values) and in complex
  // doubles (complex_lines.hpp: a buffer of 663 KB, 12 of a's 36 values a piece). Only where the
  // summed elements lie apart in X, as there: where they continue ux's run (case 3,
  // dbea,ec->abcd, the same output), pieces of a line's values ran faster
  // (docs/performance/tccg-whole-runs.md).
  if (!s.in_place && K > 1 && s.x_ds > run && !s.whole.empty()) {
    const auto apart = [](std::int64_t n) {
      return std::abs(n) * static_cast<std::int64_t>(sizeof(T)) >= 4096;
    };
    bool alone = apart(s.c_rs) && (vx == '\0' || apart(s.c_vs));
    std::vector<std::int64_t> columns(s.cn.data(), s.cn.data() + N);
    std::sort(columns.begin(), columns.end());
    for (std::int64_t j = 1; j < N && alone; ++j) alone = apart(columns[j] - columns[j - 1]);
    // (A complex piece's tiles, complex_lines.hpp, hold each side's two parts: twice the bytes.)
    const std::int64_t buffer = nu * s.longest * N * static_cast<std::int64_t>(sizeof(T)) *
                                (std::is_floating_point_v<T> ? 1 : 2);
    const std::int64_t packed = K * N * static_cast<std::int64_t>(sizeof(T));
    s.whole_runs = alone && nu > line && buffer + packed <= l2_bytes() / 4 * 3;
  }
  if (s.in_place) {
    // Written in place with ordinary stores, a tile's columns must not lie a multiple of 4 KB apart
    // in the output, where they would share their sets of L1. Written around the cache, they share
    // no sets.
    s.around = s.kc == K && writes_around<T>(zl, len, s.longest, s.c_cs, s.pieces, s.cb);
    if (!s.around && s.c_cs * static_cast<std::int64_t>(sizeof(T)) % 4096 == 0) return std::nullopt;
  }
  return s;
}

// Writes a piece's tiles out (streamed lines): tile u at buf + u·tile, its element (i, j) at
// i + j·P; row i and column j of the piece's `lines` tiles are one run of the output, at
// z + p.c + row(i) + cn[j], row(i) = (i mod span)·c_rs + (i div span)·c_vs (streamed past the
// cache with `stream` where a whole aligned line).
template <typename T>
void write_lines_out(const T* buf, std::int64_t tile, std::int64_t P, const Piece& p,
                     std::int64_t N, T* z, const std::int64_t* cn, const StreamedLines& s,
                     bool stream) {
#if EINSUMDB_AVX2
  using V = Lanes<T>;
  constexpr std::int64_t L = V::width;  // a line's elements: 8 doubles, 16 floats
  {
    // Blocks of L rows by a line's L tiles, each transposed in registers into L whole lines of the
    // output. Rows outside, columns inside: the lines of consecutive blocks lie side by side in the
    // output where its columns do (TCCG case 7, ecbfa,fd->abcde: a block's rows 9 MB apart there,
    // its columns 384 bytes apart), and a row and column's lines, where a piece has several, one
    // after the other (each column's run in one go: going over the columns for each line of them
    // instead, case 4 in doubles kept little of what whole runs gain). A piece's last tiles, fewer
    // than a line's (the last of uz's values, where they leave a line part full), go the same way
    // into the first elements of each line: in TCCG case 4 in floats (deca,be->abcd), d's 72 values
    // leave 8, a fifth of the output.
    for (std::int64_t i0 = 0, h = 0; i0 < p.rows; i0 += h) {
      h = std::min({L, p.rows - i0, s.span - i0 % s.span});  // within one value of vx
      T* const zi = z + p.c + s.row(i0);
      const auto mask = V::first(h);
      for (std::int64_t j = 0; j < N; ++j) {
        for (std::int64_t u0 = 0; u0 < p.lines; u0 += L) {
          const std::int64_t lines = std::min(L, p.lines - u0);
          T* const d = zi + cn[j] + u0;
          const T* const b = buf + u0 * tile + i0 + j * P;
#if EINSUMDB_AVX512
          if constexpr (std::is_same_v<T, double>) {
            if (h == 8 && lines == L) {
              if (stream && s.c_rs % 8 == 0 && reinterpret_cast<std::uintptr_t>(d) % 64 == 0) {
                __m512d r[8];  // whole lines, each streamed in one store
                load_transposed8(b, tile, r);
                for (std::int64_t i = 0; i < 8; ++i) _mm512_stream_pd(d + i * s.c_rs, r[i]);
              } else {
                transpose8_to(b, tile, d, s.c_rs);
              }
              continue;
            }
          }
#endif
          decltype(V::loadu(buf)) r[L];
          if (h == L && lines == L) {
            load_transposed(b, tile, r);
          } else {
            for (std::int64_t u = 0; u < L; ++u)
              r[u] = u < lines ? V::load(mask, b + u * tile) : V::zero();
            transpose_block(r);
          }
          const auto part = V::first(lines);
          for (std::int64_t i = 0; i < h; ++i) put(d + i * s.c_rs, r[i], part, false, stream);
        }
      }
    }
    return;
  }
#endif
  (void)stream;
  for (std::int64_t v0 = 0; v0 < p.rows; v0 += s.span) {  // the rows of one value of vx
    T* const zv = z + p.c + s.row(v0);
    for (std::int64_t j = 0; j < N; ++j)
      for (std::int64_t i = v0; i < std::min(p.rows, v0 + s.span); ++i) {
        T* d = zv + (i - v0) * s.c_rs + cn[j];
        for (std::int64_t u = 0; u < p.lines; ++u) d[u] = buf[u * tile + i + j * P];
      }
  }
}

// The most bytes of kWholeRows rows of our streamed-lines kernel's staging block (each row's
// values of uz by all the columns) where a piece takes all of uz's values: held in L1 and L2
// beside the panels of X the tiles read. A staging block of 16 rows is twice that, in L2.
inline constexpr std::int64_t kWholeStaging = 64 << 10;
inline constexpr std::int64_t kWholeRows = 8;

// Whether X's lines at a row's summed elements fall on at least eight sets of L1 (or on as many as
// there are summed elements): where they lie a multiple of 4 KB apart, all on one set (TCCG cases 6
// and 8, 192 KB apart in floats), a tile's lines evict each other before it is done with them.
template <typename T>
bool summed_lines_spread(const StreamedLines& s) {
  const std::int64_t K = s.wk.size();
  std::set<std::int64_t> sets;
  for (std::int64_t l = 0; l < K; ++l)
    sets.insert(l * s.x_ds * static_cast<std::int64_t>(sizeof(T)) % 4096 / 64);
  return static_cast<std::int64_t>(sets.size()) >= std::min<std::int64_t>(K, 8);
}

// How many calls ahead a call of libxsmm's streamed-lines kernel fetches X for, where the plan is
// not in place: the next call's part, but the call after next's where the summed elements' lines
// fall on a few sets of L1 (summed_lines_spread; in TCCG cases 6 and 8, of L2 too). There a
// call's panel (case 6, efbad,cf->abcde: 32 runs of 512 bytes 384 KB apart in doubles, on 8 of
// L2's 1,024 sets, 16 ways each) does not fit L2 whole, and the next call's lines, fetched while
// this one runs, come in only a call's time before they are read: fetched a call earlier, cases 6
// and 8 went faster in doubles and floats, on one thread and two. Where the lines spread, the call
// after next went no faster; in place, where the summed elements continue the run (case 19,
// adec,ebd->abc), slower (docs/performance/tccg-fetch-ahead.md has the figures).
template <typename T>
std::int64_t lines_fetch_ahead(const StreamedLines& s) {
  return s.in_place || summed_lines_spread<T>(s) ? 1 : 2;
}

// The offset in X (from a batch point's) of the part that call u of piece p fetches for, `ahead`
// calls on, counted on into the next piece's calls where p has fewer left (at most the next
// piece's last: a prefetch does not fault, but its address stays within X).
inline std::int64_t fetched_lines(const Piece& p, const Piece& next, std::int64_t u,
                                  std::int64_t ahead, std::int64_t x_us) {
  const std::int64_t v = u + ahead;
  return v < p.lines ? p.x + v * x_us : next.x + std::min(v - p.lines, next.lines - 1) * x_us;
}

// Whether our streamed-lines kernel takes plan s, in tiles of full-width registers (16 rows) or
// not: in floats (doubles go faster through libxsmm's), not in place, on a processor that runs the
// AVX-512 kernels, and where X lies as follows.
template <typename T>
bool own_lines(const StreamedLines& s, bool full_width) {
  const std::int64_t K = s.wk.size();
  if (!std::is_same_v<T, float> || s.in_place || s.kc != K || !streams()) return false;
  // A tile reads a line at each of its summed elements for each of its values of uz, and fetches
  // the next tile's panel a line a step. It runs at its best where one of the two runs within a
  // page, which the hardware's prefetchers follow too (TCCG case 2, dca,bd->abc: c's values 1,248
  // bytes apart; case 3, dbea,ec->abcd: e's 288). Where neither does (case 4, deca,be->abcd: 20 KB
  // and 1.5 MB), libxsmm's kernel, one value of uz per call, went faster than tiles of half-width
  // registers (on a Zen 4) and slower than full-width ones (on a Zen 5,
  // docs/performance/tccg-lines-apart.md). Lines a multiple of
  // 4 KB apart share their sets of L1 (and further apart, of L2): where the values of uz lie so,
  // or the summed elements' lines all fall on a few sets, a tile's lines evict each other before
  // it is done (cases 6-8, uz's values 6-9 MB apart; in cases 6 and 8 the summed elements 192
  // KB).
  const auto bytes = [](std::int64_t n) { return n * static_cast<std::int64_t>(sizeof(T)); };
  return (full_width || std::min(bytes(s.x_us), K > 1 ? bytes(s.x_ds) : 0) <= 4096) &&
         bytes(s.x_us) % 4096 != 0 && summed_lines_spread<T>(s);
}

#if EINSUMDB_AVX512
// The body of run_streamed_lines_own, its tiles R rows tall (LinesRegs).
template <int R>
void run_streamed_lines_rows(const StreamedLines& s, const float* x, const float* w, float* z,
                             int threads, bool stream) {
  using T = float;
  const std::int64_t N = s.wn.size(), K = s.wk.size();
  using V = Lanes<T>;
  const std::int64_t width = (N + kLinesC - 1) / kLinesC * kLinesC;
  const int blocks = static_cast<int>(width / kLinesC);  // of columns
  // Each piece all of uz's values where kWholeRows rows of them fit kWholeStaging: each row and
  // column's values are then one run of the output, whole lines but at its ends, and where the
  // columns follow each other there (TCCG case 3, dbea,ec->abcd: c then d), a row's are one run (of
  // 6,912 bytes there) from a line's start. Pieces of a line's values of uz leave a line of the
  // output part written at either end where the runs do not start on one (72 floats: every other
  // run), read from memory before it is written.
  const std::int64_t nu = s.whole.empty() ? 0 : s.whole.front().lines;
  const std::int64_t nu4 = (nu + kLinesU - 1) / kLinesU * kLinesU;
  const bool whole =
      nu > 0 && kWholeRows * width * nu4 * static_cast<std::int64_t>(sizeof(T)) <= kWholeStaging;
  const std::int64_t stride = whole ? nu4 : V::width;  // a column's values in the staging block
  bool runs = whole && nu4 == nu;                      // each staged row one run of the output
  for (std::int64_t j = 0; j < N && runs; ++j) runs = s.cn[j] == j * nu;
  const LinesTile t{K, s.x_us, s.x_ds, width, width * stride, stride};
  const auto pack = [&](std::int64_t q, std::vector<T>& to) { s.pack_w(w, q, width, to); };
  const auto piece = [&](std::int64_t q, const T* packed, const Piece& p, const Piece& next) {
    const T* xq = x + s.xb[q];
    T* zq = z + s.cb[q];
    thread_local std::vector<T> buffer;
    T* const staged = line_aligned(buffer, R * t.s_rs);  // R rows' values of uz
    for (std::int64_t r0 = 0; r0 < p.rows; r0 += R) {
      const int h = static_cast<int>(std::min<std::int64_t>(R, p.rows - r0));
      // The last 8 of a run of 8·(2n + 1) rows (72: case 3) go in pair tiles, twice the values.
      const bool pair = R == 16 && h == 8;
      const std::int64_t step = pair ? 2 * kLinesU : kLinesU;  // values of uz a tile
      for (std::int64_t u0 = 0; u0 < p.lines; u0 += step) {
        const T* xr = xq + p.x + r0 + u0 * s.x_us;
        // The panel the next tiles read: the next values of uz, else the next rows, else the
        // next piece's; its values spread over this panel's blocks of columns.
        const T* fetch = xr + step * s.x_us;
        std::int64_t ahead = p.lines - u0 - step;
        if (ahead <= 0) {
          fetch = r0 + R < p.rows ? xq + p.x + r0 + R : xq + next.x;
          ahead = r0 + R < p.rows ? p.lines : next.lines;
        }
        const int fetched = static_cast<int>(std::min(step, ahead));
        const int u_end = static_cast<int>(std::min(step, p.lines - u0));
        for (int b = 0; b < blocks; ++b) {
          const LinesFetch f{b, blocks, fetched};
          T* const sb = staged + b * kLinesC * stride + u0;
          const float* wb = packed + b * kLinesC;
          if (h == R)
            lines_tile<R, true>(t, xr, u_end, h, wb, sb, fetch, f);
          else if (pair)
            lines_tile<16, true, true>(t, xr, u_end, h, wb, sb, fetch, f);
          else if (R == 16 && h < 8)
            lines_tile<8, false>(t, xr, u_end, h, wb, sb, fetch, f);
          else
            lines_tile<R, false>(t, xr, u_end, h, wb, sb, fetch, f);
        }
      }
      for (int i = 0; i < h; ++i) {
        T* const zi = zq + p.c + s.row(r0 + i);
        const T* si = staged + i * t.s_rs;
        if (runs) {
          copy_run(si, N * nu, zi, false, stream);
        } else {
          for (std::int64_t j = 0; j < N; ++j)
            copy_run(si + j * stride, p.lines, zi + s.cn[j], false, stream);
        }
      }
    }
  };
  over_pieces<T>(s.xb.size(), whole ? s.whole : s.pieces, threads, pack, piece);
}
#endif

// Whether our AVX2 streamed-lines kernel takes plan s, of elements T (real, or complex: the real
// products of complex lines, run_complex_lines_avx2, complex_lines.hpp): where the kernels run
// AVX2 and not AVX-512, not in place, in one pass over several summed elements, whose lines of X
// spread over the sets of L1 (summed_lines_spread: where they all fall on one, TCCG cases 6 and 8,
// libxsmm's kernel is faster).
template <typename T>
bool own_lines_avx2(const StreamedLines& s) {
  const std::int64_t K = s.wk.size();
  return writes_stream() && !streams() && !s.in_place && s.kc == K && K > 1 &&
         summed_lines_spread<T>(s);
}

#if EINSUMDB_AVX2
// Plan s through rows_line (rows_kernel.hpp): for each value u of uz in a piece, a line of its
// rows at a time, the line's blocks of kRowColumns columns into a staging block of the piece
// (line r of rows, value u, column j at (r·line + u)·tile + j·line); the piece then goes out a line
// square at a time, each row and column its values of uz side by side, a run of the output. The
// lines of rows go by u first: at each summed element, a piece's rows are one run of X (TCCG case
// 2 in doubles: 192 bytes) read in consecutive tiles, while value u + 1's lie a row of X further
// on (2,496 bytes). Block b fetches the next tile's panel (the next line of rows, else the next
// value's first, else the next piece's) at its summed elements b, b + blocks, ...
template <typename T>
void run_streamed_lines_avx2(const StreamedLines& s, const T* x, const T* w, T* z, int threads,
                             bool stream) {
  using V = Lanes<T>;
  constexpr std::int64_t L = 64 / sizeof(T), J = kRowColumns;
  const std::int64_t N = s.wn.size(), K = s.wk.size();
  const std::int64_t blocks = (N + J - 1) / J;
  const std::int64_t tile = blocks * J * L;  // a line of rows by all the columns
  const auto pack = [&](std::int64_t q, std::vector<T>& to) { s.pack_w(w, q, blocks * J, to, J); };
  const auto piece = [&](std::int64_t q, const T* packed, const Piece& p, const Piece& next) {
    const T* xp = x + s.xb[q] + p.x;
    T* const zq = z + s.cb[q] + p.c;
    thread_local std::vector<T> buffer;
    T* const staged = line_aligned(buffer, (p.rows + L - 1) / L * L * tile);
    for (std::int64_t u = 0; u < p.lines; ++u)
      for (std::int64_t r0 = 0; r0 < p.rows; r0 += L) {
        const std::int64_t h = std::min(L, p.rows - r0);
        const T* xr = xp + r0 + u * s.x_us;
        const T* fetch = r0 + L < p.rows   ? xr + L
                         : u + 1 < p.lines ? xp + (u + 1) * s.x_us
                                           : x + s.xb[q] + next.x;
        rows_line(xr, K, s.x_ds, packed, blocks, staged + (r0 + u) * tile, L, h, fetch);
      }
    const auto part = V::first(p.lines);
    for (std::int64_t r0 = 0; r0 < p.rows; r0 += L)
      for (std::int64_t j = 0; j < N; ++j) {
        decltype(V::loadu(staged)) r[L];  // (values past p.lines are not stored)
        load_transposed(staged + r0 * tile + j * L, tile, r);
        for (std::int64_t i = 0; i < std::min(L, p.rows - r0); ++i)
          put(zq + s.row(r0 + i) + s.cn[j], r[i], part, false, stream);
      }
  };
  over_pieces<T>(s.xb.size(), s.pieces, threads, pack, piece);
}
#endif

// Runs a streamed-lines plan into z through our own kernel (lines_kernel.hpp), where own_lines
// takes it and `own` asks for it; false, having computed nothing, otherwise. Each piece goes a
// register's rows at a time: their tiles, four values of uz by six columns each, fill a staging
// block of those rows' values of uz by all the columns, which then goes out in runs of the output
// (copy_run; `stream`: its whole aligned lines around the cache).
template <typename T>
bool run_streamed_lines_own(const StreamedLines& s, const T* x, const T* w, T* z, int threads,
                            bool stream, bool own, int tile_rows = 0) {
#if EINSUMDB_AVX512
  // Where own_lines declines (as where EINSUMDB_ISA caps the kernels at AVX2 in code compiled for
  // AVX-512), the AVX2 tiles below may take the plan.
  if constexpr (std::is_same_v<T, float>) {
    // Tiles of full-width registers where the processor runs a 512-bit FMA whole (Zen 5: twice
    // the FMAs a cycle of half-width ones), of half-width ones where it runs it as two halves
    // (Zen 4: as many FMAs either way); `tile_rows` (16 or 8) chooses, for the tests.
    if (own && tile_rows == 0 && streams())
      tile_rows = machine_rows_shape() == RowsShape::wide ? 16 : 8;
    if (own && own_lines<T>(s, tile_rows == 16)) {
      if (tile_rows == 16)
        run_streamed_lines_rows<16>(s, x, w, z, threads, stream);
      else
        run_streamed_lines_rows<8>(s, x, w, z, threads, stream);
      return true;
    }
  }
#endif
#if EINSUMDB_AVX2
  if (own && own_lines_avx2<T>(s)) {
    run_streamed_lines_avx2(s, x, w, z, threads, stream);
    return true;
  }
#endif
  (void)s, (void)x, (void)w, (void)z, (void)threads, (void)stream, (void)own, (void)tile_rows;
  return false;
}

// Whether our in-place kernel (place_kernel.hpp) takes plan s: in floats, in place, in one pass
// over the summed elements, on a processor that runs the AVX-512 kernels, where each run is at most
// kPlaceVectors 256-bit registers and not a whole number of 512-bit ones (where it is, libxsmm's
// pieces fill their registers: TCCG cases 9 and 10, runs of 373,248 and 5,184 floats), and where
// the summed elements continue the run in X, so that a piece's panel is one block of X that the
// tiles before it fetch whole (TCCG case 11, ec,abed->abcd: 72 × 72 floats). Where they lie apart
// (case 5, ebad,ce->abcd: 1.5 MB), libxsmm's kernel, fetching each call's panel as it goes, is
// faster.
template <typename T>
bool own_place(const StreamedLines& s) {
  return std::is_same_v<T, float> && s.in_place && s.kc == static_cast<std::int64_t>(s.wk.size()) &&
         streams() && s.run <= 8 * kPlaceVectors && s.run % 16 != 0 && !s.runs.empty() &&
         (s.wk.size() < 2 || s.x_ds == s.run);
}

// Whether our in-place kernel takes plan s in 512-bit registers, where the processor runs them at
// full width: in floats, in one pass over the summed elements, where each run is more than four
// registers and at most five, the last part full (TCCG cases 5 and 11, ebad,ce->abcd and
// ec,abed->abcd: 72 floats), whether the summed elements lie apart (case 5) or continue the run
// (case 11): on a Zen 5 faster than libxsmm's kernel, except case 5 on two threads, where both
// are bound by memory (docs/performance/tccg-place-wide.md).
template <typename T>
bool own_place_wide(const StreamedLines& s) {
  return std::is_same_v<T, float> && s.in_place && s.kc == static_cast<std::int64_t>(s.wk.size()) &&
         streams() && s.run > 64 && s.run <= 80 && s.run % 16 != 0 && !s.runs.empty();
}

#if EINSUMDB_AVX512
// Plan s through place_tile<V, J, L>: each run a piece, its tiles J columns each, in the columns'
// order; each tile fetches its share of the next piece's panel (the runs at K / tiles of its
// summed elements).
template <int V, int J = place_columns(V), int L = 8>
void run_place(const StreamedLines& s, const float* x, const float* w, float* z, int threads,
               bool stream) {
  const std::int64_t N = s.wn.size(), K = s.wk.size();
  const std::int64_t tiles = (N + J - 1) / J, width = tiles * J;
  const int rest = static_cast<int>(s.run - L * (V - 1));  // the last register's elements
  PlaceTile t{};
  t.depth = K, t.ds = s.x_ds, t.width = width, t.ldz = s.c_cs, t.rows = s.run;
  t.last = (1u << rest) - 1;
  // Streaming stores write whole lines: a run is never whole lines here (own_place), so only a
  // tile of 256-bit registers whose columns lie one after another in whole aligned lines streams
  // (TCCG case 11: two columns of 72 floats, 576 bytes).
  const auto lines = [&](const float* at, std::int64_t cols) {
    return L == 8 && rest == 8 && s.c_cs == s.run && cols * s.run % 16 == 0 &&
           reinterpret_cast<std::uintptr_t>(at) % 64 == 0;
  };
  const auto pack = [&](std::int64_t q, std::vector<float>& to) { s.pack_w(w, q, width, to); };
  const auto piece = [&](std::int64_t q, const float* packed, const Piece& p, const Piece& next) {
    const float* xq = x + s.xb[q];
    float* const zq = z + s.cb[q] + p.c;
    for (std::int64_t b = 0; b < tiles; ++b) {
      const std::int64_t cols = std::min<std::int64_t>(J, N - b * J);
      const std::int64_t from = b * K / tiles, to = (b + 1) * K / tiles;
      float* const zt = zq + b * J * s.c_cs;
      PlaceTile tb = t;
      tb.stream = stream && lines(zt, cols);
      place_tile<V, J, L>(tb, xq + p.x, packed + b * J, zt, static_cast<int>(cols),
                          xq + next.x + from * s.x_ds, to - from);
    }
  };
  over_pieces<float>(s.xb.size(), s.runs, threads, pack, piece);
}

// run_place<V> for the run's V registers, one of Vs; false for none.
template <int... Vs>
bool run_place_of(std::integer_sequence<int, Vs...>, std::int64_t v, const StreamedLines& s,
                  const float* x, const float* w, float* z, int threads, bool stream) {
  return ((v == Vs && (run_place<Vs>(s, x, w, z, threads, stream), true)) || ...);
}
#endif

// Whether our AVX2 in-place kernel (place_chunk, place_kernel.hpp) takes plan s: where the kernels
// run AVX2 and not AVX-512 (there, libxsmm's and our AVX-512 kernels take it), in place, in one
// pass over the summed elements, where these lie apart from the run in X, and where a piece's panel
// fits in half of L2 (the buffer it is copied to). Where the summed elements continue the run (TCCG
// cases 11 and 19, and 10 in floats), libxsmm's kernel reads each panel as one stream, and this
// kernel forced onto those plans went no faster (docs/performance/tccg-avx2.md).
template <typename T>
bool own_place_chunks(const StreamedLines& s) {
  const auto K = static_cast<std::int64_t>(s.wk.size());
  return std::is_floating_point_v<T> && writes_stream() && !streams() && s.in_place && s.kc == K &&
         !s.runs.empty() && K > 1 && s.x_ds > s.run &&
         s.run * K * static_cast<std::int64_t>(sizeof(T)) <= l2_bytes() / 2;
}

#if EINSUMDB_AVX2
// A chunk of v ≤ V registers (a run's last chunk may have fewer) through place_chunk.
template <typename T, int V, int J>
void place_chunk_of(int v, bool whole, const PlaceChunk<T>& t, const T* x, const T* w, T* z,
                    int cols, const T* fetch, std::int64_t fetches) {
  if constexpr (V > 1)
    if (v < V) return place_chunk_of<T, V - 1, J>(v, whole, t, x, w, z, cols, fetch, fetches);
  if (whole)
    place_chunk<T, V, J, true>(t, x, w, z, cols, fetch, fetches);
  else
    place_chunk<T, V, J, false>(t, x, w, z, cols, fetch, fetches);
}

// Plan s through place_chunk<T, V, J> (V = kChunkRegisters and J = kChunkColumns but in tests):
// each run a piece, its panel copied to a buffer in chunks of V registers, then each chunk's tiles,
// J columns each in the columns' order, sharing the fetching of the next piece's panel (the run at
// K / tiles of its summed elements each).
template <typename T, int V = kChunkRegisters, int J = kChunkColumns>
void run_place_chunks(const StreamedLines& s, const T* x, const T* w, T* z, int threads) {
  using Y = Ymm<T>;
  constexpr std::int64_t lanes = 32 / sizeof(T);
  const std::int64_t N = s.wn.size(), K = s.wk.size();
  const std::int64_t blocks = (N + J - 1) / J, width = blocks * J;
  const std::int64_t vectors = (s.run + lanes - 1) / lanes, chunks = (vectors + V - 1) / V;
  const std::int64_t tiles = blocks * chunks;
  const bool whole = s.run % lanes == 0;  // the run ends on a register's end
  PlaceChunk<T> t{};
  t.depth = K, t.ds = V * lanes, t.width = width, t.ldz = s.c_cs, t.run = s.run;
  t.fetch_ds = s.x_ds;
  t.last = Y::first(s.run - (vectors - 1) * lanes);
  const auto pack = [&](std::int64_t q, std::vector<T>& to) { s.pack_w(w, q, width, to); };
  const auto piece = [&](std::int64_t q, const T* packed, const Piece& p, const Piece& next) {
    const T* xq = x + s.xb[q] + p.x;
    T* const zq = z + s.cb[q] + p.c;
    // The panel: chunk c's row l at panel + (c·K + l)·t.ds, zero past the run.
    thread_local std::vector<T> buffer;
    T* const panel = line_aligned(buffer, chunks * K * t.ds);
    const std::int64_t x_ds = s.x_ds, rest = vectors - (chunks - 1) * V;
    for (std::int64_t l = 0; l < K; ++l) {
      const T* from = xq + l * x_ds;
      T* to = panel + l * t.ds;
      for (std::int64_t c = 0; c + 1 < chunks; ++c, from += V * lanes, to += K * t.ds)
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) Y::storeu(to + v * lanes, Y::loadu(from + v * lanes));
      for (std::int64_t v = 0; v < V; ++v)
        Y::storeu(to + v * lanes, v + 1 < rest || (v + 1 == rest && whole)
                                      ? Y::loadu(from + v * lanes)
                                  : v + 1 == rest ? Y::maskload(from + v * lanes, t.last)
                                                  : Y::zero());
    }
    const T* const fetch = x + s.xb[q] + next.x;
    for (std::int64_t c = 0; c < chunks; ++c) {
      const int v = static_cast<int>(std::min<std::int64_t>(V, vectors - c * V));
      for (std::int64_t b = 0; b < blocks; ++b) {
        const std::int64_t i = c * blocks + b, from = i * K / tiles, to = (i + 1) * K / tiles;
        place_chunk_of<T, V, J>(v, whole || c + 1 < chunks, t, panel + c * K * t.ds, packed + b * J,
                                zq + b * J * s.c_cs + c * V * lanes,
                                static_cast<int>(std::min<std::int64_t>(J, N - b * J)),
                                fetch + from * s.x_ds, to - from);
      }
    }
  };
  over_pieces<T>(s.xb.size(), s.runs, threads, pack, piece);
}
#endif

// Runs an in-place streamed-lines plan into z through our kernels (place_kernel.hpp), where `own`
// asks for it and one takes it: with AVX-512, where own_place takes it and the processor runs a
// 512-bit operation in two halves (or `narrow` says so: a test's), or own_place_wide where it runs
// it at full width (or `narrow` says not); with AVX2, where
// own_place_chunks takes it. False, having computed nothing, otherwise. `stream`: tiles of whole
// aligned lines around the cache (AVX-512).
template <typename T>
bool run_streamed_place_own(const StreamedLines& s, const T* x, const T* w, T* z, int threads,
                            bool stream, bool own,
                            [[maybe_unused]] std::optional<bool> narrow = std::nullopt) {
#if EINSUMDB_AVX2
  if constexpr (std::is_floating_point_v<T>) {
    if (own && own_place_chunks<T>(s)) {
      run_place_chunks<T>(s, x, w, z, threads);
      return true;
    }
  }
#endif
#if EINSUMDB_AVX512
  if constexpr (std::is_same_v<T, float>) {
    if (!own) return false;
    if (!(narrow ? *narrow : machine_rows_shape() == RowsShape::narrow)) {
      if (!own_place_wide<T>(s)) return false;
      // Five columns to a tile where the summed elements lie apart (case 5: each tile reads the
      // panel again, its runs 1.5 MB apart, a multiple of 2 KB, all on the same ten sets of L1,
      // from L2), four where they continue the run (case 11: the panel one block in L1): each
      // went faster than the other there.
      if (s.wk.size() > 1 && s.x_ds != s.run)
        run_place<5, 5, 16>(s, x, w, z, threads, stream);
      else
        run_place<5, 4, 16>(s, x, w, z, threads, stream);
      return true;
    }
    if (!own_place<T>(s)) return false;
    // A run takes 2 to kPlaceVectors registers: streamed_lines takes 16 values or more.
    static_assert(kPlaceVectors == 10, "the registers' counts below end at kPlaceVectors");
    return run_place_of(std::integer_sequence<int, 2, 3, 4, 5, 6, 7, 8, 9, 10>{}, (s.run + 7) / 8,
                        s, x, w, z, threads, stream);
  }
#endif
  (void)s, (void)x, (void)w, (void)z, (void)threads, (void)stream, (void)own;
  return false;
}

// Runs a streamed-lines plan into z: through our own kernel where `own` asks and it runs,
// otherwise through libxsmm's; false, where libxsmm has no kernel for it either, having computed
// nothing.
template <typename T>
bool run_streamed_lines(const StreamedLines& s, const T* x, const T* w, T* z, int threads,
                        bool stream, bool own) {
  if (run_streamed_lines_own(s, x, w, z, threads, stream, own)) return true;
  if (run_streamed_place_own(s, x, w, z, threads, stream, own)) return true;
  using Kernel = kernels::StreamKernel<T>;
  const std::int64_t N = s.wn.size(), K = s.wk.size(), P = s.longest, kc = s.kc;
  constexpr std::int64_t line = 64 / sizeof(T);
  const std::int64_t tail = s.pieces.empty() ? P : s.pieces.back().rows;
  const std::int64_t ldc = s.in_place ? s.c_cs : P;
  // The kernels of both lengths of piece, for each pass's summed elements (the last pass's may be
  // fewer), writing in the first pass and adding in the others; all made first.
  std::map<std::tuple<std::int64_t, std::int64_t, bool>, Kernel> kernels;
  for (const std::int64_t rows : {P, tail})
    for (std::int64_t l0 = 0; l0 < K; l0 += kc) {
      const auto key = std::make_tuple(rows, std::min(kc, K - l0), l0 > 0);
      if (kernels.count(key)) continue;
      const auto write = l0 > 0                         ? Kernel::Write::add
                         : s.around && rows % line == 0 ? Kernel::Write::around
                                                        : Kernel::Write::cached;
      const Kernel k(rows, N, std::get<1>(key), s.x_ds, kc, ldc, false, Kernel::Ahead::a_into_l2,
                     write);
      if (!k) return false;
      kernels.emplace(key, k);
    }
  const std::int64_t tile = P * N;  // a tile in the buffer: (i, j) at i + j·P
  const std::int64_t ahead = lines_fetch_ahead<T>(s);
  for (std::int64_t l0 = 0; l0 < K; l0 += kc) {
    const std::int64_t depth = std::min(kc, K - l0);
    const Kernel& full = kernels.at({P, depth, l0 > 0});
    const Kernel& last = kernels.at({tail, depth, l0 > 0});
    // W of batch point q, this pass's summed elements by N (at most kc × N).
    const auto pack = [&](std::int64_t q, std::vector<T>& to) {
      to.resize(static_cast<std::size_t>(N * kc));
      const T* from = w + s.wb[q];
      for (std::int64_t j = 0; j < N; ++j)
        for (std::int64_t l = 0; l < depth; ++l) to[l + j * kc] = from[s.wn[j] + s.wk[l0 + l]];
    };
    const auto piece = [&](std::int64_t q, const T* packed, const Piece& p, const Piece& next) {
      const T* xq = x + s.xb[q] + l0 * s.x_ds;
      T* zq = z + s.cb[q];
      const Kernel& k = p.rows == P ? full : last;
      if (s.in_place) {
        k(xq + p.x, packed, zq + p.c, xq + next.x, packed, zq + next.c);
        return;
      }
      thread_local std::vector<T> buffer;
      T* const buf = line_aligned(buffer, p.lines * tile);  // the piece's tiles
      for (std::int64_t u = 0; u < p.lines; ++u)
        k(xq + p.x + u * s.x_us, packed, buf + u * tile,
          xq + fetched_lines(p, next, u, ahead, s.x_us), packed, buf);
      write_lines_out(buf, tile, P, p, N, zq, s.cn.data(), s, stream);  // (fenced: over_pieces)
    };
    over_pieces<T>(s.xb.size(), s.whole_runs ? s.whole : s.pieces, threads, pack, piece);
  }
  return true;
}

}  // namespace
}  // namespace einsumdb::tensor_gemm
EINSUMDB_TARGET_END
