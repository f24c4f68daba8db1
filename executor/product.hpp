// A binary mul/sum product of strided tensors as batched GEMMs (internal to executor/): the
// engine of ttgt, and of contraction_tree's tiled mode, which runs it on the same strides over
// and over with only the base pointers moving.
//
// Indices are grouped as in gemm_groups(): batch, M, N, K. An operand whose three groups are
// each flat in its layout (one stride per group) with a unit stride along its rows or columns is
// read in place; any other — and any operand with a function to apply — is packed into
// [batch, rows, cols] in scratch memory. The result is written in place the same way, or
// computed into [batch, M, N] order ([N, M] where a chunk is narrow: kColumnMajorChunk) in chunks
// (a range of its rows, or where those cannot be cut along whole cache lines of the result, of
// its columns) and each chunk scattered into place. A
// chunk holds about kChunkElements, so that it is scattered from the cache, or where the product
// sums more elements than that leaves it rows (columns), as many as it sums up to kChunkDepth; the
// scratch never holds the whole result, except where neither group can be cut. A product that
// sums nothing is an outer product per batch point and runs as a loop, not as GEMMs with K = 1.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "einsumdb/executor/execute.hpp"

namespace einsumdb::kernels {

// A tensor as it lies in memory: its indices and the element stride of each axis.
struct Strided {
  std::string labels;
  std::vector<std::int64_t> strides;
};

// Elements of a chunk of a result computed in scratch (16 MiB of doubles): large enough that a
// chunk's GEMM keeps its speed, small enough to be scattered from the cache.
inline constexpr std::int64_t kChunkElements = std::int64_t{1} << 21;
// A chunk's GEMM packs all of the other operand (B for a chunk of rows, A for one of columns)
// before it multiplies, so a chunk spans at least as many rows (columns) as the product sums, up
// to this many: it then copies no more of that operand than it writes of the result. Packing it
// moves each of its K·N elements at about memory speed (s bytes at a few GB/s, read and written),
// while the chunk's multiply takes 2·m·K·N / F: for doubles at 50 GFLOP/s packed at 6 GB/s, the
// packing is 33 / m of the multiply, 1.6% at m = 2048, where 2M elements a chunk would leave it
// at 9% in a product of 5184 columns (TCCG cases 22-30, 360 rows a chunk).
inline constexpr std::int64_t kChunkDepth = 2048;
// A chunk with at least this many times as many rows as columns is computed column-major, so
// that its long side is the rows OpenBLAS blocks and packs as its long dimension (row-major, a
// narrow result's long side is the BLAS's columns, and it reads its operands along their short
// side). Not where libxsmm computes the product (a real one that sums at most kSmallGemmMax
// elements), whose kernels run slower on the exchanged product, nor where a complex one sums fewer
// than kColumnMajorDepth elements. The figures behind both, and bench/gemm_orientation.py's:
// docs/performance/tccg-ttgt-narrow.md.
inline constexpr std::int64_t kColumnMajorChunk = 8;
inline constexpr std::int64_t kColumnMajorDepth = 64;

template <typename T>
class Product {
 public:
  // `a_function` / `b_function`: whether that operand will be read through a function;
  // `chunk_elements`: the size of the chunks a result computed in scratch is cut into (at least
  // one row of N).
  Product(const GemmGroups& g, const std::map<char, std::int64_t>& len, const Strided& a,
          const Strided& b, const Strided& c, bool a_function, bool b_function,
          std::int64_t chunk_elements = kChunkElements);
  // Elements of scratch memory run() needs.
  std::int64_t scratch() const { return scratch_; }
  // Whether the result is computed in chunks, each column-major (kColumnMajorChunk).
  bool column_major_chunks() const { return c_.packed && chunks_.column_major; }
  // c = a ⊗ b on tensors laid out as given to the constructor; `scratch` holds scratch()
  // elements. With threads > 1: over batch points when there are enough, else OpenBLAS's.
  void run(const T* a, const Expression* fa, const T* b, const Expression* fb, T* c, T* scratch,
           int threads) const;
  // Fixes operand a (or b) to this data for every run (run() then ignores its pointer): when it
  // must be packed, or is laid out so that each GEMM would copy it, it is packed once, here,
  // into the orientation the GEMM reads in place. For an operand that does not change between
  // runs, such as an operator matrix applied block after block.
  void fix_a(const T* data, const Expression* f) { fix(a_, data, f, true); }
  void fix_b(const T* data, const Expression* f) { fix(b_, data, f, false); }
  // Complex GEMMs by the 3M method (kernels::gemm's three_m); real ones ignore it.
  void use_3m(bool on) { three_m_ = on; }

 private:
  struct Side {
    bool packed = false;
    std::int64_t batch = 0, rs = 0, cs = 0;    // the matrix per batch point (in scratch if packed)
    std::vector<std::int64_t> shape, strides;  // how to pack it
    std::int64_t at = 0;                       // its offset in scratch
    Strided source;                            // the operand as given
    std::string rows, cols;
    bool is_fixed = false;
    std::vector<T> fixed;         // the operand packed once by fix(), or
    const T* fixed_at = nullptr;  // the operand as it lies
  };
  void fix(Side& s, const T* data, const Expression* f, bool is_a);
  // The rows [row, row + rows) and columns [col, col + cols) of the result seen as
  // [batch · M, N] into z (the result in place, or a chunk in scratch: row-major [rows, cols]);
  // rows cover whole batch points or lie within one.
  void compute(const T* a, const T* b, std::int64_t row, std::int64_t rows, std::int64_t col,
               std::int64_t cols, T* z, std::int64_t z_batch, std::int64_t z_rs, std::int64_t z_cs,
               int threads) const;
  // A result that is not a matrix the BLAS can write: its rows (the labels batch + M), or with
  // `by_columns` its columns (N's labels), are cut at one label; every value of the labels
  // before it, and every `step` values of it, is a chunk, a box of the result. `box` is a whole
  // chunk's shape (the rows' labels if by columns, the cut label at `cut_axis`, the labels after
  // it, N's if by rows), `box_strides` its strides in the result; `before` and `before_strides`
  // the lengths and result strides of the labels before the cut; `cut_stride` the cut label's;
  // `per_value` the rows (or columns) of one value of the cut. `column_major`: the chunk is
  // computed as [N, M] rather than [M, N] (see kColumnMajorChunk), its box rotated to that order.
  struct Chunks {
    bool by_columns = false, column_major = false;
    std::size_t cut_axis = 0;
    std::int64_t step = 0, per_value = 0, cut_length = 0, cut_stride = 0;
    std::vector<std::int64_t> box, box_strides, before, before_strides;
  };
  Chunks chunks_;
  // A product that sums nothing, read in place with any batch strides: per batch index its
  // length and its strides in a, b and c; the strides of M in a and c, of N in b and c.
  struct Outer {
    std::vector<std::int64_t> len, a, b, c;
    std::int64_t am = 0, cm = 0, bn = 0, cn = 0;
  };
  std::optional<Outer> outer_;
  void run_outer(const T* a, const T* b, T* c, int threads) const;
  std::string batch_;
  std::map<char, std::int64_t> len_;
  std::int64_t nb_, m_, n_, k_;
  bool sums_;
  bool three_m_ = false;
  Side a_, b_, c_;
  std::int64_t scratch_ = 0;
};

}  // namespace einsumdb::kernels
