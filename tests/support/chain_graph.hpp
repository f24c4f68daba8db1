// Test support: the chain AB + C(DE) as graph JSON, the planner's and the runtime's usual example.
#pragma once

#include <cstdint>
#include <string>

namespace einsumdb::testing {

// A[i×j] B[j×k] + C[i×l] (D[l×m] E[m×k]): two products, one of them of a product, added.
inline std::string chain_graph(std::int64_t i, std::int64_t j, std::int64_t k, std::int64_t l,
                               std::int64_t m) {
  const auto shape = [](std::int64_t a, std::int64_t b) {
    return "{\"shape\": [" + std::to_string(a) + ", " + std::to_string(b) + "]}";
  };
  return "{\"inputs\": {\"A\": " + shape(i, j) + ", \"B\": " + shape(j, k) +
         ", \"C\": " + shape(i, l) + ", \"D\": " + shape(l, m) + ", \"E\": " + shape(m, k) + R"(},
 "nodes": [{"name": "AB", "einsum": "ij,jk->ik", "inputs": ["A", "B"]},
           {"name": "DE", "einsum": "ij,jk->ik", "inputs": ["D", "E"]},
           {"name": "CDE", "einsum": "ij,jk->ik", "inputs": ["C", "DE"]},
           {"name": "Z", "einsum": "ij,ij->ij", "inputs": ["AB", "CDE"], "join": "add"}]})";
}

}  // namespace einsumdb::testing
