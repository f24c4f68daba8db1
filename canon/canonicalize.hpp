// The canonical form of a batched einsum (Algorithm 3 of the Feinsum paper) and its keys.
//
// canonicalize() builds the induced graph, labels it canonically with nauty and rebuilds the
// batched einsum in canonical order: batch rows and operand positions in the order of their
// nodes' canonical labels, then indices named a, b, c, ... (then A, B, ...) and arrays A0, A1,
// ... by first appearance (output first, then operands; rows in order), and symbolic lengths
// N0, N1, ... by the first index that has them. Two batched einsums are isomorphic (Sec. 5)
// exactly when their keys are equal.
//
// The key is the canonical form printed as one line of text; the hash is XXH3-128 of that text
// as 32 lowercase hex digits, identical on every platform and run. The structure key and hash
// come from the same procedure on the graph without axis lengths, so every size of one
// contraction shares them. The σ maps go from canonical names and positions to the input's.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "canon/induced_graph.hpp"
#include "canon/model.hpp"

namespace einsumdb {

// Canonical names and positions -> the input's (the σ maps of Algorithm 3).
struct Substitution {
  std::map<char, char> index;                 // canonical index -> input index
  std::map<std::string, std::string> array;   // canonical array -> input array
  std::vector<std::size_t> operand;           // canonical operand position -> input position
  std::vector<std::size_t> row;               // canonical batch row -> input row
  std::map<std::string, std::string> symbol;  // canonical length symbol -> input symbol

  bool operator==(const Substitution&) const = default;
};

// Rewrites an einsum in canonical names into the input's names and order. apply(c.sigma,
// c.form) == input for every c = canonicalize(input).
BatchedEinsum apply(const Substitution& sigma, const BatchedEinsum& canonical);

struct Canonical {
  BatchedEinsum form;                     // the canonical batched einsum
  std::string key;                        // canonical_text(form)
  std::string hash;                       // hash_text(key)
  std::string structure_key;              // structure_text of the structure-canonical form
  std::string structure_hash;             // hash_text(structure_key)
  std::vector<Length> structure_lengths;  // length of each structure-canonical index a, b, ...
  Substitution sigma;                     // canonical -> input
};

struct CanonOptions {
  NautyApi nauty =
      NautyApi::sparse;   // keys are defined with the sparse API; dense is for benchmarks
  bool structure = true;  // also compute the structure key (a second nauty call)
};

// Canonicalizes a validated batched einsum (validate() is called; throws SpecError).
Canonical canonicalize(const BatchedEinsum& e, const CanonOptions& options = {});

// "ab,ac->a;mul,sum;A0,A1|A0,A2;A0:f64[72,18],A1:f64[18],A2:f64[N0]": pattern; ops; batch rows
// separated by '|'; arrays in canonical order with dtype and shape.
std::string canonical_text(const BatchedEinsum& canonical_form);
// The same without the shapes (dtypes only).
std::string structure_text(const BatchedEinsum& canonical_form);
// XXH3-128 of the text, 32 lowercase hex digits (big-endian canonical representation).
std::string hash_text(std::string_view text);

// {"key", "hash", "structure_key", "structure_hash", "canonical", "sigma": {"index", "array",
// "operand", "row", "symbol"}}
nlohmann::ordered_json to_json(const Canonical& c);

// The canonical index name of the k-th index: a..z, then A..Z.
char canonical_index_name(std::size_t k);

}  // namespace einsumdb
