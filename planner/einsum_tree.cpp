#include "planner/einsum_tree.hpp"

#include <algorithm>
#include <set>

#include "canon/error.hpp"

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

}  // namespace einsumdb
