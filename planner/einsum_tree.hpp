// Einsum trees in the string format of the einsum-tree chapter of the tensor-compiler course
// (`[[8,4],[7,3,8]->[7,3,4]],[[[2,6,7],[1,5,6]->[1,2,5,7]],[0,5]->[0,1,2,7]]->[0,1,2,3,4]` with a
// list of dimension sizes ordered by dimension id): leaves are input tensors, a node with two
// children is a binary contraction, a node with one child a permutation. Plain values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace einsumdb {

struct EinsumTree {
  struct Node {
    std::vector<int> dims;  // dimension ids of this node's output, in order
    int left = -1;          // children: indices into `nodes`; -1 when absent
    int right = -1;         // a leaf has neither, a permutation only `left`
    int input = -1;         // a leaf's input number, left to right in the text
    bool is_leaf() const { return left < 0; }
    bool is_contraction() const { return right >= 0; }
    bool operator==(const Node&) const = default;
  };
  std::vector<Node> nodes;          // children before their parents; the root is last
  std::vector<std::int64_t> sizes;  // size of each dimension id

  int root() const { return static_cast<int>(nodes.size()) - 1; }
  std::size_t num_inputs() const;
  bool operator==(const EinsumTree&) const = default;
};

// Parses a tree and its dimension sizes. Throws SpecError naming the column, or the node, that
// is wrong: a dimension id without a size, a repeated dimension in one tensor, a contraction
// output with a dimension neither child has, a permutation that is not one.
EinsumTree parse_einsum_tree(std::string_view text, std::vector<std::int64_t> sizes);

// The string form (parse_einsum_tree(to_string(t), t.sizes) == t).
std::string to_string(const EinsumTree& t);

// Floating-point operations of the tree: each binary contraction costs 2 × the product of the
// sizes of every dimension either child has (one multiply and one add per point of its
// iteration space); permutations cost none.
double tree_flops(const EinsumTree& t);

// The optimisation passes of the course text, applied top-down from the root to every
// contraction. The unit-stride dimension of a tensor is its last one; for a contraction, M
// dimensions are in its left child and its result, N in its right child and its result, K in
// both children but not in the result.
//   swap:    when the result's last dimension is an N dimension, swap the children;
//   reorder: order the left child to end in K,M and the right child to end in N,K (an inner
//            child simply produces that order);
//   insert:  when reorder would reorder a leaf (a user's tensor), insert a permutation node
//            above it instead; without it, leaves are left as they are.
// Leaves keep their input numbers; dimensions and FLOPs are unchanged.
struct TreePasses {
  bool swap = true, reorder = true, insert_permutations = true;
};
struct TreePassReport {
  int swaps = 0, reorders = 0, permutations_inserted = 0;
  bool applied() const { return swaps + reorders + permutations_inserted > 0; }
};
EinsumTree optimize_tree(const EinsumTree& t, const TreePasses& passes = {},
                         TreePassReport* report = nullptr);

}  // namespace einsumdb
