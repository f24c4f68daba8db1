// Each kernel entry point calls its compilation for the instruction set kernel_isa() names.
#include "einsumdb/executor/variants.hpp"

#include "einsumdb/executor/isa.hpp"
#include "einsumdb/executor/permute.hpp"

namespace einsumdb {

// Calls ns::f(args...) for the namespace of kernel_isa().
#define EINSUMDB_BY_ISA(prefix, f, ...)     \
  switch (kernel_isa()) {                   \
    case Isa::avx512:                       \
      return prefix avx512::f(__VA_ARGS__); \
    case Isa::avx2:                         \
      return prefix avx2::f(__VA_ARGS__);   \
    case Isa::baseline:                     \
      break;                                \
  }                                         \
  return prefix baseline::f(__VA_ARGS__)

void kernels::copy_layout(const void* src, const std::vector<std::int64_t>& src_strides, void* dst,
                          const std::vector<std::int64_t>& dst_strides,
                          const std::vector<std::int64_t>& shape, std::size_t element_bytes,
                          std::size_t whole_bytes) {
  EINSUMDB_BY_ISA(kernels::, copy_layout, src, src_strides, dst, dst_strides, shape, element_bytes,
                  whole_bytes);
}

Results run_loop_nest(const Bound& bound, const nlohmann::json& params) {
  EINSUMDB_BY_ISA(, run_loop_nest, bound, params);
}

void direct_run(const DirectPlan& plan, const void* const* data, const std::int64_t* const* strides,
                void* out, const std::int64_t* out_strides) {
  EINSUMDB_BY_ISA(, direct_run, plan, data, strides, out, out_strides);
}

Tensor tensor_gemm::row(const Bound& bound, std::size_t row, const RowOptions& options) {
  EINSUMDB_BY_ISA(tensor_gemm::, row, bound, row, options);
}

bool tensor_gemm::runs_in_halves() {
  EINSUMDB_BY_ISA(tensor_gemm::, runs_in_halves);
}

}  // namespace einsumdb
