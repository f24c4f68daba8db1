// NumPy .npy files (format versions 1.0, 2.0 and 3.0): little-endian f32/f64, C or Fortran
// order. The reader checks the header against the file's size before it allocates, so a
// truncated or corrupted file is refused with a message naming the file instead of allocating
// what a damaged header claims, and reads straight into the aligned tensor (one copy fewer than
// xtensor's xnpy, which reads into its own buffer first; build/bin/npy_bench measures both).
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

#include "einsumdb/executor/tensor.hpp"

namespace einsumdb {

// Throws SpecError naming the file and what is wrong (not .npy, unsupported dtype or byte
// order, truncated, a shape that does not match the file's size) or Error when it cannot be read.
Tensor read_npy(const std::string& path);
// The same from a stream of `size` bytes, or from memory; `name` names it in errors.
Tensor read_npy(std::istream& in, std::uint64_t size, const std::string& name);
Tensor read_npy_bytes(std::string_view bytes, const std::string& name);
// The header: dtype, shape, order and where the data start. Checks the data's size as
// read_npy does.
struct NpyHeader {
  Dtype dtype = Dtype::f64;
  std::vector<std::int64_t> shape;
  bool fortran = false;
  std::uint64_t data_offset = 0;
};
NpyHeader read_npy_header(std::istream& in, std::uint64_t size, const std::string& name);
// Elements [start, start + length) along each axis, reading only those (C order; a Fortran-order
// file is read whole). Throws SpecError for a region outside the array.
Tensor read_npy_region(const std::string& path, const std::vector<std::int64_t>& start,
                       const std::vector<std::int64_t>& length);
// Writes format 1.0 (2.0 for headers over 64 KiB), C order. Throws Error when it cannot write.
void write_npy(const std::string& path, const Tensor& t);

}  // namespace einsumdb
