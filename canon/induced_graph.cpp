#include "canon/induced_graph.hpp"

#include <algorithm>
#include <map>

#include <nauty/nausparse.h>
#include <nauty/nautinv.h>

#include "canon/error.hpp"

namespace einsumdb {
namespace {

// Collects edges, then lays them out as CSR.
class EdgeList {
 public:
  void add(int from, int to) { edges_.emplace_back(from, to); }
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
  std::vector<std::pair<int, int>> edges_;
};

}  // namespace

InducedGraph build_induced_graph(const BatchedEinsum& e, const GraphOptions& options) {
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
  for (const auto& in : e.inputs)
    for (char c : in) index_id[static_cast<unsigned char>(c)] = 0;
  int n_index = 0;
  for (auto& id : index_id)
    if (id == 0) id = n_index++;

  // Distinct dtypes (by rank), concrete lengths (by value), symbols, dimensions.
  std::vector<Dtype> dtypes;
  for (const auto* info : array_info) dtypes.push_back(info->dtype);
  std::sort(dtypes.begin(), dtypes.end(),
            [](Dtype x, Dtype y) { return dtype_rank(x) < dtype_rank(y); });
  dtypes.erase(std::unique(dtypes.begin(), dtypes.end()), dtypes.end());

  const auto lengths_of = e.index_lengths();
  std::vector<std::int64_t> lengths;
  std::vector<std::string_view> symbols;
  if (options.with_lengths) {
    for (const auto& [c, len] : lengths_of) {
      if (len.symbolic())
        symbols.push_back(len.symbol);
      else
        lengths.push_back(len.value);
    }
    std::sort(lengths.begin(), lengths.end());
    lengths.erase(std::unique(lengths.begin(), lengths.end()), lengths.end());
    std::sort(symbols.begin(), symbols.end());
    symbols.erase(std::unique(symbols.begin(), symbols.end()), symbols.end());
  }
  std::size_t n_dim = e.output.size();
  for (const auto& in : e.inputs) n_dim = std::max(n_dim, in.size());
  std::size_t n_access_in = 0, n_scalar = 0;
  for (const auto& in : e.inputs) {
    n_access_in += in.size() * static_cast<std::size_t>(b);
    if (in.empty()) n_scalar += static_cast<std::size_t>(b);
  }

  InducedGraph g;
  const std::array<std::size_t, kNodeClasses> counts{array_info.size(),
                                                     static_cast<std::size_t>(n_index),
                                                     n_access_in,
                                                     e.output.size(),
                                                     static_cast<std::size_t>(b),
                                                     static_cast<std::size_t>(n_ops),
                                                     dtypes.size(),
                                                     lengths.size(),
                                                     n_dim,
                                                     symbols.size(),
                                                     n_scalar};
  g.first[0] = 0;
  for (std::size_t c = 0; c < kNodeClasses; ++c)
    g.first[c + 1] = g.first[c] + static_cast<int>(counts[c]);
  g.num_nodes = g.first[kNodeClasses];

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

  EdgeList edges;
  int access = g.node(NodeClass::input_access, 0);
  int scalar = g.node(NodeClass::scalar_access, 0);
  for (int i = 0; i < b; ++i) {
    for (int j = 0; j < n_ops; ++j) {
      const int arg = g.node(NodeClass::argument, array_id.at(e.batch[i][j]));
      const std::string& idx = e.inputs[j];
      if (idx.empty()) {
        edges.add(scalar, arg);
        edges.add(g.node(NodeClass::argument_position, j), scalar);
        edges.add(g.node(NodeClass::output, i), scalar);
        ++scalar;
      }
      for (std::size_t d = 0; d < idx.size(); ++d, ++access) {
        edges.add(access, arg);
        edges.add(g.node(NodeClass::argument_position, j), access);
        edges.add(g.node(NodeClass::output, i), access);
        edges.add(g.node(NodeClass::index, index_id[static_cast<unsigned char>(idx[d])]), access);
        edges.add(g.node(NodeClass::dimension, static_cast<int>(d)), access);
      }
    }
  }
  for (std::size_t d = 0; d < e.output.size(); ++d) {
    const int out = g.node(NodeClass::output_access, static_cast<int>(d));
    edges.add(g.node(NodeClass::index, index_id[static_cast<unsigned char>(e.output[d])]), out);
    edges.add(g.node(NodeClass::dimension, static_cast<int>(d)), out);
  }
  if (options.with_lengths)
    for (const auto& [c, len] : lengths_of)
      edges.add(length_node(len),
                g.node(NodeClass::index, index_id[static_cast<unsigned char>(c)]));
  for (std::size_t a = 0; a < array_info.size(); ++a)
    edges.add(dtype_node(array_info[a]->dtype), g.node(NodeClass::argument, static_cast<int>(a)));
  edges.add_tournament(g.first[static_cast<std::size_t>(NodeClass::length)],
                       static_cast<int>(lengths.size()));
  edges.add_tournament(g.first[static_cast<std::size_t>(NodeClass::dtype)],
                       static_cast<int>(dtypes.size()));
  edges.add_tournament(g.first[static_cast<std::size_t>(NodeClass::dimension)],
                       static_cast<int>(n_dim));
  edges.to_csr(g.num_nodes, g.offsets, g.targets);

  // Ordered partition: one cell per class, ranked classes split into singletons, and operand
  // positions split when the join is not commutative.
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
  return g;
}

namespace {

// Scratch buffers reused across calls on one thread.
struct SparseScratch {
  sparsegraph canon;
  SparseScratch() { SG_INIT(canon); }
  ~SparseScratch() { SG_FREE(canon); }
  SparseScratch(const SparseScratch&) = delete;
  SparseScratch& operator=(const SparseScratch&) = delete;
};

std::vector<int> sparse_labeling(const InducedGraph& g) {
  thread_local SparseScratch scratch;
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
  sg.e = const_cast<int*>(g.targets.data());
  sg.vlen = sg.dlen = static_cast<std::size_t>(n);
  sg.elen = g.targets.size();

  std::vector<int> lab = g.lab, ptn = g.ptn, orbits(n);
  DEFAULTOPTIONS_SPARSEDIGRAPH(options);
  options.getcanon = TRUE;
  options.defaultptn = FALSE;
  statsblk stats;
  sparsenauty(&sg, lab.data(), ptn.data(), orbits.data(), &options, &stats, &scratch.canon);
  EINSUMDB_ASSERT(stats.errstatus == 0,
                  "nauty reported error status " + std::to_string(stats.errstatus));
  return lab;
}

std::vector<int> dense_labeling(const InducedGraph& g) {
  const int n = g.num_nodes;
  const int m = SETWORDSNEEDED(n);
  std::vector<graph> dg(static_cast<std::size_t>(m) * n, 0), canon(static_cast<std::size_t>(m) * n);
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

}  // namespace

std::vector<int> canonical_labeling(const InducedGraph& g, NautyApi api) {
  return api == NautyApi::sparse ? sparse_labeling(g) : dense_labeling(g);
}

}  // namespace einsumdb
