// Retrieval in the user's own names. best_for() canonicalizes the user's spec, looks up the
// canonical key on a machine, and returns the fastest verified transform with its parameters
// renamed into the spec's index and array names through σ. When the exact workload was never
// measured, it falls back to the nearest measured workload of the same structure (all axis
// lengths abstracted) and says so: approximate = true, with the log-ratio distance.
#pragma once

#include <optional>
#include <vector>

#include "einsumdb/canon/canonicalize.hpp"
#include "einsumdb/db/store.hpp"

namespace einsumdb {

struct Answer {
  Fact fact;                 // as stored, in the canonical names of the measured workload
  nlohmann::json params;     // the transform's parameters in the user's names
  bool approximate = false;  // measured on another size of the same structure
  double distance = 0;       // log-ratio distance of the axis lengths when approximate
  std::string query_hash;    // the user's workload
  std::string query_key;
};

// Up to k answers, fastest first; exact facts only unless none exist and `nearest` is set.
std::vector<Answer> top_k_for(Store& store, const Canonical& query, const std::string& machine,
                              std::size_t k, bool nearest = true);
std::optional<Answer> best_for(Store& store, const Canonical& query, const std::string& machine,
                               bool nearest = true);

// A measurement with parameters in the spec's names, rewritten into canonical names.
Measurement to_canonical(const Canonical& c, Measurement m);

nlohmann::ordered_json to_json(const Answer& a);

}  // namespace einsumdb
