// Readers for the spec formats of docs/workloads.md: the einsum string (numpy style) completed by
// command-line flags, and the spec JSON. Every reader validates what it builds and throws
// SpecError with a message that names the column, key, array or axis at fault.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "einsumdb/canon/model.hpp"

namespace einsumdb {

// "ij,j->i". Without "->" the output follows numpy's implicit rule: the indices that appear
// exactly once, in ASCII order. Spaces are ignored. "..." stands for the axes an operand has
// beyond its letters (numpy's broadcasting ellipsis); such a pattern is completed by
// expand_ellipsis once the operands' ranks are known. Throws SpecError naming the column.
struct EinsumPattern {
  std::vector<std::string> inputs;  // letters only: where "..." stood is in `ellipsis`
  std::string output;
  std::vector<int> ellipsis;    // per input: the position of "..." among its letters, or -1
  int output_ellipsis = -1;     // the same for the output
  bool explicit_output = true;  // "->" was given (else the output is numpy's implicit one)

  bool has_ellipsis() const;
};
EinsumPattern parse_einsum_pattern(std::string_view text);

// `p` with every "..." replaced by letters for the axes of operand k beyond its letters
// (ranks[k] of them in all), as numpy reads it: the ellipses' axes align at their right ends and
// broadcast against each other; each takes a letter no operand uses, in the order A-Z, a-z; the
// output's "..." (or, with an implicit output, its start) holds them all. Throws SpecError (naming
// `text`, the subscripts) for an operand with more axes than letters and no "...", fewer axes
// than letters, or an explicit output without "..." where the ellipses hold axes.
EinsumPattern expand_ellipsis(const EinsumPattern& p, const std::vector<std::size_t>& ranks,
                              std::string_view text);

// The spec JSON: {"einsum": "ij,j->i", "batch": [["A","B"],["A","C"]],
//   "shapes": {"A": [96, 4], "B": [4], "C": ["Ne"]}, "dtypes": {"A": "f64", ...} | "dtype": "f64",
//   "ops": {"join": "mul", "agg": "sum"}}. "dtype" is the default of every array not in "dtypes"
// (f64 when neither is given); "ops" is optional. Unknown keys are errors.
BatchedEinsum parse_spec_json(const nlohmann::json& j);
// The same from text; JSON syntax errors name the line and column.
BatchedEinsum parse_spec_text(std::string_view json_text);

// The flags that complete an einsum string on the command line.
struct SpecFlags {
  std::string batch;                // "A,B;A,C": rows separated by ';', arrays by ','.
                                    // Empty: one row whose arrays are named A, B, C, ...
  std::vector<std::string> shapes;  // "A=96x4", "C=Nex4" (symbolic), "S=" (a scalar)
  std::vector<std::string> dtypes;  // "f64" for every array, or "A=f32" for one
  std::string join;                 // ⊗; empty means mul
  std::string agg;                  // ⊕; empty means sum

  bool empty() const {
    return batch.empty() && shapes.empty() && dtypes.empty() && join.empty() && agg.empty();
  }
};
BatchedEinsum parse_spec_flags(std::string_view einsum, const SpecFlags& flags);

// JSON read from users may nest arbitrarily deep; nlohmann parses that without recursion, but
// copying, printing and walking it recurse. Every JSON input is checked with this first.
inline constexpr std::size_t kMaxJsonDepth = 64;
// Throws SpecError ("<what>: nested deeper than 64 levels") without recursing.
void check_json_depth(const nlohmann::json& j, std::string_view what,
                      std::size_t max_depth = kMaxJsonDepth);

// A SPEC argument as every subcommand reads it: text starting with '{' is spec JSON, "@path"
// reads spec JSON from a file, anything else is an einsum string completed by `flags`.
// Flags given together with a JSON spec are an error.
BatchedEinsum read_spec_argument(std::string_view arg, const SpecFlags& flags);

// The JSON of a SPEC argument that is spec JSON or @FILE (parsed, not yet validated), with
// `where` ("FILE: " or empty) to put before errors about it; nullopt for an einsum string.
// Throws SpecError for flags given with JSON, an unreadable file, or invalid JSON.
struct SpecJson {
  nlohmann::json json;
  std::string where;
};
std::optional<SpecJson> read_spec_json_argument(std::string_view arg, const SpecFlags& flags);

}  // namespace einsumdb
