// The model of a batched einsum (Sec. 2 and 4 of the Feinsum paper, with the EinSum operators).
//
// A BatchedEinsum is b einsums that share one index pattern `I1,...,In->Iout` and differ only in
// the arrays they read: row i reads arrays batch[i][0..n-1]. Every array has one shape and one
// dtype. An axis length is either a positive integer or a symbol such as "Ne" that stands for a
// length known only at run time (equal symbols are equal lengths). The join ⊗ combines the
// operands of one term (mul by default) and the aggregation ⊕ reduces over the indices that are
// not in the output (sum by default).
//
// All types here are plain values: copyable, comparable, printable. `validate` checks every
// soundness condition and throws SpecError naming the array, axis or index at fault.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace einsumdb {

enum class Dtype : std::uint8_t { i8, i32, i64, f16, f32, f64, c64, c128 };

std::string_view to_string(Dtype d);
std::optional<Dtype> parse_dtype(std::string_view s);  // "f64", also "float64" and friends
int dtype_rank(Dtype d);                               // the DtypeRank of the paper's appendix
std::size_t dtype_bytes(Dtype d);
// The dtype two operands compute in, numpy's promotion among f32, f64, c64 and c128 (f64 with
// c64 is c128); for the other dtypes, the one of higher rank.
Dtype promote_dtypes(Dtype a, Dtype b);
const std::vector<Dtype>& all_dtypes();

// ⊗: how the operands of one term are combined.
enum class JoinOp : std::uint8_t { mul, add, sub, sqdiff, absdiff, max, min };
// ⊕: how terms are reduced over the indices absent from the output.
enum class AggOp : std::uint8_t { sum, max, min };

std::string_view to_string(JoinOp op);
std::string_view to_string(AggOp op);
std::optional<JoinOp> parse_join(std::string_view s);
std::optional<AggOp> parse_agg(std::string_view s);
// Whether the operands of a join may be permuted (all but `sub`).
bool is_commutative(JoinOp op);

// One axis length: a positive integer, or a symbol when `symbol` is non-empty.
struct Length {
  std::int64_t value = 0;
  std::string symbol;

  static Length of(std::int64_t v) { return Length{v, {}}; }
  static Length named(std::string s) { return Length{0, std::move(s)}; }
  bool symbolic() const { return !symbol.empty(); }
  auto operator<=>(const Length&) const = default;
};
std::string to_string(const Length& l);

struct ArrayInfo {
  std::vector<Length> shape;
  Dtype dtype = Dtype::f64;
  bool operator==(const ArrayInfo&) const = default;
};

struct BatchedEinsum {
  std::vector<std::string> inputs;              // index list of each operand; one char per index
  std::string output;                           // index list of the output
  std::vector<std::vector<std::string>> batch;  // b rows of n array names
  std::map<std::string, ArrayInfo> arrays;      // every array used in `batch`
  JoinOp join = JoinOp::mul;
  AggOp agg = AggOp::sum;

  std::size_t num_operands() const { return inputs.size(); }
  std::size_t num_rows() const { return batch.size(); }
  // "ij,j->i"
  std::string einsum_string() const;
  // The length of every index, from the first operand that uses it. Requires a valid einsum.
  std::map<char, Length> index_lengths() const;

  bool operator==(const BatchedEinsum&) const = default;
};

// An einsum of one batch row: operand k has the indices inputs[k] and reads the array
// operands[k] (a name and its shape and dtype; a name given twice is one array, the first
// description kept). Not validated.
BatchedEinsum one_row_einsum(const std::vector<std::string>& inputs, const std::string& output,
                             const std::vector<std::pair<std::string, ArrayInfo>>& operands,
                             JoinOp join = JoinOp::mul, AggOp agg = AggOp::sum);

// Lengths for symbols: symbol -> length (the lengths a symbolic workload was run or timed at).
using Binding = std::map<std::string, std::int64_t>;

// The symbols among the array lengths of `e`, sorted.
std::vector<std::string> symbols(const BatchedEinsum& e);

// `e` with every symbol that `b` names replaced by its length (others stay symbolic). Throws
// SpecError for a symbol that `e` does not have (listing the ones it has) or a length below 1.
BatchedEinsum bind_symbols(const BatchedEinsum& e, const Binding& b);

// Checks every soundness condition of Sec. 2.2 and 4 of the paper; throws SpecError. Lengths
// may be 0 (numpy's empty axes: an empty result, or sums of nothing).
void validate(const BatchedEinsum& e);

// numpy's broadcasting of size-1 axes: an operand axis of length 1 whose index has another length
// in the row is dropped, from the operand's indices and from its array's shape. The array's one
// value along it is repeated along the index, which is what the einsum without that axis says,
// so "ij,ij->j" over (10,2) and (1,2) becomes "ij,j->j" over (10,2) and (2): one key for both
// spellings, a different one from two (10,2) arrays. Returns the original axes each array lost.
// Throws SpecError when the rows of a batch broadcast differently, or an array broadcasts in one
// use and not in another.
std::map<std::string, std::vector<std::size_t>> drop_broadcast_axes(BatchedEinsum& e);

// The spec JSON of docs/workloads.md: {"einsum", "batch", "shapes", "dtypes", "ops"}. Keys in a
// fixed order; a symbolic length is written as a string.
nlohmann::ordered_json to_json(const BatchedEinsum& e);

// Whether c may name an index (a-z, A-Z).
inline bool is_index_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

}  // namespace einsumdb
