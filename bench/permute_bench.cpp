// Permuting a tensor (ttgt's packing and the write-back of its result, and the engine taking a
// caller's strided array) against a plain copy of the same bytes: kernels::copy_layout, glibc's
// memcpy, a vector copy (kernels::copy_run), and an element-by-element copy along the output's
// rows (what the permutation was before copy_layout, and of complex doubles before their
// micro-blocks), and copy_layout split between two threads (kernels::copy_strided, as ttgt packs
// on two). Sizes far beyond the caches: 2-D transposes at a power-of-two and another
// leading dimension, in f64, f32 and c128, and permutations of a 4-index tensor (TCCG's 72⁴; 56⁴
// in c128) and a 6-index one (16⁶, the interleaving of ccsd_t).
//   bench/permute.sh  (ratios per round; or build/bin/permute_bench directly)
#include <benchmark/benchmark.h>

#include <complex>
#include <cstring>
#include <string>
#include <vector>

#include "einsumdb/executor/kernels.hpp"
#include "einsumdb/executor/permute.hpp"
#include "einsumdb/executor/tensor.hpp"

namespace {

struct Workload {
  std::string name;
  std::vector<std::int64_t> shape;  // dst's axes, row-major
  std::vector<int> src_order;       // src's layout: dst's axes, slowest first
  std::size_t bytes;                // per element
};

const std::vector<Workload>& workloads() {
  static const std::vector<Workload> w = {
      {"f64_4096x2048_transposed", {4096, 2048}, {1, 0}, 8},
      {"f64_3000x3000_transposed", {3000, 3000}, {1, 0}, 8},
      {"f32_4096x4096_transposed", {4096, 4096}, {1, 0}, 4},
      {"c128_2048x2048_transposed", {2048, 2048}, {1, 0}, 16},
      {"c128_2000x2000_transposed", {2000, 2000}, {1, 0}, 16},
      {"c128_56^4_from_dbca", {56, 56, 56, 56}, {3, 1, 2, 0}, 16},
      {"f64_72^4_from_dbca", {72, 72, 72, 72}, {3, 1, 2, 0}, 8},
      {"f64_16^6_from_decfab", {16, 16, 16, 16, 16, 16}, {3, 4, 2, 5, 0, 1}, 8},
  };
  return w;
}

struct Buffers {
  std::vector<std::int64_t> shape, src_strides, dst_strides;
  einsumdb::Tensor src, dst;  // the executor's memory, written before timing
  std::size_t element_bytes = 0, bytes = 0;
};

Buffers buffers(const Workload& w) {
  Buffers b;
  b.shape = w.shape;
  b.element_bytes = w.bytes;
  b.dst_strides = einsumdb::kernels::row_major_strides(w.shape);
  b.src_strides.resize(w.shape.size());
  std::int64_t at = 1, n = 1;
  for (std::size_t q = w.src_order.size(); q-- > 0;)
    b.src_strides[w.src_order[q]] = at, at *= w.shape[w.src_order[q]];
  for (auto len : w.shape) n *= len;
  b.bytes = static_cast<std::size_t>(n) * w.bytes;
  const std::vector<std::int64_t> words = {static_cast<std::int64_t>((b.bytes + 7) / 8)};
  b.src = einsumdb::Tensor(einsumdb::Dtype::f64, words, einsumdb::Tensor::Uninitialized{});
  b.dst = einsumdb::Tensor(einsumdb::Dtype::f64, words);
  auto* x = static_cast<std::uint64_t*>(b.src.raw());
  for (std::int64_t q = 0; q < words[0]; ++q)
    x[q] = static_cast<std::uint64_t>(q) * 0x9E3779B97F4A7C15ull;
  return b;
}

// The permutation before copy_layout: along dst's rows, reading src element by element.
template <typename T>
void elementwise(const T* src, const std::vector<std::int64_t>& shape,
                 const std::vector<std::int64_t>& strides, T* dst) {
  const std::size_t r = shape.size();
  std::int64_t total = 1;
  for (auto len : shape) total *= len;
  const std::int64_t inner = shape[r - 1], stride = strides[r - 1];
  std::vector<std::int64_t> counter(r, 0);
  std::int64_t offset = 0;
  for (std::int64_t k = 0; k < total; k += inner) {
    for (std::int64_t i = 0; i < inner; ++i) dst[k + i] = src[offset + i * stride];
    for (std::size_t a = r - 1; a-- > 0;) {
      offset += strides[a];
      if (++counter[a] < shape[a]) break;
      offset -= strides[a] * shape[a];
      counter[a] = 0;
    }
  }
}

struct Complex128 {  // a complex double's bits
  std::uint64_t re, im;
};

enum class Method { memcpy_, vector_copy, copy_layout, two_threads, elementwise };

void run(benchmark::State& state, const Workload& w, Method m) {
  Buffers b = buffers(w);
  const auto* src = static_cast<const std::uint64_t*>(b.src.raw());
  auto* dst = static_cast<std::uint64_t*>(b.dst.raw());
  for (auto _ : state) {
    switch (m) {
      case Method::memcpy_:
        std::memcpy(dst, src, b.bytes);
        break;
      case Method::vector_copy:
        einsumdb::kernels::copy_run(src, static_cast<std::int64_t>(b.bytes / 8), dst);
        break;
      case Method::copy_layout:
        einsumdb::kernels::copy_layout(src, b.src_strides, dst, b.dst_strides, b.shape,
                                       b.element_bytes);
        break;
      case Method::two_threads:
        if (b.element_bytes == 16)
          einsumdb::kernels::copy_strided(reinterpret_cast<const std::complex<double>*>(src),
                                          b.shape, b.src_strides,
                                          reinterpret_cast<std::complex<double>*>(dst), nullptr, 2);
        else if (b.element_bytes == 8)
          einsumdb::kernels::copy_strided(reinterpret_cast<const double*>(src), b.shape,
                                          b.src_strides, reinterpret_cast<double*>(dst), nullptr,
                                          2);
        else
          einsumdb::kernels::copy_strided(reinterpret_cast<const float*>(src), b.shape,
                                          b.src_strides, reinterpret_cast<float*>(dst), nullptr, 2);
        break;
      case Method::elementwise:
        if (b.element_bytes == 16)
          elementwise(reinterpret_cast<const Complex128*>(src), b.shape, b.src_strides,
                      reinterpret_cast<Complex128*>(dst));
        else if (b.element_bytes == 8)
          elementwise(src, b.shape, b.src_strides, dst);
        else
          elementwise(reinterpret_cast<const std::uint32_t*>(src), b.shape, b.src_strides,
                      reinterpret_cast<std::uint32_t*>(dst));
        break;
    }
    benchmark::DoNotOptimize(dst);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(2 * b.bytes));
}

const int registered = [] {
  const std::pair<const char*, Method> methods[] = {{"memcpy", Method::memcpy_},
                                                    {"vector_copy", Method::vector_copy},
                                                    {"copy_layout", Method::copy_layout},
                                                    {"two_threads", Method::two_threads},
                                                    {"elementwise", Method::elementwise}};
  for (const Workload& w : workloads())
    for (const auto& [name, m] : methods)
      benchmark::RegisterBenchmark((std::string(name) + "/" + w.name).c_str(),
                                   [&w, m = m](benchmark::State& s) { run(s, w, m); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
