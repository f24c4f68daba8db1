#include "canon/metrics.hpp"

#include <algorithm>

namespace einsumdb {

std::optional<double> flop_count(const BatchedEinsum& e) {
  double points = 1.0;
  for (const auto& [index, len] : e.index_lengths()) {
    if (len.symbolic()) return std::nullopt;
    points *= static_cast<double>(len.value);
  }
  const double per_point = static_cast<double>(std::max<std::size_t>(1, e.inputs.size()));
  return static_cast<double>(e.batch.size()) * points * per_point;
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

}  // namespace einsumdb
