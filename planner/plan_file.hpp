// Reading a plan file back (the JSON `einsumdb plan --output` writes) against the graph it is
// meant to run, so that a plan that does not fit the graph or the job is refused before any
// work starts, with a message naming what does not match.
#pragma once

#include <cstdint>
#include <optional>

#include <nlohmann/json.hpp>

#include "einsumdb/planner/eindecomp.hpp"
#include "einsumdb/planner/eingraph.hpp"
#include "einsumdb/planner/placement.hpp"

namespace einsumdb {

struct PlanFile {
  Plan plan;            // steps re-expanded from the graph with the file's trees; costs recomputed
  Placement placement;  // the file's "placement", or place(plan) when it has none
  bool placement_given = false;
};

// Throws SpecError naming the mismatch: not a plan file, another number of ranks than `procs`
// (when given), inputs with other shapes or dtypes, steps that compute something else than the
// graph's nodes, partition vectors that do not cut a step into exactly P pieces, a placement
// that does not fit.
PlanFile read_plan(const nlohmann::json& j, const EinGraph& g,
                   std::optional<std::int64_t> procs = std::nullopt);

// A plan file: to_json(plan) with the placement.
nlohmann::ordered_json plan_file_json(const Plan& plan, const Placement& placement);

}  // namespace einsumdb
