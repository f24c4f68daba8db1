// Test support: a small graph with shared shapes and a three-operand node, planned by any method.
#pragma once

#include "einsumdb/planner/eindecomp.hpp"
#include "einsumdb/planner/eingraph.hpp"

namespace einsumdb::testing {

// (A×B) + (C×D×E): two products, one of them a contraction tree of three operands.
inline const char* kSmallChain = R"({"inputs": {"A": {"shape": [64, 48]}, "B": {"shape": [48, 40]},
  "C": {"shape": [64, 8]}, "D": {"shape": [8, 160]}, "E": {"shape": [160, 40]}},
  "nodes": [{"name": "AB", "einsum": "ij,jk->ik", "inputs": ["A", "B"]},
            {"name": "CDE", "einsum": "ij,jk,kl->il", "inputs": ["C", "D", "E"]},
            {"name": "Z", "einsum": "ij,ij->ij", "inputs": ["AB", "CDE"], "join": "add"}]})";

inline Plan plan_of(const EinGraph& g, std::int64_t procs, PlanMethod m = PlanMethod::eindecomp) {
  PlanOptions o;
  o.procs = procs;
  o.method = m;
  return make_plan(expand(g), o);
}

}  // namespace einsumdb::testing
