// What reusing a tensor's memory is worth: a kernel writing its result into pages the process
// has written before (a Tensor, whose large blocks are recycled mappings) against the same
// kernel writing into a new mapping each time (what every run of a kernel did when each of its
// results landed on new pages) — an element-wise addition and a DGEMM, 1536² doubles each.
//   build/bin/tensor_bench --benchmark_repetitions=3
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <sys/mman.h>

#include <cstdint>
#include <stdexcept>

#include "einsumdb/executor/tensor.hpp"

namespace einsumdb {
namespace {

constexpr std::int64_t kN = 1536;

Tensor filled(std::uint64_t seed) {
  Tensor t(Dtype::f64, {kN, kN}, Tensor::Uninitialized{});
  fill_random(t, seed);
  return t;
}

// A new anonymous mapping for the result, unmapped afterwards.
class FreshMapping {
 public:
  FreshMapping() {
    void* p = mmap(nullptr, bytes(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap failed");
    data_ = static_cast<double*>(p);
  }
  ~FreshMapping() { munmap(data_, bytes()); }
  FreshMapping(const FreshMapping&) = delete;
  FreshMapping& operator=(const FreshMapping&) = delete;
  double* data() { return data_; }

 private:
  static std::size_t bytes() { return sizeof(double) * kN * kN; }
  double* data_ = nullptr;
};

void add(const double* x, const double* y, double* z) {
  for (std::int64_t i = 0; i < kN * kN; ++i) z[i] = x[i] + y[i];
}

void gemm(const double* x, const double* y, double* z) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kN, kN, kN, 1.0, x, kN, y, kN, 0.0, z, kN);
}

template <void (*Kernel)(const double*, const double*, double*)>
void BM_IntoFreshMapping(benchmark::State& state) {
  const Tensor x = filled(1), y = filled(2);
  for (auto _ : state) {
    FreshMapping z;
    Kernel(x.data<double>(), y.data<double>(), z.data());
    benchmark::DoNotOptimize(z.data()[kN]);
  }
}

template <void (*Kernel)(const double*, const double*, double*)>
void BM_IntoTensor(benchmark::State& state) {
  const Tensor x = filled(1), y = filled(2);
  for (auto _ : state) {
    Tensor z(Dtype::f64, {kN, kN}, Tensor::Uninitialized{});
    Kernel(x.data<double>(), y.data<double>(), z.data<double>());
    benchmark::DoNotOptimize(z.data<double>()[kN]);
  }
}

BENCHMARK(BM_IntoFreshMapping<add>)->Name("add/fresh_mapping")->UseRealTime();
BENCHMARK(BM_IntoTensor<add>)->Name("add/tensor")->UseRealTime();
BENCHMARK(BM_IntoFreshMapping<gemm>)->Name("dgemm/fresh_mapping")->UseRealTime()->Iterations(8);
BENCHMARK(BM_IntoTensor<gemm>)->Name("dgemm/tensor")->UseRealTime()->Iterations(8);

}  // namespace
}  // namespace einsumdb

BENCHMARK_MAIN();
