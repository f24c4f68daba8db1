// The strategy registry and the parameter spellings the strategies share.
#include <algorithm>
#include <limits>
#include <memory>
#include <optional>

#include "einsumdb/executor/direct.hpp"
#include "einsumdb/executor/kernels.hpp"
#include "einsumdb/executor/real_form.hpp"

namespace einsumdb {

nlohmann::json index_param(char index) {
  return nlohmann::json{{"index", std::string(1, index)}};
}

nlohmann::json index_list_param(std::string_view indices) {
  nlohmann::json out = nlohmann::json::array();
  for (char c : indices) out.push_back(index_param(c));
  return out;
}

std::string read_index_list(const nlohmann::json& params, std::string_view key,
                            std::string_view strategy, bool allow_repeats) {
  const std::string where = std::string(strategy) + ": '" + std::string(key) + "'";
  const auto it = params.find(std::string(key));
  if (it == params.end()) throw SpecError(where + " is missing");
  if (!it->is_array())
    throw SpecError(where + " must be a list of {\"index\": i}, got " + it->dump());
  std::string out;
  for (const auto& item : *it) {
    if (!item.is_object() || item.size() != 1 || !item.contains("index") ||
        !item["index"].is_string() || item["index"].get<std::string>().size() != 1 ||
        !is_index_char(item["index"].get<std::string>()[0]))
      throw SpecError(where + " must be a list of {\"index\": i} with one-letter indices, got " +
                      item.dump());
    const char c = item["index"].get<std::string>()[0];
    if (!allow_repeats && out.find(c) != std::string::npos)
      throw SpecError(where + " names index '" + std::string(1, c) + "' twice");
    out += c;
  }
  return out;
}

void check_param_keys(const nlohmann::json& params, std::string_view strategy,
                      std::initializer_list<std::string_view> keys) {
  if (!params.is_object())
    throw SpecError(std::string(strategy) + ": parameters must be a JSON object, got " +
                    params.dump());
  for (const auto& [key, value] : params.items())
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      std::string expected;
      for (auto k : keys) expected += (expected.empty() ? "" : ", ") + std::string(k);
      throw SpecError(std::string(strategy) + ": unknown parameter '" + key + "'; expected " +
                      (expected.empty() ? "none" : expected));
    }
}

int read_threads(const nlohmann::json& params, std::string_view strategy) {
  if (!params.is_object())
    throw SpecError(std::string(strategy) + ": parameters must be a JSON object, got " +
                    params.dump());
  const auto it = params.find("threads");
  if (it == params.end()) return 1;
  if (!it->is_number_integer() || it->get<long long>() < 1 || it->get<long long>() > 256)
    throw SpecError(std::string(strategy) + ": 'threads' must be an integer from 1 to 256, got " +
                    it->dump());
  return it->get<int>();
}

bool read_flag(const nlohmann::json& params, std::string_view key, std::string_view strategy,
               bool otherwise) {
  const auto it = params.find(std::string(key));
  if (it == params.end()) return otherwise;
  if (!it->is_boolean())
    throw SpecError(std::string(strategy) + ": '" + std::string(key) +
                    "' must be true or false, got " + it->dump());
  return it->get<bool>();
}

std::optional<std::string> loop_nest_rejects(const BatchedEinsum& e) {
  if (e.inputs.size() > 64)
    return "loop_nest runs at most 64 operands; this einsum has " + std::to_string(e.inputs.size());
  if (auto why = kernels::dtype_rejects(e, "loop_nest")) return why;
  if (has_complex_row(e))
    if (auto why = real_form_rejects(e))
      return "loop_nest computes complex rows in real form: " + *why;
  return std::nullopt;
}

Tensor evaluate(const Bound::Operand& x) {
  const Tensor& from = *x.tensor;
  Tensor out(from.dtype(), from.shape(), Tensor::Uninitialized{});
  with_element_type(from.dtype(), [&](auto t) {
    using T = decltype(t);
    x.function->apply(from.data<T>(), 1, out.data<T>(), out.size());
  });
  return out;
}

namespace {

Results run_direct(const Bound& bound, const nlohmann::json& params) {
  check_param_keys(params, "direct", {"threads"});
  const BatchedEinsum& e = bound.einsum();
  const DirectLoops plan(e);
  const void* data[DirectLoops::kMaxOperands];
  std::vector<Tensor> evaluated;  // functional operands, applied once (a few elements)
  evaluated.reserve(e.inputs.size());
  for (std::size_t k = 0; k < e.inputs.size(); ++k) {
    const auto op = bound.operand(0, k);
    data[k] = op.tensor->raw();
    if (!op.function) continue;
    data[k] = evaluated.emplace_back(evaluate(op)).raw();
  }
  Results out;
  out.emplace_back(plan.dtype(), plan.shape(), Tensor::Uninitialized{});
  plan.run(data, nullptr, out[0].raw());
  return out;
}

// The results of an einsum with an axis of length 0: nothing to compute. An output with such an
// axis is empty; otherwise every element aggregates no terms and holds ⊕'s identity (0 for sum,
// as numpy's sums of nothing).
std::optional<Results> empty_results(const Bound& bound) {
  const auto& len = bound.lengths();
  if (std::none_of(len.begin(), len.end(), [](const auto& l) { return l.second == 0; }))
    return std::nullopt;
  const BatchedEinsum& e = bound.einsum();
  Results out;
  for (std::size_t r = 0; r < e.batch.size(); ++r) {
    std::vector<std::int64_t> shape;
    for (char c : e.output) shape.push_back(len.at(c));
    Tensor z(result_dtype(e, r), shape);  // zeros
    if (e.agg != AggOp::sum)
      for (std::int64_t k = 0; k < z.size(); ++k)
        z.set(k, e.agg == AggOp::max ? -std::numeric_limits<double>::infinity()
                                     : std::numeric_limits<double>::infinity());
    out.push_back(std::move(z));
  }
  return out;
}

// `x` converted to `to` (a functional operand evaluated first, in its array's dtype), or, in its
// own dtype, a function's values.
Tensor converted(const Bound::Operand& x, Dtype to) {
  Tensor evaluated;
  const Tensor* from = x.tensor;
  if (x.function) {
    evaluated = evaluate(x);
    from = &evaluated;
  }
  Tensor out(to, from->shape(), Tensor::Uninitialized{});
  with_element_type(from->dtype(), [&](auto s) {
    with_element_type(to, [&](auto d) {
      using S = decltype(s);
      using D = decltype(d);
      if constexpr (is_complex_v<S> && !is_complex_v<D>) {
        EINSUMDB_ASSERT(false, "promotion never makes a complex number real");
      } else {
        const S* src = from->data<S>();
        D* dst = out.data<D>();
        for (std::int64_t k = 0; k < out.size(); ++k) dst[k] = static_cast<D>(src[k]);
      }
    });
  });
  return out;
}

// The name of `operand`'s copy in `dtype` ("A~c128").
std::string promoted_name(const std::string& operand, Dtype dtype) {
  return operand + "~" + std::string(to_string(dtype));
}

// A batch whose rows mix dtypes, as the strategies that compute in one dtype per row receive it:
// every operand whose dtype is not its row's result dtype (numpy's promotion) replaced by a copy
// in that dtype (promoted_name; rows that promote the same operand alike share the copy), and
// every function of a complex array by its values: the strategies evaluate functions of real
// arrays only, in the pass that reads them, and a complex row runs in real form (real_form.hpp),
// whose operands are the complex arrays' parts. A row's real factor (real_form.hpp) is left as it
// is where `reads` says the strategy reads it so. Null where there is nothing to convert.
std::optional<BatchedEinsum> promoted_einsum(const BatchedEinsum& e, const Functions& functions,
                                             const std::function<bool(std::size_t)>& reads = {}) {
  std::optional<BatchedEinsum> p;
  for (std::size_t r = 0; r < e.batch.size(); ++r) {
    const Dtype to = result_dtype(e, r);
    const int real = reads && reads(r) ? real_factor(e, r) : -1;
    for (std::size_t k = 0; k < e.inputs.size(); ++k) {
      const ArrayInfo& info = e.arrays.at(e.batch[r][k]);
      const bool complex_function = is_complex(info.dtype) && functions.count(e.batch[r][k]);
      if ((info.dtype == to && !complex_function) || static_cast<int>(k) == real) continue;
      if (!p) p = e;
      const std::string copy = promoted_name(e.batch[r][k], to);
      p->arrays[copy] = ArrayInfo{info.shape, to};
      p->batch[r][k] = copy;
    }
  }
  return p;
}

// The promoted einsum and the copies it reads.
struct Promoted {
  BatchedEinsum e;
  Arrays arrays;
};

std::unique_ptr<Promoted> promoted(const Bound& bound,
                                   const decltype(Strategy::reads_real_factor)& reads) {
  const BatchedEinsum& e = bound.einsum();
  auto pe = promoted_einsum(e, bound.functions(),
                            [&](std::size_t r) { return reads && reads(e, r, bound.lengths()); });
  if (!pe) return nullptr;
  auto p = std::make_unique<Promoted>(Promoted{std::move(*pe), {}});
  for (std::size_t r = 0; r < e.batch.size(); ++r)
    for (std::size_t k = 0; k < e.inputs.size(); ++k) {
      const std::string& copy = p->e.batch[r][k];
      if (copy != e.batch[r][k] && !p->arrays.count(copy))
        p->arrays.emplace(copy, converted(bound.operand(r, k), p->e.arrays.at(copy).dtype));
    }
  if (bound.extra())  // a composite strategy's intermediates stay visible
    for (const auto& [name, t] : *bound.extra()) p->arrays.emplace(name, Tensor::view(t));
  return p;
}

// Every strategy's run, answering an einsum with an axis of length 0 itself (nothing to compute,
// and no strategy need handle the empty case), and, for those that compute in one dtype per row
// (all but those that mix dtypes: the reference), converting the operands of rows that mix
// dtypes: all of them, but a row's real factor (real_form.hpp) where the strategy reads it as it
// lies (Strategy::reads_real_factor).
std::vector<Strategy> with_empty_axes(std::vector<Strategy> strategies) {
  for (auto& s : strategies)
    s.run = [run = std::move(s.run), mixes = s.mixes_dtypes, reads = s.reads_real_factor](
                const Bound& b, const nlohmann::json& params) {
      if (auto empty = empty_results(b)) return std::move(*empty);
      if (!mixes)
        if (const auto p = promoted(b, reads)) {
          const Bound one_dtype(p->e, b.arrays(), b.functions(), &p->arrays);
          return run(one_dtype, params);
        }
      return run(b, params);
    };
  return strategies;
}

}  // namespace

const std::vector<Strategy>& builtin_strategies() {
  static const std::vector<Strategy> strategies = with_empty_axes({
      {"reference", "plain loop nest in double precision (the oracle)", complex_rejects,
       [](const Bound& b, const nlohmann::json& params) {
         check_param_keys(params, "reference", {"threads"});
         return run_reference(b);
       },
       nullptr, 1000, /*mixes_dtypes=*/true},
      {"direct", "one loop nest over the operands as they lie, no set-up (tiny workloads)",
       [](const BatchedEinsum& e) {  // rows that mix dtypes are promoted before it runs
         const auto p = promoted_einsum(e, Functions{});  // (functions keep their dtypes)
         return DirectLoops::rejects(p ? *p : e);
       },
       run_direct, nullptr, 1},
      {"loop_nest", "loop order, up to two blocked indices, vectorized innermost loop",
       loop_nest_rejects,
       [](const Bound& b, const nlohmann::json& p) { return run_loop_nest(b, p); }, loop_nest_space,
       40, false,
       [](const BatchedEinsum& e, std::size_t r, const Lengths&) {
         return parts_run_with_output(e, r);
       }},
      {"ttgt", "transpose into GEMM layout, OpenBLAS GEMM per batch point, transpose back",
       ttgt_rejects, [](const Bound& b, const nlohmann::json& p) { return run_ttgt(b, p); },
       ttgt_space, 10, false,
       [](const BatchedEinsum& e, std::size_t r, const Lengths&) {
         return ttgt_reads_real_factor(e, r);
       }},
      {"loop_over_gemm", "GEMM on strided sub-matrices in place, loops around it",
       loop_over_gemm_rejects,
       [](const Bound& b, const nlohmann::json& p) { return run_loop_over_gemm(b, p); },
       loop_over_gemm_space, 20},
      {"tensor_gemm", "one GEMM over the tensors as they lie, BLIS micro-kernel, no transposition",
       tensor_gemm_rejects,
       [](const Bound& b, const nlohmann::json& p) { return run_tensor_gemm(b, p); },
       tensor_gemm_space, 5, false, tensor_gemm_reads_real_factor},
      {"batch_fused", "rows sharing operands stacked into one einsum", batch_fused_rejects,
       [](const Bound& b, const nlohmann::json& p) { return run_batch_fused(b, p); },
       batch_fused_space, 0},
      {"contraction_tree", "3+ operands contracted pairwise in a chosen order",
       contraction_tree_rejects,
       [](const Bound& b, const nlohmann::json& p) { return run_contraction_tree(b, p); },
       contraction_tree_space, 30},
  });
  return strategies;
}

std::string strategy_names() {
  std::string names;
  for (const auto& s : builtin_strategies()) names += (names.empty() ? "" : ", ") + s.name;
  return names;
}

const Strategy* find_strategy(std::string_view name) {
  for (const auto& s : builtin_strategies())
    if (s.name == name) return &s;
  return nullptr;
}

double verification_error(const Results& got, const Results& want,
                          const std::vector<double>& magnitudes) {
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  double worst = 0;
  for (std::size_t r = 0; r < got.size(); ++r)
    worst = std::max(
        worst, max_relative_error(got[r], want[r], r < magnitudes.size() ? magnitudes[r] : 0.0));
  return worst;
}

Results execute(const Bound& bound, std::string_view strategy, const nlohmann::json& params) {
  const Strategy* s = find_strategy(strategy);
  if (!s) {
    throw SpecError("unknown strategy '" + std::string(strategy) + "'; known: " + strategy_names());
  }
  if (const auto why = s->rejects(bound.einsum()))
    throw SpecError(s->name + " does not apply to " + bound.einsum().einsum_string() + ": " + *why);
  return s->run(bound, params);
}

}  // namespace einsumdb
