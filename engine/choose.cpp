#include "einsumdb/engine/choose.hpp"

#include "einsumdb/canon/canonicalize.hpp"
#include "einsumdb/db/retrieve.hpp"

namespace einsumdb {

Choice choose_transform(Store* store, const BatchedEinsum& e, const std::string& machine,
                        const ChooseOptions& options) {
  Choice c;
  if (store) {
    if (const auto answer =
            best_for(*store, canonicalize(e, kQueryCanon), machine, options.nearest)) {
      c.candidate = {answer->fact.transform.name, answer->params};
      c.source = answer->match == Match::nearest    ? "best known for a nearby size"
                 : answer->match == Match::symbolic ? "best known for its symbolic form"
                                                    : "best known";
      c.stored = true;
      c.distance = answer->distance;
    } else {
      c.reason = "nothing is known for this workload on this machine";
    }
  } else {
    c.reason = "no database";
  }
  if (!c.stored) {
    c.candidate = default_candidate(e);
    c.source = "default";
  }
  if (options.threads > 0) c.candidate.params["threads"] = options.threads;
  return c;
}

}  // namespace einsumdb
