// Placement of a plan on P ranks: every tensor becomes a tensor relation of blocks, and every
// block and every piece of work is owned by one rank (Sec. 4 of the EinDecomp paper; the physical
// relations of the tensor-relational implementation algebra).
//
// A step with partition vector d has exactly P pieces of join work, one per block coordinate
// over its join labels, and each runs on its own rank. Its result relation is cut by d over the
// result labels; the pieces that share a result block (they differ only in aggregated labels)
// reduce their partial results with ⊕ onto one of them, the block's owner. A graph input is cut
// the way its first consumer reads it, each block owned by a rank that reads it (pre-placed,
// as in the paper's experiments), so that consumer needs no re-partitioning.
//
// place() assigns pieces to ranks step by step, greedily preferring the rank that already owns
// the most of a piece's operand data, so that the data each join needs is local when it can be.
// Every rank runs one piece per step; result blocks go to distinct ranks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "einsumdb/planner/eindecomp.hpp"

namespace einsumdb {

// A box of a tensor: start and length per axis.
struct Region {
  std::vector<std::int64_t> start, length;
  std::int64_t size() const;
};
// The intersection of two boxes; false when they do not meet.
bool intersect(const Region& a, const Region& b, Region& out);

// "[64,48]", for messages.
std::string shape_text(const std::vector<std::int64_t>& shape);

// A tensor of `shape` cut into parts[a] balanced pieces along each axis a: part k of a bound b
// cut into n covers [k·b/n, (k+1)·b/n). Blocks are numbered row-major over block coordinates.
struct Blocking {
  std::vector<std::int64_t> shape, parts;

  std::int64_t blocks() const;
  std::vector<std::int64_t> coords(std::int64_t block) const;
  std::int64_t index(const std::vector<std::int64_t>& coords) const;
  static std::int64_t start(std::int64_t bound, std::int64_t parts, std::int64_t k) {
    return k * bound / parts;
  }
  std::int64_t start(std::size_t axis, std::int64_t k) const {
    return start(shape[axis], parts[axis], k);
  }
  std::int64_t length(std::size_t axis, std::int64_t k) const {
    return start(axis, k + 1) - start(axis, k);
  }
  std::vector<std::int64_t> block_shape(std::int64_t block) const;
  Region region(std::int64_t block) const;  // where the block lies in the tensor
  bool operator==(const Blocking&) const = default;
};

// Calls f(block, box) for every block of `b` that meets `region`, `box` the part of the region
// inside the block (global coordinates), in increasing block order. Finds the blocks axis by axis,
// so the cost is the number of blocks met, not the number of blocks.
template <typename F>
void for_each_block_meeting(const Blocking& b, const Region& region, F&& f);

// A tensor relation's physical layout: its blocking and the owner of each block.
struct Relation {
  Blocking blocking;
  std::vector<int> owner;  // per block
};

// The pieces of work of one step.
struct StepPlacement {
  std::string join_labels;          // the labels d cuts, in order (x then y)
  std::vector<std::int64_t> parts;  // d over join_labels
  std::vector<int> rank;            // per piece (row-major over join_labels): its rank
  std::vector<std::int64_t> coords(std::int64_t piece) const;  // per join label
  std::int64_t aggregated_parts = 1;  // n_agg: pieces reduced into one result block
};

struct Placement {
  std::int64_t procs = 1;
  std::map<std::string, Relation> relations;  // every graph input and every step's result
  std::vector<StepPlacement> steps;           // per step of the plan
};

// The region of a tensor a piece reads through an operand with these labels.
Region operand_region(const PlanStep& s, const StepPlacement& p, std::int64_t piece,
                      const std::string& labels);

// The block of the step's result relation (cut as `result`) that piece `piece` contributes to.
std::int64_t result_block(const PlanStep& s, const StepPlacement& p, const Blocking& result,
                          std::int64_t piece);

// The placement of a plan (deterministic).
Placement place(const Plan& plan);

// {"inputs": {"A": {"parts": [..], "owners": [..]}}, "steps": [{"name", "ranks", "owners"}]}.
nlohmann::ordered_json to_json(const Placement& p, const Plan& plan);
// Reads a placement written by to_json for `plan`; throws SpecError naming the step or input
// whose placement does not fit (wrong counts, ranks out of range, a rank with two pieces).
Placement placement_from_json(const nlohmann::json& j, const Plan& plan);

// The parts of axis `axis` of `b` that [lo, hi) meets: [first, last].
std::pair<std::int64_t, std::int64_t> parts_meeting(const Blocking& b, std::size_t axis,
                                                    std::int64_t lo, std::int64_t hi);

template <typename F>
void for_each_block_meeting(const Blocking& b, const Region& region, F&& f) {
  const std::size_t n = b.shape.size();
  std::vector<std::int64_t> first(n), last(n), c(n);
  for (std::size_t a = 0; a < n; ++a) {
    if (region.length[a] <= 0) return;
    std::tie(first[a], last[a]) =
        parts_meeting(b, a, region.start[a], region.start[a] + region.length[a]);
    c[a] = first[a];
  }
  Region box;
  box.start.resize(n);
  box.length.resize(n);
  while (true) {
    for (std::size_t a = 0; a < n; ++a) {
      const std::int64_t lo = std::max(b.start(a, c[a]), region.start[a]);
      const std::int64_t hi = std::min(b.start(a, c[a] + 1), region.start[a] + region.length[a]);
      box.start[a] = lo;
      box.length[a] = hi - lo;
    }
    f(b.index(c), box);
    std::size_t a = n;
    while (a > 0 && c[a - 1] == last[a - 1]) c[a - 1] = first[a - 1], --a;
    if (a == 0) return;
    ++c[a - 1];
  }
}

}  // namespace einsumdb
