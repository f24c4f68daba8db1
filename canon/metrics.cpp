#include "einsumdb/canon/metrics.hpp"

#include <algorithm>

#include "einsumdb/canon/contraction_path.hpp"

namespace einsumdb {

double work_flops(const BatchedEinsum& e, const std::map<char, std::int64_t>& lengths) {
  const double rows = static_cast<double>(e.batch.size());
  bool complex = false;
  for (const auto& [name, info] : e.arrays)
    complex = complex || info.dtype == Dtype::c64 || info.dtype == Dtype::c128;
  // Real operations per complex one: a multiply-add 8 against 2, an addition 2 against 1.
  const double scale = !complex ? 1.0 : e.join == JoinOp::mul ? 4.0 : 2.0;
  if (e.inputs.size() >= 3 && e.join == JoinOp::mul && e.agg == AggOp::sum)
    return contraction_path(e.inputs, e.output, lengths).flops * rows * scale;
  double points = 1.0;
  for (const auto& [index, len] : lengths) points *= static_cast<double>(len);
  const double per_point = static_cast<double>(std::max<std::size_t>(1, e.inputs.size()));
  return rows * points * per_point * scale;
}

std::optional<double> flop_count(const BatchedEinsum& e) {
  std::map<char, std::int64_t> lengths;
  for (const auto& [index, len] : e.index_lengths()) {
    if (len.symbolic()) return std::nullopt;
    lengths[index] = len.value;
  }
  return work_flops(e, lengths);
}

std::optional<double> footprint_bytes(const BatchedEinsum& e) {
  double bytes = 0.0;
  std::size_t widest = 0;
  for (const auto& [name, info] : e.arrays) {
    double elements = 1.0;
    for (const auto& len : info.shape) {
      if (len.symbolic()) return std::nullopt;
      elements *= static_cast<double>(len.value);
    }
    bytes += elements * static_cast<double>(dtype_bytes(info.dtype));
    widest = std::max(widest, dtype_bytes(info.dtype));
  }
  const auto lengths = e.index_lengths();
  double out = 1.0;
  for (char c : e.output) {
    const Length& len = lengths.at(c);
    if (len.symbolic()) return std::nullopt;
    out *= static_cast<double>(len.value);
  }
  return bytes + static_cast<double>(e.batch.size()) * out * static_cast<double>(widest);
}

double reduction_terms(const BatchedEinsum& e, const std::map<char, std::int64_t>& lengths) {
  double terms = static_cast<double>(e.inputs.size());
  for (const auto& [c, l] : lengths)
    if (e.output.find(c) == std::string::npos) terms *= static_cast<double>(l);
  return terms;
}

}  // namespace einsumdb
