// Small matrix products: libxsmm's kernels as the executor calls them (kernels::small_gemm and
// small_gemm_batch) against OpenBLAS's cblas_dgemm on the same row-major operands, one thread.
// Shapes: the GEMM steps of the DG-FEM operators (e = 10000 elements; N and K from 4 faces × 15
// nodes, 3 directions × 35 nodes, ...), a batch of 10000 tiny per-element products, and batched
// products at the executor's size limit for libxsmm (kSmallGemmArea). bench/small_gemm.sh
// prints the ratios.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <vector>

#include "einsumdb/executor/small_gemm.hpp"

namespace {

struct Operands {
  std::vector<double> a, b, c;
  Operands(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k)
      : a(static_cast<std::size_t>(batch * m * k)),
        b(static_cast<std::size_t>(batch * k * n)),
        c(static_cast<std::size_t>(batch * m * n)) {
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = 1.0 / double(1 + i % 7);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = 1.0 / double(1 + i % 5);
  }
};

// range: batch, m, n, k; `multiply` runs one batch of products on the operands.
template <typename Multiply>
void products(benchmark::State& state, Multiply multiply) {
  const std::int64_t nb = state.range(0), m = state.range(1), n = state.range(2),
                     k = state.range(3);
  Operands o(nb, m, n, k);
  openblas_set_num_threads(1);
  for (auto _ : state) {
    if (!multiply(nb, m, n, k, o)) {
      state.SkipWithError("libxsmm has no kernel for this shape");
      break;
    }
    benchmark::DoNotOptimize(o.c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * double(nb * m * n * k),
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}

void xsmm(benchmark::State& state) {
  products(state, [](std::int64_t nb, std::int64_t m, std::int64_t n, std::int64_t k, Operands& o) {
    return einsumdb::kernels::small_gemm_batch(nb, m, n, k, o.a.data(), k, false, m * k, o.b.data(),
                                               n, k * n, o.c.data(), n, m * n, false);
  });
}

void openblas(benchmark::State& state) {
  products(state, [](std::int64_t nb, std::int64_t m, std::int64_t n, std::int64_t k, Operands& o) {
    for (std::int64_t i = 0; i < nb; ++i)
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(m), int(n), int(k), 1.0,
                  o.a.data() + i * m * k, int(k), o.b.data() + i * k * n, int(n), 0.0,
                  o.c.data() + i * m * n, int(n));
    return true;
  });
}

void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"batch", "m", "n", "k"});
  // DG-FEM GEMM steps: gradient P4 (N = 3·35), divergence P4 (K = 3·35), face mass P4 (K = 4·15),
  // face mass P3 (K = 4·10), gradient P3 (N = 3·20).
  b->Args({1, 10000, 105, 35});
  b->Args({1, 10000, 35, 105});
  b->Args({1, 10000, 35, 60});
  b->Args({1, 10000, 20, 40});
  b->Args({1, 10000, 60, 20});
  // One 3×3 by 3×35 product per element (gradient P4's second step).
  b->Args({10000, 3, 35, 3});
  // Batched products at the executor's limit for libxsmm (n·k = kSmallGemmArea), and below.
  b->Args({64, 128, 64, 128});
  b->Args({64, 64, 64, 64});
  b->Unit(benchmark::kMicrosecond);
}

BENCHMARK(xsmm)->Apply(shapes);
BENCHMARK(openblas)->Apply(shapes);

}  // namespace

BENCHMARK_MAIN();
