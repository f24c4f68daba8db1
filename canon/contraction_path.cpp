#include "einsumdb/canon/contraction_path.hpp"

#include <algorithm>
#include <bit>
#include <limits>
#include <tuple>

#include "einsumdb/core/error.hpp"

namespace einsumdb {
namespace {

using Mask = std::uint64_t;  // a set of indices (bit per distinct index)

struct Problem {
  std::vector<Mask> operand;  // index set of each input
  Mask output = 0;
  std::vector<double> length;    // per index bit
  std::string letters;           // index bit -> index letter
  std::vector<std::string> raw;  // each operand's indices as written

  double size(Mask m) const {
    double s = 1;
    for (; m; m &= m - 1) s *= length[static_cast<std::size_t>(std::countr_zero(m))];
    return s;
  }
  std::string indices(Mask m) const {
    std::string out;
    for (std::size_t b = 0; b < letters.size(); ++b)
      if (m >> b & 1) out += letters[b];
    return out;
  }
};

Problem make_problem(const std::vector<std::string>& inputs, const std::string& output,
                     const std::map<char, std::int64_t>& lengths) {
  Problem p;
  std::map<char, int> bit;
  auto bit_of = [&](char c) {
    auto [it, inserted] = bit.emplace(c, static_cast<int>(p.letters.size()));
    if (inserted) {
      const auto len = lengths.find(c);
      if (len == lengths.end()) throw SpecError(std::string("index '") + c + "' has no length");
      if (p.letters.size() >= 64) throw SpecError("more than 64 distinct indices");
      p.letters += c;
      p.length.push_back(static_cast<double>(len->second));
    }
    return Mask{1} << it->second;
  };
  p.raw = inputs;
  for (const auto& in : inputs) {
    Mask m = 0;
    for (char c : in) m |= bit_of(c);
    p.operand.push_back(m);
  }
  for (char c : output) p.output |= bit_of(c);
  return p;
}

// The indices a group of operands must keep: those in the output or in any operand outside.
Mask kept(const Problem& p, std::uint32_t group) {
  Mask inside = 0, outside = 0;
  for (std::size_t k = 0; k < p.operand.size(); ++k)
    (group >> k & 1 ? inside : outside) |= p.operand[k];
  return inside & (outside | p.output);
}

ContractionPath exact_path(const Problem& p, const PathOptions& o) {
  const std::size_t n = p.operand.size();
  const std::uint32_t full = (std::uint32_t{1} << n) - 1;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<double> cost(std::size_t{full} + 1, kInf), peak(std::size_t{full} + 1, 0);
  std::vector<std::uint32_t> split(std::size_t{full} + 1, 0);
  std::vector<Mask> idx(std::size_t{full} + 1, 0);
  std::vector<double> flops(std::size_t{full} + 1, 0);
  auto text = [&](std::uint32_t s) {
    return std::popcount(s) == 1 ? p.raw[static_cast<std::size_t>(std::countr_zero(s))]
                                 : p.indices(idx[s]);
  };
  std::map<std::tuple<std::string, std::string, std::string>, std::optional<double>> memo;
  auto measured = [&](std::uint32_t a, std::uint32_t b, std::uint32_t s, double step) {
    auto key = std::make_tuple(text(a), text(b), text(s));
    auto it = memo.find(key);
    if (it == memo.end())
      it = memo.emplace(key, o.measured_step(std::get<0>(key), std::get<1>(key), std::get<2>(key)))
               .first;
    return it->second.value_or(step);
  };
  // A single operand keeps all of its indices (summing one that only it has is part of the first
  // step that reads it); a group keeps what the output or the operands outside it still need.
  for (std::uint32_t s = 1; s <= full; ++s)
    idx[s] = std::popcount(s) == 1 ? p.operand[std::countr_zero(s)] : kept(p, s);
  for (std::size_t k = 0; k < n; ++k) cost[std::uint32_t{1} << k] = 0;
  for (std::uint32_t s = 1; s <= full; ++s) {
    if (std::popcount(s) < 2) continue;
    const double result = p.size(idx[s]);
    if (s != full && o.memory_limit_elements && result > *o.memory_limit_elements) continue;
    // Each unordered split once: the part holding the lowest operand of s is `a`.
    const std::uint32_t low = s & (~s + 1);
    for (std::uint32_t a = (s - 1) & s; a; a = (a - 1) & s) {
      if (!(a & low)) continue;
      const std::uint32_t b = s ^ a;
      if (cost[a] == kInf || cost[b] == kInf) continue;
      const double step = 2 * p.size(idx[a] | idx[b]);
      const double c = cost[a] + cost[b] + (o.measured_step ? measured(a, b, s, step) : step);
      if (c < cost[s]) {
        cost[s] = c;
        flops[s] = flops[a] + flops[b] + step;
        split[s] = a;
        peak[s] = std::max({peak[a], peak[b], s == full ? 0.0 : result});
      }
    }
  }
  if (cost[full] == kInf)
    throw SpecError("no contraction order keeps every intermediate within the memory limit");
  ContractionPath path;
  path.flops = flops[full];
  path.objective = cost[full];
  path.largest_intermediate = peak[full];
  // Emit steps bottom-up; each subset's result gets the next operand number.
  std::map<std::uint32_t, int> operand_of;
  for (std::size_t k = 0; k < n; ++k) operand_of[std::uint32_t{1} << k] = static_cast<int>(k);
  auto emit = [&](auto&& self, std::uint32_t s) -> int {
    if (const auto it = operand_of.find(s); it != operand_of.end()) return it->second;
    const int l = self(self, split[s]), r = self(self, s ^ split[s]);
    path.steps.push_back({l, r, p.indices(idx[s])});
    return operand_of[s] = static_cast<int>(n + path.steps.size() - 1);
  };
  emit(emit, full);
  return path;
}

// Repeatedly contracts the pair whose step costs the fewest operations (ties: smaller result).
ContractionPath greedy_path(const Problem& p, const PathOptions& o) {
  struct Live {
    int operand;
    Mask indices;
  };
  std::vector<Live> live;
  for (std::size_t k = 0; k < p.operand.size(); ++k)
    live.push_back({static_cast<int>(k), p.operand[k]});
  ContractionPath path;
  path.exact = false;
  int next = static_cast<int>(p.operand.size());
  while (live.size() > 1) {
    double best = std::numeric_limits<double>::infinity(), best_size = 0;
    std::size_t bi = 0, bj = 1;
    Mask best_idx = 0;
    for (std::size_t i = 0; i < live.size(); ++i)
      for (std::size_t j = i + 1; j < live.size(); ++j) {
        Mask others = p.output;
        for (std::size_t k = 0; k < live.size(); ++k)
          if (k != i && k != j) others |= live[k].indices;
        const Mask result = (live[i].indices | live[j].indices) & others;
        const double size = p.size(result);
        if (live.size() > 2 && o.memory_limit_elements && size > *o.memory_limit_elements) continue;
        const double c = 2 * p.size(live[i].indices | live[j].indices);
        if (c < best || (c == best && size < best_size)) {
          best = c, best_size = size, bi = i, bj = j, best_idx = result;
        }
      }
    if (best == std::numeric_limits<double>::infinity())
      throw SpecError("no contraction order keeps every intermediate within the memory limit");
    path.steps.push_back({live[bi].operand, live[bj].operand, p.indices(best_idx)});
    path.flops += best;
    path.objective += best;
    if (live.size() > 2) path.largest_intermediate = std::max(path.largest_intermediate, best_size);
    live[bi] = {next++, best_idx};
    live.erase(live.begin() + static_cast<long>(bj));
  }
  return path;
}

}  // namespace

ContractionPath contraction_path(const std::vector<std::string>& inputs, const std::string& output,
                                 const std::map<char, std::int64_t>& lengths,
                                 const PathOptions& options) {
  if (inputs.empty()) throw SpecError("a contraction path needs at least one operand");
  const Problem p = make_problem(inputs, output, lengths);
  if (inputs.size() == 1) return {};
  if (inputs.size() <= std::min<std::size_t>(options.exact_limit, 24))
    return exact_path(p, options);
  return greedy_path(p, options);
}

}  // namespace einsumdb
