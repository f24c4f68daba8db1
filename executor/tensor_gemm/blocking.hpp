// tensor_gemm's blocking stage: the order of the GEMM's rows, columns and summed elements in the
// tensors (tiles of two indices where an operand and the output run along different ones), the
// packed blocks' sizes (MC rows by KC summed elements, after BLIS's, adapted to the contraction's
// depth and the output's size), the rows packed at once, and whether tiles stream past the cache.
// Its result is a Contraction: every scatter table and block size the macro-kernel (Gemm) runs on.
// Internal to executor/.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "einsumdb/executor/kernels.hpp"
#include "einsumdb/executor/tensor_gemm/micro_kernel.hpp"
#include "einsumdb/executor/tensor_gemm/scatter.hpp"

namespace einsumdb::tensor_gemm {

using kernels::contains;

// One contraction C[m, n] = Σ_k A[m, k] B[k, n] per batch point, every index through its table.
struct Contraction {
  Table am, cm;                                  // per row: offset in A, in C
  Table bn, cn;                                  // per column: offset in B, in C
  Table ak, bk;                                  // per summed element: offset in A, in B
  Table ab, bb, cb;                              // per batch point
  std::vector<std::int64_t> row_step, col_step;  // per MR rows / NR columns: spacing in C
  std::vector<char> row_runs;   // per MR rows: whether they go in runs of a cache line (unit_runs)
  std::vector<char> row_lines;  // per MR rows: whether a line group starts there (line_groups)
  std::int64_t M = 0, N = 0, K = 0;
  std::int64_t mc = 0, kc = 0;  // rows and summed elements per packed block (block_sizes)
  std::int64_t span = 0;        // rows packed at once, over several blocks (packing_span)
  bool stream = false;          // tiles written through the buffer bypass the cache (copy_run)
  bool stream_all = false;      // and so do even tiles, through the buffer too (kStreamAllDepth)
  bool line_tiles = false;      // our kernel writes tiles from its registers (line_tiles_write_out)
  bool stream_lines = true;     // and streams them around the cache, or stores them in it
  bool fetch_ahead = true;      // the next block's lines fetched during this one's (NextBlock)
  bool own_tiles = false;       // whole tiles by our own micro-kernel (line_tile), not BLIS's
  bool tiles_across = false;    // a block's tiles go along its columns (tiles_across_by_default)
  std::int64_t around_ldc = 0;  // tiles' runs of columns this far apart written around the cache
};

// The elements of T in a cache line.
template <typename T>
inline constexpr std::int64_t kLineElements = 64 / sizeof(T);

// The bytes of this core's L2 cache (512 KB where the system does not say).
std::int64_t l2_bytes();

// A tensor larger than this is taken not to stay in the cache between two reads of it.
inline constexpr std::int64_t kCachedBytes = std::int64_t{8} << 20;
// The fastest of the other indices goes kInner values at a time inside each tile (group_rows).
inline constexpr std::int64_t kInner = 4;
// Summed elements up to which every tile of a streamed output whose lines it writes whole goes
// through the buffer, not only the uneven ones: the micro-kernel then spends less time on a tile
// than writing it takes, and written in place, each of its lines is read from memory before it is
// written.
inline constexpr std::int64_t kStreamAllDepth = 24;

// Whether an ordinary store that writes a whole cache line far from the last one reads the line
// from memory first, as on Intel's processors and AMD's Zen 4: measured once per process, on its
// first call, by writing twice the last-level cache in the order a tile's columns go out, in
// ordinary stores and in non-temporal ones, the fastest of three passes each. A store that reads
// first moves each line twice, so its pass takes up to twice as long; one that does not, about as
// long: kReadFirstMargin lies halfway between, as far from the noise of a machine whose stores do
// not read first (whose ratio varies from one process to the next around 1) as from the ratio of
// one whose stores do. Even tiles have gone faster in place on one Zen 5 machine and through the
// buffer on another, so the answer is measured rather than read from the processor's family.
// The passes write `scratch` (`scratch_bytes` of memory the caller overwrites whole afterwards: a
// result not yet computed, populated already) where it holds them, and a block of their own
// otherwise, which the first run of the process then populates as well.
inline constexpr double kReadFirstMargin = 1.5;
bool scattered_stores_read_lines(void* scratch = nullptr, std::size_t scratch_bytes = 0);

// Whether a tile's columns lie apart in the output, each its own few lines: where the output's
// two fastest indices belong to the same operand, which then takes the tile's rows, the other's
// indices (the columns) are at least both lengths apart. Where the second belongs to the other
// operand, a tile's columns can adjoin: TCCG case 33 (degc,gfab->abcdef: f and e), a tile of
// 16 × 14 doubles is one run of 1,792 bytes; in case 37 (efga,gdbc->abcdef: f and e both in
// efga) its 14 columns lie 3 KB apart.
bool tile_columns_apart(const std::string& xl, const std::string& yl, const std::string& zl);

// Whether the even tiles of the product xl,yl->zl, its output beyond the cache, go out in
// non-temporal stores by default (with AVX-512 through the buffer or libxsmm's kernels, with AVX2
// through ours where BLIS's tile is its: stream_tile.hpp), rather than in place by the
// micro-kernel, prefetching their lines as it starts: where an ordinary store reads its line
// first, and with the AVX-512 kernels where a tile's columns lie apart (tile_columns_apart), which
// on a Zen 5 whose stores do not read first went faster streamed (TCCG cases 37-42,
// docs/performance/tccg-ccsdt-columns.md); with the AVX2 kernels, which stream through a
// different path, they stay in place. The parameter "stream_even" chooses, and the tuner tries
// both (tensor_gemm_space).
bool streams_even_tiles_by_default(const std::string& xl, const std::string& yl,
                                   const std::string& zl, void* scratch = nullptr,
                                   std::size_t scratch_bytes = 0);

// Whether copy_run and the write-out's transposes run in vector registers and can stream whole
// lines around the cache: where the kernels run AVX2 or AVX-512 (kernel_isa(); transpose.hpp).
// Without, a buffered even tile is only a detour.
bool writes_stream();

// Whether our own AVX-512 kernels run (rows_kernel.hpp, lines_kernel.hpp, place_kernel.hpp,
// line_kernel.hpp), and libxsmm's write around the cache: where the kernels run AVX-512.
bool streams();

// Whether our own micro-kernel (line_kernel.hpp) runs for floats: where the kernels run AVX-512
// and BLIS's float tile is one it computes (line_tile_fits).
bool own_kernel_runs();

// Whether whole float tiles go to our own micro-kernel by default: where it runs and the output,
// too large for the cache, is read back and added to in each of several summed passes. There each
// tile is in memory when its sum starts, and ours fetches its lines during the sum (line_tile);
// elsewhere BLIS's kernel, which fetches the next panels ahead, is as fast or faster (the tuner
// measures both).
bool own_kernel_by_default(std::int64_t summed, double output_bytes);

// Whether the packed path of a real row summed over several of BLIS's passes runs the wide
// micro-kernel (wide_kernel.hpp) by default: in doubles, into an output beyond the cache
// (kCachedBytes), on Intel's processors with AVX-512, where it was measured faster than BLIS's
// Skylake-X kernel (the GEMM-shaped cases; on outputs that the cache holds it was level or slower:
// docs/performance/tccg-wide-kernel.md); the tuner measures it against BLIS's wherever it runs
// (wide_kernel_applies).
bool wide_kernel_by_default(bool doubles, double output_bytes);

// Whether the packed path of a real row in T summed over `summed` elements into an output of
// `output_bytes` runs the wide micro-kernel: where the kernels run AVX-512 and the sum takes
// several of BLIS's passes, as `wide` says ("kernel": "wide", or another), or without it by
// default (wide_kernel_by_default).
template <typename T>
bool wide_kernel_runs(std::int64_t summed, double output_bytes, std::optional<bool> wide);

// Whether threads share the summed range of a packed GEMM of M × N summed over K (for each of nb
// batch points) by default, rather than the wider of its rows and columns (`split_rows`: the
// rows): where the result is small (kernels::kSplitSumElements) and each thread's copy of the
// other operand's packed blocks, which a split of the rows or columns has every thread pack whole,
// moves more than the buffer each thread then sums into and adds to the result. TCCG case 13,
// acd,dbc->ab (312 × 296 summed over 92,352): split by rows, each thread packs all 230 MB of the
// other operand, gathered from runs of 8 elements; split by the sum, half. The parameter
// "split_sum" chooses.
bool sums_split(std::int64_t M, std::int64_t N, std::int64_t K, std::int64_t nb, bool split_rows);

// Whether "stream_even" decides anything: an output too large for the cache, written once and
// summed over kStreamAllDepth elements or fewer (the run and the tuner's space both ask).
bool even_tiles_may_stream(std::int64_t summed, double output_bytes);

// `labels` ordered by their strides in the tensor indexed by `layout`, the smallest last: runs
// of consecutive elements of the group are then evenly spaced there as often as possible (a
// packing routine reads them contiguously, or a tile is written in place).
std::string by_stride(std::string labels, const std::string& layout,
                      const std::vector<std::int64_t>& strides);

// Whether the tensor indexed by `layout` runs at unit stride along one of `labels`.
bool unit_along(const std::string& labels, const std::string& layout,
                const std::vector<std::int64_t>& strides);

// Whether the tensor indexed by `layout` runs along one of `labels` at a stride of at most a
// quarter of a line that the indices below it (none of `labels`) fill densely: a complex tensor in
// real form (real_form.hpp), its parts (2 values) below its fastest index. A line then holds whole
// runs of that index, interleaved with those of the indices below, as a unit stride would.
bool parts_below(const std::string& labels, const std::string& layout,
                 const std::vector<std::int64_t>& strides, const std::map<char, std::int64_t>& len,
                 std::int64_t line);

// `labels` in the order of X's strides or of Z's: of the one that runs at unit stride along one
// of them where only one does (its lines are then read or written whole), otherwise of X where
// `x_first`.
std::string order(const std::string& labels, const std::string& xl,
                  const std::vector<std::int64_t>& xs, const std::string& zl,
                  const std::vector<std::int64_t>& zs, bool x_first);

// A group of indices as offsets in its operand X and in the output Z, entry by entry.
struct Rows {
  Table x, z;
};

// The tiled order of a group of indices, X's and Z's offsets for each, or nothing where X does not
// run at unit stride along the group (nor Z, with `z_unit`), where X and Z's fastest indices of the
// group are the same or one of the tensors fits in the cache. X with its parts below the group
// (parts_below) counts as at unit stride where Z is at least half its size: a complex operand and
// output that run along different indices (TCCG cases 6-8 in complex numbers), whose tiles the
// micro-kernel would otherwise write out a complex element at a time to lines the next tiles write
// too. What the tiles save is that scattered write-out, so a Z much smaller than X (a third in
// cases 3 and 4) keeps X's order, whose packing reads X's lines in turn.
// The summed indices of two operands that both run at unit stride along them, along different ones,
// go in these tiles too, a cache line of X's unit-stride index for each of a line of Y's
// (sum_tile): a packed block of KC summed elements then reads both operands in whole cache lines,
// where in X's order it read one element of each line of Y. Where only one of them does, they go in
// its order. Complex operands in real form both run along their parts, summed (real_form.hpp);
// where the indices just above the parts differ, the tiles are of those two, each element's parts
// side by side (a line then holds half as many of each index: TCCG case 13 in complex numbers).
std::optional<Rows> tiles(const std::string& labels, const std::map<char, std::int64_t>& len,
                          const std::string& xl, const std::vector<std::int64_t>& xs,
                          const std::string& zl, const std::vector<std::int64_t>& zs,
                          std::int64_t x_bytes, std::int64_t z_bytes, std::int64_t panel,
                          std::int64_t line, bool z_unit);

// The rows of a group of indices (the row or the column indices of the GEMM), as offsets in its
// operand X and in the output Z. Where X runs at unit stride along an index of the group (ux), Z's
// fastest index of the group is another one (uz), and both tensors are too large to be re-read from
// the cache, the rows go in tiles: `panel` consecutive values of ux (a micro-panel, packed from X
// along contiguous memory) for each of `line` consecutive values of uz (a cache line of Z, where uz
// is Z's unit-stride index), so that the lines of both tensors are used whole while they are in
// cache. Otherwise the rows go in the order of the tensor that runs at unit stride along the group
// where only one does, else of the larger tensor's strides (the smaller one is re-read from the
// cache where it is strided); with `follow_z`, in Z's order. The tiles go kInner values of the
// fastest of the other indices at a time inside each line of uz: where that index is the next one
// out from ux in X, a tile then reads each of its places in X (one per value of the summed and the
// slower indices) in a run of kInner times ux's length rather than one. Where X runs at unit stride
// along a summed index instead, its packing reads whole lines in any order of the rows, and tiles
// would only break Z's tiles into line groups.
//
// Where X fits in the cache and Z does not, the group follows Z, unless X's order leaves fewer
// micro-panels unevenly spaced in Z: X's packing re-reads it from the cache in any order, and what
// goes to memory is Z's tiles, each written whole in place where it is even. (That was with uneven
// tiles copied out through the buffer; where tiles are written around the cache, which splits them
// at no copy, or written from our own kernel's registers, the caller follows Z.)
Rows group_rows(const std::string& labels, const std::map<char, std::int64_t>& len,
                const std::string& xl, const std::vector<std::int64_t>& xs, const std::string& zl,
                const std::vector<std::int64_t>& zs, std::int64_t x_bytes, std::int64_t z_bytes,
                std::int64_t panel, std::int64_t line, bool follow_z);

// The packed blocks' sizes: BLIS's KC summed elements, or all of them in one pass where there are
// at most a quarter more (the output is then written once, not read back and added to), and MC rows
// scaled by KC over the block's depth, so that a block of A takes the cache BLIS sized it for
// however few summed elements it has: where there are few, each of A's runs along its memory is
// then read in more of one block. A block holds at least `group` rows (one line group, where there
// are any: Gemm::block_end). Where the output is too large for the cache and the contraction takes
// several summed passes, each pass reads the whole output and writes it back: the passes then take
// up to kLongPass times BLIS's KC summed elements, in equal shares. Not with our own micro-kernel
// (p.own_tiles, set first), which fetches each tile's lines during its sum, so that reading the
// output back costs it little, while a longer pass makes its panels longer than L1 holds (an A
// panel of 32 floats by KC = 384 is already 48 KB); its blocks of A take at most a third of L2,
// beside the B panels and the next block fetched ahead (NextBlock). Nor with the wide kernel
// (wide_kernel.hpp, MicroKernel::fetches_tile), which fetches its tile's lines likewise.
//
// With BLIS's AVX2 (Haswell) tile in doubles, 6 rows by a line of columns, a block at least KC deep
// holds kHaswellRows rows scaled likewise rather than BLIS's MC. Each micro-panel of B (KC by a
// line: 16 KB at KC = 256) is read from L3 once per block and serves MC / 6 tiles: BLIS's MC for
// Zen 3 (72) gives it 12, OpenBLAS's on the processors that run these kernels (its P, 512) 85. The
// block of A, 1 MB at KC = 256, then lies in L3 rather than L2. In floats, such blocks went no
// faster (docs/performance/tccg-avx2.md), and keep BLIS's MC.
inline constexpr std::int64_t kLongPass = 2;
inline constexpr std::int64_t kHaswellRows = 504;
// Whether micro-kernel k (a MicroKernel<T>, or anything with its panel sizes) has BLIS's Haswell
// tile in T: 6 rows by a line of columns, its panels packed to exactly that.
template <typename T, typename Kernel>
bool haswell_tile(const Kernel& k) {
  return k.mr == 6 && k.packmr == k.mr && k.nr == kLineElements<T> && k.packnr == k.nr;
}
// The elements of X's unit-stride index per cache line of Y's in a tile of summed indices
// (tiles) for micro-kernel k: a cache line's, so that a tile is a line of X's index by a line of
// Y's, or fewer where a pass of BLIS's KC summed elements would not hold a whole tile. The operand
// that runs along the tile's slower index then has its lines a line's depths apart, and its
// packing (pack_runs, pack_run_lines) transposes each group of them into consecutive depths of the
// panel. Wider tiles in X's index (256 bytes, or what a pass held of it) left TCCG case 13
// (acd,dbc->ab) slower in both dtypes (docs/performance/tccg-sum-tiles.md).
template <typename T, typename Kernel>
std::int64_t sum_tile(const Kernel& k) {
  return std::min<std::int64_t>(kLineElements<T>, k.kc / kLineElements<T>);
}
template <typename T>
bool one_pass(const MicroKernel<T>& k, std::int64_t summed) {
  return summed <= k.kc + k.kc / 4;
}
// Whether our own micro-kernel (line_kernel.hpp) writes the tiles it can from its registers
// (Gemm::write_lines_around: rows in one run or in two runs of a line, columns anywhere), whether
// or not even tiles stream: where the kernels run AVX-512, BLIS's tile is one it computes, the sum
// takes one pass and the output is too large for the cache. The rows and columns then follow the
// output (tensor_gemm_row).
template <typename T>
bool line_tiles_write_out(const MicroKernel<T>& k, std::int64_t summed, std::int64_t output_bytes) {
  return streams() && line_tile_fits(k) && one_pass(k, summed) && output_bytes > kCachedBytes;
}
// line_tiles_write_out for an output of `output_bytes` in `dtype` (real, or complex in real form,
// `summed` counting both parts), where the tuner measures both ways of storing those tiles.
bool line_tiles_may_write(Dtype dtype, std::int64_t summed, double output_bytes);
// Whether the tiles our own kernel writes from its registers (line_tiles_write_out) go out in
// non-temporal stores by default ("stream_line_tiles"), rather than in ordinary ones: where an
// ordinary store reads its line first (scattered_stores_read_lines), which would move each line
// twice. Where it does not, the ordinary stores overlap the FMA work of the tiles that follow,
// where the sum waits on the streamed ones (TCCG's ccsd_t cases on a Zen 5 whose stores do not
// read first: docs/performance/tccg-line-stores-default.md). The tuner measures the other way.
bool line_tiles_stream_by_default(void* scratch = nullptr, std::size_t scratch_bytes = 0);
// Whether the tiles of each block go along its columns, a panel of rows at a time, rather than
// down its rows, a panel of columns at a time (Gemm::run): where our kernel writes them from its
// registers in one pass over a large output (p.line_tiles), a tile's rows lie in runs of a line
// (Contraction::row_runs) and the columns mostly continue those runs in the output, each a line
// after the last. Consecutive tiles then write the same runs on, where down the rows each piece
// is a line by NR columns far from the last: in TCCG case 47 in floats (gfac,degb->abcdef), tiles
// of f's 16 rows at two values of c, 24 KB apart, by 12 columns of e and d, 16 floats apart, went
// out in 768-byte pieces at 24 KB strides over the whole 151 MB output, each column panel's tiles
// adding the next piece. Along the columns, each tile's A panel stays in L1 and the B block's
// panels are read in turn from L2 (Gemm::run takes them in chunks that fit half of it). Where a
// tile's rows are one run, its columns continuing it (the same cases in doubles: 16 × 14 doubles,
// one run of 1,792 bytes), it already writes a long piece, and along the columns was no faster
// (docs/performance/tccg-tiles-across.md). The parameter "tiles_across" chooses, and the tuner
// tries them down the rows wherever our kernel writes them (tensor_gemm_space).
template <typename T>
bool tiles_across_by_default(const MicroKernel<T>& k, const Contraction& p);
// Sets p.kc and p.mc from p.K.
template <typename T>
void block_sizes(const MicroKernel<T>& k, Contraction& p, bool large_output, std::int64_t group);

// The rows packed at once (Contraction::span). Where the rows follow the output and their operand
// runs at unit stride along another of their indices, a line of the operand holds the same row of
// up to eight panels, `apart` rows from each other: in TCCG case 21 (aebf,fdec->abcd, rows c and d,
// d fastest), the 8 values of c on a line lie 72 rows apart. A block of MC rows (128 there) holds
// fewer than two of them, so each line came from memory once for each block it served, one element
// at a time. The rows of a line's worth of them (576 there) are packed at once instead, each line
// read whole (pack_across), into a buffer of up to kSpanBytes (2.2 MB there) that the blocks then
// take their turns from. No other TCCG contraction has such rows.
inline constexpr std::int64_t kSpanBytes = std::int64_t{4} << 20;
template <typename T>
std::int64_t packing_span(const MicroKernel<T>& k, const Contraction& p, std::int64_t a_bytes);

}  // namespace einsumdb::tensor_gemm
