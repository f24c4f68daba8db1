#include "einsumdb/planner/eindecomp_cost.hpp"

#include <algorithm>

#include "einsumdb/core/error.hpp"

namespace einsumdb {
namespace {

double elements(const std::string& labels, const PartitionVector& d,
                const std::map<char, std::int64_t>& bounds) {
  double n = 1;
  for (char l : labels) n *= static_cast<double>(bounds.at(l)) / static_cast<double>(d.at(l));
  return n;
}

bool is_power_of_two(std::int64_t v) {
  return v > 0 && (v & (v - 1)) == 0;
}

}  // namespace

std::string join_labels(const std::string& x, const std::string& y) {
  std::string out;
  for (char c : x + y)
    if (out.find(c) == std::string::npos) out += c;
  return out;
}

std::vector<PartitionVector> partition_vectors(const std::string& labels,
                                               const std::map<char, std::int64_t>& bounds,
                                               std::int64_t procs) {
  if (!is_power_of_two(procs))
    throw SpecError("the number of processes must be a power of two, got " + std::to_string(procs));
  std::vector<PartitionVector> out;
  PartitionVector d;
  for (char l : labels) d[l] = 1;
  // Place log2(procs) doublings into the labels, each label's count non-decreasing in label
  // order (balls into buckets), keeping every part at least one element wide.
  auto place = [&](auto&& self, std::size_t from, std::int64_t left) -> void {
    if (left == 1) {
      out.push_back(d);
      return;
    }
    for (std::size_t k = from; k < labels.size(); ++k) {
      const char l = labels[k];
      if (d[l] * 2 > bounds.at(l)) continue;
      d[l] *= 2;
      self(self, k, left / 2);
      d[l] /= 2;
    }
  };
  place(place, 0, procs);
  return out;
}

double join_cost(const std::string& x, const std::string& y, const PartitionVector& d,
                 const std::map<char, std::int64_t>& bounds, std::int64_t procs) {
  const double ny = y.empty() ? 0.0 : elements(y, d, bounds);
  return static_cast<double>(procs) * (elements(x, d, bounds) + ny);
}

double aggregation_cost(const std::string& x, const std::string& y, const std::string& z,
                        const PartitionVector& d, const std::map<char, std::int64_t>& bounds,
                        std::int64_t procs) {
  double n_agg = 1;
  for (char l : join_labels(x, y))
    if (z.find(l) == std::string::npos) n_agg *= static_cast<double>(d.at(l));
  return static_cast<double>(procs) / n_agg * (n_agg - 1) * elements(z, d, bounds);
}

double repartition_cost(const std::vector<std::int64_t>& b, const std::vector<std::int64_t>& dz,
                        const std::vector<std::int64_t>& dx) {
  EINSUMDB_ASSERT(b.size() == dz.size() && b.size() == dx.size(), "one part count per axis");
  if (dz == dx) return 0;
  double np = 1, nc = 1, nint = 1, n = 1;
  for (std::size_t a = 0; a < b.size(); ++a) {
    const double p = static_cast<double>(b[a]) / static_cast<double>(dz[a]);
    const double c = static_cast<double>(b[a]) / static_cast<double>(dx[a]);
    np *= p;
    nc *= c;
    nint *= std::min(p, c);
    n *= static_cast<double>(b[a]);
  }
  double cost = (nc / nint - 1) * (n / nc) * (nc + np);
  if (np != nint) cost += np * n / nc;
  return cost;
}

}  // namespace einsumdb
