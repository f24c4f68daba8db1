// The pairwise contraction order of an n-ary einsum: exact dynamic programming over subsets of
// operands up to a size limit, greedy beyond. The objective is floating-point operations (each
// pairwise step costs 2 × the product of the lengths of every index either side has), with an
// optional limit on the elements of any intermediate.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace einsumdb {

struct ContractionStep {
  int left = 0, right = 0;  // operands 0..n-1, then step k's result is operand n + k
  std::string indices;      // the indices of this step's result
};

struct ContractionPath {
  std::vector<ContractionStep> steps;  // n - 1 steps; the last one yields the output
  double flops = 0;                    // FLOPs of the chosen order
  double objective = 0;             // what the search minimised (== flops without measured steps)
  double largest_intermediate = 0;  // elements of the largest result before the last
  bool exact = true;                // false: greedy (n above PathOptions::exact_limit)
};

struct PathOptions {
  std::size_t exact_limit = 14;                 // dynamic program up to this many operands
  std::optional<double> memory_limit_elements;  // no intermediate larger than this (if possible)
  // When set, a pairwise step (left indices, right indices, result indices; a single operand
  // keeps its own index order, a group its indices in first-appearance order) costs what this
  // returns, in FLOP-equivalents, instead of its FLOP count; nullopt keeps the FLOP count.
  // Called once per distinct step, only by the dynamic program.
  std::function<std::optional<double>(const std::string&, const std::string&, const std::string&)>
      measured_step;
};

// Throws SpecError when no order satisfies the memory limit, or an index has no length.
ContractionPath contraction_path(const std::vector<std::string>& inputs, const std::string& output,
                                 const std::map<char, std::int64_t>& lengths,
                                 const PathOptions& options = {});

}  // namespace einsumdb
