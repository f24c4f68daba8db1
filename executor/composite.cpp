// The composite strategies: they rewrite the einsum and hand the pieces to other strategies.
//
// batch_fused: the operand positions whose array differs between rows are stacked along a new
// index β (a functional operand is evaluated while it is stacked), β is prepended to those
// operands and to the output, and the b rows become one einsum that reads every shared operand
// once: b matrix-vector products become one matrix-matrix product, b GEMMs sharing a factor one
// wider GEMM. Parameters: "inner" (the strategy for the fused einsum: ttgt, loop_over_gemm,
// contraction_tree or loop_nest; default the first that applies), "tile" (the fused einsum as
// a contraction tree of its FLOP-optimal order, tiled along an index of the output as
// contraction_tree's "tile" below; implies inner contraction_tree) and "threads".
//
// contraction_tree: 3+ operands are contracted pairwise. A step's result keeps, in order of
// appearance (left operand first), the indices that the output or a later operand needs.
// Parameters: "path": [[left, right], ...] where left and right are the index lists of two
// current operands ([{"index": i}, ...]; operands are named by their indices so that a path
// measured on one spelling applies to another), default: the FLOP-optimal order; "tile":
// [{"index": i}, size] (optional; see tiled_row below: the tree runs block by block along output
// index i so that a block's intermediates stay in cache); and "threads" (over blocks when
// tiled). Untiled, each step runs ttgt when it pays and applies and loop_nest otherwise; a last
// step puts the result into the output's order when it is not.
#include <algorithm>
#include <cstring>

#include "einsumdb/canon/contraction_path.hpp"
#include "einsumdb/executor/kernels.hpp"
#include "einsumdb/executor/product.hpp"

namespace einsumdb {
namespace {

using kernels::contains;

char fresh_label(const BatchedEinsum& e) {
  const std::string free = kernels::unused_letters(e, 1);
  return free.empty() ? 0 : free[0];
}

std::vector<bool> varying_positions(const BatchedEinsum& e) {
  std::vector<bool> v(e.inputs.size(), false);
  for (const auto& row : e.batch)
    for (std::size_t k = 0; k < row.size(); ++k)
      if (row[k] != e.batch[0][k]) v[k] = true;
  return v;
}

bool semiring(const BatchedEinsum& e) {
  return (e.join == JoinOp::mul && e.agg == AggOp::sum) ||
         (e.join == JoinOp::add && e.agg != AggOp::sum) ||
         (e.join == JoinOp::max && e.agg == AggOp::max) ||
         (e.join == JoinOp::min && e.agg == AggOp::min);
}

}  // namespace

std::optional<std::string> batch_fused_rejects(const BatchedEinsum& e) {
  if (e.batch.size() < 2) return "batch_fused fuses rows; this einsum has one";
  const auto v = varying_positions(e);
  if (std::all_of(v.begin(), v.end(), [](bool b) { return b; }))
    return "the rows share no operand (every operand position reads different arrays)";
  if (std::none_of(v.begin(), v.end(), [](bool b) { return b; }))
    return "every row reads the same arrays: there is nothing to stack";
  if (!fresh_label(e)) return "no letter is left to name the stacking index";
  // The stacked operands must agree in shape and dtype across rows.
  for (std::size_t k = 0; k < v.size(); ++k)
    if (v[k])
      for (const auto& row : e.batch)
        if (!(e.arrays.at(row[k]) == e.arrays.at(e.batch[0][k])))
          return "operand " + std::to_string(k) +
                 " has arrays of different shapes or dtypes in "
                 "different rows ('" +
                 e.batch[0][k] + "', '" + row[k] + "')";
  return kernels::dtype_rejects(e, "batch_fused");
}

BatchedEinsum batch_fused_einsum(const BatchedEinsum& e) {
  const char beta = fresh_label(e);
  const auto v = varying_positions(e);
  BatchedEinsum f;
  f.join = e.join, f.agg = e.agg;
  f.output = std::string(1, beta) + e.output;
  std::vector<std::string> row;
  for (std::size_t k = 0; k < e.inputs.size(); ++k) {
    f.inputs.push_back(v[k] ? std::string(1, beta) + e.inputs[k] : e.inputs[k]);
    const std::string name = v[k] ? "~stack" + std::to_string(k) : e.batch[0][k];
    ArrayInfo info = e.arrays.at(e.batch[0][k]);
    if (v[k])
      info.shape.insert(info.shape.begin(), Length::of(static_cast<std::int64_t>(e.batch.size())));
    f.arrays.emplace(name, info);
    row.push_back(name);
  }
  f.batch.push_back(row);
  return f;
}

Results run_batch_fused(const Bound& bound, const nlohmann::json& params) {
  const BatchedEinsum& e = bound.einsum();
  if (const auto why = batch_fused_rejects(e))
    throw SpecError("batch_fused does not apply: " + *why);
  check_param_keys(params, "batch_fused", {"inner", "threads", "tile"});
  const int threads = read_threads(params, "batch_fused");
  const BatchedEinsum f = batch_fused_einsum(e);
  std::string inner;
  if (params.contains("tile") && !params.contains("inner")) {
    inner = "contraction_tree";
  } else if (params.contains("inner")) {
    if (!params["inner"].is_string()) throw SpecError("batch_fused: 'inner' must name a strategy");
    inner = params["inner"].get<std::string>();
    if (inner == "batch_fused" || inner == "reference" || !find_strategy(inner))
      throw SpecError(
          "batch_fused: 'inner' must be ttgt, loop_over_gemm, contraction_tree or "
          "loop_nest, got '" +
          inner + "'");
    if (params.contains("tile") && inner != "contraction_tree")
      throw SpecError("batch_fused: a tile runs the fused einsum as a contraction tree; inner is " +
                      inner);
    if (const auto why = find_strategy(inner)->rejects(f))
      throw SpecError("batch_fused: inner strategy " + inner +
                      " does not apply to the fused "
                      "einsum " +
                      f.einsum_string() + ": " + *why);
  } else {
    for (const char* s : {"ttgt", "contraction_tree", "loop_over_gemm", "loop_nest"})
      if (!find_strategy(s)->rejects(f)) {
        inner = s;
        break;
      }
  }
  // Stack the varying operands (evaluating functions on the way); share the others as views.
  const auto v = varying_positions(e);
  const auto& len = bound.lengths();
  Arrays arrays;
  const Dtype dtype = result_dtype(e, 0);
  for (std::size_t k = 0; k < e.inputs.size(); ++k) {
    const std::string& name = f.batch[0][k];
    if (!v[k]) {
      const auto op = bound.operand(0, k);
      if (op.function) {  // keep it functional: the inner strategy fuses it
        arrays.emplace(op.function->array(), Tensor::view(*op.tensor));
      } else {
        arrays.emplace(name, Tensor::view(*op.tensor));
      }
      continue;
    }
    auto shape = kernels::shape_of(e.inputs[k], len);
    const std::int64_t block = kernels::product(e.inputs[k], len);
    shape.insert(shape.begin(), static_cast<std::int64_t>(e.batch.size()));
    Tensor stacked(dtype, shape, Tensor::Uninitialized{});
    for (std::size_t r = 0; r < e.batch.size(); ++r) {
      const auto op = bound.operand(r, k);
      with_element_type(dtype, [&](auto zero) {
        using T = decltype(zero);
        kernels::pack<T>(op, e.inputs[k], e.inputs[k], len,
                         stacked.data<T>() + static_cast<std::int64_t>(r) * block);
      });
    }
    arrays.emplace(name, std::move(stacked));
  }
  Functions functions;  // the shared functional operands, under their names in `f`
  for (std::size_t k = 0; k < e.inputs.size(); ++k)
    if (!v[k])
      if (const auto op = bound.operand(0, k); op.function)
        functions.emplace(e.batch[0][k], *op.function);
  const Bound fb(f, arrays, functions);
  nlohmann::json inner_params{{"threads", threads}};
  if (params.contains("tile")) inner_params["tile"] = params["tile"];
  Results all;
  try {
    all = execute(fb, inner, inner_params);
  } catch (const SpecError& err) {  // (a tile the fused tree cannot take)
    throw SpecError(std::string("batch_fused: ") + err.what());
  }
  // The rows' results are slices of the [β, output...] result (no copies).
  Results out;
  const Tensor& z = all.at(0);
  const std::int64_t block = kernels::product(e.output, len);
  for (std::size_t r = 0; r < e.batch.size(); ++r)
    out.push_back(
        Tensor::slice(z, static_cast<std::int64_t>(r) * block, kernels::shape_of(e.output, len)));
  return out;
}

// ---- contraction_tree

std::optional<std::string> contraction_tree_rejects(const BatchedEinsum& e) {
  if (e.inputs.size() < 3)
    return "contraction_tree orders 3 or more operands; this einsum has " +
           std::to_string(e.inputs.size());
  if (!semiring(e))
    return std::string(to_string(e.join)) + "/" + std::string(to_string(e.agg)) +
           " cannot be evaluated pairwise (mul/sum, add/max, add/min, max/max, min/min can)";
  return kernels::dtype_rejects(e, "contraction_tree");
}

std::string contraction_step_result(const std::string& a, const std::string& b,
                                    const std::string& others) {
  std::string r;
  for (char c : a + b)
    if (contains(others, c) && !contains(r, c)) r += c;
  return r;
}

namespace {

// Whether a pairwise step is worth a GEMM per batch point: it sums something and each GEMM has at
// least 4096 multiply-adds, or 64 when it is small enough for a libxsmm kernel (a call costs tens
// of nanoseconds there, against a microsecond in OpenBLAS); otherwise (Hadamard products, tiny
// GEMMs) the loop nest is faster.
bool gemm_pays(const BatchedEinsum& s, const std::map<char, std::int64_t>& len) {
  if (ttgt_rejects(s)) return false;
  std::int64_t m = 1, n = 1, k = 1;
  const std::string &x = s.inputs[0], &y = s.inputs[1];
  for (char c : x)
    if (contains(y, c) && !contains(s.output, c)) k *= len.at(c);
  for (char c : s.output) {
    if (contains(x, c) && !contains(y, c)) m *= len.at(c);
    if (contains(y, c) && !contains(x, c)) n *= len.at(c);
  }
  bool sums = false;
  for (char c : x)
    if (contains(y, c) && !contains(s.output, c)) sums = true;
  using kernels::kSmallGemmArea, kernels::kSmallGemmMax;
  const bool small = k <= kSmallGemmMax && ((n <= kSmallGemmMax && n * k <= kSmallGemmArea) ||
                                            (m <= kSmallGemmMax && m * k <= kSmallGemmArea));
  return sums && m * n * k >= (small ? 64 : 4096);
}

}  // namespace

// The path of the FLOP-optimal order, as the "path" parameter.
nlohmann::json default_contraction_path(const BatchedEinsum& e,
                                        const std::map<char, std::int64_t>& lengths) {
  const ContractionPath p = contraction_path(e.inputs, e.output, lengths);
  std::vector<std::string> ops = e.inputs;  // indexed as the planner numbers them
  std::vector<std::string> live = e.inputs;
  std::vector<bool> used(e.inputs.size() + p.steps.size(), false);
  nlohmann::json path = nlohmann::json::array();
  for (const auto& s : p.steps) {
    const std::string &a = ops[static_cast<std::size_t>(s.left)],
                      &b = ops[static_cast<std::size_t>(s.right)];
    used[static_cast<std::size_t>(s.left)] = used[static_cast<std::size_t>(s.right)] = true;
    std::string others = e.output;
    for (std::size_t k = 0; k < ops.size(); ++k)
      if (!used[k]) others += ops[k];
    path.push_back({index_list_param(a), index_list_param(b)});
    ops.push_back(contraction_step_result(a, b, others));
  }
  return path;
}

namespace {

// A contraction tree resolved against an einsum: the steps over node ids (operands 0..n-1, then
// step k's result n + k) and each node's layout.
struct TreePlan {
  struct Step {
    std::size_t a, b;
    std::string labels;  // the result's indices in their default order (how the path names it)
  };
  std::vector<Step> steps;
  std::vector<std::string> layout;
};

TreePlan plan_tree(const BatchedEinsum& e, const nlohmann::json& path) {
  if (!path.is_array() || path.size() != e.inputs.size() - 1)
    throw SpecError("contraction_tree: 'path' must list " + std::to_string(e.inputs.size() - 1) +
                    " steps [[left indices], [right indices]]");
  std::vector<std::pair<std::string, std::string>> steps;
  for (const auto& s : path) {
    if (!s.is_array() || s.size() != 2)
      throw SpecError(
          "contraction_tree: each path step is [[left indices], [right indices]], got " + s.dump());
    // An operand's indices may repeat (a diagonal).
    steps.emplace_back(read_index_list(nlohmann::json{{"l", s[0]}}, "l", "contraction_tree", true),
                       read_index_list(nlohmann::json{{"r", s[1]}}, "r", "contraction_tree", true));
  }
  // The steps over node ids (operands 0..n-1, then step k's result n + k), resolved from the
  // path's index lists once for all rows.
  const std::size_t n = e.inputs.size();
  TreePlan tree;
  auto& plan = tree.steps;
  {
    std::vector<std::pair<std::string, std::size_t>> live;  // (path name, node)
    for (std::size_t k = 0; k < n; ++k) live.emplace_back(e.inputs[k], k);
    for (std::size_t k = 0; k < steps.size(); ++k) {
      auto find = [&](const std::string& labels, std::size_t skip) {
        for (std::size_t i = 0; i < live.size(); ++i)
          if (i != skip && live[i].first == labels) return i;
        std::string current;
        for (const auto& it : live) current += (current.empty() ? "" : ", ") + it.first;
        throw SpecError("contraction_tree: path step " + std::to_string(k) +
                        " names an operand with indices '" + labels +
                        "' but the current operands are " + current);
      };
      const std::size_t i = find(steps[k].first, live.size());
      const std::size_t j = find(steps[k].second, i);
      std::string others = e.output;
      for (std::size_t q = 0; q < live.size(); ++q)
        if (q != i && q != j) others += live[q].first;
      plan.push_back({live[i].second, live[j].second,
                      contraction_step_result(live[i].first, live[j].first, others)});
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(std::max(i, j)));
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(std::min(i, j)));
      live.emplace_back(plan.back().labels, n + k);
    }
  }
  // Each intermediate's layout, chosen by its consumer (last step first) so that a GEMM step
  // reads it in place: [batch, M, K] as the left operand, [batch, K, N] as the right one, K in
  // the order of the other operand. The last result takes the output's order when it can.
  auto& layout = tree.layout;
  layout.resize(n + plan.size());
  for (std::size_t k = 0; k < n; ++k) layout[k] = e.inputs[k];
  for (std::size_t k = 0; k < plan.size(); ++k) layout[n + k] = plan[k].labels;
  {
    std::string a = plan.back().labels, b = e.output;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    if (a == b) layout.back() = e.output;
  }
  if (e.join == JoinOp::mul && e.agg == AggOp::sum)
    for (std::size_t k = plan.size(); k-- > 0;) {
      const std::string &r = layout[n + k], &p = layout[plan[k].a], &q = layout[plan[k].b];
      std::string batch, m, nn, kk;
      for (char c : r) {
        if (contains(p, c) && contains(q, c))
          batch += c;
        else if (contains(p, c))
          m += c;
        else if (contains(q, c))
          nn += c;
      }
      const bool a_mid = plan[k].a >= n, b_mid = plan[k].b >= n;
      for (char c : (a_mid && !b_mid) ? q : p)
        if (contains(p, c) && contains(q, c) && !contains(r, c)) kk += c;
      const std::string pa = batch + m + kk, qb = batch + kk + nn;
      // Only a permutation of the same indices (an operand may also sum an index privately).
      auto same_set = [](std::string x, std::string y) {
        std::sort(x.begin(), x.end());
        std::sort(y.begin(), y.end());
        return x == y;
      };
      if (a_mid && same_set(pa, p)) layout[plan[k].a] = pa;
      if (b_mid && same_set(qb, q)) layout[plan[k].b] = qb;
    }

  return tree;
}

// The "tile" parameter, [{"index": i}, size], checked against the tree: the index and the tile
// length. Tiling runs every step as a product of two operands (mul/sum, each index of an operand
// in the other one or in the step's result), on an index the output keeps once.
std::pair<char, std::int64_t> read_tile(const BatchedEinsum& e, const TreePlan& tree,
                                        const nlohmann::json& t) {
  if (!t.is_array() || t.size() != 2 || !t[1].is_number_integer() || t[1].get<long>() < 1)
    throw SpecError("contraction_tree: 'tile' is [{\"index\": i}, size ≥ 1], got " + t.dump());
  const char c = read_index_list(nlohmann::json{{"i", nlohmann::json::array({t[0]})}}, "i",
                                 "contraction_tree")[0];
  const std::string what = std::string("contraction_tree: cannot tile index '") + c + "': ";
  if (std::count(e.output.begin(), e.output.end(), c) != 1)
    throw SpecError(what + "only an index the output keeps (once) can be tiled");
  if (e.join != JoinOp::mul || e.agg != AggOp::sum)
    throw SpecError(what + "a tiled tree runs its steps as products, which needs mul/sum");
  for (std::size_t q = 0; q < e.output.size(); ++q)
    if (e.output.find(e.output[q]) != q)
      throw SpecError(what + "the output repeats index '" + e.output[q] + "'");
  const std::size_t n = e.inputs.size();
  for (std::size_t k = 0; k < tree.steps.size(); ++k) {
    const std::string &x = tree.layout[tree.steps[k].a], &y = tree.layout[tree.steps[k].b];
    const std::string& r = k + 1 == tree.steps.size() ? e.output : tree.layout[n + k];
    for (const std::string* op : {&x, &y})
      for (std::size_t q = 0; q < op->size(); ++q) {
        const char l = (*op)[q];
        if (op->find(l) != q || ((!contains(x, l) || !contains(y, l)) && !contains(r, l)))
          throw SpecError(what + "step " + std::to_string(k) + " (" + x + "," + y + "->" + r +
                          ") is not a product of two operands: index '" + l + "' is " +
                          (op->find(l) != q ? "repeated (a diagonal)" : "summed within one"));
      }
  }
  return {c, t[1].get<std::int64_t>()};
}

// The tree run block by block along index c: each step that involves c runs on the blocks of
// its operands in place (leaves at the block's offset, intermediates in per-thread buffers of
// one block), the last one writing into the output's block, so the intermediates of a block
// stay in cache instead of making round trips to memory. The products are prepared once per
// block length; steps without c run once, whole, before the blocks. Blocks are divided among the
// threads.
template <typename T>
Tensor tiled_row(const Bound& bound, std::size_t row, const TreePlan& tree, char c,
                 std::int64_t tile, int threads) {
  using kernels::Product, kernels::Strided;
  const BatchedEinsum& e = bound.einsum();
  const auto& len = bound.lengths();
  const std::size_t n = e.inputs.size(), steps = tree.steps.size(), nodes = n + steps;
  const auto& layout = tree.layout;
  Tensor out(result_dtype(e, row), kernels::shape_of(e.output, len), Tensor::Uninitialized{});
  const auto out_strides = out.strides();
  auto groups = [&](std::size_t k) {  // ttgt's default group orders
    BatchedEinsum s;
    s.inputs = {layout[tree.steps[k].a], layout[tree.steps[k].b]};
    s.output = k + 1 == steps ? e.output : layout[n + k];
    return ttgt_groups(s);
  };
  std::vector<bool> has(nodes);
  std::vector<const T*> base(nodes, nullptr);
  std::vector<std::vector<std::int64_t>> strides(nodes);
  std::vector<const Expression*> function(nodes, nullptr);
  for (std::size_t k = 0; k < nodes; ++k) has[k] = contains(layout[k], c);
  for (std::size_t k = 0; k < n; ++k) {
    const auto op = bound.operand(row, k);
    base[k] = op.tensor->data<T>();
    strides[k] = op.tensor->strides();
    function[k] = op.function;
  }
  kernels::BlasThreads blas(1);  // the blocks run on their own threads, one product at a time
  // Steps whose result lacks c read no operand with c: once, whole.
  std::vector<Tensor> whole(steps);
  for (std::size_t k = 0; k < steps; ++k) {
    if (has[n + k]) continue;
    const std::size_t a = tree.steps[k].a, b = tree.steps[k].b;
    whole[k] = Tensor(out.dtype(), kernels::shape_of(layout[n + k], len), Tensor::Uninitialized{});
    const Product<T> p(groups(k), len, {layout[a], strides[a]}, {layout[b], strides[b]},
                       {layout[n + k], whole[k].strides()}, function[a] != nullptr,
                       function[b] != nullptr);
    Tensor scratch(out.dtype(), {p.scratch()}, Tensor::Uninitialized{});
    p.run(base[a], function[a], base[b], function[b], whole[k].data<T>(), scratch.data<T>(), 1);
    base[n + k] = whole[k].data<T>();
    strides[n + k] = whole[k].strides();
  }
  // Per block length: the products, and where each block intermediate and the products' scratch
  // sit in a thread's memory.
  struct Prepared {
    std::vector<std::optional<Product<T>>> products;
    std::vector<std::int64_t> at;  // per node: its block buffer's offset
    std::int64_t scratch_at = 0, size = 0;
  };
  auto prepare = [&](std::int64_t t) {
    auto lt = len;
    lt[c] = t;
    Prepared p;
    p.at.assign(nodes, 0);
    for (std::size_t k = 0; k + 1 < steps; ++k)
      if (has[n + k]) {
        p.at[n + k] = p.size;
        p.size += kernels::product(layout[n + k], lt);
      }
    auto side = [&](std::size_t node) {
      return node < n || !has[node]
                 ? Strided{layout[node], strides[node]}
                 : Strided{layout[node], kernels::row_major_strides(layout[node], lt)};
    };
    std::int64_t scratch = 0;
    p.products.resize(steps);
    for (std::size_t k = 0; k < steps; ++k) {
      if (!has[n + k]) continue;
      const std::size_t a = tree.steps[k].a, b = tree.steps[k].b;
      p.products[k].emplace(groups(k), lt, side(a), side(b),
                            k + 1 == steps ? Strided{e.output, out_strides} : side(n + k),
                            function[a] != nullptr, function[b] != nullptr);
      // Operands without c are the same for every block: packed once.
      if (!has[a]) p.products[k]->fix_a(base[a], function[a]);
      if (!has[b]) p.products[k]->fix_b(base[b], function[b]);
      scratch = std::max(scratch, p.products[k]->scratch());
    }
    p.scratch_at = p.size;
    p.size += scratch;
    return p;
  };
  const std::int64_t total = len.at(c), tiles = (total + tile - 1) / tile;
  const std::int64_t rest = total - (tiles - 1) * tile;
  const Prepared full = prepare(tile), tail = rest == tile ? Prepared{} : prepare(rest);
  auto offset = [&](std::size_t node) {  // elements per unit of c in a leaf
    return node < n && has[node] ? strides[node][layout[node].find(c)] : 0;
  };
  const std::int64_t out_step = out_strides[e.output.find(c)];
  kernels::parallel_for(tiles, threads, [&](std::int64_t lo, std::int64_t hi) {
    Tensor memory(out.dtype(), {full.size}, Tensor::Uninitialized{});
    T* mem = memory.data<T>();
    std::vector<const T*> at(nodes);
    for (std::int64_t q = lo; q < hi; ++q) {
      check_deadline();
      const Prepared& p = q + 1 < tiles || rest == tile ? full : tail;
      const std::int64_t c0 = q * tile;
      for (std::size_t node = 0; node < nodes; ++node)
        at[node] = node >= n && has[node] ? mem + p.at[node] : base[node] + c0 * offset(node);
      // The next block of each leaf led by c is one contiguous range: fetched into cache while
      // this block computes, so that packing it (a function applied) does not wait on memory.
      if (q + 1 < hi)
        for (std::size_t node = 0; node < n; ++node)
          if (has[node] && layout[node][0] == c) {
            const T* next = at[node] + tile * offset(node);
            const std::int64_t count = std::min(tile, total - c0 - tile) * offset(node);
            for (std::int64_t i = 0; i < count; i += 64 / sizeof(T))
              __builtin_prefetch(next + i, 0, 2);
          }
      for (std::size_t k = 0; k < steps; ++k) {
        if (!has[n + k]) continue;
        const std::size_t a = tree.steps[k].a, b = tree.steps[k].b;
        T* z = k + 1 == steps ? out.data<T>() + c0 * out_step : mem + p.at[n + k];
        p.products[k]->run(at[a], function[a], at[b], function[b], z, mem + p.scratch_at, 1);
      }
    }
  });
  return out;
}

}  // namespace

bool contraction_tree_tiles(const BatchedEinsum& e, const nlohmann::json& path, char c) {
  try {
    read_tile(e, plan_tree(e, path), nlohmann::json::array({index_param(c), 1}));
    return true;
  } catch (const SpecError&) {
    return false;
  }
}

Results run_contraction_tree(const Bound& bound, const nlohmann::json& params) {
  const BatchedEinsum& e = bound.einsum();
  if (const auto why = contraction_tree_rejects(e))
    throw SpecError("contraction_tree does not apply: " + *why);
  check_param_keys(params, "contraction_tree", {"path", "tile", "threads"});
  const int threads = read_threads(params, "contraction_tree");
  const TreePlan tree = plan_tree(
      e, params.contains("path") ? params["path"] : default_contraction_path(e, bound.lengths()));
  const auto& plan = tree.steps;
  const auto& layout = tree.layout;
  const std::size_t n = e.inputs.size();
  if (params.contains("tile")) {
    const auto tiled = read_tile(e, tree, params["tile"]);
    const char c = tiled.first;
    const std::int64_t tile = tiled.second;
    if (tile < bound.length(c)) {
      Results out;
      for (std::size_t row = 0; row < e.batch.size(); ++row)
        out.push_back(with_element_type(result_dtype(e, row), [&](auto zero) {
          return tiled_row<decltype(zero)>(bound, row, tree, c, tile, threads);
        }));
      return out;
    }
  }
  const auto& len = bound.lengths();
  Results out;
  for (std::size_t row = 0; row < e.batch.size(); ++row) {
    std::vector<std::string> names(n + plan.size());
    Arrays arrays;  // views of the leaves and the intermediates, by name
    Functions functions;
    for (std::size_t k = 0; k < n; ++k) {
      const auto op = bound.operand(row, k);
      names[k] = e.batch[row][k];
      if (op.function) {
        functions.emplace(names[k], *op.function);
        arrays.emplace(op.function->array(), Tensor::view(*op.tensor));
      } else {
        arrays.emplace(names[k], Tensor::view(*op.tensor));
      }
    }
    auto info_of = [&](std::size_t node) {
      if (node < n) return e.arrays.at(names[node]);
      ArrayInfo info;
      info.dtype = result_dtype(e, row);
      for (char c : layout[node]) info.shape.push_back(Length::of(len.at(c)));
      return info;
    };
    for (std::size_t k = 0; k < plan.size(); ++k) {
      const std::size_t a = plan[k].a, b = plan[k].b;
      BatchedEinsum s;
      s.join = e.join, s.agg = e.agg;
      s.inputs = {layout[a], layout[b]};
      s.output = layout[n + k];
      s.batch = {{names[a], names[b]}};
      s.arrays.emplace(names[a], info_of(a));
      s.arrays.emplace(names[b], info_of(b));
      const Bound sb(s, arrays, functions);
      // A complex step goes to ttgt (complex GEMM) where it can, loop_nest (in real form) where
      // it cannot (an index summed within one operand), the reference where neither can.
      const bool complex = is_complex(result_dtype(s, 0));
      const char* strategy = !complex                ? (gemm_pays(s, len) ? "ttgt" : "loop_nest")
                             : !ttgt_rejects(s)      ? "ttgt"
                             : !loop_nest_rejects(s) ? "loop_nest"
                                                     : "reference";
      Tensor t = std::move(execute(sb, strategy, nlohmann::json{{"threads", threads}}).at(0));
      names[n + k] = "~t" + std::to_string(k);
      arrays.emplace(names[n + k], std::move(t));
    }
    const std::size_t last = n + plan.size() - 1;
    if (layout[last] == e.output) {
      out.push_back(std::move(arrays.at(names[last])));
      continue;
    }
    // Reorder (or reduce) into the output.
    BatchedEinsum s;
    s.join = e.join, s.agg = e.agg;
    s.inputs = {layout[last]};
    s.output = e.output;
    s.batch = {{names[last]}};
    s.arrays.emplace(names[last], info_of(last));
    const Bound sb(s, arrays, functions);
    out.push_back(std::move(run_loop_nest(sb, nlohmann::json{{"threads", threads}}).at(0)));
  }
  return out;
}

}  // namespace einsumdb
