// Retrieval in the user's own names. best_for() canonicalizes the user's spec, looks up the
// canonical key on a machine, and returns the fastest verified transform with its parameters
// renamed into the spec's index and array names through σ.
//
// What answers a query, in this order (Answer::match says which):
//   exact     facts of the workload itself;
//   symbolic  for a concrete workload, facts of a symbolic workload that becomes exactly this
//             one when its symbols are bound to some lengths (Feinsum's "one fact serves every
//             mesh"): any axis may stand for a symbol, and an axis of the stored workload with a
//             number must have that number. The match is verified by canonicalizing the bound
//             form and comparing keys, so the answer is never a fact of another computation;
//   nearest   the measured workload of the same structure (every axis length abstracted) whose
//             lengths are nearest in log-ratio distance — another size of this contraction,
//             said so (approximate = true) with the distance. Only when asked for (`nearest`).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "einsumdb/canon/canonicalize.hpp"
#include "einsumdb/db/store.hpp"

namespace einsumdb {

enum class Match : std::uint8_t { exact, symbolic, nearest };
std::string_view to_string(Match m);

struct Answer {
  Fact fact;              // as stored, in the canonical names of the measured workload
  nlohmann::json params;  // the transform's parameters in the user's names
  Match match = Match::exact;
  bool approximate = false;  // match == nearest: measured on another size of the structure
  double distance = 0;       // log-ratio distance of the axis lengths when approximate
  Binding binding;           // match == symbolic: the measured workload's symbols -> this size
  std::string query_hash;    // the user's workload
  std::string query_key;
};

// How a query is canonicalized: without its structure labeling (half the work), which top_k_for
// adds (add_structure) only when the workload itself has no facts.
inline constexpr CanonOptions kQueryCanon{.structure = false};

// Up to k answers, highest rate first, on any of the machines (fingerprints): exact facts, else
// those of symbolic generalisations, else (when `nearest`) the nearest size's best. The query may
// be canonicalized with kQueryCanon or whole.
std::vector<Answer> top_k_for(Store& store, const Canonical& query,
                              const std::vector<std::string>& machines, std::size_t k,
                              bool nearest = true);
std::vector<Answer> top_k_for(Store& store, const Canonical& query, const std::string& machine,
                              std::size_t k, bool nearest = true);
std::optional<Answer> best_for(Store& store, const Canonical& query, const std::string& machine,
                               bool nearest = true);
// The best answer of every query (top_k_for's first; none where it has none), in one read
// transaction (one snapshot of the store), the workloads' own facts read in batches
// (Store::top_k_many): the answers a framework asks for many shapes at once, in the order of
// `queries`.
std::vector<std::optional<Answer>> best_many(Store& store, const std::vector<Canonical>& queries,
                                             const std::vector<std::string>& machines,
                                             bool nearest = true);
std::vector<std::optional<Answer>> best_many(Store& store, const std::vector<Canonical>& queries,
                                             const std::string& machine, bool nearest = true);

// How a symbolic workload (a canonical form with symbols) becomes the concrete `query`: the
// binding of its symbols, and its canonical names -> the query's input names. nullopt when no
// binding makes it the query's computation.
struct Generalisation {
  Binding binding;
  NameMap to_query;
};
std::optional<Generalisation> generalises(const BatchedEinsum& symbolic, const Canonical& query);
// The same for a stored symbolic workload of the query's structure (Store::symbolic_workloads):
// its canonical form, its recorded structure lengths and its canonical -> structure names, which
// spare labeling it, and (for the binding its structure suggests) labeling it bound.
std::optional<Generalisation> generalises(const BatchedEinsum& symbolic_form,
                                          const std::vector<Length>& structure_lengths,
                                          const NameMap& to_structure, const Canonical& query);

// A measurement with parameters and binding in the spec's names, rewritten into canonical names.
// Throws SpecError for a binding that names a symbol the spec does not have.
Measurement to_canonical(const Canonical& c, Measurement m);

// {"transform", "params", "match", "approximate", ["distance"], ["binding"], ["measured_on"],
//  "median_s", "min_s", "gflops", "flops", "measured_at", "measurements", "repetitions",
//  "machine", "hash", "key", "canonical_params", ["origin"]}
nlohmann::ordered_json to_json(const Answer& a);

}  // namespace einsumdb
