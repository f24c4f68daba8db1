// Executing one batched einsum on one process. Strategies are named kernels with parameters;
// each can say that it does not apply to a workload, and why.
//   reference        — a plain loop nest over every index, in double precision: the oracle;
//   loop_nest        — a chosen loop order with up to two blocked indices and a vectorized
//                      innermost loop, for every ⊗/⊕;
//   ttgt             — transpose operands into GEMM layout, OpenBLAS ?gemm per batch point,
//                      transpose back; the parameters choose the order of M, N and K;
//   loop_over_gemm   — GEMM on strided sub-matrices in place, looping over the other indices;
//   tensor_gemm      — one GEMM over the tensors as they lie: its packing gathers tensor indices
//                      and BLIS's micro-kernel computes the tiles (no transposition pass);
//   batch_fused      — rows that share operands become one einsum over a stacked operand (b
//                      matrix-vector products become one matrix-matrix product), run by an
//                      inner strategy or as a tiled contraction tree;
//   contraction_tree — 3+ operands contracted pairwise in a chosen order, optionally tile by
//                      tile along an output index.
// Every strategy takes "threads" (1 by default): its own threads, or OpenBLAS's when it makes one
// GEMM call at a time, never both (no nested oversubscription).
//
// Every strategy computes f32, f64, c64 and c128 (complex numbers under mul, add or sub and sum;
// tensor_gemm and loop_nest in real form, real_form.hpp). A row whose operands differ in dtype is
// computed in numpy's promoted dtype: the reference reads it as it is, every other strategy gets
// its operands converted first (strategies.cpp), but for tensor_gemm, loop_nest and ttgt a real
// operand times a complex one, which they read as it lies where its layout suits them (real form,
// real_factor, real_form.hpp). Each strategy's entry says which it does (Strategy::mixes_dtypes,
// Strategy::reads_real_factor).
//
// Parameters name indices as {"index": "i"} (see db/transform.hpp); at execution they are in the
// einsum's own names. Functional operands (executor/expression.hpp) are evaluated in the pass
// that reads their array; in a complex row, a function of a real array is evaluated in real
// numbers and its values promoted, and a function of a complex array is evaluated in complex
// arithmetic once, before a strategy runs, its values a complex array (strategies.cpp).
#pragma once

#include <array>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "einsumdb/canon/model.hpp"
#include "einsumdb/executor/expression.hpp"
#include "einsumdb/executor/tensor.hpp"

namespace einsumdb {

using Arrays = std::map<std::string, Tensor>;

// The length of every index, read from the arrays bound to the einsum (so symbolic lengths get
// their run-time values). A name in `functions` is bound to the array its expression reads.
// Throws SpecError naming the array and axis that disagree with the spec or with another array,
// a missing array, or a dtype the executor cannot compute in.
std::map<char, std::int64_t> bind_lengths(const BatchedEinsum& e, const Arrays& arrays,
                                          const Functions& functions = {});

// The dtype of a row's result: its operands' dtypes promoted as numpy does (promote_dtypes).
Dtype result_dtype(const BatchedEinsum& e, std::size_t row);
// Whether some row's result is complex (its own operands, or promoted with a real one).
bool has_complex_row(const BatchedEinsum& e);

// Why an einsum with complex arrays cannot be computed: a ⊗ other than mul, add and sub, or a ⊕
// other than sum (complex numbers have no order). nullopt: it can (or nothing is complex).
std::optional<std::string> complex_rejects(const BatchedEinsum& e);

// An einsum with its data bound: what a strategy runs on. Holds references; the einsum, the
// arrays and the functions must outlive it.
class Bound {
 public:
  // `extra`, when given, holds further arrays (looked up before `arrays`): the intermediates and
  // stacked operands of the composite strategies.
  Bound(const BatchedEinsum& e, const Arrays& arrays, const Functions& functions,
        const Arrays* extra = nullptr);
  Bound(const BatchedEinsum& e, const Arrays& arrays) : Bound(e, arrays, no_functions()) {}

  struct Operand {
    const Tensor* tensor = nullptr;
    const Expression* function = nullptr;  // applied element-wise when read; null: the array
  };
  const BatchedEinsum& einsum() const { return *e_; }
  const std::map<char, std::int64_t>& lengths() const { return lengths_; }
  std::int64_t length(char index) const { return lengths_.at(index); }
  Operand operand(std::size_t row, std::size_t k) const;
  bool functional() const { return !functions_->empty(); }
  const Arrays& arrays() const { return *arrays_; }
  const Functions& functions() const { return *functions_; }
  const Arrays* extra() const { return extra_; }
  static const Functions& no_functions();

 private:
  const BatchedEinsum* e_;
  const Arrays* arrays_;
  const Arrays* extra_;
  const Functions* functions_;
  std::map<char, std::int64_t> lengths_;
};

// A functional operand's values: its function applied to every element of its array, in the
// array's dtype.
Tensor evaluate(const Bound::Operand& x);

// One result per batch row.
using Results = std::vector<Tensor>;

using Lengths = std::map<char, std::int64_t>;

// A strategy is all there is to know about one way of executing: adding one means adding one
// entry to builtin_strategies() (strategies.cpp) with its functions.
struct Strategy {
  std::string name;
  std::string summary;
  // nullopt when the strategy applies to the einsum; otherwise the reason it does not.
  std::function<std::optional<std::string>(const BatchedEinsum&)> rejects;
  // Throws SpecError for parameters that do not fit the einsum, naming the parameter.
  std::function<Results(const Bound&, const nlohmann::json& params)> run;
  // The parameters the tuner tries, the default first, without "threads". Null: only {}.
  std::function<std::vector<nlohmann::json>(const BatchedEinsum&, const Lengths&)> space;
  // Lower first: the order in which the tuner's best-first search starts (the strategies that
  // are usually fastest first) and in which the default transform is picked among those that
  // apply (dispatch.hpp).
  int priority = 100;
  // Whether `run` takes a row's operands in their own dtypes where they mix (the reference);
  // every other strategy computes in one dtype per row, and receives an operand of another dtype
  // converted to the row's result dtype (numpy's promotion).
  bool mixes_dtypes = false;
  // For a strategy that computes in one dtype per row: whether it reads row `row`'s real factor,
  // a real operand times a complex one (real_factor, real_form.hpp), as it lies rather than
  // converted, given the lengths. Null: it never does.
  std::function<bool(const BatchedEinsum&, std::size_t row, const Lengths&)> reads_real_factor =
      nullptr;
};

// The built-in strategies, reference first.
const std::vector<Strategy>& builtin_strategies();
// Their names, comma-separated (for help texts and errors).
std::string strategy_names();
// A built-in strategy by name, or null.
const Strategy* find_strategy(std::string_view name);

// Runs `strategy` with `params` (in the einsum's names). Throws SpecError when the strategy is
// unknown or does not apply (with its reason) or the parameters are wrong. The results are new
// tensors the caller owns (rows of a fused run may share one allocation). Thread-safe: several
// threads may execute at once, on one Bound or on different ones; a strategy's "threads" are its
// own, on top of the caller's.
Results execute(const Bound& bound, std::string_view strategy,
                const nlohmann::json& params = nlohmann::json::object());

// Whether this process makes its OpenBLAS calls only from threads einsumdb runs, one call at a
// time (the einsumdb command's processes say so as they start; false by default). Then, before
// einsumdb starts threads of its own for a kernel, it stops OpenBLAS's pool of worker threads: an
// idle worker spins (sched_yield) for a while after the library loads and after each threaded
// call (OpenBLAS's THREAD_TIMEOUT, 2^28 cycles by default, a tenth of a second at 2.7 GHz), and
// where einsumdb's threads fill the cores, the spinning worker shares a core with one of them,
// which then runs at half its speed while the others wait for it. OpenBLAS starts the pool again
// on its next threaded call, as it does after a fork. Where other threads may be inside OpenBLAS
// at the time (a Python process beside numpy, a program that embeds the library), stopping the
// pool under them is not safe, so it is left alone.
void set_blas_calls_exclusive(bool exclusive);

// The reference results. With `magnitudes`, also the scale of each row for verification: the
// largest, over the row's output elements, of the sum (the maximum, for ⊕ = max/min) of the
// terms' absolute sizes. A result that cancels to nearly zero is judged against the size of
// what was summed, not against its own size. Complex rows are computed in complex<double>.
// Throws SpecError for what complex_rejects refuses.
Results run_reference(const Bound& bound, std::vector<double>* magnitudes = nullptr);

// The largest relative error of `got` against the reference `want` over the rows, relative to
// each row's magnitude (see run_reference) when given.
double verification_error(const Results& got, const Results& want,
                          const std::vector<double>& magnitudes = {});
inline Results run_reference(const BatchedEinsum& e, const Arrays& arrays) {
  return run_reference(Bound(e, arrays));
}

// Why each strategy does not apply (nullopt: it does).
std::optional<std::string> loop_nest_rejects(const BatchedEinsum& e);
std::optional<std::string> ttgt_rejects(const BatchedEinsum& e);
std::optional<std::string> loop_over_gemm_rejects(const BatchedEinsum& e);
std::optional<std::string> tensor_gemm_rejects(const BatchedEinsum& e);
// The BLIS kernel set and double-precision micro-tile tensor_gemm uses, e.g. "skx 16x14".
std::string tensor_gemm_kernel();
// Whether tensor_gemm was built to write tiles with non-temporal stores around the cache
// (AVX-512): where it was not, outputs larger than the cache are written like any other.
bool tensor_gemm_streams();
// How tensor_gemm, with its defaults, runs batch row `row`: "rows" or "lines" where it reads the
// large operand in place through libxsmm (a product with few columns; its streamed rows, or its
// streamed lines where the output's unit-stride index belongs to that operand: along another
// index, or along that one, in place, in several summed passes where the columns' operand would
// not fit the cache in one), "packed" where it packs it for BLIS's micro-kernel; empty where
// tensor_gemm does not apply.
std::string tensor_gemm_path(const Bound& bound, std::size_t row = 0);
// Whether tensor_gemm reads row `row`'s real operand of a real × complex product as it lies
// (real_factor, real_form.hpp) rather than converted, given the lengths: where the complex
// operand holds the output's last index (parts_run_with_output), but not where the row would
// stream as complex rows or lines with the parts beside another index than the output's.
bool tensor_gemm_reads_real_factor(const BatchedEinsum& e, std::size_t row, const Lengths& len);
// Whether ttgt reads row `row`'s real factor as it lies, one real GEMM: where the complex
// operand's last index is in the output, so that its parts join a free index's runs when it is
// packed (where that index is summed, the packing would move runs of two parts).
bool ttgt_reads_real_factor(const BatchedEinsum& e, std::size_t row);
std::optional<std::string> batch_fused_rejects(const BatchedEinsum& e);
std::optional<std::string> contraction_tree_rejects(const BatchedEinsum& e);

// The indices of a binary product as a GEMM sees them: batch (both operands and the output), M
// (left operand and output), N (right operand and output), in the output's order, and K (both
// operands, summed), in the left operand's order.
struct GemmGroups {
  std::string batch, m, n, k;
};
GemmGroups gemm_groups(const BatchedEinsum& e);
// The same for operands and an output indexed by these labels.
GemmGroups gemm_groups(const std::string& x, const std::string& y, const std::string& z);
// `labels` in the order they appear in `layout`.
std::string in_order_of(const std::string& labels, const std::string& layout);
// The groups as ttgt orders them by default: M and K in the left operand's order, N in the
// right one's (the orders that let it read operands in place), except where an operand is packed
// whatever the orders (a group of it not one flat axis): its free group then takes the output's
// order where that lets the product be written in place.
GemmGroups ttgt_groups(const BatchedEinsum& e);

// The (m, n, k) index groups loop_over_gemm can run in place, widest first.
std::vector<std::array<std::string, 3>> loop_over_gemm_choices(const BatchedEinsum& e);

// The single-row einsum batch_fused runs: β prepended to the operands whose arrays differ between
// rows (stacked arrays "~stack<k>") and to the output. Requires batch_fused to apply.
BatchedEinsum batch_fused_einsum(const BatchedEinsum& e);

// The indices a contraction_tree step keeps: those of `a` then `b`, in order of appearance,
// that `others` (the output and the remaining operands) needs.
std::string contraction_step_result(const std::string& a, const std::string& b,
                                    const std::string& others);

// Whether contraction_tree can run this path tiled along output index c (its "tile"
// parameter): every step a product of two operands under mul/sum.
bool contraction_tree_tiles(const BatchedEinsum& e, const nlohmann::json& path, char c);

// The FLOP-optimal pairwise order as contraction_tree's "path" parameter.
nlohmann::json default_contraction_path(const BatchedEinsum& e,
                                        const std::map<char, std::int64_t>& lengths);

// The parameter spaces of the built-in strategies (spaces.cpp).
std::vector<nlohmann::json> loop_nest_space(const BatchedEinsum& e, const Lengths& len);
std::vector<nlohmann::json> ttgt_space(const BatchedEinsum& e, const Lengths& len);
std::vector<nlohmann::json> loop_over_gemm_space(const BatchedEinsum& e, const Lengths& len);
std::vector<nlohmann::json> tensor_gemm_space(const BatchedEinsum& e, const Lengths& len);
std::vector<nlohmann::json> batch_fused_space(const BatchedEinsum& e, const Lengths& len);
std::vector<nlohmann::json> contraction_tree_space(const BatchedEinsum& e, const Lengths& len);

Results run_loop_nest(const Bound& bound, const nlohmann::json& params);
Results run_ttgt(const Bound& bound, const nlohmann::json& params);
Results run_loop_over_gemm(const Bound& bound, const nlohmann::json& params);
Results run_tensor_gemm(const Bound& bound, const nlohmann::json& params);
Results run_batch_fused(const Bound& bound, const nlohmann::json& params);
Results run_contraction_tree(const Bound& bound, const nlohmann::json& params);
inline Results run_ttgt(const BatchedEinsum& e, const Arrays& arrays) {
  return run_ttgt(Bound(e, arrays), nlohmann::json::object());
}

// Parameter spellings shared by the strategies and the tuner.
nlohmann::json index_param(char index);
nlohmann::json index_list_param(std::string_view indices);
// Reads [{"index": "i"}, ...] under `key`; throws SpecError naming the strategy and key.
std::string read_index_list(const nlohmann::json& params, std::string_view key,
                            std::string_view strategy, bool allow_repeats = false);
// Throws SpecError naming the first key of `params` that is not in `keys`.
void check_param_keys(const nlohmann::json& params, std::string_view strategy,
                      std::initializer_list<std::string_view> keys);
// "threads" (default 1); throws SpecError unless 1 ≤ threads ≤ 256.
int read_threads(const nlohmann::json& params, std::string_view strategy);
// A parameter that is true or false (`otherwise` where `params` lacks it); throws SpecError naming
// the strategy and key for anything else.
bool read_flag(const nlohmann::json& params, std::string_view key, std::string_view strategy,
               bool otherwise);

}  // namespace einsumdb
