// Reading .npy files: einsumdb's reader (header checked against the file size, data read
// straight into the aligned tensor) against xtensor's xnpy (data read into its own buffer, then
// copied into a tensor). Both read the same 8, 64 and 256 MiB files from the page cache.
#include <benchmark/benchmark.h>

#include <xtensor/xarray.hpp>
#include <xtensor/xnpy.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "einsumdb/executor/npy.hpp"

namespace {

std::string file_of(std::int64_t mib) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("einsumdb_npy_bench_" + std::to_string(mib) + ".npy"))
                               .string();
  if (!std::filesystem::exists(path)) {
    einsumdb::Tensor t(einsumdb::Dtype::f64, {mib * 1024, 128});
    einsumdb::fill_random(t, 1);
    einsumdb::write_npy(path, t);
  }
  return path;
}

void einsumdb_reader(benchmark::State& state) {
  const std::string path = file_of(state.range(0));
  for (auto _ : state) {
    einsumdb::Tensor t = einsumdb::read_npy(path);
    benchmark::DoNotOptimize(t.raw());
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * (1 << 20));
}

void xnpy_reader(benchmark::State& state) {
  const std::string path = file_of(state.range(0));
  for (auto _ : state) {
    auto a = xt::load_npy<double>(path);
    std::vector<std::int64_t> shape(a.shape().begin(), a.shape().end());
    einsumdb::Tensor t(einsumdb::Dtype::f64, shape, einsumdb::Tensor::Uninitialized{});
    std::copy(a.begin(), a.end(), t.data<double>());
    benchmark::DoNotOptimize(t.raw());
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * (1 << 20));
}

BENCHMARK(einsumdb_reader)->Arg(8)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond);
BENCHMARK(xnpy_reader)->Arg(8)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
