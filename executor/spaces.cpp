// The parameter spaces the tuner searches, one per strategy, in the workload's names and without
// "threads" (the tuner adds the thread counts asked for). Each strategy's first parameters are
// its default. Registered with the strategies (Strategy::space, execute.hpp).
#include <algorithm>
#include <set>

#include "einsumdb/executor/execute.hpp"
#include "einsumdb/executor/kernels.hpp"
#include "einsumdb/executor/real_form.hpp"

namespace einsumdb {
namespace {

using kernels::contains;

std::string all_labels(const BatchedEinsum& e) {
  std::string all;
  for (const auto& in : e.inputs)
    for (char c : in)
      if (!contains(all, c)) all += c;
  return all;
}

}  // namespace

std::vector<nlohmann::json> loop_nest_space(const BatchedEinsum& e,
                                            const std::map<char, std::int64_t>& len) {
  const std::string all = all_labels(e);
  std::string summed, def = e.output;
  for (char c : all)
    if (!contains(e.output, c)) summed += c;
  def += summed;
  std::vector<std::string> orders{def};
  auto add = [&](const std::string& o) {
    if (std::find(orders.begin(), orders.end(), o) == orders.end()) orders.push_back(o);
  };
  if (all.size() <= 4) {
    std::string p = def;
    std::sort(p.begin(), p.end());
    do add(p);
    while (std::next_permutation(p.begin(), p.end()));
  } else {
    add(summed + e.output);
    for (char c : def) {  // each index innermost, the others in the default order
      std::string o;
      for (char d : def)
        if (d != c) o += d;
      add(o + c);
    }
  }
  // First the executor's own choice (by locality), then explicit orders.
  std::vector<nlohmann::json> out{nlohmann::json::object()};
  for (const auto& o : orders) out.push_back({{"order", index_list_param(o)}});
  // Blocked variants of the default order: one or two of its three innermost indices.
  const std::size_t n = def.size();
  for (std::int64_t size : {32, 128})
    for (std::size_t a = n >= 3 ? n - 3 : 0; a < n; ++a) {
      if (len.at(def[a]) <= size) continue;
      out.push_back({{"order", index_list_param(def)},
                     {"block", nlohmann::json::array({{index_param(def[a]), size}})}});
      for (std::size_t b = a + 1; b < n; ++b)
        if (len.at(def[b]) > size)
          out.push_back({{"order", index_list_param(def)},
                         {"block", nlohmann::json::array({{index_param(def[a]), size},
                                                          {index_param(def[b]), size}})}});
    }
  return out;
}

std::vector<nlohmann::json> ttgt_space(const BatchedEinsum& e,
                                       const std::map<char, std::int64_t>&) {
  const std::string &x = e.inputs[0], &y = e.inputs[1], &z = e.output;
  const auto [batch, m, n, k] = gemm_groups(e);
  (void)batch;
  std::vector<nlohmann::json> out;
  std::set<std::string> seen;
  for (const auto& mo : {in_order_of(m, x), in_order_of(m, z)})
    for (const auto& no : {in_order_of(n, y), in_order_of(n, z)})
      for (const auto& ko : {in_order_of(k, x), in_order_of(k, y)})
        if (seen.insert(mo + "|" + no + "|" + ko).second)
          out.push_back({{"m", index_list_param(mo)},
                         {"n", index_list_param(no)},
                         {"k", index_list_param(ko)}});
  // Complex: the 3M method too, in the default orders, where the product is a GEMM (rows,
  // columns and a sum; ?gemv has no 3M form). It pays on large products only. (A row whose real
  // factor ttgt reads as it lies is one real GEMM, with no 3M form.)
  bool complex_product = false;
  for (std::size_t r = 0; r < e.batch.size(); ++r)
    complex_product |= is_complex(result_dtype(e, r)) && !ttgt_reads_real_factor(e, r);
  if (complex_product && !m.empty() && !n.empty() && !k.empty()) out.push_back({{"gemm3m", true}});
  return out;
}

std::vector<nlohmann::json> loop_over_gemm_space(const BatchedEinsum& e,
                                                 const std::map<char, std::int64_t>&) {
  std::vector<nlohmann::json> out;
  const auto choices = loop_over_gemm_choices(e);
  for (const auto& [m, n, k] : choices)
    out.push_back(
        {{"m", index_list_param(m)}, {"n", index_list_param(n)}, {"k", index_list_param(k)}});
  // Complex: the 3M method too, on the widest groups (the first choice: the largest products),
  // where they form a GEMM (as ttgt_space).
  if (!choices.empty() && has_complex_row(e) &&
      std::all_of(choices[0].begin(), choices[0].end(), [](const auto& g) { return !g.empty(); })) {
    out.push_back(out.front());
    out.back()["gemm3m"] = true;
  }
  return out;
}

namespace {

// The output's longest index (0 for a scalar).
char longest_index(const BatchedEinsum& e, const std::map<char, std::int64_t>& len) {
  char longest = 0;
  for (char c : e.output)
    if (!longest || len.at(c) > len.at(longest)) longest = c;
  return longest;
}

// Tiles tried along an index of length n: 256 and 16, each when it makes at least two.
std::vector<std::int64_t> tile_sizes(std::int64_t n) {
  std::vector<std::int64_t> out;
  for (std::int64_t size : {256, 16})
    if (2 * size <= n) out.push_back(size);
  return out;
}

}  // namespace

std::vector<nlohmann::json> batch_fused_space(const BatchedEinsum& e,
                                              const std::map<char, std::int64_t>& len) {
  const BatchedEinsum f = batch_fused_einsum(e);
  std::vector<nlohmann::json> out;
  for (const char* inner : {"ttgt", "contraction_tree", "loop_over_gemm", "loop_nest"})
    if (!find_strategy(inner)->rejects(f)) out.push_back({{"inner", inner}});
  // The fused contraction tree also tiled along the output's longest index, as contraction_tree
  // is below (the stacking index β leads the fused output; a tile runs under it).
  const char longest = longest_index(e, len);
  if (!longest || find_strategy("contraction_tree")->rejects(f)) return out;
  auto f_len = len;
  f_len[f.output[0]] = static_cast<std::int64_t>(e.batch.size());
  const nlohmann::json path = default_contraction_path(f, f_len);
  if (contraction_tree_tiles(f, path, longest))
    for (std::int64_t size : tile_sizes(len.at(longest)))
      out.push_back({{"inner", "contraction_tree"}, {"tile", {index_param(longest), size}}});
  return out;
}

namespace {

// Every pairwise order for up to 4 operands (3 for three, 18 for four); the FLOP-optimal one
// only beyond.
void all_paths(const std::vector<std::string>& ops, const std::string& output,
               nlohmann::json& prefix, std::vector<nlohmann::json>& out) {
  if (ops.size() == 1) {
    out.push_back(prefix);
    return;
  }
  for (std::size_t i = 0; i < ops.size(); ++i)
    for (std::size_t j = i + 1; j < ops.size(); ++j) {
      std::string others = output;
      std::vector<std::string> next;
      for (std::size_t q = 0; q < ops.size(); ++q)
        if (q != i && q != j) others += ops[q], next.push_back(ops[q]);
      next.push_back(contraction_step_result(ops[i], ops[j], others));
      prefix.push_back({index_list_param(ops[i]), index_list_param(ops[j])});
      all_paths(next, output, prefix, out);
      prefix.erase(prefix.size() - 1);
    }
}

}  // namespace

std::vector<nlohmann::json> contraction_tree_space(const BatchedEinsum& e,
                                                   const std::map<char, std::int64_t>& len) {
  const nlohmann::json best = default_contraction_path(e, len);
  std::vector<nlohmann::json> out{{{"path", best}}};
  if (e.inputs.size() <= 4) {
    std::vector<nlohmann::json> paths;
    nlohmann::json prefix = nlohmann::json::array();
    all_paths(e.inputs, e.output, prefix, paths);
    for (const auto& p : paths)
      if (p != best) out.push_back({{"path", p}});
  }
  // Each path also tiled along the output's longest index (tile_sizes()), if the tree can be;
  // right after it, so that a budget reaches the tiled FLOP-optimal path early.
  const char longest = longest_index(e, len);
  if (!longest) return out;
  std::vector<nlohmann::json> all;
  for (const auto& p : out) {
    all.push_back(p);
    if (contraction_tree_tiles(e, p["path"], longest))
      for (std::int64_t size : tile_sizes(len.at(longest))) {
        all.push_back(p);
        all.back()["tile"] = {index_param(longest), size};
      }
  }
  return all;
}

}  // namespace einsumdb
