#include "einsumdb/distributed/graph_data.hpp"

#include <filesystem>
#include <fstream>

#include "einsumdb/core/error.hpp"
#include "einsumdb/executor/npy.hpp"

namespace einsumdb {
namespace {

std::uint64_t mix(std::uint64_t z) {  // splitmix64's finalizer
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::uint64_t name_hash(std::string_view name) {  // FNV-1a
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

}  // namespace

std::string InputSource::file_of(const std::string& name) const {
  if (generated(name)) return {};
  return (std::filesystem::path(dir) / (name + ".npy")).string();
}

void check_input_file(const InputSource& src, const std::string& name, const EinGraph::Tensor& t) {
  const std::string file = src.file_of(name);
  if (file.empty()) return;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec))
    throw SpecError("input '" + name + "': no file '" +
                    std::filesystem::absolute(file, ec).string() +
                    "' here (with --inputs DIR every input is read from DIR/NAME.npy on the host "
                    "of each rank that reads it; --generate NAME generates it from the seed "
                    "instead)");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw SpecError("input '" + name + "': cannot open '" + file + "'");
  in.seekg(0, std::ios::end);
  const auto size = static_cast<std::uint64_t>(in.tellg());
  in.seekg(0);
  const NpyHeader h = read_npy_header(in, size, file);
  if (h.shape != t.shape)
    throw SpecError(file + ": input '" + name + "' has shape " + shape_text(h.shape) +
                    " in the file, but the graph says " + shape_text(t.shape));
  if (h.dtype != t.dtype)
    throw SpecError(file + ": input '" + name + "' is " + std::string(to_string(h.dtype)) +
                    " in the file, but the graph says " + std::string(to_string(t.dtype)));
}

double input_value(std::uint64_t seed, std::string_view name, std::int64_t flat) {
  const std::uint64_t base = mix(seed * 0x9E3779B97F4A7C15ull ^ name_hash(name));
  const std::uint64_t z = mix(base + static_cast<std::uint64_t>(flat) * 0x9E3779B97F4A7C15ull);
  return static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0;
}

Tensor input_region(const InputSource& src, const std::string& name, const EinGraph::Tensor& t,
                    const Region& region) {
  if (const std::string file = src.file_of(name); !file.empty()) {
    check_input_file(src, name, t);
    return read_npy_region(file, region.start, region.length);
  }
  Tensor out(t.dtype, region.length, Tensor::Uninitialized{});
  const std::size_t r = t.shape.size();
  std::vector<std::int64_t> strides(r, 1), idx(r, 0);
  for (std::size_t a = r; a-- > 1;) strides[a - 1] = strides[a] * t.shape[a];
  std::int64_t base = 0;
  for (std::size_t a = 0; a < r; ++a) base += region.start[a] * strides[a];
  const std::int64_t inner = r ? region.length[r - 1] : 1;
  for (std::int64_t k = 0; k < out.size(); k += inner) {
    std::int64_t flat = base;
    for (std::size_t a = 0; a + 1 < r; ++a) flat += idx[a] * strides[a];
    for (std::int64_t i = 0; i < inner; ++i) out.set(k + i, input_value(src.seed, name, flat + i));
    for (std::size_t a = r > 0 ? r - 1 : 0; a-- > 0;) {
      if (++idx[a] < region.length[a]) break;
      idx[a] = 0;
    }
  }
  return out;
}

Results execute_kernel(const Bound& bound, KernelChoice& choice, int threads,
                       std::string* refused) {
  choice.transform.params["threads"] = threads;
  std::string why;
  Results r = execute_or_default(bound, choice.transform, choice.source != "default", &why);
  if (!why.empty()) {
    choice.source = "default (the stored transform was refused)";
    if (refused) *refused = why;
  }
  return r;
}

BatchedEinsum node_einsum(const EinGraph& g, const EinGraph::Node& n) {
  std::vector<std::pair<std::string, ArrayInfo>> operands;
  for (std::size_t k = 0; k < n.inputs.size(); ++k) {
    ArrayInfo info;
    const auto& t = g.tensor(n.inputs[k]);
    info.dtype = t.dtype;
    for (auto l : t.shape) info.shape.push_back(Length::of(l));
    operands.emplace_back("T" + std::to_string(k), std::move(info));
  }
  return one_row_einsum(n.operands, n.output, operands, n.join, n.agg);
}

std::map<std::string, Tensor> run_graph_locally(const EinGraph& g, const InputSource& src,
                                                const ChooseKernel& choose, int threads) {
  std::map<std::string, Tensor> inputs;
  for (const auto& [name, t] : g.inputs) {
    Region all;
    all.start.assign(t.shape.size(), 0);
    all.length = t.shape;
    inputs.emplace(name, input_region(src, name, t, all));
  }
  return run_graph_locally(g, std::move(inputs), choose, threads);
}

std::map<std::string, Tensor> run_graph_locally(const EinGraph& g,
                                                std::map<std::string, Tensor> inputs,
                                                const ChooseKernel& choose, int threads) {
  std::map<std::string, Tensor> tensors = std::move(inputs);
  for (const auto& n : g.nodes) {
    const BatchedEinsum e = node_einsum(g, n);
    Arrays arrays;
    for (std::size_t k = 0; k < n.inputs.size(); ++k)
      arrays.emplace("T" + std::to_string(k), Tensor::view(tensors.at(n.inputs[k])));
    KernelChoice c = choose(e);
    Results r = execute_kernel(Bound(e, arrays), c, threads);
    tensors.emplace(n.name, std::move(r.at(0)));
  }
  return tensors;
}

}  // namespace einsumdb
