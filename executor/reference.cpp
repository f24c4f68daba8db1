#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>

#include "einsumdb/executor/execute.hpp"
#include "einsumdb/executor/scalar_ops.hpp"

namespace einsumdb {
namespace {

using kernels::combine;
using kernels::identity;
using kernels::join;

}  // namespace

namespace {

const Tensor* find_array(const Arrays& arrays, const Arrays* extra, const std::string& name) {
  if (extra)
    if (const auto it = extra->find(name); it != extra->end()) return &it->second;
  const auto it = arrays.find(name);
  return it == arrays.end() ? nullptr : &it->second;
}

std::map<char, std::int64_t> bind_all(const BatchedEinsum& e, const Arrays& arrays,
                                      const Arrays* extra, const Functions& functions) {
  std::map<char, std::int64_t> lengths;
  std::map<char, std::string> from;
  for (std::size_t r = 0; r < e.batch.size(); ++r)
    for (std::size_t k = 0; k < e.inputs.size(); ++k) {
      const std::string& operand = e.batch[r][k];
      const auto f = functions.find(operand);
      const std::string& name = f == functions.end() ? operand : f->second.array();
      const Tensor* found = find_array(arrays, extra, name);
      if (!found) throw SpecError("no data bound to array '" + name + "'");
      const Tensor& t = *found;
      const ArrayInfo& info = e.arrays.at(operand);
      if (t.dtype() != info.dtype)
        throw SpecError("array '" + name + "' holds " + std::string(to_string(t.dtype())) +
                        " data but the spec says " + std::string(to_string(info.dtype)));
      if (t.rank() != info.shape.size())
        throw SpecError("array '" + name + "' has " + std::to_string(t.rank()) +
                        " axes but the spec gives it " + std::to_string(info.shape.size()));
      for (std::size_t a = 0; a < t.rank(); ++a) {
        const std::int64_t len = t.shape()[a];
        const Length& want = info.shape[a];
        const std::string where = "array '" + name + "' axis " + std::to_string(a);
        if (!want.symbolic() && want.value != len)
          throw SpecError(where + " has length " + std::to_string(len) + " but the spec says " +
                          std::to_string(want.value));
        const char l = e.inputs[k][a];
        const auto [at, inserted] = lengths.emplace(l, len);
        if (inserted)
          from[l] = where;
        else if (at->second != len)
          throw SpecError(where + " has length " + std::to_string(len) + " but index '" +
                          std::string(1, l) + "' has length " + std::to_string(at->second) +
                          " at " + from[l]);
      }
    }
  return lengths;
}

}  // namespace

std::map<char, std::int64_t> bind_lengths(const BatchedEinsum& e, const Arrays& arrays,
                                          const Functions& functions) {
  return bind_all(e, arrays, nullptr, functions);
}

Dtype result_dtype(const BatchedEinsum& e, std::size_t row) {
  Dtype d = e.arrays.at(e.batch[row][0]).dtype;
  for (const auto& name : e.batch[row]) d = promote_dtypes(d, e.arrays.at(name).dtype);
  return d;
}

bool has_complex_row(const BatchedEinsum& e) {
  for (std::size_t r = 0; r < e.batch.size(); ++r)
    if (is_complex(result_dtype(e, r))) return true;
  return false;
}

const Functions& Bound::no_functions() {
  static const Functions none;
  return none;
}

Bound::Bound(const BatchedEinsum& e, const Arrays& arrays, const Functions& functions,
             const Arrays* extra)
    : e_(&e),
      arrays_(&arrays),
      extra_(extra),
      functions_(&functions),
      lengths_(bind_all(e, arrays, extra, functions)) {}

Bound::Operand Bound::operand(std::size_t row, std::size_t k) const {
  const std::string& name = e_->batch.at(row).at(k);
  if (const auto f = functions_->find(name); f != functions_->end())
    return {find_array(*arrays_, extra_, f->second.array()), &f->second};
  return {find_array(*arrays_, extra_, name), nullptr};
}

namespace {

// One row of the reference: every term in order, accumulated in V (double, or complex<double>
// where any operand is complex). Each operand is first read whole into V (its function applied to
// each element once), so that the loop over the terms reads plain arrays; the last label's run is
// the inner loop and an odometer steps the others, last fastest: the terms are taken in the same
// order as by one odometer over every label.
template <typename V>
Tensor reference_row(const Bound& bound, std::size_t r, std::vector<double>* magnitudes) {
  const BatchedEinsum& e = bound.einsum();
  const auto& lengths = bound.lengths();
  std::string labels;
  for (const auto& [l, len] : lengths) labels += l;
  const std::size_t n = labels.size(), ops = e.inputs.size();
  std::vector<std::int64_t> shape;
  for (char l : e.output) shape.push_back(lengths.at(l));
  Tensor z(result_dtype(e, r), shape);
  // Per label: its length and its stride in each operand and in the output (repeated labels
  // within one operand add their strides: a diagonal).
  std::vector<std::int64_t> len(n);
  std::vector<std::vector<std::int64_t>> stride(ops + 1, std::vector<std::int64_t>(n, 0));
  std::vector<std::vector<V>> in(ops);
  for (std::size_t i = 0; i < n; ++i) len[i] = lengths.at(labels[i]);
  for (std::size_t k = 0; k <= ops; ++k) {
    const std::string& idx = k < ops ? e.inputs[k] : e.output;
    const Tensor* t = &z;
    if (k < ops) {
      const Bound::Operand op = bound.operand(r, k);
      t = op.tensor;
      in[k].resize(static_cast<std::size_t>(t->size()));
      for (std::int64_t x = 0; x < t->size(); ++x) {
        if (op.function) {  // in complex arithmetic over a complex array
          if constexpr (std::is_same_v<V, double>)
            in[k][x] = (*op.function)(t->at(x));
          else
            in[k][x] = is_complex(t->dtype()) ? (*op.function)(t->at_complex(x))
                                              : V((*op.function)(t->at(x)));
        } else if constexpr (std::is_same_v<V, double>)
          in[k][x] = t->at(x);
        else
          in[k][x] = t->at_complex(x);
      }
    }
    const auto s = t->strides();
    for (std::size_t a = 0; a < idx.size(); ++a) stride[k][labels.find(idx[a])] += s[a];
  }
  std::vector<V> acc(static_cast<std::size_t>(z.size()), V(identity(e.agg)));
  std::vector<double> mag(magnitudes ? static_cast<std::size_t>(z.size()) : 0, 0.0);
  const bool empty = std::any_of(len.begin(), len.end(), [](std::int64_t v) { return v == 0; });
  // The inner run: the last label's length and strides (one term where there is no label).
  const std::size_t outer = n == 0 ? 0 : n - 1;
  const std::int64_t run = n == 0 ? 1 : len[outer];
  std::vector<std::int64_t> step(ops + 1, 0);
  if (n > 0)
    for (std::size_t k = 0; k <= ops; ++k) step[k] = stride[k][outer];
  std::vector<std::int64_t> counter(outer, 0), offset(ops + 1, 0), at(ops + 1, 0);
  // A product summed over two operands, the contractions that most tests compare against, has
  // its run in a loop of its own: the same arithmetic as the general one below, on pointers.
  const bool product = ops == 2 && e.join == JoinOp::mul && e.agg == AggOp::sum;
  for (bool done = empty; !done;) {
    at = offset;
    if (product) {
      const V* x = in[0].data() + at[0];
      const V* y = in[1].data() + at[1];
      V* a = acc.data() + at[2];
      double* b = magnitudes ? mag.data() + at[2] : nullptr;
      const std::int64_t sx = step[0], sy = step[1], sz = step[2];
      for (std::int64_t j = 0; j < run; ++j) {
        const V v = x[j * sx] * y[j * sy];
        a[j * sz] += v;
        if (b) b[j * sz] += std::abs(x[j * sx]) * std::abs(y[j * sy]);
      }
    }
    for (std::int64_t j = 0; !product && j < run; ++j) {
      V v = in[0][at[0]];
      double m = std::abs(v);
      for (std::size_t k = 1; k < ops; ++k) {
        const V x = in[k][at[k]];
        v = join(e.join, v, x);
        // The size of the numbers a rounding error is relative to.
        m = e.join == JoinOp::mul                            ? m * std::abs(x)
            : e.join == JoinOp::max || e.join == JoinOp::min ? std::max(m, std::abs(x))
                                                             : m + std::abs(x);
      }
      if (e.join == JoinOp::sqdiff) m *= m;
      auto& a = acc[static_cast<std::size_t>(at[ops])];
      a = combine(e.agg, a, v);
      if (magnitudes) {
        auto& b = mag[static_cast<std::size_t>(at[ops])];
        b = e.agg == AggOp::sum ? b + m : std::max(b, m);
      }
      for (std::size_t k = 0; k <= ops; ++k) at[k] += step[k];
    }
    // Odometer over the other labels, the last of them fastest.
    for (std::size_t i = outer;;) {
      if (i == 0) {
        done = true;
        break;
      }
      --i;
      ++counter[i];
      for (std::size_t k = 0; k <= ops; ++k) offset[k] += stride[k][i];
      if (counter[i] < len[i]) break;
      for (std::size_t k = 0; k <= ops; ++k) offset[k] -= stride[k][i] * len[i];
      counter[i] = 0;
    }
  }
  for (std::int64_t k = 0; k < z.size(); ++k) {
    if constexpr (std::is_same_v<V, double>)
      z.set(k, acc[static_cast<std::size_t>(k)]);
    else
      z.set_complex(k, acc[static_cast<std::size_t>(k)]);
  }
  if (magnitudes) {
    double largest = 0;
    for (double b : mag)
      if (std::isfinite(b)) largest = std::max(largest, b);
    magnitudes->push_back(largest);
  }
  return z;
}

}  // namespace

std::optional<std::string> complex_rejects(const BatchedEinsum& e) {
  bool any = false;
  for (const auto& [name, info] : e.arrays) any = any || is_complex(info.dtype);
  if (!any) return std::nullopt;
  if (e.join != JoinOp::mul && e.join != JoinOp::add && e.join != JoinOp::sub)
    return "complex numbers have no order or magnitude to " + std::string(to_string(e.join)) +
           " by; their join is mul, add or sub";
  if (e.agg != AggOp::sum)
    return "complex numbers have no order to " + std::string(to_string(e.agg)) +
           " by; their aggregation is sum";
  return std::nullopt;
}

Results run_reference(const Bound& bound, std::vector<double>* magnitudes) {
  const BatchedEinsum& e = bound.einsum();
  if (const auto why = complex_rejects(e)) throw SpecError(*why);
  Results out;
  for (std::size_t r = 0; r < e.batch.size(); ++r) {
    if (is_complex(result_dtype(e, r))) {
      out.push_back(reference_row<std::complex<double>>(bound, r, magnitudes));
    } else {
      out.push_back(reference_row<double>(bound, r, magnitudes));
    }
  }
  return out;
}

}  // namespace einsumdb
