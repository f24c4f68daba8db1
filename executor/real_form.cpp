#include "einsumdb/executor/real_form.hpp"

#include <complex>

#include "einsumdb/executor/kernels.hpp"

namespace einsumdb {

namespace {

Dtype real_of(Dtype d) {
  return d == Dtype::c64 ? Dtype::f32 : Dtype::f64;
}

// The elements [0, n) of y's last axis from y into W at w (their stride there `a`): for each,
// [[y₀, y₁], [−y₁, y₀]] at w + k·a + {0, p, q, q + p}. Where the parts of each row of W are the
// elements' two floats side by side (a = 2, and q or p 1), its two rows are runs that the compiler
// vectorizes: with q = 1, [y₀, −y₁] at w and [y₁, y₀] at w + p; with p = 1, y as it is at w and
// [−y₁, y₀] at w + q.
template <typename R>
void expand_line(const std::complex<R>* y, std::int64_t n, std::int64_t a, std::int64_t q,
                 std::int64_t p, R* w) {
  const R* v = reinterpret_cast<const R*>(y);  // (the parts of std::complex: an array of two)
  if (a == 2 && q == 1) {
    R* const w1 = w + p;
    for (std::int64_t k = 0; k < 2 * n; k += 2) {
      w[k] = v[k], w[k + 1] = -v[k + 1];
      w1[k] = v[k + 1], w1[k + 1] = v[k];
    }
  } else if (a == 2 && p == 1) {
    R* const w1 = w + q;
    for (std::int64_t k = 0; k < 2 * n; k += 2) {
      w[k] = v[k], w[k + 1] = v[k + 1];
      w1[k] = -v[k + 1], w1[k + 1] = v[k];
    }
  } else {
    for (std::int64_t k = 0; k < n; ++k, w += a) {
      const R re = v[2 * k], im = v[2 * k + 1];
      w[0] = re, w[p] = im, w[q] = -im, w[q + p] = re;
    }
  }
}

// W from the elements of y of `shape` (at y's strides `ys`, its last axis contiguous): for every
// element, [[y₀, y₁], [−y₁, y₀]] (real_form.hpp), at W's strides for y's axes (`at`) and for q and
// p, line by line along y's last axis.
template <typename R>
void expand_range(const std::complex<R>* y, const std::vector<std::int64_t>& shape,
                  const std::vector<std::int64_t>& ys, const std::vector<std::int64_t>& at,
                  std::int64_t q, std::int64_t p, R* w) {
  if (shape.empty()) {
    expand_line(y, 1, 0, q, p, w);
    return;
  }
  const std::size_t last = shape.size() - 1;
  const std::int64_t n = shape[last];
  const std::int64_t total = kernels::product(shape);
  std::vector<std::int64_t> index(last, 0);
  std::int64_t from = 0, to = 0;
  for (std::int64_t k = 0; k < total; k += n) {
    expand_line(y + from, n, at[last], q, p, w + to);
    for (std::size_t a = last; a-- > 0;) {  // the next line, row-major
      from += ys[a], to += at[a];
      if (++index[a] < shape[a]) break;
      from -= ys[a] * shape[a], to -= at[a] * shape[a];
      index[a] = 0;
    }
  }
}

// W from y (contiguous), on up to `threads` threads where y is as large as a copy the kernels
// split among threads (kThreadedCopyElements, split_copy: each thread a range of one axis). A pass
// over y that writes twice its bytes: on one thread it would stand alone before a product that
// runs on all of them (TCCG case 13 in c64, 115 MB read and 230 MB written before every run of
// acd,dbc->ab).
template <typename R>
void expand(const std::complex<R>* y, const std::vector<std::int64_t>& shape,
            const std::vector<std::int64_t>& at, std::int64_t q, std::int64_t p, R* w,
            int threads) {
  const std::int64_t total = kernels::product(shape);
  if (total == 0) return;
  const auto ys = kernels::row_major_strides(shape);
  if (threads <= 1 || total < kernels::kThreadedCopyElements)
    return expand_range(y, shape, ys, at, q, p, w);
  kernels::split_copy<std::complex<R>>(
      shape, ys, at, threads, [&](std::int64_t lo, std::int64_t hi, std::size_t axis) {
        std::vector<std::int64_t> part = shape;
        part[axis] = hi - lo;
        expand_range(y + lo * ys[axis], part, ys, at, q, p, w + lo * at[axis]);
      });
}

// W's labels: y's, with q after y's last summed index and p after its last index in the output
// (each at the end where y has none). So W's summed indices run in the order of the other operand's
// (whose q is its last index) and its output indices in the order of the output's (whose p is its
// last): the GEMM reads W along the runs it reads the other operand and the output.
std::string expanded_labels(const std::string& y, const std::string& output, char q, char p) {
  std::size_t last_summed = std::string::npos, last_kept = std::string::npos;
  for (std::size_t a = 0; a < y.size(); ++a)
    (kernels::contains(output, y[a]) ? last_kept : last_summed) = a;
  std::string w;
  for (std::size_t a = 0; a < y.size(); ++a) {
    w += y[a];
    if (a == last_summed) w += q;
    if (a == last_kept) w += p;
  }
  if (last_summed == std::string::npos) w += q;
  if (last_kept == std::string::npos) w += p;
  return w;
}

// Which operand of a product to expand. W puts p beside the expanded operand's last index in the
// output, so where the output is written from memory (larger than the cache), expanding the
// operand that holds the output's unit-stride index keeps the output's runs whole: its last index
// and p are columns of the same operand, in the order they lie (the other way, each run of the
// output alternates between a row index and a column index, every element a tile's edge). That is
// worth W's memory unless that operand is more than four times the other's size; otherwise the
// smaller operand is expanded (W costs twice its memory and a pass over it).
// (The cache's size as tensor_gemm takes it, kCachedBytes: 8 MiB.)
int expanded_operand(const BatchedEinsum& e, const Lengths& len, Dtype dtype) {
  const std::int64_t x = kernels::product(e.inputs[0], len), y = kernels::product(e.inputs[1], len);
  const int smaller = x < y ? 0 : 1;
  const auto output_bytes =
      kernels::product(e.output, len) * static_cast<std::int64_t>(dtype_bytes(dtype));
  if (e.output.empty() || output_bytes <= (std::int64_t{8} << 20)) return smaller;
  const char unit = e.output.back();
  const bool in_x = kernels::contains(e.inputs[0], unit),
             in_y = kernels::contains(e.inputs[1], unit);
  if (in_x == in_y) return smaller;
  const int holder = in_x ? 0 : 1;
  return (holder == 0 ? x <= 4 * y : y <= 4 * x) ? holder : smaller;
}

}  // namespace

std::optional<std::string> real_form_rejects(const BatchedEinsum& e) {
  if (e.join != JoinOp::mul && e.join != JoinOp::add && e.join != JoinOp::sub)
    return "complex numbers are combined by mul, add and sub only; this einsum uses " +
           std::string(to_string(e.join));
  if (e.agg != AggOp::sum)
    return "complex numbers are aggregated by sum only; this einsum uses " +
           std::string(to_string(e.agg));
  if (e.join == JoinOp::mul && e.inputs.size() > 2)
    return "a product of " + std::to_string(e.inputs.size()) +
           " complex operands is computed pairwise (contraction_tree)";
  if (kernels::unused_letters(e, 2).size() < 2)
    return "the real and imaginary parts need two index letters the einsum does not use";
  return std::nullopt;
}

int real_factor(const BatchedEinsum& e, std::size_t row) {
  const Dtype to = result_dtype(e, row);
  if (!is_complex(to) || e.join != JoinOp::mul || e.inputs.size() != 2 || real_form_rejects(e))
    return -1;
  for (int k = 0; k < 2; ++k) {
    const Dtype x = e.arrays.at(e.batch[row][k]).dtype, y = e.arrays.at(e.batch[row][1 - k]).dtype;
    if (x == real_of(to) && is_complex(y)) return k;
  }
  return -1;
}

bool parts_run_with_output(const BatchedEinsum& e, std::size_t row) {
  const int real = real_factor(e, row);
  return real >= 0 && (e.output.empty() || kernels::contains(e.inputs[1 - real], e.output.back()));
}

RealForm real_form_layout(const BatchedEinsum& e, std::size_t row, const Lengths& len) {
  EINSUMDB_ASSERT(!real_form_rejects(e), "the real form applies");
  RealForm f;
  const std::string letters = kernels::unused_letters(e, 2);
  f.part = letters[0];
  f.complex_dtype = result_dtype(e, row);
  f.shape = kernels::shape_of(e.output, len);
  f.lengths = len;
  const Dtype real = real_of(f.complex_dtype);
  const std::size_t n = e.inputs.size();
  f.lengths[f.part] = 2;
  f.real = real_factor(e, row);
  if (e.join == JoinOp::mul && n == 2 && f.real < 0) {
    f.summed = letters[1];
    f.lengths[f.summed] = 2;
    f.expanded = expanded_operand(e, len, f.complex_dtype);
  }
  f.e.join = e.join;
  f.e.agg = e.agg;
  f.e.output = e.output + f.part;
  f.e.batch.emplace_back();
  for (std::size_t k = 0; k < n; ++k) {
    const std::string name = "~re" + std::to_string(k);
    std::string labels = e.inputs[k];
    if (static_cast<int>(k) == f.expanded)
      labels = expanded_labels(labels, e.output, f.summed, f.part);
    else if (static_cast<int>(k) != f.real)
      labels += f.summed ? f.summed : f.part;
    ArrayInfo info;
    info.dtype = real;
    for (char c : labels) info.shape.push_back(Length::of(f.lengths.at(c)));
    f.e.inputs.push_back(labels);
    f.e.batch[0].push_back(name);
    f.e.arrays.emplace(name, std::move(info));
  }
  return f;
}

RealForm real_form(const Bound& bound, std::size_t row, int threads) {
  const BatchedEinsum& e = bound.einsum();
  RealForm f = real_form_layout(e, row, bound.lengths());
  for (std::size_t k = 0; k < e.inputs.size(); ++k) {
    const auto x = bound.operand(row, k);
    const std::string& name = f.e.batch[0][k];
    if (static_cast<int>(k) == f.real) {
      EINSUMDB_ASSERT(x.tensor->dtype() == real_of(f.complex_dtype),
                      "the real factor is of the result's precision (real_factor)");
      f.arrays.emplace(name, x.function ? evaluate(x) : Tensor::view(*x.tensor));
      continue;
    }
    EINSUMDB_ASSERT(!x.function && x.tensor->dtype() == f.complex_dtype,
                    "the real form's complex operands are arrays of the row's dtype (promoted() "
                    "converts the others and evaluates functions)");
    std::vector<std::int64_t> shape;
    for (const auto& l : f.e.arrays.at(name).shape) shape.push_back(l.value);
    if (static_cast<int>(k) != f.expanded) {
      f.arrays.emplace(name, Tensor::reinterpret(*x.tensor, real_of(f.complex_dtype), shape));
      continue;
    }
    Tensor w(real_of(f.complex_dtype), shape, Tensor::Uninitialized{});
    const std::string& labels = f.e.inputs[k];
    const auto strides = w.strides();
    std::vector<std::int64_t> at;  // W's strides along y's axes, in y's order
    std::int64_t q = 0, p = 0;
    for (std::size_t b = 0; b < labels.size(); ++b)
      (labels[b] == f.summed ? q : labels[b] == f.part ? p : at.emplace_back()) = strides[b];
    if (f.complex_dtype == Dtype::c64)
      expand(x.tensor->data<std::complex<float>>(), x.tensor->shape(), at, q, p, w.data<float>(),
             threads);
    else
      expand(x.tensor->data<std::complex<double>>(), x.tensor->shape(), at, q, p, w.data<double>(),
             threads);
    f.arrays.emplace(name, std::move(w));
  }
  return f;
}

}  // namespace einsumdb
