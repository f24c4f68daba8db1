// The GEMM strategies for binary mul/sum einsums. Indices are classified as batch (in both
// operands and the result), M (left operand and result), N (right operand and result) and K
// (both operands, summed).
//
// ttgt: an operand whose batch, row and column groups are each one flat axis of its layout,
// with a unit stride along rows or columns, is read in place (the BLAS reads a transposed matrix
// itself); any other is packed into [batch, M, K] / [batch, K, N]. One GEMM runs per batch point
// — OpenBLAS's, or libxsmm's kernel when the product is small (executor/small_gemm.hpp), a batch
// of small products at once — writing into the output in place under the same condition, else
// into [batch, M, N] permuted after; a product that sums nothing is a loop. (The engine is
// kernels::Product, executor/product.hpp.) Parameters: "m", "n", "k" (the order of each group's
// indices; default: the order that avoids copies), "threads" (over batch points when there
// are enough, otherwise OpenBLAS's threads) and "gemm3m" (true or false, default false: complex
// products by the 3M method, kernels::gemm; the tuner measures both). A functional operand is
// evaluated while it is packed. A real operand times a complex one whose last index is in the
// output is one real GEMM over the complex operand's parts (its real factor read as it lies,
// real_form.hpp; ttgt_reads_real_factor), with no 3M form.
//
// loop_over_gemm: no copies. One index group each becomes M, N and K of a GEMM on strided
// sub-matrices of the operands and the output in place; every other index is a loop around it.
// Parameters: "m", "n", "k" (each a run of indices adjacent in every tensor that has them; "k"
// may be empty only when the einsum sums nothing), "threads" (over the loops that do not sum;
// OpenBLAS's threads when there are none) and "gemm3m" (as ttgt's). A functional operand is
// evaluated into a buffer in its array's layout first (OpenBLAS reads operands itself, so there is
// no pass to fuse into).
#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "einsumdb/executor/kernels.hpp"
#include "einsumdb/executor/product.hpp"
#include "einsumdb/executor/real_form.hpp"

namespace einsumdb {

GemmGroups gemm_groups(const BatchedEinsum& e) {
  return gemm_groups(e.inputs[0], e.inputs[1], e.output);
}

GemmGroups gemm_groups(const std::string& x, const std::string& y, const std::string& z) {
  auto in = [](const std::string& s, char c) { return s.find(c) != std::string::npos; };
  GemmGroups g;
  for (char c : z) {  // batch, M, N in the output's order
    if (in(x, c) && in(y, c))
      g.batch += c;
    else if (in(x, c))
      g.m += c;
    else
      g.n += c;
  }
  for (char c : x)
    if (in(y, c) && !in(z, c)) g.k += c;
  return g;
}

namespace kernels {

std::optional<std::string> binary_product_rejects(const BatchedEinsum& e, std::string_view who) {
  if (e.inputs.size() != 2)
    return std::string(who) + " contracts two operands; this einsum has " +
           std::to_string(e.inputs.size());
  if (e.join != JoinOp::mul || e.agg != AggOp::sum)
    return std::string(who) + " needs mul/sum (a GEMM); this einsum uses " +
           std::string(to_string(e.join)) + "/" + std::string(to_string(e.agg));
  for (std::size_t k = 0; k < 2; ++k) {
    const std::string& s = e.inputs[k];
    for (std::size_t a = 0; a < s.size(); ++a) {
      if (s.find(s[a]) != a)
        return "operand " + std::to_string(k) + " repeats index '" + std::string(1, s[a]) +
               "' (a diagonal)";
      if (!contains(e.inputs[1 - k], s[a]) && !contains(e.output, s[a]))
        return "index '" + std::string(1, s[a]) + "' is summed within operand " +
               std::to_string(k) + " alone";
    }
  }
  return kernels::dtype_rejects(e, who);
}

}  // namespace kernels

namespace {

using kernels::contains;
using kernels::product;

// The order of one group from the parameters (a permutation of `labels`), or `fallback`.
std::string group_param(const nlohmann::json& params, const char* key, const std::string& labels,
                        const std::string& fallback, std::string_view who) {
  if (!params.contains(key)) return fallback;
  std::string order = read_index_list(params, key, who), a = order, b = labels;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  if (a != b)
    throw SpecError(std::string(who) + ": '" + key + "' must order the indices '" + labels +
                    "', got '" + order + "'");
  return order;
}

// Whether `labels`, in this order, lie side by side in `layout`: one flat axis of it.
bool flat_in(const std::string& labels, const std::string& layout) {
  if (labels.empty()) return true;
  const auto first = layout.find(labels[0]);
  return first != std::string::npos && layout.compare(first, labels.size(), labels) == 0;
}

// "gemm3m": false without it; true only where some row is complex (or promoted to complex).
bool read_gemm3m(const BatchedEinsum& e, const nlohmann::json& params, std::string_view who) {
  if (!read_flag(params, "gemm3m", who, false)) return false;
  if (has_complex_row(e)) return true;
  throw SpecError(std::string(who) +
                  ": 'gemm3m' chooses how complex products are computed; every row of " +
                  e.einsum_string() + " is real");
}

template <typename T>
Tensor ttgt_row(const Bound& bound, std::size_t row, const GemmGroups& g, int threads,
                bool three_m) {
  const BatchedEinsum& e = bound.einsum();
  const auto& len = bound.lengths();
  const auto x = bound.operand(row, 0), y = bound.operand(row, 1);
  Tensor out(x.tensor->dtype(), kernels::shape_of(e.output, len), Tensor::Uninitialized{});
  kernels::Product<T> p(g, len, {e.inputs[0], x.tensor->strides()},
                        {e.inputs[1], y.tensor->strides()}, {e.output, out.strides()},
                        x.function != nullptr, y.function != nullptr);
  p.use_3m(three_m);
  Tensor scratch(out.dtype(), {p.scratch()}, Tensor::Uninitialized{});
  p.run(x.tensor->data<T>(), x.function, y.tensor->data<T>(), y.function, out.data<T>(),
        scratch.data<T>(), threads);
  return out;
}

// ---- loop_over_gemm

// Runs of the labels in `set` that are adjacent, in the same order, in every tensor holding any
// of them, each taken in `layout`'s order; the empty run first.
std::vector<std::string> runs(const std::string& set, const std::string& layout,
                              const std::vector<std::string>& tensors) {
  std::vector<std::string> out{""};
  for (std::size_t i = 0; i < layout.size(); ++i)
    for (std::size_t j = i + 1; j <= layout.size(); ++j) {
      const std::string r = layout.substr(i, j - i);
      if (!std::all_of(r.begin(), r.end(), [&](char c) { return contains(set, c); })) break;
      const bool adjacent = std::all_of(tensors.begin(), tensors.end(), [&](const std::string& t) {
        return !contains(t, r[0]) || t.find(r) != std::string::npos;
      });
      if (adjacent) out.push_back(r);
    }
  return out;
}

// Element stride of a group (its last label's stride) in a tensor; groups are adjacent runs.
std::int64_t group_stride(const std::string& group, const std::string& layout,
                          const std::map<char, std::int64_t>& len) {
  if (group.empty()) return 0;
  std::int64_t s = 1;
  for (std::size_t a = layout.size(); a-- > 0;) {
    if (layout[a] == group.back()) return s;
    s *= len.at(layout[a]);
  }
  return 0;
}

// Whether a group choice can be addressed by the BLAS for every length (a group's stride
// depends only on the layout's trailing lengths, so check with symbolic unit-stride reasoning:
// one of each matrix's two groups must end the tensor, or be empty).
bool addressable(const std::string& rows, const std::string& cols, const std::string& layout) {
  auto ends = [&](const std::string& g) { return g.empty() || layout.back() == g.back(); };
  return layout.empty() || ends(rows) || ends(cols);
}

// The einsum with its two operands exchanged (the same product).
BatchedEinsum swapped(const BatchedEinsum& e) {
  BatchedEinsum s = e;
  std::swap(s.inputs[0], s.inputs[1]);
  for (auto& row : s.batch) std::swap(row[0], row[1]);
  return s;
}

// Whether the parameters give the M group from the right operand and N from the left, as they
// do when measured on a spelling whose operands are in the other order: then the operands
// swap roles (the product is the same).
bool wants_swap(const BatchedEinsum& e, const nlohmann::json& params, std::string_view who) {
  auto only_in = [&](const char* key, const std::string& in, const std::string& out) {
    if (!params.contains(key)) return false;
    const std::string g = read_index_list(params, key, who);
    return !g.empty() && std::all_of(g.begin(), g.end(),
                                     [&](char c) { return contains(in, c) && !contains(out, c); });
  };
  return only_in("m", e.inputs[1], e.inputs[0]) || only_in("n", e.inputs[0], e.inputs[1]);
}

}  // namespace

std::string in_order_of(const std::string& labels, const std::string& layout) {
  std::string out;
  for (char c : layout)
    if (contains(labels, c)) out += c;
  return out;
}

GemmGroups ttgt_groups(const BatchedEinsum& e) {
  GemmGroups g = gemm_groups(e);
  const std::string &x = e.inputs[0], &y = e.inputs[1], &z = e.output;
  GemmGroups own = g;
  own.m = in_order_of(g.m, x);
  own.n = in_order_of(g.n, y);
  own.k = in_order_of(g.k, x);
  // An operand whose groups are not each one flat axis of it is packed whatever their orders. Its
  // free group then takes the output's order where that lets the product be written in place,
  // rather than into scratch permuted after (TCCG case 20, aebf,dfce->abcd: N as cd, not dc).
  const auto packed = [&](const std::string& layout, const std::string& free) {
    return !flat_in(in_order_of(g.batch, layout), layout) ||
           !flat_in(in_order_of(free, layout), layout) ||
           !flat_in(in_order_of(g.k, layout), layout);
  };
  const auto in_place = [&](const GemmGroups& o) {
    return flat_in(in_order_of(g.batch, z), z) && flat_in(o.m, z) && flat_in(o.n, z);
  };
  GemmGroups out = own;
  if (packed(x, g.m)) out.m = in_order_of(g.m, z);
  if (packed(y, g.n)) out.n = in_order_of(g.n, z);
  return in_place(out) && !in_place(own) ? out : own;
}

bool ttgt_reads_real_factor(const BatchedEinsum& e, std::size_t row) {
  const int real = real_factor(e, row);
  return real >= 0 && !e.inputs[1 - real].empty() && contains(e.output, e.inputs[1 - real].back());
}

std::optional<std::string> ttgt_rejects(const BatchedEinsum& e) {
  return kernels::binary_product_rejects(e, "ttgt");
}

Results run_ttgt(const Bound& bound, const nlohmann::json& params) {
  const BatchedEinsum& e = bound.einsum();
  if (const auto why = ttgt_rejects(e)) throw SpecError("ttgt does not apply: " + *why);
  check_param_keys(params, "ttgt", {"m", "n", "k", "threads", "gemm3m"});
  const int threads = read_threads(params, "ttgt");
  const bool three_m = read_gemm3m(e, params, "ttgt");
  if (wants_swap(e, params, "ttgt")) {
    const BatchedEinsum s = swapped(e);
    return run_ttgt(Bound(s, bound.arrays(), bound.functions(), bound.extra()), params);
  }
  GemmGroups g = ttgt_groups(e);
  g.m = group_param(params, "m", g.m, g.m, "ttgt");
  g.n = group_param(params, "n", g.n, g.n, "ttgt");
  g.k = group_param(params, "k", g.k, g.k, "ttgt");
  Results out;
  for (std::size_t r = 0; r < e.batch.size(); ++r) {
    if (real_factor(e, r) >= 0) {  // (left unconverted where ttgt_reads_real_factor)
      // A real operand times a complex one (real_form.hpp): one real GEMM, the complex operand's
      // parts p the last index of its free group, the output's parts its own. Half the FLOPs of
      // the complex product (and no 3M method: nothing is complex in it).
      const RealForm f = real_form(bound, r);
      GemmGroups parts = g;
      (f.real == 0 ? parts.n : parts.m) += f.part;
      const Bound real(f.e, f.arrays);
      out.push_back(f.complex_result(f.complex_dtype == Dtype::c64
                                         ? ttgt_row<float>(real, 0, parts, threads, false)
                                         : ttgt_row<double>(real, 0, parts, threads, false)));
      continue;
    }
    out.push_back(with_element_type(result_dtype(e, r), [&](auto zero) {
      return ttgt_row<decltype(zero)>(bound, r, g, threads, three_m);
    }));
  }
  return out;
}

std::vector<std::array<std::string, 3>> loop_over_gemm_choices(const BatchedEinsum& e) {
  std::vector<std::array<std::string, 3>> out;
  if (kernels::binary_product_rejects(e, "loop_over_gemm")) return out;
  const GemmGroups g = gemm_groups(e);
  const std::string &x = e.inputs[0], &y = e.inputs[1], &z = e.output;
  const std::vector<std::string> all{x, y, z};
  for (const auto& m : runs(g.m, x, all))
    for (const auto& n : runs(g.n, y, all))
      for (const auto& k : runs(g.k, x, all)) {
        if (k.empty() && !g.k.empty()) continue;  // a GEMM that sums nothing
        if (m.empty() && n.empty()) continue;     // a dot product per loop point: use loop_nest
        if (addressable(m, k, x) && addressable(k, n, y) && addressable(m, n, z))
          out.push_back({m, n, k});
      }
  // Widest groups first: fewer, larger GEMM calls.
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a[0].size() + a[1].size() + a[2].size() > b[0].size() + b[1].size() + b[2].size();
  });
  return out;
}

std::optional<std::string> loop_over_gemm_rejects(const BatchedEinsum& e) {
  if (auto why = kernels::binary_product_rejects(e, "loop_over_gemm")) return why;
  if (loop_over_gemm_choices(e).empty())
    return "no index groups form matrices the BLAS can read in place (each operand and the "
           "output needs a group ending at its last axis)";
  return std::nullopt;
}

namespace {

template <typename T>
Tensor loop_over_gemm_row(const Bound& bound, std::size_t row, const std::string& m,
                          const std::string& n, const std::string& k, int threads, bool three_m) {
  const BatchedEinsum& e = bound.einsum();
  const auto& len = bound.lengths();
  const std::string &xl = e.inputs[0], &yl = e.inputs[1], &zl = e.output;
  auto x = bound.operand(row, 0), y = bound.operand(row, 1);
  Tensor xf, yf;  // functional operands, evaluated in their arrays' layouts
  kernels::evaluate_in_place<T>(x, xf, xl, len);
  kernels::evaluate_in_place<T>(y, yf, yl, len);
  Tensor z(x.tensor->dtype(), kernels::shape_of(zl, len));
  const std::int64_t M = product(m, len), N = product(n, len), K = product(k, len);
  const auto a_rs = group_stride(m, xl, len), a_cs = group_stride(k, xl, len),
             b_rs = group_stride(k, yl, len), b_cs = group_stride(n, yl, len),
             c_rs = group_stride(m, zl, len), c_cs = group_stride(n, zl, len);
  if (!kernels::gemm_in_place(M, N, K, a_rs, a_cs, b_rs, b_cs, c_rs, c_cs))
    throw SpecError("loop_over_gemm: the groups m='" + m + "' n='" + n + "' k='" + k +
                    "' do not form matrices the BLAS can address at these lengths");
  // The loops: every other index; those that do not sum come first and may be split.
  std::string outer, summed;
  for (char c : zl)
    if (!contains(m + n, c)) outer += c;
  for (char c : xl)
    if (!contains(zl, c) && !contains(k, c)) summed += c;
  const std::string loops = outer + summed;
  std::vector<std::int64_t> ext, sx, sy, sz;
  const auto xs = kernels::label_strides(loops, xl, x.tensor->strides()),
             ys = kernels::label_strides(loops, yl, y.tensor->strides()),
             zs = kernels::label_strides(loops, zl, z.strides());
  for (char c : loops) ext.push_back(len.at(c));
  const std::int64_t n_outer = product(outer, len), n_summed = product(summed, len);
  const bool over_loops = threads > 1 && n_outer >= threads;
  // Fewer loops that do not sum than threads, and enough summed ones: the threads split the
  // summed loops (kernels::split_sum; TCCG case 14, cad,dcb->ab: 312 products of 156 × 296
  // summed over 312).
  const bool over_sums =
      threads > 1 && !over_loops && n_summed >= threads && M * N <= kernels::kSplitSumElements;
  kernels::BlasThreads blas(over_loops || over_sums ? 1 : threads);
  const T* xp = x.tensor->data<T>();
  const T* yp = y.tensor->data<T>();
  T* zp = z.data<T>();
  // The offsets in x, y and z of loop point p (the outer indices, last fastest).
  const auto outer_at = [&](std::int64_t p) {
    std::array<std::int64_t, 3> o{0, 0, 0};
    for (std::size_t a = outer.size(); a-- > 0;) {
      const std::int64_t i = p % ext[a];
      p /= ext[a];
      o[0] += i * xs[a], o[1] += i * ys[a], o[2] += i * zs[a];
    }
    return o;
  };
  // The products of loop point `o` over the summed points [q0, q1), added up into `to` (element
  // strides rs, cs), which they overwrite.
  const auto sum_products = [&](const std::array<std::int64_t, 3>& o, std::int64_t q0,
                                std::int64_t q1, T* to, std::int64_t rs, std::int64_t cs) {
    for (std::int64_t q = q0; q < q1; ++q) {
      std::int64_t r2 = q, sxo = o[0], syo = o[1];
      for (std::size_t a = loops.size(); a-- > outer.size();) {
        const std::int64_t i = r2 % ext[a];
        r2 /= ext[a];
        sxo += i * xs[a], syo += i * ys[a];
      }
      check_deadline();
      kernels::gemm<T>(M, N, K, {xp + sxo, a_rs, a_cs}, {yp + syo, b_rs, b_cs}, to, rs, cs, q > q0,
                       three_m);
    }
  };
  if (!over_sums) {
    kernels::parallel_for(n_outer, over_loops ? threads : 1, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t p = lo; p < hi; ++p) {
        const auto o = outer_at(p);
        sum_products(o, 0, n_summed, zp + o[2], c_rs, c_cs);
      }
    });
    return z;
  }
  for (std::int64_t p = 0; p < n_outer; ++p) {
    const auto o = outer_at(p);
    kernels::split_sum(threads, M, N, zp + o[2], c_rs, c_cs,
                       [&](std::int64_t s, T* to, std::int64_t rs, std::int64_t cs) {
                         sum_products(o, n_summed * s / threads, n_summed * (s + 1) / threads, to,
                                      rs, cs);
                       });
  }
  return z;
}

}  // namespace

Results run_loop_over_gemm(const Bound& bound, const nlohmann::json& params) {
  const BatchedEinsum& e = bound.einsum();
  if (const auto why = loop_over_gemm_rejects(e))
    throw SpecError("loop_over_gemm does not apply: " + *why);
  check_param_keys(params, "loop_over_gemm", {"m", "n", "k", "threads", "gemm3m"});
  const int threads = read_threads(params, "loop_over_gemm");
  const bool three_m = read_gemm3m(e, params, "loop_over_gemm");
  if (wants_swap(e, params, "loop_over_gemm")) {
    const BatchedEinsum s = swapped(e);
    return run_loop_over_gemm(Bound(s, bound.arrays(), bound.functions(), bound.extra()), params);
  }
  const auto choices = loop_over_gemm_choices(e);
  std::array<std::string, 3> pick = choices.front();
  if (params.contains("m") || params.contains("n") || params.contains("k")) {
    for (const char* key : {"m", "n", "k"})
      if (!params.contains(key))
        throw SpecError(std::string("loop_over_gemm: give all of m, n, k; '") + key +
                        "' is missing");
    pick = {read_index_list(params, "m", "loop_over_gemm"),
            read_index_list(params, "n", "loop_over_gemm"),
            read_index_list(params, "k", "loop_over_gemm")};
    if (std::find(choices.begin(), choices.end(), pick) == choices.end())
      throw SpecError("loop_over_gemm: m='" + pick[0] + "' n='" + pick[1] + "' k='" + pick[2] +
                      "' are not index groups the BLAS can read in place for " + e.einsum_string());
  }
  Results out;
  for (std::size_t r = 0; r < e.batch.size(); ++r)
    out.push_back(with_element_type(result_dtype(e, r), [&](auto zero) {
      return loop_over_gemm_row<decltype(zero)>(bound, r, pick[0], pick[1], pick[2], threads,
                                                three_m);
    }));
  return out;
}

}  // namespace einsumdb
