// loop_nest: every index is a loop, in a chosen order, with up to two indices blocked (a tile
// loop outside, its point loop in the index's place). The innermost loop is a kernel specialized
// for ⊗, ⊕ and the dtype, and for unit or zero strides so that the compiler vectorizes it.
// Functional operands are evaluated over the innermost run as it is read. A complex row runs as a
// real one (real_form.hpp), its parts the outermost loops.
//
// Parameters: {"order": [{"index": i}, ...] (every index, outermost first; default: by locality,
// default_order), "block": [[{"index": i}, size], ...] (at most two),
// "threads": t}. With t > 1 the first loop over an output index is split among threads, so no
// two threads write the same element.
#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <type_traits>

#include "einsumdb/executor/isa_target.hpp"  // this file: once per instruction set
#include "einsumdb/executor/kernels.hpp"
#include "einsumdb/executor/real_form.hpp"

EINSUMDB_TARGET_BEGIN
namespace einsumdb::EINSUMDB_ISA_NS {
namespace {

using kernels::contains;

template <typename T, AggOp A>
constexpr T identity() {
  if constexpr (A == AggOp::sum)
    return T(0);
  else if constexpr (A == AggOp::max)
    return -std::numeric_limits<T>::infinity();
  else
    return std::numeric_limits<T>::infinity();
}

template <JoinOp J, typename T>
inline T join(T a, T b) {
  if constexpr (J == JoinOp::mul) return a * b;
  if constexpr (J == JoinOp::add) return a + b;
  if constexpr (J == JoinOp::sub) return a - b;
  if constexpr (J == JoinOp::sqdiff) return (a - b) * (a - b);
  if constexpr (J == JoinOp::absdiff) return std::abs(a - b);
  if constexpr (J == JoinOp::max) return a > b ? a : b;
  if constexpr (J == JoinOp::min) return a < b ? a : b;
}

template <AggOp A, typename T>
inline T agg(T acc, T v) {
  if constexpr (A == AggOp::sum) return acc + v;
  if constexpr (A == AggOp::max) return acc > v ? acc : v;
  if constexpr (A == AggOp::min) return acc < v ? acc : v;
}

// Reduces f(i) for i < n into acc, vectorized.
template <AggOp A, typename T, typename F>
inline T reduce(std::int64_t n, T acc, F f) {
  if constexpr (A == AggOp::sum) {
#pragma omp simd reduction(+ : acc)
    for (std::int64_t i = 0; i < n; ++i) acc += f(i);
  } else if constexpr (A == AggOp::max) {
#pragma omp simd reduction(max : acc)
    for (std::int64_t i = 0; i < n; ++i) acc = std::max(acc, f(i));
  } else {
#pragma omp simd reduction(min : acc)
    for (std::int64_t i = 0; i < n; ++i) acc = std::min(acc, f(i));
  }
  return acc;
}

// z[i·sz] ⊕= x[i·sx] ⊗ y[i·sy] for i < n (sz = 0: a reduction into z[0]); with Store,
// z[i·sz] = x[i·sx] ⊗ y[i·sy] (an einsum that sums nothing writes each element once).
template <typename T, JoinOp J, AggOp A, bool Store = false>
void inner2(std::int64_t n, const T* __restrict x, std::int64_t sx, const T* __restrict y,
            std::int64_t sy, T* __restrict z, std::int64_t sz) {
  if constexpr (Store) {
    if (sz == 1 && sx == 1 && sy == 1) {
#pragma omp simd
      for (std::int64_t i = 0; i < n; ++i) z[i] = join<J>(x[i], y[i]);
    } else {
      for (std::int64_t i = 0; i < n; ++i) z[i * sz] = join<J>(x[i * sx], y[i * sy]);
    }
    return;
  }
  if (sz == 0) {
    if (sx == 1 && sy == 1)
      z[0] = reduce<A>(n, z[0], [&](std::int64_t i) { return join<J>(x[i], y[i]); });
    else if (sx == 1 && sy == 0)
      z[0] = reduce<A>(n, z[0], [&, b = y[0]](std::int64_t i) { return join<J>(x[i], b); });
    else if (sx == 0 && sy == 1)
      z[0] = reduce<A>(n, z[0], [&, a = x[0]](std::int64_t i) { return join<J>(a, y[i]); });
    else
      z[0] = reduce<A>(n, z[0], [&](std::int64_t i) { return join<J>(x[i * sx], y[i * sy]); });
    return;
  }
  if (sz == 1 && sx == 1 && sy == 1) {
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) z[i] = agg<A>(z[i], join<J>(x[i], y[i]));
  } else if (sz == 1 && sx == 1 && sy == 0) {
    const T b = y[0];
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) z[i] = agg<A>(z[i], join<J>(x[i], b));
  } else if (sz == 1 && sx == 0 && sy == 1) {
    const T a = x[0];
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) z[i] = agg<A>(z[i], join<J>(a, y[i]));
  } else {
    for (std::int64_t i = 0; i < n; ++i)
      z[i * sz] = agg<A>(z[i * sz], join<J>(x[i * sx], y[i * sy]));
  }
}

template <typename T, AggOp A, bool Store = false>
void inner1(std::int64_t n, const T* __restrict x, std::int64_t sx, T* __restrict z,
            std::int64_t sz) {
  if constexpr (Store) {
    for (std::int64_t i = 0; i < n; ++i) z[i * sz] = x[i * sx];
    return;
  }
  if (sz == 0) {
    if (sx == 1)
      z[0] = reduce<A>(n, z[0], [&](std::int64_t i) { return x[i]; });
    else
      z[0] = reduce<A>(n, z[0], [&](std::int64_t i) { return x[i * sx]; });
  } else if (sz == 1 && sx == 1) {
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) z[i] = agg<A>(z[i], x[i]);
  } else {
    for (std::int64_t i = 0; i < n; ++i) z[i * sz] = agg<A>(z[i * sz], x[i * sx]);
  }
}

struct Level {
  char label;
  std::int64_t block = 0;  // a tile loop over blocks of this size; 0: a point loop
};

struct NestPlan {
  std::vector<Level> levels;
  std::string blocked;  // labels with a tile loop
  std::vector<std::int64_t> block_size;
};

// The order when none is given, by locality: the index whose strides (summed over the operands
// and the output) are largest outermost, the one with the smallest strides innermost; ties in
// output order.
std::string default_order(const BatchedEinsum& e, const std::map<char, std::int64_t>& len) {
  std::string order;
  for (char c : e.output) order += c;
  for (const auto& in : e.inputs)
    for (char c : in)
      if (!contains(order, c)) order += c;
  std::map<char, double> weight;
  auto add = [&](const std::string& layout) {
    double s = 1;
    for (std::size_t a = layout.size(); a-- > 0;) {
      weight[layout[a]] += s;
      s *= static_cast<double>(len.at(layout[a]));
    }
  };
  for (const auto& in : e.inputs) add(in);
  add(e.output);
  std::stable_sort(order.begin(), order.end(),
                   [&](char a, char b) { return weight[a] > weight[b]; });
  return order;
}

NestPlan make_plan(const BatchedEinsum& e, const std::map<char, std::int64_t>& len,
                   const nlohmann::json& params) {
  std::string all;
  for (const auto& in : e.inputs)
    for (char c : in)
      if (!contains(all, c)) all += c;
  std::string order;
  if (!params.contains("order")) {
    order = default_order(e, len);
  } else {
    order = read_index_list(params, "order", "loop_nest");
    std::string a = all, b = order;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    if (a != b)
      throw SpecError("loop_nest: 'order' must list every index of the einsum once (" + all +
                      "), got " + order);
  }
  NestPlan plan;
  if (params.contains("block")) {
    const auto& blocks = params.at("block");
    if (!blocks.is_array() || blocks.size() > 2)
      throw SpecError("loop_nest: 'block' must be a list of at most two [{\"index\": i}, size]");
    for (const auto& b : blocks) {
      if (!b.is_array() || b.size() != 2 || !b[1].is_number_integer() || b[1].get<long>() < 1)
        throw SpecError("loop_nest: each 'block' entry is [{\"index\": i}, size ≥ 1], got " +
                        b.dump());
      const std::string l =
          read_index_list(nlohmann::json{{"i", nlohmann::json::array({b[0]})}}, "i", "loop_nest");
      if (!contains(all, l[0]) || contains(plan.blocked, l[0]))
        throw SpecError("loop_nest: 'block' names index '" + l + "' " +
                        (contains(plan.blocked, l[0]) ? "twice" : "which the einsum lacks"));
      plan.blocked += l[0];
      plan.block_size.push_back(b[1].get<std::int64_t>());
    }
  }
  for (char c : order)
    if (const auto k = plan.blocked.find(c); k != std::string::npos)
      plan.levels.push_back({c, plan.block_size[k]});
  for (char c : order) plan.levels.push_back({c, 0});
  if (plan.levels.empty()) plan.levels.push_back({'\0', 0});  // a scalar einsum: one iteration
  return plan;
}

// The operands of one row as the nest reads them. A functional operand read more than once per
// element is evaluated once, here, instead of at every read; one read per element is left to
// the innermost loop. Prepared once per row and shared by the threads.
template <typename T>
struct RowInputs {
  std::vector<const T*> base;
  std::vector<const Expression*> functions;
  std::deque<Tensor> evaluated;  // stable addresses
};

template <typename T>
void prepare(const Bound& bound, const NestPlan& plan, std::size_t row, RowInputs<T>& in) {
  std::int64_t iterations = 1;
  for (const auto& l : plan.levels)
    if (l.label && !l.block) iterations *= bound.length(l.label);
  for (std::size_t k = 0; k < bound.einsum().inputs.size(); ++k) {
    const auto x = bound.operand(row, k);
    if (x.function && x.tensor->size() > 0 && iterations / x.tensor->size() > 1) {
      in.evaluated.emplace_back(x.tensor->dtype(), x.tensor->shape(), Tensor::Uninitialized{});
      x.function->apply(x.tensor->data<T>(), 1, in.evaluated.back().template data<T>(),
                        x.tensor->size());
      in.functions.push_back(nullptr);
      in.base.push_back(in.evaluated.back().template data<T>());
    } else {
      in.functions.push_back(x.function);
      in.base.push_back(x.tensor->data<T>());
    }
  }
}

template <typename T, JoinOp J, AggOp A, bool Store>
class Nest {
 public:
  Nest(const Bound& bound, const NestPlan& plan, std::size_t row, const RowInputs<T>& in, Tensor& z)
      : plan_(plan),
        ops_(bound.einsum().inputs.size()),
        levels_(plan.levels.size()),
        base_(in.base),
        functions_(in.functions) {
    const BatchedEinsum& e = bound.einsum();
    std::string labels;
    for (const auto& l : plan.levels)
      if (!contains(labels, l.label)) labels += l.label;
    for (std::size_t k = 0; k <= ops_; ++k) {
      const Tensor* t = k < ops_ ? bound.operand(row, k).tensor : &z;
      label_stride_.push_back(
          kernels::label_strides(labels, k < ops_ ? e.inputs[k] : e.output, t->strides()));
    }
    z_ = z.data<T>();
    for (const auto& l : plan.levels) {
      const std::size_t at = labels.find(l.label);
      length_.push_back(l.label ? bound.length(l.label) : 1);
      std::vector<std::int64_t> s;
      for (std::size_t k = 0; k <= ops_; ++k)
        s.push_back(label_stride_[k][at] * (l.block ? l.block : 1));
      stride_.push_back(std::move(s));
    }
    offsets_.assign((levels_ + 1) * (ops_ + 1), 0);
    tile_start_.assign(levels_, 0);
    scratch_.resize(ops_ + 1);
  }

  // Runs the nest with level `split` restricted to iterations [lo, hi).
  void run(std::size_t split, std::int64_t lo, std::int64_t hi) {
    split_ = split, lo_ = lo, hi_ = hi;
    go(0);
  }
  std::int64_t extent(std::size_t lv) const {
    const Level& l = plan_.levels[lv];
    const std::int64_t len = length_[lv];
    if (l.block) return (len + l.block - 1) / l.block;
    for (std::size_t t = 0; t < lv; ++t)  // the point loop of a blocked index
      if (plan_.levels[t].label == l.label && plan_.levels[t].block)
        return std::min(plan_.levels[t].block, len - tile_start_[t]);
    return len;
  }

 private:
  void go(std::size_t lv) {
    std::int64_t* off = &offsets_[lv * (ops_ + 1)];
    std::int64_t lo = 0, hi = extent(lv);
    if (lv == split_) lo = std::max(lo, lo_), hi = std::min(hi, hi_);
    const auto& s = stride_[lv];
    if (lv + 1 == levels_) {
      innermost(hi - lo, off, lo);
      return;
    }
    if (lv + 2 == levels_ && ops_ == 2 && !functions_[0] && !functions_[1]) {
      // The two innermost loops without recursion: short innermost runs are common (small
      // element-local dimensions), and a call per run would cost more than the run.
      const auto& si = stride_[lv + 1];
      const bool tile = plan_.levels[lv].block != 0;
      std::int64_t n = tile ? 0 : extent(lv + 1);
      for (std::int64_t i = lo; i < hi; ++i) {
        tick();
        if (tile) tile_start_[lv] = i * plan_.levels[lv].block, n = extent(lv + 1);
        std::int64_t l2 = 0, h2 = n;
        if (lv + 1 == split_) l2 = std::max(l2, lo_), h2 = std::min(h2, hi_);
        if (h2 <= l2) continue;
        inner2<T, J, A, Store>(h2 - l2, base_[0] + off[0] + i * s[0] + l2 * si[0], si[0],
                               base_[1] + off[1] + i * s[1] + l2 * si[1], si[1],
                               z_ + off[2] + i * s[2] + l2 * si[2], si[2]);
      }
      return;
    }
    std::int64_t* next = off + (ops_ + 1);
    for (std::int64_t i = lo; i < hi; ++i) {
      tick();
      for (std::size_t k = 0; k <= ops_; ++k) next[k] = off[k] + i * s[k];
      if (plan_.levels[lv].block) tile_start_[lv] = i * plan_.levels[lv].block;
      go(lv + 1);
    }
  }

  // The deadline (deadline.hpp) is checked every 64th pass of a loop around the innermost: a
  // pass may be a short run, and the check is then not a share of its time.
  void tick() {
    if ((++ticks_ & 63) == 0) check_deadline();
  }

  void innermost(std::int64_t n, const std::int64_t* off, std::int64_t lo) {
    if (n <= 0) return;
    const auto& s = stride_[levels_ - 1];
    const T* x[64];
    std::int64_t sx[64];
    for (std::size_t k = 0; k < ops_; ++k) {
      x[k] = base_[k] + off[k] + lo * s[k];
      sx[k] = s[k];
      if (functions_[k]) {
        auto& buf = scratch_[k];
        if (buf.size() < static_cast<std::size_t>(n)) buf.resize(static_cast<std::size_t>(n));
        functions_[k]->apply(x[k], sx[k], buf.data(), n);
        x[k] = buf.data(), sx[k] = 1;
      }
    }
    T* z = z_ + off[ops_] + lo * s[ops_];
    const std::int64_t sz = s[ops_];
    if (ops_ == 1) return inner1<T, A, Store>(n, x[0], sx[0], z, sz);
    if (ops_ == 2) return inner2<T, J, A, Store>(n, x[0], sx[0], x[1], sx[1], z, sz);
    // Three or more operands: fold the joins into a scratch run, then aggregate it.
    auto& v = scratch_[ops_];
    if (v.size() < static_cast<std::size_t>(n)) v.resize(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) v[i] = join<J>(x[0][i * sx[0]], x[1][i * sx[1]]);
    for (std::size_t k = 2; k < ops_; ++k)
      for (std::int64_t i = 0; i < n; ++i) v[i] = join<J>(v[i], x[k][i * sx[k]]);
    inner1<T, A, Store>(n, v.data(), 1, z, sz);
  }

  const NestPlan& plan_;
  std::size_t ops_, levels_;
  std::uint32_t ticks_ = 0;
  std::vector<const T*> base_;
  std::vector<const Expression*> functions_;
  T* z_ = nullptr;
  std::vector<std::vector<std::int64_t>> label_stride_, stride_;
  std::vector<std::int64_t> length_, offsets_, tile_start_;
  std::vector<std::vector<T>> scratch_;
  std::size_t split_ = 0;
  std::int64_t lo_ = 0, hi_ = 0;
};

// Store: the einsum sums nothing, so the nest writes every element of z once (whatever ⊕), and
// z needs no initial value.
template <typename T, JoinOp J, AggOp A, bool Store>
Tensor run_row(const Bound& bound, const NestPlan& plan, std::size_t row, int threads) {
  const BatchedEinsum& e = bound.einsum();
  Tensor z = Store ? Tensor(result_dtype(e, row), kernels::shape_of(e.output, bound.lengths()),
                            Tensor::Uninitialized{})
                   : Tensor(result_dtype(e, row), kernels::shape_of(e.output, bound.lengths()));
  if constexpr (!Store && A != AggOp::sum) std::fill_n(z.data<T>(), z.size(), identity<T, A>());
  // Split the first loop over an output index among the threads.
  std::size_t split = 0;
  while (split < plan.levels.size() && !contains(e.output, plan.levels[split].label)) ++split;
  if (split == plan.levels.size()) threads = 1, split = 0;
  const Level& at = plan.levels[split];
  const std::int64_t len = at.label ? bound.length(at.label) : 1;
  const std::int64_t n = at.block ? (len + at.block - 1) / at.block : len;
  if (at.block == 0)
    for (std::size_t t = 0; t < split; ++t)
      if (plan.levels[t].label == at.label) threads = 1;  // a point loop: its extent varies
  RowInputs<T> in;
  prepare(bound, plan, row, in);
  kernels::parallel_for(threads > 1 ? n : 1, threads, [&](std::int64_t lo, std::int64_t hi) {
    Nest<T, J, A, Store> nest(bound, plan, row, in, z);
    if (threads > 1)
      nest.run(split, lo, hi);
    else
      nest.run(plan.levels.size(), 0, 0);
  });
  return z;
}

template <typename T, typename F>
void dispatch(JoinOp j, AggOp a, F&& f) {
  auto with_agg = [&](auto jc) {
    switch (a) {
      case AggOp::sum:
        return f(jc, std::integral_constant<AggOp, AggOp::sum>{});
      case AggOp::max:
        return f(jc, std::integral_constant<AggOp, AggOp::max>{});
      case AggOp::min:
        return f(jc, std::integral_constant<AggOp, AggOp::min>{});
    }
  };
  switch (j) {
    case JoinOp::mul:
      return with_agg(std::integral_constant<JoinOp, JoinOp::mul>{});
    case JoinOp::add:
      return with_agg(std::integral_constant<JoinOp, JoinOp::add>{});
    case JoinOp::sub:
      return with_agg(std::integral_constant<JoinOp, JoinOp::sub>{});
    case JoinOp::sqdiff:
      return with_agg(std::integral_constant<JoinOp, JoinOp::sqdiff>{});
    case JoinOp::absdiff:
      return with_agg(std::integral_constant<JoinOp, JoinOp::absdiff>{});
    case JoinOp::max:
      return with_agg(std::integral_constant<JoinOp, JoinOp::max>{});
    case JoinOp::min:
      return with_agg(std::integral_constant<JoinOp, JoinOp::min>{});
  }
}

}  // namespace

Results run_loop_nest(const Bound& bound, const nlohmann::json& params) {
  const BatchedEinsum& e = bound.einsum();
  if (const auto why = loop_nest_rejects(e)) throw SpecError("loop_nest does not apply: " + *why);
  const int threads = read_threads(params, "loop_nest");
  check_param_keys(params, "loop_nest", {"order", "block", "threads"});
  const NestPlan plan = make_plan(e, bound.lengths(), params);
  kernels::BlasThreads blas(1);
  // Every index of the operands in the output, once, and no other: each element is written once.
  bool sums = false;
  for (const auto& in : e.inputs)
    for (char c : in) sums = sums || !contains(e.output, c);
  for (std::size_t a = 0; a < e.output.size(); ++a) {
    const bool read = std::any_of(e.inputs.begin(), e.inputs.end(),
                                  [&](const std::string& in) { return contains(in, e.output[a]); });
    sums = sums || e.output.find(e.output[a]) != a || !read;  // a diagonal, or a broadcast
  }
  Results out;
  for (std::size_t r = 0; r < e.batch.size(); ++r) {
    if (is_complex(result_dtype(e, r))) {
      // In real form (real_form.hpp), its parts the outermost loops: each pass is the real loop
      // nest over every other index in the order asked, reading and writing one part of each
      // element (at a stride of 2).
      const RealForm f = real_form(bound, r, threads);
      const Bound real(f.e, f.arrays);
      nlohmann::json p = params;
      const std::string order = params.contains("order")
                                    ? read_index_list(params, "order", "loop_nest")
                                    : default_order(e, bound.lengths());
      p["order"] = index_list_param(std::string(1, f.part) +
                                    (f.summed ? std::string(1, f.summed) : "") + order);
      out.push_back(f.complex_result(EINSUMDB_ISA_NS::run_loop_nest(real, p).at(0)));
      continue;
    }
    Tensor z;
    auto run = [&](auto jc, auto ac) {
      constexpr JoinOp J = decltype(jc)::value;
      constexpr AggOp A = decltype(ac)::value;
      const bool f32 = result_dtype(e, r) == Dtype::f32;
      if (!sums)  // ⊕ plays no part: one instantiation serves them all
        z = f32 ? run_row<float, J, AggOp::sum, true>(bound, plan, r, threads)
                : run_row<double, J, AggOp::sum, true>(bound, plan, r, threads);
      else
        z = f32 ? run_row<float, J, A, false>(bound, plan, r, threads)
                : run_row<double, J, A, false>(bound, plan, r, threads);
    };
    dispatch<double>(e.join, e.agg, run);
    out.push_back(std::move(z));
  }
  return out;
}

}  // namespace einsumdb::EINSUMDB_ISA_NS
EINSUMDB_TARGET_END
