// tensor_gemm's scatter tables: the offset of every row, column and summed element of the GEMM in
// each tensor (TBLIS's block-scatter matrices), and what the tiles' writers learn from them: where
// a block of rows or columns is evenly spaced, goes in runs of a cache line, or starts a line
// group. The matrices are never formed; the packing and the writers address the tensors through
// these tables, so the rows, columns and summed indices may be any of a tensor's axes, in any
// order. Internal to executor/.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "einsumdb/executor/tensor.hpp"

namespace einsumdb::tensor_gemm {

// A table of offsets. Those of a large GEMM's rows run to millions of entries; they are held in a
// Tensor's memory, which a previous run has already written (tensor.hpp), rather than in pages
// glibc maps afresh for each call and the call faults in (on a virtual machine, that cost more than
// the GEMM's kernel).
class Table {
 public:
  explicit Table(std::int64_t n = 0)
      : t_(Dtype::f64, {n}, Tensor::Uninitialized{}), n_(n) {}  // (8-byte elements)
  std::int64_t* data() { return static_cast<std::int64_t*>(t_.raw()); }
  const std::int64_t* data() const { return static_cast<const std::int64_t*>(t_.raw()); }
  std::int64_t size() const { return n_; }
  std::int64_t& operator[](std::int64_t i) { return data()[i]; }
  std::int64_t operator[](std::int64_t i) const { return data()[i]; }

 private:
  Tensor t_;
  std::int64_t n_;
};

// Offsets of every element of the group `labels` (row-major over them, last fastest) in a
// tensor indexed by `layout` with these strides (0 for a label it does not have).
Table offsets(const std::string& labels, const std::map<char, std::int64_t>& len,
              const std::string& layout, const std::vector<std::int64_t>& strides);

// The spacing of a block whose entries are not evenly spaced.
inline constexpr std::int64_t kUneven = std::numeric_limits<std::int64_t>::min();

// Per block of `width` consecutive entries of `off`: their common spacing, or kUneven. A block of
// one entry has any spacing (a micro-kernel addresses no second row or column): 1 is given.
std::vector<std::int64_t> spacing(const Table& off, std::int64_t width);

// Per block of `width` consecutive entries of `off` whose `step` (spacing) is uneven: whether they
// go in runs of `run` consecutive offsets (`run` dividing the block). A micro-panel of the output's
// rows that does so (where the output's unit-stride index is among the rows with a length that is a
// multiple of a cache line but not of MR, a panel holds the end of one line's run and the start of
// the next) is written a line per run and column, where it was scattered element by element along
// the columns.
std::vector<char> unit_runs(const Table& off, std::int64_t width, std::int64_t run,
                            const std::vector<std::int64_t>& step);

// Per MR rows of the output's offsets `cm` (a micro-panel): whether `line` panels start there in
// which row i of panel j lies at cm[i] + j, the first of them at a whole line's start or not: row i
// and a column of all of them then make one whole line of the output (a line group, written with
// write_lines). Such panels come from the tiles of group_rows where the output's unit-stride index
// is among the rows and the operand's another one: the micro-kernel would write each row of a tile
// to a different line, through its general-stride path, and each line of the output, not written
// whole, would be read from memory first. Empty where there is none.
std::vector<char> line_groups(const Table& cm, std::int64_t mr, std::int64_t line);

}  // namespace einsumdb::tensor_gemm
