// A transform: a strategy name plus parameters. In parameter JSON a value that names an index
// is written {"index": "i"} and one that names an array {"array": "A"}, at any depth; every other
// value is a literal. The store keeps parameters in canonical names; translate() renames them
// through a σ map in either direction, so a transform measured on `ik,kj->ij` applies to
// `qp,rq->pr`.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "einsumdb/canon/canonicalize.hpp"

namespace einsumdb {

struct Transform {
  std::string name;
  nlohmann::json params = nlohmann::json::object();

  bool operator==(const Transform&) const = default;
  // The parameters as stored: compact JSON with sorted keys (deterministic).
  std::string params_text() const { return params.dump(); }
};

struct NameMap {
  std::map<std::string, std::string> index;
  std::map<std::string, std::string> array;
};

// Canonical -> input names (σ), and input -> canonical names (σ⁻¹).
NameMap to_input_names(const Substitution& sigma);
NameMap to_canonical_names(const Substitution& sigma);

// Renames every {"index": x} and {"array": x} in `params`. Throws SpecError naming a name that
// the map does not know (a parameter that refers to something the workload does not have).
nlohmann::json translate(const nlohmann::json& params, const NameMap& names);
// translate(params, to_input_names(sigma)) without building the map (what a lookup does).
nlohmann::json to_input_names(const nlohmann::json& params, const Substitution& sigma);

}  // namespace einsumdb
