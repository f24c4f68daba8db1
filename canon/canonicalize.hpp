// The canonical form of a batched einsum (Algorithm 3 of the Feinsum paper) and its keys.
//
// canonicalize() groups interchangeable batch rows into twin classes (rows that read the same
// shared arrays at the same positions and private arrays in the same pattern), builds the
// induced graph of one row per class (induced_graph.hpp; the compact layout, with each class's
// multiplicity and each array's shared/private flag as colors), labels it canonically with
// nauty, and reads the batched einsum off the labeling: batch rows (each class expanded in
// place) and operand positions in the order of their nodes' canonical labels, then indices named
// a, b, c, ... (then A, B, ...) and arrays A0, A1, ... by first appearance (output first, then
// operands; rows in order), and symbolic lengths N0, N1, ... by the first index that has them.
// The text so read describes the einsum completely, so equal keys mean isomorphic einsums; and
// isomorphic einsums have isomorphic graphs, so they get equal keys (Sec. 5 and 6 of the paper).
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

#include "einsumdb/canon/induced_graph.hpp"
#include "einsumdb/canon/model.hpp"

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

// The other direction: input names and positions -> canonical ones, so that
// apply(invert(c.sigma), input) == c.form.
Substitution invert(const Substitution& sigma);

// Rewrites an einsum in canonical names into the input's names and order. apply(c.sigma,
// c.form) == input for every c = canonicalize(input).
BatchedEinsum apply(const Substitution& sigma, const BatchedEinsum& canonical);

struct Canonical {
  BatchedEinsum form;                     // the canonical batched einsum
  std::string key;                        // canonical_text(form)
  std::string hash;                       // hash_text(key)
  std::string structure_key;              // the key text, without shapes, of the structure labeling
  std::string structure_hash;             // hash_text(structure_key)
  std::vector<Length> structure_lengths;  // length of each structure-canonical index a, b, ...
  Substitution sigma;                     // canonical -> input
  // Structure-canonical names -> the input's (index and array maps only; empty when
  // CanonOptions::structure is false). Two workloads with one structure hash correspond index
  // for index and array for array through their structure names.
  Substitution structure_sigma;

  // What was labeled: the graph of the canonical key (after twin-row reduction).
  struct Stats {
    int nodes = 0;
    std::size_t edges = 0;
    std::size_t row_classes = 0;
  } stats;
};

// The labeling method that defines the keys stored in databases. Changing it changes every key.
inline constexpr Labeling kKeyLabeling = Labeling::nauty_sparse;

struct CanonOptions {
  Labeling labeling = kKeyLabeling;  // others give other (equally canonical) keys; for benchmarks
  // Also compute the structure key (a second nauty call). A query needs it only when its exact
  // workload is unknown: top_k_for() computes it then for a Canonical made without it.
  bool structure = true;
  // Canonicalize interchangeable (twin) batch rows once; the keys are the same either way.
  bool twin_rows = true;
};

// Canonicalizes a validated batched einsum (validate() is called; throws SpecError). Returns a
// value the caller owns. Thread-safe: nauty keeps its workspace per thread (Debian builds it with
// thread-local storage) and this module has no shared mutable state, so any number of threads
// may canonicalize at once.
Canonical canonicalize(const BatchedEinsum& e, const CanonOptions& options = {});

// Adds the structure fields to a Canonical made with {.structure = false}, by labeling its
// canonical form (one nauty call, as canonicalize() would have made); nothing when it has them.
// The structure key and hash are those canonicalize() gives.
void add_structure(Canonical& c, const CanonOptions& options = {});

// The key text of a canonical form: "ab,ac->a;mul,sum;A0,A1|A0,A2;A0:f64[72,18],A1:f64[18],
// A2:f64[N0]" — pattern; ops; batch rows separated by '|'; arrays in canonical order A0, A1, ...
// with dtype and shape. The structure key is the same text, from the structure labeling, without
// the shapes. Requires a canonical form (arrays A0.., symbols N0..): canonical_text(c.form) ==
// c.key.
std::string canonical_text(const BatchedEinsum& canonical_form);
// XXH3-128 of the text, 32 lowercase hex digits (big-endian canonical representation).
std::string hash_text(std::string_view text);

// {"key", "hash", "structure_key", "structure_hash", "canonical", "sigma": {"index", "array",
// "operand", "row", "symbol"}}
nlohmann::ordered_json to_json(const Canonical& c);
// Its "sigma": canonical names -> the input's, {"index", "array", "operand", "row", "symbol"}.
nlohmann::ordered_json sigma_json(const Substitution& sigma);

// The canonical index name of the k-th index: a..z, then A..Z.
char canonical_index_name(std::size_t k);

}  // namespace einsumdb
