// tensor_gemm's macro-kernel: BLIS's loop over blocks of NC columns, KC summed elements and MC
// rows, each operand's block packed (packing.hpp), then the micro-kernel over every MR × NR tile of
// the block, each tile written in place where its rows and columns are evenly spaced in the
// output, otherwise through a buffer (write_out.hpp) or, summed over few elements, around the
// cache by libxsmm kernels. Edge tiles with fewer rows or columns go to a libxsmm kernel of their
// exact size, for which BLIS's would compute a whole tile. Internal to executor/.
#pragma once

#include <xmmintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "einsumdb/executor/isa_target.hpp"
#include "einsumdb/executor/kernels.hpp"
#include "einsumdb/executor/small_gemm.hpp"
#include "einsumdb/executor/tensor_gemm/blocking.hpp"
#include "einsumdb/executor/tensor_gemm/line_kernel.hpp"
#include "einsumdb/executor/tensor_gemm/micro_kernel.hpp"
#include "einsumdb/executor/tensor_gemm/packing.hpp"
#include "einsumdb/executor/tensor_gemm/stream_tile.hpp"
#include "einsumdb/executor/tensor_gemm/write_out.hpp"

EINSUMDB_TARGET_BEGIN
namespace einsumdb::tensor_gemm {
// Internal linkage, as for everything the driver alone instantiates (tensor_gemm.cpp says why).
namespace {

// Fetches the lines of the next block of rows into L2 a few at a time, before each micro-kernel
// call of this one: where packing a block is bound by memory misses (panels of MR consecutive
// elements far apart in a large operand), memory then works while the FMA units do, instead of in
// turn. Panels that are gathered element by element are left to the packing routine's own
// prefetches; and at most what L2 holds beside the packed block is fetched.
template <typename T>
class NextBlock {
 public:
  NextBlock(const T* src, const std::int64_t* row, std::int64_t rows, const std::int64_t* col,
            std::int64_t depth, std::int64_t width, std::int64_t calls, std::int64_t lines)
      : src_(src),
        row_(row),
        rows_(rows),
        col_(col),
        depth_(depth),
        width_(width),
        panels_((rows + width - 1) / width),
        lines_(lines) {
    per_call_ = calls > 0 ? (panels_ * depth + calls - 1) / calls : 0;
  }

  // The next share of the block's panels, depth by depth as the packing reads them. (Tested
  // inline before a call: a call stores its return address, and behind a tile's stores to memory
  // that store waits, and the next tile with it.)
  void fetch() {
    if (per_call_ > 0 && p_ < depth_ && lines_ > 0) fetch_share();
  }

 private:
  [[gnu::noinline]] void fetch_share() {
    for (std::int64_t n = 0; n < per_call_ && p_ < depth_ && lines_ > 0; ++n) {
      const std::int64_t r0 = q_ * width_, w = std::min(width_, rows_ - r0);
      const std::int64_t span = row_[r0 + w - 1] - row_[r0];
      // Consecutive rows, or rows 2 apart with their partners between (pack_pairs): their lines.
      if (span == w - 1 || span == 2 * (w - 1)) {
        constexpr std::uintptr_t line = 63;
        const T* from = src_ + row_[r0] + col_[p_];
        const std::uintptr_t last =
            reinterpret_cast<std::uintptr_t>(from + span + (span == w - 1 ? 0 : 1)) & ~line;
        for (std::uintptr_t at = reinterpret_cast<std::uintptr_t>(from) & ~line; at <= last;
             at += 64, --lines_)
          _mm_prefetch(reinterpret_cast<const char*>(at), _MM_HINT_T1);
      }
      if (++q_ == panels_) q_ = 0, ++p_;
    }
  }

  const T* src_;
  const std::int64_t* row_;
  std::int64_t rows_;
  const std::int64_t* col_;
  std::int64_t depth_, width_, panels_, lines_;
  std::int64_t per_call_ = 0, p_ = 0, q_ = 0;
};

// The packed GEMM of a Contraction over the operands a and b into the output c. run() computes a
// range of rows and columns of one batch point with the caller's packing buffers, so that threads
// share one Gemm, each with buffers of its own.
template <typename T>
class Gemm {
 public:
  Gemm(const Contraction& p, const T* a, const T* b, T* c,
       const MicroKernel<T>& k = MicroKernel<T>::get())
      : p_(p), k_(k), a_(a), b_(b), c_(c) {
    if (p_.around_ldc > 0)
      for (std::int64_t n = 1; n <= k_.nr; ++n)
        around_.emplace_back(k_.mr, n, p_.K, k_.packmr, k_.packnr, p_.around_ldc, true,
                             kernels::StreamKernel<T>::Ahead::none,
                             kernels::StreamKernel<T>::Write::around);
    if (std::any_of(around_.begin(), around_.end(), [](const auto& f) { return !f; }))
      around_.clear();  // libxsmm has no kernel for one of the shapes
#if EINSUMDB_AVX512
    line_tiles_ = p_.line_tiles;
    stores_lines_ = line_tiles_ && !p_.stream_lines && !p_.stream_all;
    if (p_.own_tiles) tile_kernel_ = &Gemm::own_tile;
#endif
#if EINSUMDB_AVX2
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      if (p_.stream_all && stream_tile_fits<T>(k_)) {
        const auto rows = static_cast<std::int64_t>(p_.cm.size());
        lined_.assign(static_cast<std::size_t>(rows / k_.mr), 0);
        for (std::int64_t g = 0; g < rows / k_.mr; ++g) {
          bool lines = true;
          for (std::int64_t i = g * k_.mr; i < (g + 1) * k_.mr; ++i)
            lines = lines && p_.cm[i] % kLine == 0;
          lined_[static_cast<std::size_t>(g)] = lines;
        }
      }
    }
#endif
    across_ = p_.tiles_across && lined_.empty() &&
              std::none_of(p_.row_lines.begin(), p_.row_lines.end(), [](char g) { return g; });
  }

  // Rows [m0, m1) × columns [n0, n1) of batch point `q`; m0 a multiple of MR, n0 of NR. Summed
  // over the elements [k0, k1) where given (all of them otherwise), into `to` where given (an
  // output laid out as the Contraction's, c_ otherwise).
  void run(std::int64_t q, std::int64_t m0, std::int64_t m1, std::int64_t n0, std::int64_t n1,
           T* apack, T* bpack, std::int64_t k0 = 0, std::int64_t k1 = -1, T* to = nullptr) const {
    const T* a = a_ + p_.ab[q];
    const T* b = b_ + p_.bb[q];
    T* c = (to ? to : c_) + p_.cb[q];
    if (k1 < 0) k1 = p_.K;
    T one = 1, zero = 0;
    alignas(64) T tile[kMaxTile];
    alignas(64) T group[kLine * kMaxTile];  // a line group's tiles (write_lines)
    const std::int64_t tile_rs = k_.prefers_rows ? k_.nr : 1;
    const std::int64_t tile_cs = k_.prefers_rows ? 1 : k_.mr;
    auxinfo_t aux{};
    bli_auxinfo_set_schema_a(BLIS_PACKED_ROW_PANELS, &aux);
    bli_auxinfo_set_schema_b(BLIS_PACKED_COL_PANELS, &aux);
    bli_auxinfo_set_is_a(1, &aux);
    bli_auxinfo_set_is_b(1, &aux);
    thread_local std::vector<ColumnPanel> columns;  // those of the packed block of B
    for (std::int64_t jc = n0; jc < n1; jc += k_.nc) {
      const std::int64_t ncb = std::min(k_.nc, n1 - jc);
      for (std::int64_t pc = k0; pc < k1; pc += p_.kc) {
        const std::int64_t kcb = std::min(p_.kc, k1 - pc);
        const bool accumulate = pc != k0;
        check_deadline();
        pack(b, p_.bn.data() + jc, ncb, p_.bk.data() + pc, kcb, k_.nr, k_.packnr, bpack);
        T* beta = accumulate ? &one : &zero;
        const std::int64_t b_panel = k_.packnr * kcb;  // elements of a micro-panel of B
        columns.clear();  // (their spacing: per NR columns of the Contraction's, from jc)
        for (std::int64_t jr = 0; jr < ncb; jr += k_.nr) {
          ColumnPanel q{bpack + jr / k_.nr * b_panel, std::min(k_.nr, ncb - jr),
                        p_.col_step[static_cast<std::size_t>((jc + jr) / k_.nr)],
                        p_.cn.data() + jc + jr};
          for (std::int64_t j = 1; j < q.nrb; ++j)
            q.lines_apart &= (q.cn[j] - q.cn[0]) % kLine == 0;
          q.streams_rows = !lined_.empty() && q.nrb == k_.nr && q.cs == 1 && !accumulate &&
                           kcb == p_.K && reinterpret_cast<std::uintptr_t>(c + q.cn[0]) % 64 == 0;
          columns.push_back(q);
        }
        // Tiles along the columns where the Contraction asks for it and every one goes out whole
        // in this one pass (Contraction::tiles_across).
        const bool across = across_ && !accumulate && kcb == p_.K;
        std::int64_t packed_from = m0, packed_to = m0;  // the rows in apack
        for (std::int64_t ic = m0, next; ic < m1; ic = next) {
          next = block_end(ic, m1);
          if (ic >= packed_to) {  // this block's rows, or the span of rows it starts
            packed_from = ic;
            packed_to = p_.span ? std::min(m1, (ic / p_.span + 1) * p_.span) : next;
            pack(a, p_.am.data() + ic, packed_to - ic, p_.ak.data() + pc, kcb, k_.mr, k_.packmr,
                 apack, p_.span > 0);
          }
          next = std::min(next, packed_to);
          const std::int64_t mcb = next - ic;
          const std::int64_t a_panel = k_.packmr * kcb;  // elements of a micro-panel of A
          T* const ablock = apack + (ic - packed_from) / k_.mr * a_panel;
          const std::int64_t after =
              next < m1 && next >= packed_to && p_.fetch_ahead ? block_end(next, m1) : next;
          // What L2 holds meanwhile: this packed block of A and the B micro-panel in use.
          const std::int64_t packed =
              (mcb + k_.packnr) * kcb * static_cast<std::int64_t>(sizeof(T));
          NextBlock<T> ahead(a, p_.am.data() + next, after - next, p_.ak.data() + pc, kcb, k_.mr,
                             (mcb + k_.mr - 1) / k_.mr * ((ncb + k_.nr - 1) / k_.nr),
                             std::max<std::int64_t>(0, l2_bytes() - packed) / 64);
          bli_auxinfo_set_ps_a(a_panel, &aux);
          bli_auxinfo_set_ps_b(b_panel, &aux);
          // The micro-kernel on the MR rows from `ir` (packed at `ap`) by the columns of q, into
          // `to` (rs, cs), with the panels the next tile reads for its prefetches.
          const auto kernel = [&](const ColumnPanel& q, std::int64_t ir, T* ap, std::int64_t mrb,
                                  T* to_beta, T* to, std::int64_t to_rs, std::int64_t to_cs) {
            const bool last = ir + k_.mr >= mcb;  // (down the rows: the block's last tile)
            bli_auxinfo_set_next_a(across ? ap : last ? ablock : ap + a_panel, &aux);
            bli_auxinfo_set_next_b(across || last ? q.bp + b_panel : q.bp, &aux);
            ahead.fetch();
            // An edge tile through libxsmm: BLIS's micro-kernel computes a whole tile for it.
            if ((mrb < k_.mr || q.nrb < k_.nr) &&
                kernels::packed_tile(mrb, q.nrb, kcb, ap, k_.packmr, q.bp, k_.packnr, to, to_rs,
                                     to_cs, *to_beta != 0))
              return;
            tile_kernel_(mrb, q.nrb, kcb, &one, ap, q.bp, to_beta, to, to_rs, to_cs, &aux, k_.cntx);
          };
          // The tile of the MR rows from ir (the panel `panel` of the output's rows and of A's,
          // packed at ap) by the columns of q, written the first of the ways below that takes it.
          // Inlined in both loops below, and so is our own kernel where it writes a tile from its
          // registers (write_lines_around, line_tile): a call between two tiles stores its return
          // address, which waits behind the last tile's stores to memory, and the next tile with
          // it (TCCG's ccsd_t cases).
          const auto one_tile = [&](const ColumnPanel& q, std::int64_t ir, std::int64_t panel,
                                    T* ap) __attribute__((always_inline)) {
            const std::int64_t mrb = std::min(k_.mr, mcb - ir);
            const std::int64_t* cm = p_.cm.data() + ic + ir;
            const std::int64_t nrb = q.nrb, cs = q.cs;
            const std::int64_t* cn = q.cn;
            T* const bp = q.bp;
            const std::int64_t rs = p_.row_step[static_cast<std::size_t>(panel)];
            const bool even = rs != kUneven && cs != kUneven;
            const bool whole_lines = rs == 1 ? tile_rs == 1 : cs == 1 && tile_cs == 1;
            if (cs == 1 && transposes()) {  // rows of the output across the tile, even or not
              kernel(q, ir, ap, mrb, &zero, tile, 1, k_.mr);
              transpose_out(tile, k_.mr, mrb, nrb, c + cn[0], cm, accumulate, p_.stream);
            } else if (stores_lines_ && even && rs == 1 && mrb == k_.mr && !accumulate &&
                       write_lines_around(nrb, kcb, ap, bp, c, cm, cn, q.lines_apart)) {
              ahead.fetch();
            } else if (even && !(p_.stream_all && whole_lines)) {
              kernel(q, ir, ap, mrb, beta, c + cm[0] + cn[0], rs, cs);
            } else if (rs == 1 && mrb == k_.mr && !accumulate &&
                       write_around(nrb, kcb, ap, bp, c + cm[0], cn, q.lines_apart)) {
              ahead.fetch();
            } else if ((rs == 1 ||
                        (rs == kUneven && p_.row_runs[static_cast<std::size_t>(panel)])) &&
                       mrb == k_.mr && !accumulate &&
                       write_lines_around(nrb, kcb, ap, bp, c, cm, cn, q.lines_apart)) {
              ahead.fetch();
            } else if (rs == kUneven && p_.own_tiles && mrb == k_.mr &&
                       split_tile(nrb, kcb, ap, bp, c, cm, cn, accumulate)) {
              ahead.fetch();
            } else {
              kernel(q, ir, ap, mrb, &zero, tile, tile_rs, tile_cs);
              if (rs == kUneven && tile_rs == 1 &&
                  p_.row_runs[static_cast<std::size_t>(panel)]) {  // a line per run
                for (std::int64_t n = 0; n < nrb; ++n)
                  for (std::int64_t i = 0; i < mrb; i += kLine)
                    copy_run(tile + n * tile_cs + i, kLine, c + cm[i] + cn[n], accumulate,
                             p_.stream);
              } else if (rs != kUneven && (cs == kUneven || rs == 1))  // along evenly spaced rows
                write_along(tile, tile_rs, tile_cs, mrb, nrb, c + cm[0], rs, cn, accumulate,
                            p_.stream);
              else if (cs != kUneven)  // evenly spaced columns: row by row
                write_along(tile, tile_cs, tile_rs, nrb, mrb, c + cn[0], cs, cm, accumulate,
                            p_.stream);
              else
                for (std::int64_t i = 0; i < mrb; ++i) {
                  T* row = c + cm[i];
                  const T* t = tile + i * tile_rs;
                  if (accumulate)
                    for (std::int64_t j = 0; j < nrb; ++j) row[cn[j]] += t[j * tile_cs];
                  else
                    for (std::int64_t j = 0; j < nrb; ++j) row[cn[j]] = t[j * tile_cs];
                }
            }
          };
          // The tiles' rows from ir, the panel of the output's rows (Contraction::row_step) and of
          // A's (at ap) that they are, counted along rather than divided out of ir: an integer
          // division takes tens of cycles, against the 144 of a Haswell tile's FMAs summed over
          // 24 elements (TCCG's ccsd_t cases).
          if (across) {
            // Along the columns (Contraction::tiles_across), so many at a time that their packed
            // panels fit half of L2: each tile's A panel stays in L1 meanwhile.
            const std::int64_t chunk = std::max<std::int64_t>(
                1, l2_bytes() / 2 / (b_panel * static_cast<std::int64_t>(sizeof(T))));
            const auto panels = static_cast<std::int64_t>(columns.size());
            for (std::int64_t q0 = 0; q0 < panels; q0 += chunk) {
              T* ap = ablock;
              for (std::int64_t ir = 0, panel = ic / k_.mr; ir < mcb;
                   ir += k_.mr, ++panel, ap += a_panel)
                for (std::int64_t q = q0; q < std::min(panels, q0 + chunk); ++q)
                  one_tile(columns[static_cast<std::size_t>(q)], ir, panel, ap);
            }
            continue;
          }
          for (const ColumnPanel& q : columns) {
            T* ap = ablock;
            for (std::int64_t ir = 0, panel = ic / k_.mr; ir < mcb;) {
              const std::int64_t mrb = std::min(k_.mr, mcb - ir);
              const std::int64_t* cm = p_.cm.data() + ic + ir;
              if (!p_.row_lines.empty() && p_.row_lines[static_cast<std::size_t>(panel)] &&
                  ir + kLine * k_.mr <= mcb) {
                for (std::int64_t j = 0; j < kLine; ++j) {
                  T* const aj = ap + j * a_panel;
                  if (transposes())  // tile j column-major at group + j·MR·NR
                    kernel(q, ir + j * k_.mr, aj, k_.mr, &zero, group + j * k_.mr * k_.nr, 1,
                           k_.mr);
                  else  // element (i, n) of tile j at group[(i + n·MR)·kLine + j]
                    kernel(q, ir + j * k_.mr, aj, k_.mr, &zero, group + j, kLine, kLine * k_.mr);
                }
                write_lines(group, k_.mr, k_.nr, transposes(), q.nrb, c, cm, q.cn, accumulate,
                            p_.stream);
                ir += kLine * k_.mr, panel += kLine, ap += kLine * a_panel;
                continue;
              }
              if (q.streams_rows && mrb == k_.mr && lined_[static_cast<std::size_t>(panel)]) {
                stream_rows(kcb, ap, q.bp, c + q.cn[0], cm);
                ahead.fetch();
              } else {
                one_tile(q, ir, panel, ap);
              }
              ir += k_.mr, ++panel, ap += a_panel;
            }
          }
        }
      }
    }
    if (p_.stream) _mm_sfence();  // the streamed stores, visible before the threads join
  }

 private:
  // A panel of NR columns of the packed block of B (its last perhaps fewer): its micro-panel, its
  // columns' count, their spacing in the output (Contraction::col_step) and offsets there, whether
  // they lie whole lines apart (write_around and write_lines_around then check one address for a
  // tile: checking each column's was a loop of 12 per tile, among the FMAs of 24 summed elements
  // in TCCG's ccsd_t cases), and whether its whole tiles whose rows are whole lines of the output
  // (lined_) go out from our own kernel's registers (stream_tile.hpp).
  struct ColumnPanel {
    T* bp;
    std::int64_t nrb, cs;
    const std::int64_t* cn;
    bool lines_apart = true;
    bool streams_rows = false;
  };

  // Computes the tile of the MR rows of the micro-panel of A at `ap` (contiguous in the output from
  // `base`) and the `nrb` columns of B's at `bp` (at `cn` from it, whole lines apart where
  // `lines_apart`) straight into the output, around the cache: one libxsmm kernel per run of
  // columns p_.around_ldc apart, whose non-temporal stores write each column's whole lines
  // (kernels::StreamKernel). False, having computed nothing, where there are no such kernels or a
  // column starts off a cache line. A whole tile written once, summed over few elements: BLIS's
  // micro-kernel writes it in place with ordinary stores, which read each line from memory first,
  // and through the buffer (copy_run), the copy costs as much again as the kernel's stores.
  bool write_around(std::int64_t nrb, std::int64_t kcb, const T* ap, const T* bp, T* base,
                    const std::int64_t* cn, bool lines_apart) const {
    if (around_.empty() || kcb != p_.K || !lines_apart ||
        reinterpret_cast<std::uintptr_t>(base + cn[0]) % 64 != 0)
      return false;
    for (std::int64_t j0 = 0, j1; j0 < nrb; j0 = j1) {
      for (j1 = j0 + 1; j1 < nrb && cn[j1] - cn[j1 - 1] == p_.around_ldc;) ++j1;
      T* to = base + cn[j0];
      around_[static_cast<std::size_t>(j1 - j0 - 1)](ap, bp + j0, to, ap, bp + j0, to);
    }
    return true;
  }

#if EINSUMDB_AVX512
  // Our own micro-kernel behind BLIS's calling convention (tile_kernel_): a whole tile whose
  // columns are contiguous (rs 1), set or added in place, its columns `cs` apart; anything else
  // BLIS's. Called through the pointer, as BLIS's is, rather than chosen by a branch inlined into
  // each of the macro-kernel's calls: the branch alone made the loop of tiles written around the
  // cache slower (TCCG cases 37-42, which never reach it).
  static void own_tile(dim_t m, dim_t n, dim_t k, T* alpha, T* a, T* b, T* beta, T* c, inc_t rs,
                       inc_t cs, auxinfo_t* aux, cntx_t* cntx) {
    const MicroKernel<T>& blis = MicroKernel<T>::get();
    if (m != blis.mr || rs != 1 || *alpha != 1 || (*beta != 0 && *beta != 1)) {
      blis.run(m, n, k, alpha, a, b, beta, c, rs, cs, aux, cntx);
      return;
    }
    const auto column = [cs](int j) { return j * cs; };
    const LineRows<T> top{c, c, kLine}, bottom{c + kLine, c + kLine, kLine};
    if (*beta != 0)
      line_tile<T, LineWrite::add>(k, a, b, top, bottom, column, n);
    else
      line_tile<T, LineWrite::set>(k, a, b, top, bottom, column, n);
  }
#endif

  // The tile of the MR rows of the micro-panel of A at `ap` and the NR columns of B's at `bp`, each
  // row one whole line of the output at base + cm[i], evenly spaced or not, computed by our own
  // AVX2 micro-kernel and streamed straight into the output from its registers (stream_tile.hpp).
  // Only where lined_ is set.
  void stream_rows([[maybe_unused]] std::int64_t kcb, [[maybe_unused]] const T* ap,
                   [[maybe_unused]] const T* bp, [[maybe_unused]] T* base,
                   [[maybe_unused]] const std::int64_t* cm) const {
#if EINSUMDB_AVX2
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
      stream_tile(kcb, ap, bp, base, cm);
#endif
  }

  // The tile of the MR rows of the micro-panel at `ap`, in one run or in two runs of a cache line
  // (row_runs: 32 floats over an output index of 16, TCCG cases 31-36 and 43-48), its columns
  // wherever they lie, computed by our own micro-kernel (line_tile) and written straight into the
  // output a line at a time, around the cache or through it (Contraction::stream_lines):
  // write_around's libxsmm kernels store only tiles whose rows are one run, and through the
  // buffer (copy_run) the stores of a tile come in a burst with no FMA work between them,
  // waiting on memory (the tiles whose 14 columns straddle two values of e = 16 in case 35,
  // dfgb,geac->abcdef, in doubles). False, having computed nothing, where the kernel does not fit
  // BLIS's tile or a line starts off a cache line (`lines_apart`: the columns lie whole lines
  // apart, write_around's).
  [[gnu::always_inline]] bool write_lines_around(
      [[maybe_unused]] std::int64_t nrb, [[maybe_unused]] std::int64_t kcb,
      [[maybe_unused]] const T* ap, [[maybe_unused]] const T* bp, [[maybe_unused]] T* c,
      [[maybe_unused]] const std::int64_t* cm, [[maybe_unused]] const std::int64_t* cn,
      [[maybe_unused]] bool lines_apart) const {
#if EINSUMDB_AVX512
    if (!line_tiles_ || kcb != p_.K || !lines_apart || (cm[kLine] - cm[0]) % kLine != 0 ||
        reinterpret_cast<std::uintptr_t>(c + cm[0] + cn[0]) % 64 != 0)
      return false;
    const LineRows<T> top{c + cm[0], c + cm[0], kLine}, bottom{c + cm[kLine], c + cm[kLine], kLine};
    const auto column = [cn](int j) { return cn[j]; };
    if (nrb < kLineTileColumns<T>) {  // the last columns
      if (p_.stream_lines)
        line_tile<T, LineWrite::stream>(kcb, ap, bp, top, bottom, column, nrb);
      else
        line_tile<T, LineWrite::store>(kcb, ap, bp, top, bottom, column, nrb);
    } else if (p_.stream_lines) {
      line_tile<T, LineWrite::stream, true>(kcb, ap, bp, top, bottom, column, nrb);
    } else {
      line_tile<T, LineWrite::store, true>(kcb, ap, bp, top, bottom, column, nrb);
    }
    return true;
#else
    return false;
#endif
  }

#if EINSUMDB_AVX512
  // Where a register's rows go for split_tile: rows [h, h + W) in at most two runs (LineRows).
  static bool split_rows(T* c, const std::int64_t* cm, LineRows<T>& rows) {
    int split = kLine;
    for (int i = 1; i < kLine; ++i)
      if (cm[i] != cm[i - 1] + 1) {
        if (split != kLine) return false;
        split = i;
      }
    rows = {c + cm[0], c + cm[split % kLine] - split % kLine, split};
    return true;
  }
#endif

  // The tile of the MR rows of the micro-panel at `ap`, unevenly spaced in the output (a panel
  // straddling two values of an index: TCCG cases 22-25, 27, 29 and 30, rows d of 72 in panels of
  // 32), computed by our own micro-kernel and set or added in place, each register's rows in up to
  // two runs under masks, its lines fetched during the sum as an even tile's (line_tile). Through
  // the buffer, the write-out went row by row and read each line from memory as it came to it.
  // False, having computed nothing, where a register's rows go in more than two runs.
  [[gnu::noinline]] bool split_tile([[maybe_unused]] std::int64_t nrb,
                                    [[maybe_unused]] std::int64_t kcb, [[maybe_unused]] const T* ap,
                                    [[maybe_unused]] const T* bp, [[maybe_unused]] T* c,
                                    [[maybe_unused]] const std::int64_t* cm,
                                    [[maybe_unused]] const std::int64_t* cn,
                                    [[maybe_unused]] bool accumulate) const {
#if EINSUMDB_AVX512
    LineRows<T> top, bottom;
    if (!split_rows(c, cm, top) || !split_rows(c, cm + kLine, bottom)) return false;
    const auto column = [cn](int j) { return cn[j]; };
    if (accumulate)
      line_tile<T, LineWrite::add>(kcb, ap, bp, top, bottom, column, nrb);
    else
      line_tile<T, LineWrite::set>(kcb, ap, bp, top, bottom, column, nrb);
    return true;
#else
    return false;
#endif
  }

  // The end of the block of rows that starts at `ic`: MC rows on (or m1), or, where that would cut
  // a line group in two, the start of that group, so that each group is computed whole: a group
  // cut in two is no group, and its panels go out element by element (with 15 panels to a block,
  // 7 in 15 of TCCG case 20's groups would be cut).
  std::int64_t block_end(std::int64_t ic, std::int64_t m1) const {
    const std::int64_t end = std::min(m1, ic + p_.mc);
    if (p_.row_lines.empty() || end == m1) return end;
    const std::int64_t last = end / k_.mr;  // the first panel of the next block
    for (std::int64_t g = last - 1; g > ic / k_.mr && g > last - kLine; --g)
      if (p_.row_lines[static_cast<std::size_t>(g)]) return g * k_.mr;
    return end;
  }

  // Whether tiles go out through registers, transposed a cache line square at a time (AVX2 or
  // AVX-512, a micro-kernel that writes columns fastest, MR a multiple of a line), rather than
  // along strides by the micro-kernel, whose general-stride path stores element by element: line
  // groups, and even tiles whose columns are contiguous in the output.
  bool transposes() const {
#if EINSUMDB_AVX2
    return !k_.prefers_rows && k_.mr % kLine == 0;  // (T: double or float)
#else
    return false;
#endif
  }

  static constexpr std::int64_t kLine = kLineElements<T>;  // elements per cache line

  const Contraction& p_;
  const MicroKernel<T>& k_;
  const T* a_;
  const T* b_;
  T* c_;
  // libxsmm's kernels of MR rows by 1, 2, ..., NR columns that write around the cache
  // (write_around).
  std::vector<kernels::StreamKernel<T>> around_;
  bool line_tiles_ = false;  // whether write_lines_around applies (Contraction::line_tiles)
  // Whether it stores its lines through the cache (Contraction::stream_lines false): it then takes
  // the even tiles whose rows are contiguous in the output too, where they are written in place
  // rather than streamed (Contraction::stream_all: with AVX-512, where a tile's columns lie apart,
  // TCCG cases 37-42, libxsmm's kernels streaming them were as fast or faster). BLIS's
  // micro-kernel, writing them in place, fetches the tile's lines into the cache during its sum,
  // reading from memory each line of an output that is only written, which ordinary stores of whole
  // lines need not do where they do not read a line first (TCCG cases 31-33 and 46-48 in doubles: a
  // tile of 16 × 14 doubles, one run of 1,792 bytes).
  bool stores_lines_ = false;
  // Where whole tiles stream from our AVX2 kernel (stream_tile_fits, stream_all): per panel of MR
  // rows, whether each row starts a cache line of the output where a batch point's start does;
  // otherwise empty.
  std::vector<char> lined_;
  // Whether the tiles of a block go along its columns (Contraction::tiles_across), where neither
  // line groups nor rows streamed from our AVX2 kernel, which go down the rows, take any of them.
  bool across_ = false;
  // The micro-kernel of whole tiles: BLIS's, or ours where p_.own_tiles (own_tile).
  typename Blis<T>::Kernel tile_kernel_ = k_.run;
};

}  // namespace
}  // namespace einsumdb::tensor_gemm
EINSUMDB_TARGET_END
