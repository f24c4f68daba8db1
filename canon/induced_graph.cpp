#include "einsumdb/canon/induced_graph.hpp"

#include <algorithm>
#include <map>

#include <nauty/nausparse.h>
#include <nauty/nautinv.h>
// traces.h pulls in gtools.h, whose thread-local declarations use the C11 spelling.
#define _Thread_local thread_local
#include <nauty/traces.h>
#undef _Thread_local

#include "einsumdb/canon/enum_names.hpp"
#include "einsumdb/core/error.hpp"

namespace einsumdb {
namespace {

// Collects edges, then lays them out as CSR (both directions when undirected).
class EdgeList {
 public:
  explicit EdgeList(bool directed) : directed_(directed) {}
  void add(int from, int to) {
    edges_.emplace_back(from, to);
    if (!directed_) edges_.emplace_back(to, from);
  }
  // smaller -> larger among `count` nodes starting at `first`
  void add_tournament(int first, int count) {
    for (int a = 0; a < count; ++a)
      for (int b = a + 1; b < count; ++b) add(first + a, first + b);
  }
  void to_csr(int n, std::vector<int>& offsets, std::vector<int>& targets) const {
    offsets.assign(n + 1, 0);
    for (const auto& [from, to] : edges_) ++offsets[from + 1];
    for (int v = 0; v < n; ++v) offsets[v + 1] += offsets[v];
    targets.resize(edges_.size());
    std::vector<int> fill(offsets.begin(), offsets.end() - 1);
    for (const auto& [from, to] : edges_) targets[fill[from]++] = to;
  }

 private:
  bool directed_;
  std::vector<std::pair<int, int>> edges_;
};

}  // namespace

InducedGraph build_induced_graph(const BatchedEinsum& e, const GraphOptions& options) {
  const bool paper = options.layout == GraphLayout::paper;
  const int n_ops = static_cast<int>(e.inputs.size());
  const int b = static_cast<int>(e.batch.size());

  // Arrays in map order; indices in ASCII order.
  std::map<std::string_view, int> array_id;
  std::vector<const ArrayInfo*> array_info;
  for (const auto& [name, info] : e.arrays) {
    array_id.emplace(name, static_cast<int>(array_info.size()));
    array_info.push_back(&info);
  }
  std::array<int, 128> index_id;
  index_id.fill(-1);
  std::array<const Length*, 128> index_length{};
  for (int j = 0; j < n_ops; ++j) {
    const auto& shape = e.arrays.at(e.batch[0][j]).shape;
    for (std::size_t d = 0; d < e.inputs[j].size(); ++d)
      index_length[static_cast<unsigned char>(e.inputs[j][d])] = &shape[d];
  }
  int n_index = 0;
  for (int c = 0; c < 128; ++c)
    if (index_length[c]) index_id[c] = n_index++;

  // Distinct dtypes (by rank), concrete lengths (by value), symbols, dimensions.
  std::vector<Dtype> dtypes;
  for (const auto* info : array_info) dtypes.push_back(info->dtype);
  std::sort(dtypes.begin(), dtypes.end(),
            [](Dtype x, Dtype y) { return dtype_rank(x) < dtype_rank(y); });
  dtypes.erase(std::unique(dtypes.begin(), dtypes.end()), dtypes.end());
  std::vector<std::int64_t> lengths;
  std::vector<std::string_view> symbols;
  if (options.with_lengths) {
    for (const Length* len : index_length) {
      if (!len) continue;
      if (len->symbolic())
        symbols.push_back(len->symbol);
      else
        lengths.push_back(len->value);
    }
    std::sort(lengths.begin(), lengths.end());
    lengths.erase(std::unique(lengths.begin(), lengths.end()), lengths.end());
    std::sort(symbols.begin(), symbols.end());
    symbols.erase(std::unique(symbols.begin(), symbols.end()), symbols.end());
  }
  std::size_t n_dim = e.output.size(), total_rank = 0, n_scalar = 0;
  for (const auto& in : e.inputs) {
    n_dim = std::max(n_dim, in.size());
    total_rank += in.size();
    n_scalar += in.empty();
  }
  const auto rows = static_cast<std::size_t>(b), ops = static_cast<std::size_t>(n_ops);

  InducedGraph g;
  g.directed = paper;
  const std::array<std::size_t, kNodeClasses> counts{array_info.size(),
                                                     static_cast<std::size_t>(n_index),
                                                     paper ? total_rank * rows : total_rank,
                                                     e.output.size(),
                                                     rows,
                                                     ops,
                                                     dtypes.size(),
                                                     lengths.size(),
                                                     n_dim,
                                                     symbols.size(),
                                                     paper ? n_scalar * rows : ops * rows};
  g.first[0] = 0;
  for (std::size_t c = 0; c < kNodeClasses; ++c)
    g.first[c + 1] = g.first[c] + static_cast<int>(counts[c]);
  g.num_nodes = g.first[kNodeClasses];

  auto index_node = [&](char c) {
    return g.node(NodeClass::index, index_id[static_cast<unsigned char>(c)]);
  };
  auto dtype_node = [&](Dtype d) {
    const auto it = std::find(dtypes.begin(), dtypes.end(), d);
    return g.node(NodeClass::dtype, static_cast<int>(it - dtypes.begin()));
  };
  auto length_node = [&](const Length& len) {
    if (len.symbolic()) {
      const auto it = std::lower_bound(symbols.begin(), symbols.end(), len.symbol);
      return g.node(NodeClass::symbolic_length, static_cast<int>(it - symbols.begin()));
    }
    const auto it = std::lower_bound(lengths.begin(), lengths.end(), len.value);
    return g.node(NodeClass::length, static_cast<int>(it - lengths.begin()));
  };

  EdgeList edges(paper);
  int access = g.node(NodeClass::input_access, 0);
  int occurrence = g.node(NodeClass::occurrence, 0);
  if (!paper) {
    for (int j = 0; j < n_ops; ++j)
      for (std::size_t d = 0; d < e.inputs[j].size(); ++d, ++access) {
        edges.add(g.node(NodeClass::argument_position, j), access);
        edges.add(index_node(e.inputs[j][d]), access);
        edges.add(g.node(NodeClass::dimension, static_cast<int>(d)), access);
      }
  }
  for (int i = 0; i < b; ++i) {
    for (int j = 0; j < n_ops; ++j) {
      const int arg = g.node(NodeClass::argument, array_id.at(e.batch[i][j]));
      const std::string& idx = e.inputs[j];
      if (!paper || idx.empty()) {
        edges.add(occurrence, arg);
        edges.add(g.node(NodeClass::argument_position, j), occurrence);
        edges.add(g.node(NodeClass::output, i), occurrence);
        ++occurrence;
      }
      if (!paper) continue;
      for (std::size_t d = 0; d < idx.size(); ++d, ++access) {
        edges.add(access, arg);
        edges.add(g.node(NodeClass::argument_position, j), access);
        edges.add(g.node(NodeClass::output, i), access);
        edges.add(index_node(idx[d]), access);
        edges.add(g.node(NodeClass::dimension, static_cast<int>(d)), access);
      }
    }
  }
  for (std::size_t d = 0; d < e.output.size(); ++d) {
    const int out = g.node(NodeClass::output_access, static_cast<int>(d));
    edges.add(index_node(e.output[d]), out);
    edges.add(g.node(NodeClass::dimension, static_cast<int>(d)), out);
  }
  if (options.with_lengths)
    for (int c = 0; c < 128; ++c)
      if (index_length[c])
        edges.add(length_node(*index_length[c]), index_node(static_cast<char>(c)));
  for (std::size_t a = 0; a < array_info.size(); ++a)
    edges.add(dtype_node(array_info[a]->dtype), g.node(NodeClass::argument, static_cast<int>(a)));
  if (paper) {
    edges.add_tournament(g.first[static_cast<std::size_t>(NodeClass::length)],
                         static_cast<int>(lengths.size()));
    edges.add_tournament(g.first[static_cast<std::size_t>(NodeClass::dtype)],
                         static_cast<int>(dtypes.size()));
    edges.add_tournament(g.first[static_cast<std::size_t>(NodeClass::dimension)],
                         static_cast<int>(n_dim));
  }
  edges.to_csr(g.num_nodes, g.offsets, g.targets);

  // Ordered partition: one cell per class in the order above; ranked classes split into
  // singletons in rank order; operand positions split when the join is not commutative.
  g.lab.resize(g.num_nodes);
  g.ptn.assign(g.num_nodes, 1);
  for (int v = 0; v < g.num_nodes; ++v) g.lab[v] = v;
  for (std::size_t c = 0; c < kNodeClasses; ++c) {
    const int lo = g.first[c], hi = g.first[c + 1];
    if (lo == hi) continue;
    const auto cls = static_cast<NodeClass>(c);
    const bool singletons = cls == NodeClass::dtype || cls == NodeClass::length ||
                            cls == NodeClass::dimension ||
                            (cls == NodeClass::argument_position && !is_commutative(e.join));
    if (singletons)
      for (int v = lo; v < hi; ++v) g.ptn[v] = 0;
    else
      g.ptn[hi - 1] = 0;
  }
  if (!options.private_argument.empty()) {
    EINSUMDB_ASSERT(options.private_argument.size() == array_info.size(), "one flag per array");
    const int lo = g.first[static_cast<std::size_t>(NodeClass::argument)];
    const int count = static_cast<int>(array_info.size());
    auto priv = [&](int v) { return options.private_argument[static_cast<std::size_t>(v - lo)]; };
    std::stable_sort(g.lab.begin() + lo, g.lab.begin() + lo + count,
                     [&](int x, int y) { return priv(x) < priv(y); });
    for (int k = lo; k + 1 < lo + count; ++k)
      g.ptn[k] = priv(g.lab[k]) == priv(g.lab[k + 1]) ? 1 : 0;
  }
  if (!options.row_multiplicity.empty()) {
    EINSUMDB_ASSERT(options.row_multiplicity.size() == rows, "one multiplicity per row");
    const int lo = g.first[static_cast<std::size_t>(NodeClass::output)];
    auto mult = [&](int v) { return options.row_multiplicity[static_cast<std::size_t>(v - lo)]; };
    std::stable_sort(g.lab.begin() + lo, g.lab.begin() + lo + b,
                     [&](int x, int y) { return mult(x) < mult(y); });
    for (int k = lo; k + 1 < lo + b; ++k) g.ptn[k] = mult(g.lab[k]) == mult(g.lab[k + 1]) ? 1 : 0;
  }
  return g;
}

namespace {

// The canonical graph nauty writes is reused across calls on one thread.
struct CanonGraph {
  sparsegraph sg;
  CanonGraph() { SG_INIT(sg); }
  ~CanonGraph() { SG_FREE(sg); }
  CanonGraph(const CanonGraph&) = delete;
  CanonGraph& operator=(const CanonGraph&) = delete;
};

std::vector<int> sparse_labeling(const InducedGraph& g, bool traces) {
  thread_local CanonGraph canon;
  thread_local std::vector<std::size_t> v;
  thread_local std::vector<int> d;
  const int n = g.num_nodes;
  v.resize(n);
  d.resize(n);
  for (int i = 0; i < n; ++i) {
    v[i] = static_cast<std::size_t>(g.offsets[i]);
    d[i] = g.offsets[i + 1] - g.offsets[i];
  }
  sparsegraph sg;
  SG_INIT(sg);
  sg.nv = n;
  sg.nde = g.targets.size();
  sg.v = v.data();
  sg.d = d.data();
  sg.e = const_cast<int*>(g.targets.data());  // nauty does not modify the input graph
  sg.vlen = sg.dlen = static_cast<std::size_t>(n);
  sg.elen = g.targets.size();

  std::vector<int> lab = g.lab, ptn = g.ptn, orbits(n);
  if (traces) {
    DEFAULTOPTIONS_TRACES(options);
    options.getcanon = TRUE;
    options.defaultptn = FALSE;
    TracesStats stats;
    Traces(&sg, lab.data(), ptn.data(), orbits.data(), &options, &stats, &canon.sg);
    EINSUMDB_ASSERT(stats.errstatus == 0,
                    "Traces reported error status " + std::to_string(stats.errstatus));
    return lab;
  }
  DEFAULTOPTIONS_SPARSEDIGRAPH(digraph_options);
  DEFAULTOPTIONS_SPARSEGRAPH(graph_options);
  optionblk& options = g.directed ? digraph_options : graph_options;
  options.getcanon = TRUE;
  options.defaultptn = FALSE;
  statsblk stats;
  sparsenauty(&sg, lab.data(), ptn.data(), orbits.data(), &options, &stats, &canon.sg);
  EINSUMDB_ASSERT(stats.errstatus == 0,
                  "nauty reported error status " + std::to_string(stats.errstatus));
  return lab;
}

std::vector<int> dense_labeling(const InducedGraph& g) {
  const int n = g.num_nodes;
  const int m = SETWORDSNEEDED(n);
  std::vector<graph> dg(static_cast<std::size_t>(m) * n, 0);
  std::vector<graph> canon(static_cast<std::size_t>(m) * n);
  for (int from = 0; from < n; ++from)
    for (int k = g.offsets[from]; k < g.offsets[from + 1]; ++k)
      ADDONEARC(dg.data(), from, g.targets[k], m);
  std::vector<int> lab = g.lab, ptn = g.ptn, orbits(n);
  DEFAULTOPTIONS_DIGRAPH(options);
  options.getcanon = TRUE;
  options.defaultptn = FALSE;
  statsblk stats;
  densenauty(dg.data(), lab.data(), ptn.data(), orbits.data(), &options, &stats, m, n,
             canon.data());
  EINSUMDB_ASSERT(stats.errstatus == 0,
                  "nauty reported error status " + std::to_string(stats.errstatus));
  return lab;
}

constexpr std::array<std::string_view, 4> kLabelingNames{
    "nauty-sparse-digraph", "nauty-dense-digraph", "nauty-sparse", "traces"};

}  // namespace

std::string_view to_string(Labeling l) {
  return enum_name(kLabelingNames, l);
}
std::optional<Labeling> parse_labeling(std::string_view s) {
  return enum_from_name<Labeling>(kLabelingNames, s);
}

GraphLayout layout_of(Labeling l) {
  return l == Labeling::nauty_sparse_digraph || l == Labeling::nauty_dense_digraph
             ? GraphLayout::paper
             : GraphLayout::compact;
}

std::vector<int> canonical_labeling(const InducedGraph& g, Labeling method) {
  EINSUMDB_ASSERT(g.directed == (layout_of(method) == GraphLayout::paper),
                  std::string(to_string(method)) + " was given a graph of the other layout");
  switch (method) {
    case Labeling::nauty_dense_digraph:
      return dense_labeling(g);
    case Labeling::traces:
      return sparse_labeling(g, true);
    case Labeling::nauty_sparse_digraph:
    case Labeling::nauty_sparse:
      break;
  }
  return sparse_labeling(g, false);
}

}  // namespace einsumdb
