#include "einsumdb/executor/direct.hpp"

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>

#include "einsumdb/core/error.hpp"
#include "einsumdb/executor/execute.hpp"
#include "einsumdb/executor/scalar_ops.hpp"
#include "einsumdb/executor/tensor.hpp"
#include "einsumdb/executor/variants.hpp"

namespace einsumdb {
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
  plan_.dtype = e.arrays.at(e.batch[0][0]).dtype;
  plan_.join = e.join;
  plan_.agg = e.agg;
  plan_.operands = e.inputs.size();
  // The output's indices first, in its order, then the summed ones.
  std::string order = e.output;
  for (const auto& in : e.inputs)
    for (char c : in)
      if (order.find(c) == std::string::npos) order += c;
  plan_.indices = order.size();
  plan_.kept = e.output.size();
  const auto lengths = e.index_lengths();
  for (std::size_t i = 0; i < plan_.indices; ++i) plan_.length[i] = lengths.at(order[i]).value;
  for (std::size_t k = 0; k < plan_.operands; ++k) {
    plan_.rank[k] = e.inputs[k].size();
    for (std::size_t a = 0; a < plan_.rank[k]; ++a)
      plan_.axis_index[k][a] = static_cast<std::uint8_t>(order.find(e.inputs[k][a]));
  }
  for (std::size_t a = 0; a < plan_.kept; ++a) {
    plan_.out_index[a] = static_cast<std::uint8_t>(a);
    shape_.push_back(plan_.length[a]);
  }
}

void DirectLoops::run(const void* const* data, const std::int64_t* const* strides, void* out,
                      const std::int64_t* out_strides) const {
  direct_run(plan_, data, strides, out, out_strides);
}

}  // namespace einsumdb
