// The cost of calling einsumdb through its library API on small workloads, against calling the
// strategy the engine chose directly on tensors bound once: what a repeated Engine::einsum call
// adds beyond the kernel (the prepared-execution cache lookup, binding the caller's memory,
// copying the result into the caller's buffer). bench/engine.sh prints the differences.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "einsumdb/engine/engine.hpp"

namespace {

using namespace einsumdb;

struct Workload {
  std::int64_t n;
  std::vector<double> a, b, c;
  explicit Workload(std::int64_t size)
      : n(size),
        a(static_cast<std::size_t>(n * n), 0.5),
        b(static_cast<std::size_t>(n * n), 0.25),
        c(static_cast<std::size_t>(n * n)) {}
  TensorRef A() { return {Dtype::f64, a.data(), {n, n}, {}}; }
  TensorRef B() { return {Dtype::f64, b.data(), {n, n}, {}}; }
  TensorRef C() { return {Dtype::f64, c.data(), {n, n}, {}}; }
};

// No store: every run uses the same default transform on all three paths.
EngineOptions no_store() {
  EngineOptions o;
  o.db = (std::filesystem::temp_directory_path() / "einsumdb-engine-bench-none.sqlite").string();
  return o;
}

// The chosen strategy called directly on tensors bound once (the kernel alone, with its own
// result allocation).
void BM_Direct(benchmark::State& state) {
  Workload w(state.range(0));
  Engine engine(no_store());
  const auto p = engine.prepare("ik,kj->ij", {w.A(), w.B()});
  Arrays arrays;
  arrays.emplace("T0", Tensor::borrow(Dtype::f64, {w.n, w.n}, w.a.data()));
  arrays.emplace("T1", Tensor::borrow(Dtype::f64, {w.n, w.n}, w.b.data()));
  const Bound bound(p->einsum(), arrays);
  const auto& c = p->choice().candidate;
  for (auto _ : state) benchmark::DoNotOptimize(execute(bound, c.strategy, c.params));
  state.SetLabel(c.strategy);
}

// Prepared once by the caller, run on the caller's memory into the caller's buffer.
void BM_Prepared(benchmark::State& state) {
  Workload w(state.range(0));
  Engine engine(no_store());
  const auto p = engine.prepare("ik,kj->ij", {w.A(), w.B()});
  const std::map<std::string, TensorRef> inputs = {{"T0", w.A()}, {"T1", w.B()}};
  const std::vector<TensorRef> outputs = {w.C()};
  for (auto _ : state) {
    p->run(inputs, outputs);
    benchmark::DoNotOptimize(w.c.data());
  }
}

// numpy.einsum's form: subscripts and operands every call (the cache finds the prepared run).
void BM_Einsum(benchmark::State& state) {
  Workload w(state.range(0));
  Engine engine(no_store());
  for (auto _ : state) {
    engine.einsum("ik,kj->ij", {w.A(), w.B()}, w.C());
    benchmark::DoNotOptimize(w.c.data());
  }
}

BENCHMARK(BM_Direct)->Arg(2)->Arg(4)->Arg(8)->Arg(16);
BENCHMARK(BM_Prepared)->Arg(2)->Arg(4)->Arg(8)->Arg(16);
BENCHMARK(BM_Einsum)->Arg(2)->Arg(4)->Arg(8)->Arg(16);

}  // namespace

BENCHMARK_MAIN();
