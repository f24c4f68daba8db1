// Test support: an exhaustive isomorphism check for small batched einsums (Definitions 5.1 and
// 5.3 of the Feinsum paper, with symbol renaming and the join/aggregation operators) and a
// random generator of valid batched einsums with the features canonicalization must handle.
#pragma once

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "einsumdb/canon/model.hpp"

namespace einsumdb::testing {

// Tries every operand permutation and every row permutation; for each, the index, array and
// symbol maps are forced, and only their consistency and bijectivity are checked.
inline bool brute_force_isomorphic(const BatchedEinsum& a, const BatchedEinsum& b) {
  const std::size_t n = a.inputs.size(), rows = a.batch.size();
  if (n != b.inputs.size() || rows != b.batch.size() || a.output.size() != b.output.size() ||
      a.join != b.join || a.agg != b.agg || a.arrays.size() != b.arrays.size())
    return false;
  const auto len_a = a.index_lengths(), len_b = b.index_lengths();
  if (len_a.size() != len_b.size()) return false;

  std::vector<std::size_t> op(n), row(rows);
  std::iota(op.begin(), op.end(), std::size_t{0});
  do {
    if (!is_commutative(a.join) && !std::is_sorted(op.begin(), op.end())) continue;
    // Index bijection forced by the operand permutation and the output.
    std::map<char, char> fwd, bwd;
    auto bind = [&](char x, char y) {
      auto [i, ins] = fwd.emplace(x, y);
      auto [k, ins2] = bwd.emplace(y, x);
      return i->second == y && k->second == x;
    };
    bool ok = true;
    for (std::size_t j = 0; j < n && ok; ++j) {
      const auto &ia = a.inputs[j], &ib = b.inputs[op[j]];
      ok = ia.size() == ib.size();
      for (std::size_t d = 0; d < ia.size() && ok; ++d) ok = bind(ia[d], ib[d]);
    }
    for (std::size_t d = 0; d < a.output.size() && ok; ++d) ok = bind(a.output[d], b.output[d]);
    if (!ok) continue;
    // Lengths: concrete equal, symbols under one bijection.
    std::map<std::string, std::string> sf, sb;
    for (const auto& [x, la] : len_a) {
      const Length& lb = len_b.at(fwd.at(x));
      if (la.symbolic() != lb.symbolic()) {
        ok = false;
        break;
      }
      if (!la.symbolic()) {
        if (la.value != lb.value) {
          ok = false;
          break;
        }
        continue;
      }
      auto [i, i1] = sf.emplace(la.symbol, lb.symbol);
      auto [k, k1] = sb.emplace(lb.symbol, la.symbol);
      if (i->second != lb.symbol || k->second != la.symbol) {
        ok = false;
        break;
      }
    }
    if (!ok) continue;
    std::iota(row.begin(), row.end(), std::size_t{0});
    do {
      std::map<std::string, std::string> af, ab;
      bool rows_ok = true;
      for (std::size_t i = 0; i < rows && rows_ok; ++i)
        for (std::size_t j = 0; j < n && rows_ok; ++j) {
          const std::string &x = a.batch[i][j], &y = b.batch[row[i]][op[j]];
          auto [p, p1] = af.emplace(x, y);
          auto [q, q1] = ab.emplace(y, x);
          rows_ok =
              p->second == y && q->second == x && a.arrays.at(x).dtype == b.arrays.at(y).dtype;
        }
      if (rows_ok) return true;
    } while (std::next_permutation(row.begin(), row.end()));
  } while (std::next_permutation(op.begin(), op.end()));
  return false;
}

struct RandomEinsumOptions {
  int max_operands = 4;
  int max_indices = 6;
  int max_rank = 3;
  int max_rows = 4;
  double symbol_probability = 0.1;
  double reuse_probability = 0.45;
  bool other_ops = true;
  int max_length = 5;        // concrete lengths are drawn from 2..max_length
  bool mixed_dtypes = true;  // false: every array is f64
};

inline BatchedEinsum random_einsum(std::mt19937_64& rng, const RandomEinsumOptions& o = {}) {
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto chance = [&](double p) { return std::bernoulli_distribution(p)(rng); };
  static const std::string letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  std::string pool = letters;
  std::shuffle(pool.begin(), pool.end(), rng);
  const int k = uniform(1, o.max_indices);
  std::map<char, Length> lengths;
  for (int x = 0; x < k; ++x)
    lengths[pool[x]] = chance(o.symbol_probability) ? Length::named(chance(0.5) ? "Ne" : "Nq")
                                                    : Length::of(uniform(2, o.max_length));
  BatchedEinsum e;
  const int n = uniform(1, o.max_operands);
  std::string used;
  for (int j = 0; j < n; ++j) {
    std::string list;
    const int rank = uniform(j == 0 ? 1 : 0, o.max_rank);
    for (int d = 0; d < rank; ++d) list += pool[uniform(0, k - 1)];
    e.inputs.push_back(list);
    used += list;
  }
  std::sort(used.begin(), used.end());
  used.erase(std::unique(used.begin(), used.end()), used.end());
  std::shuffle(used.begin(), used.end(), rng);
  e.output = used.substr(0, uniform(0, std::min<int>(3, static_cast<int>(used.size()))));

  static const Dtype dtypes[] = {Dtype::f64, Dtype::f64, Dtype::f32, Dtype::c128, Dtype::i32};
  const int b = uniform(1, o.max_rows);
  int next_array = 0;
  for (int i = 0; i < b; ++i) {
    std::vector<std::string> row;
    for (int j = 0; j < n; ++j) {
      std::vector<Length> shape;
      for (char c : e.inputs[j]) shape.push_back(lengths.at(c));
      std::vector<std::string> compatible;
      for (const auto& [name, info] : e.arrays)
        if (info.shape == shape) compatible.push_back(name);
      if (!compatible.empty() && chance(o.reuse_probability)) {
        row.push_back(compatible[uniform(0, static_cast<int>(compatible.size()) - 1)]);
      } else {
        const std::string name = "X" + std::to_string(next_array++);
        e.arrays[name] = ArrayInfo{shape, o.mixed_dtypes ? dtypes[uniform(0, 4)] : Dtype::f64};
        row.push_back(name);
      }
    }
    e.batch.push_back(std::move(row));
  }
  if (o.other_ops && chance(0.2)) {
    e.join = static_cast<JoinOp>(uniform(0, 6));
    e.agg = static_cast<AggOp>(uniform(0, 2));
  }
  return e;
}

// A random spelling of the same batched einsum: indices, arrays and symbols renamed, operands
// (when the join commutes) and rows permuted.
inline BatchedEinsum random_respelling(const BatchedEinsum& e, std::mt19937_64& rng) {
  std::string letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  std::shuffle(letters.begin(), letters.end(), rng);
  std::map<char, char> index;
  for (const auto& [c, len] : e.index_lengths()) index.emplace(c, letters[index.size()]);
  std::map<std::string, std::string> array, symbol;
  for (const auto& [name, info] : e.arrays)
    array.emplace(name,
                  "arr_" + std::to_string(rng() % 1000000) + "_" + std::to_string(array.size()));
  std::vector<std::size_t> op(e.inputs.size()), row(e.batch.size());
  std::iota(op.begin(), op.end(), std::size_t{0});
  std::iota(row.begin(), row.end(), std::size_t{0});
  if (is_commutative(e.join)) std::shuffle(op.begin(), op.end(), rng);
  std::shuffle(row.begin(), row.end(), rng);

  BatchedEinsum r;
  r.join = e.join;
  r.agg = e.agg;
  auto rename = [&](std::string s) {
    for (char& c : s) c = index.at(c);
    return s;
  };
  r.output = rename(e.output);
  for (std::size_t j : op) r.inputs.push_back(rename(e.inputs[j]));
  for (std::size_t i : row) {
    std::vector<std::string> names;
    for (std::size_t j : op) names.push_back(array.at(e.batch[i][j]));
    r.batch.push_back(std::move(names));
  }
  for (const auto& [name, info] : e.arrays) {
    ArrayInfo renamed = info;
    for (auto& len : renamed.shape)
      if (len.symbolic()) {
        auto [it, ins] =
            symbol.emplace(len.symbol, "S" + std::to_string(symbol.size() + rng() % 7 * 10));
        len.symbol = it->second;
      }
    r.arrays.emplace(array.at(name), std::move(renamed));
  }
  return r;
}

}  // namespace einsumdb::testing
