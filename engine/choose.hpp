// "The best known transform, else the default": the one rule by which `einsumdb run`, the
// kernels of a distributed graph run, the library's Engine and the Python module pick what to
// execute for a workload on this machine.
#pragma once

#include <string>

#include "einsumdb/canon/model.hpp"
#include "einsumdb/db/store.hpp"
#include "einsumdb/executor/dispatch.hpp"

namespace einsumdb {

struct Choice {
  Candidate candidate;  // parameters in the workload's own names
  // "best known", "best known for a nearby size" or "default".
  std::string source;
  // Why the default was chosen ("no database at PATH", "nothing known for this workload on
  // this machine"); empty when the store answered.
  std::string reason;
  bool stored = false;  // the candidate came from the store (may be refused; see dispatch.hpp)
  double distance = 0;  // log-ratio distance of the measured size, for a nearby size

  bool operator==(const Choice&) const = default;
};

struct ChooseOptions {
  bool nearest = true;  // answer from the nearest measured size of the same structure
  int threads = 0;      // > 0: run the candidate with this many threads instead of its own
};

// The fastest verified transform of `e` on `machine` (a fingerprint) in `store` (null: no store),
// translated into e's names; the default (default_candidate) when nothing is known. Throws what
// canonicalization throws for an unsound einsum. Not thread-safe in `store` (a Store is not).
Choice choose_transform(Store* store, const BatchedEinsum& e, const std::string& machine,
                        const ChooseOptions& options = {});

}  // namespace einsumdb
