// Copying a tensor between two layouts of one shape (internal to executor/ and engine/): packing
// an operand into GEMM order, writing a permuted result, taking a caller's strided array.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace einsumdb::kernels {

// Row-major element strides of `shape`.
inline std::vector<std::int64_t> row_major_strides(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> s(shape.size(), 1);
  for (std::size_t a = shape.size(); a-- > 1;) s[a - 1] = s[a] * shape[a];
  return s;
}

// dst[x] = src[x] for every index x of `shape`, with element strides `src_strides` and
// `dst_strides` (any sign; elements of `element_bytes` bytes, copied bit for bit). Axes are
// reordered so that the writes run along dst's smallest stride, and axes adjacent in both
// layouts are merged. Where src and dst are contiguous along different axes (4-, 8- and 16-byte
// elements), the run of axes contiguous in src is transposed against the run contiguous in dst
// in micro-blocks of one cache line square, in vector registers, so that both sides are read
// and written in whole lines; results over 8 MiB are written with streaming stores. Each line
// is then read once and written once, as memcpy reads and writes it (bench/permute.sh compares
// the two on every layout).
// `whole_bytes`: the size of the destination tensor this copy is a part of, when it is one (a
// chunk of a result), for the choice of streaming stores.
void copy_layout(const void* src, const std::vector<std::int64_t>& src_strides, void* dst,
                 const std::vector<std::int64_t>& dst_strides,
                 const std::vector<std::int64_t>& shape, std::size_t element_bytes,
                 std::size_t whole_bytes = 0);

}  // namespace einsumdb::kernels
