#include "einsumdb/planner/einsum_tree.hpp"

#include <algorithm>
#include <set>

#include "einsumdb/core/error.hpp"

namespace einsumdb {
namespace {

class TreeParser {
 public:
  TreeParser(std::string_view text, EinsumTree& tree) : text_(text), tree_(tree) {}

  // The whole text is an operation without surrounding brackets.
  void parse() {
    skip_space();
    const int root = operation();
    skip_space();
    if (pos_ != text_.size())
      fail("unexpected '" + std::string(1, text_[pos_]) + "'", "end of the tree");
    (void)root;
  }

 private:
  [[noreturn]] void fail(const std::string& what, const std::string& expected) const {
    throw SpecError("einsum tree, column " + std::to_string(pos_ + 1) + ": " + what +
                    "; expected " + expected);
  }
  void skip_space() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n'))
      ++pos_;
  }
  bool peek(char c) {
    skip_space();
    return pos_ < text_.size() && text_[pos_] == c;
  }
  void expect(char c) {
    if (!peek(c))
      fail(pos_ < text_.size() ? "unexpected '" + std::string(1, text_[pos_]) + "'" : "end of text",
           "'" + std::string(1, c) + "'");
    ++pos_;
  }
  bool accept_arrow() {
    skip_space();
    if (text_.substr(pos_, 2) != "->") return false;
    pos_ += 2;
    return true;
  }

  std::vector<int> id_list() {
    expect('[');
    std::vector<int> ids;
    if (peek(']')) {
      ++pos_;
      return ids;
    }
    while (true) {
      skip_space();
      const std::size_t start = pos_;
      int v = 0;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        if (v > 1000000) fail("dimension id too large", "an id below 1000000");
        v = v * 10 + (text_[pos_++] - '0');
      }
      if (pos_ == start)
        fail(pos_ < text_.size() ? "unexpected '" + std::string(1, text_[pos_]) + "'"
                                 : "end of text",
             "a dimension id");
      if (std::find(ids.begin(), ids.end(), v) != ids.end())
        fail("dimension " + std::to_string(v) + " appears twice in one tensor",
             "distinct dimensions");
      ids.push_back(v);
      if (peek(',')) {
        ++pos_;
        continue;
      }
      expect(']');
      return ids;
    }
  }

  // tensor := '[' ids ']' | '[' operation ']'
  int tensor() {
    skip_space();
    const std::size_t open = pos_;
    expect('[');
    if (peek('[')) {  // a nested operation
      if (++depth_ > kMaxDepth)
        fail("nesting deeper than " + std::to_string(kMaxDepth) + " levels", "a shallower tree");
      const int node = operation();
      --depth_;
      expect(']');
      return node;
    }
    pos_ = open;
    EinsumTree::Node leaf;
    leaf.dims = id_list();
    leaf.input = next_input_++;
    tree_.nodes.push_back(std::move(leaf));
    return static_cast<int>(tree_.nodes.size()) - 1;
  }

  // operation := tensor [',' tensor] '->' ids
  int operation() {
    const int left = tensor();
    int right = -1;
    if (peek(',')) {
      ++pos_;
      right = tensor();
    }
    if (!accept_arrow())
      fail(pos_ < text_.size() ? "unexpected '" + std::string(1, text_[pos_]) + "'" : "end of text",
           "'->' after the operands");
    const std::size_t at = pos_;
    EinsumTree::Node node;
    node.left = left;
    node.right = right;
    node.dims = id_list();
    const auto& l = tree_.nodes[static_cast<std::size_t>(left)].dims;
    std::set<int> available(l.begin(), l.end());
    if (right >= 0) {
      const auto& r = tree_.nodes[static_cast<std::size_t>(right)].dims;
      available.insert(r.begin(), r.end());
    }
    for (int d : node.dims)
      if (!available.count(d)) {
        pos_ = at;
        fail("output dimension " + std::to_string(d) + " is in neither operand",
             "dimensions of the operands");
      }
    if (right < 0 && std::set<int>(node.dims.begin(), node.dims.end()) != available) {
      pos_ = at;
      fail("a permutation must keep every dimension of its operand",
           "a reordering of the operand's dimensions");
    }
    tree_.nodes.push_back(std::move(node));
    return static_cast<int>(tree_.nodes.size()) - 1;
  }

  std::string_view text_;
  EinsumTree& tree_;
  std::size_t pos_ = 0;
  int next_input_ = 0;
  int depth_ = 0;
  static constexpr int kMaxDepth = 512;  // far from the stack's end, even under sanitizers
};

void print(const EinsumTree& t, int n, std::string& out, bool bracket) {
  const auto& node = t.nodes[static_cast<std::size_t>(n)];
  auto ids = [&](const std::vector<int>& dims) {
    out += '[';
    for (std::size_t k = 0; k < dims.size(); ++k) {
      if (k) out += ',';
      out += std::to_string(dims[k]);
    }
    out += ']';
  };
  if (node.is_leaf()) {
    ids(node.dims);
    return;
  }
  if (bracket) out += '[';
  print(t, node.left, out, true);
  if (node.is_contraction()) {
    out += ',';
    print(t, node.right, out, true);
  }
  out += "->";
  ids(node.dims);
  if (bracket) out += ']';
}

}  // namespace

std::size_t EinsumTree::num_inputs() const {
  return static_cast<std::size_t>(
      std::count_if(nodes.begin(), nodes.end(), [](const Node& n) { return n.is_leaf(); }));
}

EinsumTree parse_einsum_tree(std::string_view text, std::vector<std::int64_t> sizes) {
  EinsumTree t;
  t.sizes = std::move(sizes);
  TreeParser(text, t).parse();
  for (std::size_t d = 0; d < t.sizes.size(); ++d)
    if (t.sizes[d] <= 0)
      throw SpecError("einsum tree: dimension " + std::to_string(d) + " has size " +
                      std::to_string(t.sizes[d]) + "; sizes must be positive");
  for (const auto& node : t.nodes)
    for (int d : node.dims)
      if (static_cast<std::size_t>(d) >= t.sizes.size())
        throw SpecError("einsum tree: dimension " + std::to_string(d) +
                        " has no size (the size list has " + std::to_string(t.sizes.size()) +
                        " entries)");
  return t;
}

std::string to_string(const EinsumTree& t) {
  std::string out;
  if (!t.nodes.empty()) print(t, t.root(), out, false);
  return out;
}

double tree_flops(const EinsumTree& t) {
  double flops = 0;
  for (const auto& node : t.nodes) {
    if (!node.is_contraction()) continue;
    std::set<int> dims(t.nodes[static_cast<std::size_t>(node.left)].dims.begin(),
                       t.nodes[static_cast<std::size_t>(node.left)].dims.end());
    const auto& r = t.nodes[static_cast<std::size_t>(node.right)].dims;
    dims.insert(r.begin(), r.end());
    double points = 1;
    for (int d : dims) points *= static_cast<double>(t.sizes[static_cast<std::size_t>(d)]);
    flops += 2 * points;
  }
  return flops;
}

namespace {

bool contains(const std::vector<int>& dims, int d) {
  return std::find(dims.begin(), dims.end(), d) != dims.end();
}

// The position, from the right, of the last dimension of `dims` satisfying `is`; -1 if none.
template <typename Pred>
int rightmost(const std::vector<int>& dims, Pred is) {
  for (int k = static_cast<int>(dims.size()) - 1; k >= 0; --k)
    if (is(dims[static_cast<std::size_t>(k)])) return k;
  return -1;
}

// `dims` reordered to end in (second, last) kinds, as the course's reorder does: the rightmost
// dimension of the last kind moves to the end, then the rightmost of the second kind before it.
template <typename A, typename B>
std::vector<int> end_with(std::vector<int> dims, A second_kind, B last_kind) {
  const int n = static_cast<int>(dims.size());
  const int l = rightmost(dims, last_kind), s = rightmost(dims, second_kind);
  if (l < 0 || s < 0 || n < 2) return dims;
  std::iter_swap(dims.begin() + l, dims.begin() + (n - 1));
  const int s_now = s == n - 1 ? l : s;
  std::iter_swap(dims.begin() + s_now, dims.begin() + (n - 2));
  return dims;
}

class TreeOptimizer {
 public:
  TreeOptimizer(const EinsumTree& t, const TreePasses& p, TreePassReport& r)
      : in_(t), passes_(p), report_(r) {
    nodes_ = t.nodes;
  }

  EinsumTree run() {
    visit(in_.root());
    EinsumTree out;
    out.sizes = in_.sizes;
    emit(in_.root(), out);
    return out;
  }

 private:
  void visit(int n) {
    auto at = [&](int k) -> EinsumTree::Node& { return nodes_[static_cast<std::size_t>(k)]; };
    if (at(n).is_leaf()) return;
    if (!at(n).is_contraction()) {
      visit(at(n).left);
      return;
    }
    const std::vector<int> out = at(n).dims;  // copies: reorder() may grow nodes_
    if (passes_.swap && !out.empty()) {
      const int last = out.back();
      if (contains(at(at(n).right).dims, last) && !contains(at(at(n).left).dims, last)) {
        std::swap(at(n).left, at(n).right);
        ++report_.swaps;
      }
    }
    if (passes_.reorder) {
      const std::vector<int> l = at(at(n).left).dims, r = at(at(n).right).dims;
      auto is_m = [&](int d) { return contains(out, d) && contains(l, d) && !contains(r, d); };
      auto is_n = [&](int d) { return contains(out, d) && contains(r, d) && !contains(l, d); };
      auto is_k = [&](int d) { return !contains(out, d) && contains(l, d) && contains(r, d); };
      const int left = reorder(at(n).left, end_with(l, is_k, is_m));
      at(n).left = left;
      const int right = reorder(at(n).right, end_with(r, is_n, is_k));
      at(n).right = right;
    }
    visit(at(n).left);
    visit(at(n).right);
  }

  // Child c producing `want` instead of its current order; returns the (possibly new) child.
  int reorder(int c, const std::vector<int>& want) {
    auto& child = nodes_[static_cast<std::size_t>(c)];
    if (child.dims == want) return c;
    if (!child.is_leaf()) {
      child.dims = want;  // an inner node produces its result in any order we ask
      ++report_.reorders;
      return c;
    }
    if (!passes_.insert_permutations) return c;
    EinsumTree::Node perm;
    perm.dims = want;
    perm.left = c;
    nodes_.push_back(perm);
    ++report_.permutations_inserted;
    return static_cast<int>(nodes_.size()) - 1;
  }

  // Children before parents, in the order the text lists them.
  int emit(int n, EinsumTree& out) {
    EinsumTree::Node node = nodes_[static_cast<std::size_t>(n)];
    if (node.left >= 0) node.left = emit(node.left, out);
    if (node.right >= 0) node.right = emit(node.right, out);
    out.nodes.push_back(node);
    return static_cast<int>(out.nodes.size()) - 1;
  }

  const EinsumTree& in_;
  const TreePasses& passes_;
  TreePassReport& report_;
  std::vector<EinsumTree::Node> nodes_;
};

}  // namespace

EinsumTree optimize_tree(const EinsumTree& t, const TreePasses& passes, TreePassReport* report) {
  TreePassReport local;
  if (t.nodes.empty()) return t;
  return TreeOptimizer(t, passes, report ? *report : local).run();
}

}  // namespace einsumdb
