// The direct loops' kernel (direct.hpp), compiled once per instruction set (isa_target.hpp): the
// loops are scalar, but their sums are chains of multiply-adds, which an FMA unit completes in one
// step where the baseline takes a multiply and an add in turn.
#include <array>
#include <complex>
#include <cstdint>
#include <type_traits>

#include "einsumdb/executor/direct.hpp"
#include "einsumdb/executor/execute.hpp"
#include "einsumdb/executor/isa_target.hpp"  // this file: once per instruction set
#include "einsumdb/executor/scalar_ops.hpp"
#include "einsumdb/executor/tensor.hpp"

EINSUMDB_TARGET_BEGIN
namespace einsumdb::EINSUMDB_ISA_NS {
namespace {

// The accumulator of an element type: double for float (as the reference), complex<double> for
// complex<float>.
template <typename T>
using Wide = std::conditional_t<is_complex_v<T>, std::complex<double>, double>;

template <typename T>
void run_typed(const DirectPlan& plan, const void* const* data, const std::int64_t* const* strides,
               void* out_data, const std::int64_t* out_strides) {
  constexpr std::size_t kMaxIndices = DirectPlan::kMaxIndices,
                        kMaxOperands = DirectPlan::kMaxOperands;
  using V = Wide<T>;
  const std::size_t n = plan.indices, ops = plan.operands;
  // Per operand, the stride of each index (repeats add: a diagonal); the output's likewise.
  std::array<std::array<std::int64_t, kMaxIndices>, kMaxOperands> step{};
  std::array<std::int64_t, kMaxIndices> out_step{};
  for (std::size_t k = 0; k < ops; ++k) {
    std::int64_t row_major = 1;
    for (std::size_t a = plan.rank[k]; a-- > 0;) {
      const std::int64_t s = strides && strides[k] ? strides[k][a] : row_major;
      step[k][plan.axis_index[k][a]] += s;
      row_major *= plan.length[plan.axis_index[k][a]];
    }
  }
  std::int64_t row_major = 1;
  for (std::size_t a = plan.kept; a-- > 0;) {
    out_step[plan.out_index[a]] = out_strides ? out_strides[a] : row_major;
    row_major *= plan.length[plan.out_index[a]];
  }
  std::array<const T*, kMaxOperands> in{};
  for (std::size_t k = 0; k < ops; ++k) in[k] = static_cast<const T*>(data[k]);
  T* out = static_cast<T*>(out_data);
  for (std::size_t i = 0; i < n; ++i)
    if (plan.length[i] == 0) {  // nothing to compute: an empty result, or sums of nothing
      if (i >= plan.kept && row_major > 0) {
        std::array<std::int64_t, kMaxIndices> c{};
        std::int64_t at = 0;
        for (std::int64_t p = 0; p < row_major; ++p) {
          out[at] = T(V(kernels::identity(plan.agg)));
          for (std::size_t a = plan.kept; a-- > 0;) {
            at += out_step[a];
            if (++c[a] < plan.length[a]) break;
            at -= out_step[a] * plan.length[a];
            c[a] = 0;
          }
        }
      }
      return;
    }
  const bool product = plan.join == JoinOp::mul && plan.agg == AggOp::sum;
  // The innermost summed index runs as a tight loop; the others by an odometer.
  const bool summed = n > plan.kept;
  const std::size_t inner = summed ? n - 1 : n;  // indices the odometers cover
  const std::int64_t inner_len = summed ? plan.length[n - 1] : 1;
  std::array<std::int64_t, kMaxOperands> inner_step{};
  for (std::size_t k = 0; k < ops; ++k) inner_step[k] = summed ? step[k][n - 1] : 0;
  std::array<std::int64_t, kMaxIndices> counter{};
  std::array<std::int64_t, kMaxOperands> offset{};
  std::int64_t at = 0;
  for (;;) {
    // One output element: every point of the summed indices.
    V acc = V(kernels::identity(plan.agg));
    std::array<std::int64_t, kMaxOperands> o = offset;
    for (bool more = true; more;) {
      if (product && ops == 2) {
        const T *x = in[0] + o[0], *y = in[1] + o[1];
        const std::int64_t sx = inner_step[0], sy = inner_step[1];
        for (std::int64_t j = 0; j < inner_len; ++j) acc += V(x[j * sx]) * V(y[j * sy]);
      } else {
        for (std::int64_t j = 0; j < inner_len; ++j) {
          V v = V(in[0][o[0] + j * inner_step[0]]);
          for (std::size_t k = 1; k < ops; ++k) {
            const V x = V(in[k][o[k] + j * inner_step[k]]);
            v = product ? v * x : kernels::join(plan.join, v, x);
          }
          acc = kernels::combine(plan.agg, acc, v);
        }
      }
      more = false;
      for (std::size_t i = inner; i-- > plan.kept;) {
        for (std::size_t k = 0; k < ops; ++k) o[k] += step[k][i];
        if (++counter[i] < plan.length[i]) {
          more = true;
          break;
        }
        for (std::size_t k = 0; k < ops; ++k) o[k] -= step[k][i] * plan.length[i];
        counter[i] = 0;
      }
    }
    out[at] = T(acc);
    // The next output element, or the end.
    bool done = true;
    for (std::size_t i = plan.kept; i-- > 0;) {
      for (std::size_t k = 0; k < ops; ++k) offset[k] += step[k][i];
      at += out_step[i];
      if (++counter[i] < plan.length[i]) {
        done = false;
        break;
      }
      for (std::size_t k = 0; k < ops; ++k) offset[k] -= step[k][i] * plan.length[i];
      at -= out_step[i] * plan.length[i];
      counter[i] = 0;
    }
    if (done) return;
  }
}

}  // namespace

void direct_run(const DirectPlan& plan, const void* const* data, const std::int64_t* const* strides,
                void* out, const std::int64_t* out_strides) {
  with_element_type(plan.dtype, [&](auto zero) {
    run_typed<decltype(zero)>(plan, data, strides, out, out_strides);
  });
}

}  // namespace einsumdb::EINSUMDB_ISA_NS
EINSUMDB_TARGET_END
