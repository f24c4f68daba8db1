// Copying a tensor between two layouts of one shape (internal to executor/ and engine/): packing
// an operand into GEMM order, writing a permuted result, taking a caller's strided array.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace einsumdb::kernels {

// dst[x] = src[x] for every index x of `shape`, with element strides `src_strides` and
// `dst_strides` (any sign; elements of `element_bytes` bytes, copied bit for bit). Axes are
// reordered so that the writes run along dst's smallest stride, and axes adjacent in both
// layouts are merged. Where src's unit-stride axis is another than dst's, the two are
// transposed in tiles of vector registers, so that both sides are read and written in whole
// cache lines (4- and 8-byte elements; others copy element by element).
void copy_layout(const void* src, const std::vector<std::int64_t>& src_strides, void* dst,
                 const std::vector<std::int64_t>& dst_strides,
                 const std::vector<std::int64_t>& shape, std::size_t element_bytes);

}  // namespace einsumdb::kernels
