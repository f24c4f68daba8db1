// The data a plan's run moves between ranks, computed from its placement exactly as the
// distributed executor moves it (distributed/mpi_executor.hpp), so that what the executor sends
// and what the time model (planner/network.hpp) prices are one enumeration:
//   - into each join, the part of every block of an operand's relation that the piece's region
//     covers, from the block's owner to the piece's rank (a copy when they are the same rank);
//   - out of each join, the partial results of the pieces that share a result block, reduced
//     along a binomial tree onto the block's owner.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "einsumdb/canon/model.hpp"
#include "einsumdb/planner/eindecomp.hpp"
#include "einsumdb/planner/placement.hpp"

namespace einsumdb {

// One movement of data into a join: the part `box` (global coordinates) of block `block` of
// `tensor`, from its owner `src` to the rank `dst` of a piece of step `step`, operand `operand`.
struct Transfer {
  int step = 0, operand = 0;
  int src = 0, dst = 0;
  std::string tensor;
  std::int64_t block = 0;
  Region box;
};

// Every transfer into step `step`'s joins, ordered by piece, then operand, then block: the order
// every rank derives alone and agrees on.
std::vector<Transfer> join_transfers(const Plan& plan, const Placement& placement, int step);
// The same transfers one at a time: f(operand, src, dst, block, box), in that order, without
// building them.
template <typename F>
void for_each_join_transfer(const Plan& plan, const Placement& placement, int step, F&& f);

// The ranks whose pieces reduce into the result block of piece `piece` of step `step`: the
// block's owner first, then the other pieces' ranks in piece order. A rank at position i sends
// its partial result to position i − 2^k in the round k where bit k of i is its lowest set bit,
// after receiving from i + 2^j for every round j before (a binomial tree).
std::vector<int> aggregation_group(const Plan& plan, const Placement& placement, int step,
                                   std::int64_t piece);

// The join of piece `piece` of a step as a one-row batched einsum on its blocks, operands named
// X (and Y), in the step's dtype.
BatchedEinsum piece_kernel(const PlanStep& s, const StepPlacement& p, std::int64_t piece);

// Everything a piece's kernel choice and time depend on: its pattern, operators, dtypes and
// block shapes (pieces of one step mostly share one).
std::string kernel_key(const BatchedEinsum& kernel);

template <typename F>
void for_each_join_transfer(const Plan& plan, const Placement& placement, int step, F&& f) {
  const PlanStep& s = plan.graph.steps[static_cast<std::size_t>(step)];
  const StepPlacement& sp = placement.steps[static_cast<std::size_t>(step)];
  for (std::int64_t q = 0; q < placement.procs; ++q)
    for (int k = 0; k < (s.y.empty() ? 1 : 2); ++k) {
      const Relation& src = placement.relations.at(s.inputs[static_cast<std::size_t>(k)]);
      const int dst = sp.rank[static_cast<std::size_t>(q)];
      for_each_block_meeting(src.blocking, operand_region(s, sp, q, k == 0 ? s.x : s.y),
                             [&](std::int64_t b, const Region& box) {
                               f(k, src.owner[static_cast<std::size_t>(b)], dst, b, box);
                             });
    }
}

}  // namespace einsumdb
