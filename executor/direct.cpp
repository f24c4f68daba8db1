#include "einsumdb/executor/direct.hpp"

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>

#include "einsumdb/canon/error.hpp"
#include "einsumdb/executor/execute.hpp"
#include "einsumdb/executor/scalar_ops.hpp"
#include "einsumdb/executor/tensor.hpp"

namespace einsumdb {
namespace {

// The accumulator of an element type: double for float (as the reference), complex<double> for
// complex<float>.
template <typename T>
using Wide = std::conditional_t<is_complex_v<T>, std::complex<double>, double>;

}  // namespace

std::optional<std::string> DirectLoops::rejects(const BatchedEinsum& e) {
  if (e.batch.size() != 1)
    return "direct runs one row; this batch has " + std::to_string(e.batch.size());
  if (e.inputs.size() > kMaxOperands)
    return "direct takes at most " + std::to_string(kMaxOperands) + " operands";
  const auto lengths = e.index_lengths();
  if (lengths.size() > kMaxIndices)
    return "direct takes at most " + std::to_string(kMaxIndices) + " indices";
  double points = 1;
  for (const auto& [c, l] : lengths) {
    if (l.symbolic()) return std::string("direct needs every length known (a symbol is not)");
    points *= static_cast<double>(l.value);
  }
  if (points > static_cast<double>(kMaxPoints))
    return "direct is for at most " + std::to_string(kMaxPoints) + " iteration points; this has " +
           std::to_string(static_cast<std::int64_t>(points));
  for (const auto& rank : e.inputs)
    if (rank.size() > kMaxIndices) return std::string("an operand has too many axes for direct");
  const Dtype d = e.arrays.at(e.batch[0][0]).dtype;
  for (const auto& name : e.batch[0]) {
    if (e.arrays.at(name).dtype != d)
      return "direct computes in one dtype; the operands mix " + std::string(to_string(d)) +
             " and " + std::string(to_string(e.arrays.at(name).dtype));
  }
  if (!executable_dtype(d))
    return "direct computes in f32, f64, c64 and c128; the operands are " +
           std::string(to_string(d));
  return complex_rejects(e);
}

DirectLoops::DirectLoops(const BatchedEinsum& e) {
  if (const auto why = rejects(e)) throw SpecError(*why);
  dtype_ = e.arrays.at(e.batch[0][0]).dtype;
  join_ = e.join;
  agg_ = e.agg;
  operands_ = e.inputs.size();
  // The output's indices first, in its order, then the summed ones.
  std::string order = e.output;
  for (const auto& in : e.inputs)
    for (char c : in)
      if (order.find(c) == std::string::npos) order += c;
  indices_ = order.size();
  kept_ = e.output.size();
  const auto lengths = e.index_lengths();
  for (std::size_t i = 0; i < indices_; ++i) length_[i] = lengths.at(order[i]).value;
  for (std::size_t k = 0; k < operands_; ++k) {
    rank_[k] = e.inputs[k].size();
    for (std::size_t a = 0; a < rank_[k]; ++a)
      axis_index_[k][a] = static_cast<std::uint8_t>(order.find(e.inputs[k][a]));
  }
  for (std::size_t a = 0; a < kept_; ++a) {
    out_index_[a] = static_cast<std::uint8_t>(a);
    shape_.push_back(length_[a]);
  }
}

void DirectLoops::run(const void* const* data, const std::int64_t* const* strides, void* out,
                      const std::int64_t* out_strides) const {
  with_element_type(dtype_,
                    [&](auto zero) { run_typed<decltype(zero)>(data, strides, out, out_strides); });
}

template <typename T>
void DirectLoops::run_typed(const void* const* data, const std::int64_t* const* strides,
                            void* out_data, const std::int64_t* out_strides) const {
  using V = Wide<T>;
  const std::size_t n = indices_, ops = operands_;
  // Per operand, the stride of each index (repeats add: a diagonal); the output's likewise.
  std::array<std::array<std::int64_t, kMaxIndices>, kMaxOperands> step{};
  std::array<std::int64_t, kMaxIndices> out_step{};
  for (std::size_t k = 0; k < ops; ++k) {
    std::int64_t row_major = 1;
    for (std::size_t a = rank_[k]; a-- > 0;) {
      const std::int64_t s = strides && strides[k] ? strides[k][a] : row_major;
      step[k][axis_index_[k][a]] += s;
      row_major *= length_[axis_index_[k][a]];
    }
  }
  std::int64_t row_major = 1;
  for (std::size_t a = kept_; a-- > 0;) {
    out_step[out_index_[a]] = out_strides ? out_strides[a] : row_major;
    row_major *= length_[out_index_[a]];
  }
  std::array<const T*, kMaxOperands> in{};
  for (std::size_t k = 0; k < ops; ++k) in[k] = static_cast<const T*>(data[k]);
  T* out = static_cast<T*>(out_data);
  for (std::size_t i = 0; i < n; ++i)
    if (length_[i] == 0) {  // nothing to compute: an empty result, or sums of nothing
      if (i >= kept_ && row_major > 0) {
        std::array<std::int64_t, kMaxIndices> c{};
        std::int64_t at = 0;
        for (std::int64_t p = 0; p < row_major; ++p) {
          out[at] = T(V(kernels::identity(agg_)));
          for (std::size_t a = kept_; a-- > 0;) {
            at += out_step[a];
            if (++c[a] < length_[a]) break;
            at -= out_step[a] * length_[a];
            c[a] = 0;
          }
        }
      }
      return;
    }
  const bool product = join_ == JoinOp::mul && agg_ == AggOp::sum;
  // The innermost summed index runs as a tight loop; the others by an odometer.
  const bool summed = n > kept_;
  const std::size_t inner = summed ? n - 1 : n;  // indices the odometers cover
  const std::int64_t inner_len = summed ? length_[n - 1] : 1;
  std::array<std::int64_t, kMaxOperands> inner_step{};
  for (std::size_t k = 0; k < ops; ++k) inner_step[k] = summed ? step[k][n - 1] : 0;
  std::array<std::int64_t, kMaxIndices> counter{};
  std::array<std::int64_t, kMaxOperands> offset{};
  std::int64_t at = 0;
  for (;;) {
    // One output element: every point of the summed indices.
    V acc = V(kernels::identity(agg_));
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
            v = product ? v * x : kernels::join(join_, v, x);
          }
          acc = kernels::combine(agg_, acc, v);
        }
      }
      more = false;
      for (std::size_t i = inner; i-- > kept_;) {
        for (std::size_t k = 0; k < ops; ++k) o[k] += step[k][i];
        if (++counter[i] < length_[i]) {
          more = true;
          break;
        }
        for (std::size_t k = 0; k < ops; ++k) o[k] -= step[k][i] * length_[i];
        counter[i] = 0;
      }
    }
    out[at] = T(acc);
    // The next output element, or the end.
    bool done = true;
    for (std::size_t i = kept_; i-- > 0;) {
      for (std::size_t k = 0; k < ops; ++k) offset[k] += step[k][i];
      at += out_step[i];
      if (++counter[i] < length_[i]) {
        done = false;
        break;
      }
      for (std::size_t k = 0; k < ops; ++k) offset[k] -= step[k][i] * length_[i];
      at -= out_step[i] * length_[i];
      counter[i] = 0;
    }
    if (done) return;
  }
}

}  // namespace einsumdb
