// Test support: the workloads the executor's tests share.
#pragma once

#include <map>
#include <string>
#include <utility>

#include "einsumdb/canon/metrics.hpp"
#include "einsumdb/canon/model.hpp"
#include "einsumdb/canon/parse.hpp"

namespace einsumdb::testing {

// A two-operand einsum "x,y->z" with arrays A and B of these lengths per index.
inline BatchedEinsum binary_spec(const std::string& spec, const std::map<char, int>& n,
                                 Dtype dtype = Dtype::f64) {
  SpecFlags f;
  f.dtypes = {std::string(to_string(dtype))};
  const std::string x = spec.substr(0, spec.find(',')),
                    y = spec.substr(spec.find(',') + 1, spec.find('-') - spec.find(',') - 1);
  for (const auto& [name, labels] : {std::pair{"A", x}, std::pair{"B", y}}) {
    std::string shape = std::string(name) + "=";
    for (std::size_t k = 0; k < labels.size(); ++k)
      shape += (k ? "x" : "") + std::to_string(n.at(labels[k]));
    f.shapes.push_back(shape);
  }
  return read_spec_argument(spec, f);
}

// The terms a result's elements sum, as the tolerance counts them.
inline double terms_of(const BatchedEinsum& e, const std::map<char, std::int64_t>& lengths) {
  return reduction_terms(e, lengths);
}

}  // namespace einsumdb::testing
