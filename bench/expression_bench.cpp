// Functional operands: evaluating an expression over a block of an operand (as the strategies
// do while packing it) against copying the same block, the pass a materialized operand would
// need at most (kernels::copy_run; std_copy is glibc's memmove, whose `rep movsb` path is slow
// on some AMD machines). 5120 doubles: a tile of 256 elements × 20 nodes of DG-FEM's U. And the
// same elements in strided runs of 3, evaluated run by run and packed by copy_strided.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <string>
#include <vector>

#include "einsumdb/executor/expression.hpp"
#include "einsumdb/executor/kernels.hpp"

namespace {

constexpr std::int64_t kElements = 5120;

std::vector<double> input() {
  std::vector<double> in(kElements);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = 0.001 * double(i);
  return in;
}

void std_copy(benchmark::State& state) {
  const std::vector<double> in = input();
  std::vector<double> out(kElements);
  for (auto _ : state) {
    std::copy(in.begin(), in.end(), out.begin());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kElements);
}

void copy_run(benchmark::State& state) {
  const std::vector<double> in = input();
  std::vector<double> out(kElements);
  for (auto _ : state) {
    einsumdb::kernels::copy_run(in.data(), kElements, out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kElements);
}

void evaluate(benchmark::State& state, const std::string& text) {
  const std::vector<double> in = input();
  std::vector<double> out(kElements);
  const einsumdb::Expression f = einsumdb::Expression::parse(text);
  for (auto _ : state) {
    f.apply(in.data(), 1, out.data(), kElements);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kElements);
}

// The same elements evaluated in runs of 3, with a stride: how a functional operand is packed
// when its last axis is short and not contiguous (DG-FEM's J, [x, r, e] packed as [e, x, r]).
void evaluate_runs_of_3(benchmark::State& state, const std::string& text) {
  const std::vector<double> in = input();
  std::vector<double> out(kElements);
  const einsumdb::Expression f = einsumdb::Expression::parse(text);
  constexpr std::int64_t kRuns = kElements / 3;
  for (auto _ : state) {
    for (std::int64_t r = 0; r < kRuns; ++r) f.apply(in.data() + r, kRuns, out.data() + 3 * r, 3);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kRuns * 3);
}

// The same runs packed by kernels::copy_strided, which gathers short runs first and evaluates
// the function once over the block.
void pack_runs_of_3(benchmark::State& state, const std::string& text) {
  const std::vector<double> in = input();
  std::vector<double> out(kElements);
  const einsumdb::Expression f = einsumdb::Expression::parse(text);
  constexpr std::int64_t kRuns = kElements / 3;
  for (auto _ : state) {
    einsumdb::kernels::copy_strided(in.data(), {kRuns, 3}, {1, kRuns}, out.data(), &f);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kRuns * 3);
}

BENCHMARK(std_copy);
BENCHMARK(copy_run);
BENCHMARK_CAPTURE(evaluate, identity, std::string("U"));
BENCHMARK_CAPTURE(evaluate, u_squared_minus_1, std::string("U*U-1"));
BENCHMARK_CAPTURE(evaluate, two_u_plus_1, std::string("2*U+1"));
BENCHMARK_CAPTURE(evaluate, abs_u_minus_half, std::string("abs(U)-0.5"));
BENCHMARK_CAPTURE(evaluate, sin_u, std::string("sin(U)"));
BENCHMARK_CAPTURE(evaluate_runs_of_3, u_squared_minus_1, std::string("U*U-1"));
BENCHMARK_CAPTURE(evaluate_runs_of_3, two_u_sin_u, std::string("2*U*sin(U)+U"));
BENCHMARK_CAPTURE(pack_runs_of_3, u_squared_minus_1, std::string("U*U-1"));
BENCHMARK_CAPTURE(pack_runs_of_3, two_u_sin_u, std::string("2*U*sin(U)+U"));

}  // namespace

BENCHMARK_MAIN();
