// The kernels compiled once per instruction set (isa_target.hpp), each in a namespace of its own,
// and the functions that call the one kernel_isa() names (variants.cpp). Internal to executor/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "einsumdb/executor/direct.hpp"
#include "einsumdb/executor/execute.hpp"

namespace einsumdb::tensor_gemm {
// tensor_gemm's parameters for one row (tensor_gemm.cpp says what each does).
struct RowOptions {
  int threads = 1;
  std::optional<bool> stream_even;  // without it, the default (streams_even_tiles_by_default)
  bool fetch_ahead = true;
  bool stream_rows = true;
  std::optional<bool> stream_line_tiles;  // without it, line_tiles_stream_by_default
  std::optional<bool> own_kernel;         // without it, own_kernel_by_default
  std::optional<bool> wide_kernel;        // "kernel": "wide"; without it, wide_kernel_by_default
  std::optional<bool> split_sum;          // without it, sums_split
  std::optional<bool> tiles_across;       // without it, tiles_across_by_default
  bool rows_fetch_l1 = false;             // "rows_fetch": "l1" (or "l2", the default)
};
}  // namespace einsumdb::tensor_gemm

// One declaration of each kernel entry point per instruction set.
#define EINSUMDB_KERNEL_ENTRIES(ns)                                                                \
  namespace kernels::ns {                                                                          \
  void copy_layout(const void* src, const std::vector<std::int64_t>& src_strides, void* dst,       \
                   const std::vector<std::int64_t>& dst_strides,                                   \
                   const std::vector<std::int64_t>& shape, std::size_t element_bytes,              \
                   std::size_t whole_bytes);                                                       \
  }                                                                                                \
  namespace ns {                                                                                   \
  Results run_loop_nest(const Bound& bound, const nlohmann::json& params);                         \
  void direct_run(const DirectPlan& plan, const void* const* data,                                 \
                  const std::int64_t* const* strides, void* out, const std::int64_t* out_strides); \
  }                                                                                                \
  namespace tensor_gemm::ns {                                                                      \
  Tensor row(const Bound& bound, std::size_t row, const RowOptions& options);                      \
  bool runs_in_halves();                                                                           \
  }

namespace einsumdb {

EINSUMDB_KERNEL_ENTRIES(baseline)
EINSUMDB_KERNEL_ENTRIES(avx2)
EINSUMDB_KERNEL_ENTRIES(avx512)

// The direct loops' kernel (direct_kernel.cpp), for the instruction set kernel_isa() names.
void direct_run(const DirectPlan& plan, const void* const* data, const std::int64_t* const* strides,
                void* out, const std::int64_t* out_strides);

namespace tensor_gemm {
// One row of the batch (row.cpp), for the instruction set kernel_isa() names.
Tensor row(const Bound& bound, std::size_t row, const RowOptions& options);
// Whether the kernels run AVX-512 on a processor that runs a 512-bit operation as two 256-bit
// halves (rows_kernel.hpp, machine_rows_shape), as measured once per process.
bool runs_in_halves();
}  // namespace tensor_gemm

}  // namespace einsumdb
