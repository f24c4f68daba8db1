#include "einsumdb/tuner/roofline.hpp"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "einsumdb/executor/tensor.hpp"

namespace einsumdb {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

template <typename T>
double gemm_gflops() {
  constexpr int n = 1024;
  std::vector<T> a(n * n, T(0.5)), b(n * n, T(0.25)), c(n * n, T(0));
  const int saved = openblas_get_num_threads();
  openblas_set_num_threads(1);
  double best = 0;
  for (int rep = 0; rep < 7; ++rep) {  // the first run warms up; the best of the others
    const auto t0 = std::chrono::steady_clock::now();
    if constexpr (sizeof(T) == 8)
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a.data(), n, b.data(), n,
                  0.0, c.data(), n);
    else
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(),
                  n, 0.0f, c.data(), n);
    const double t = seconds_since(t0);
    if (rep > 0) best = std::max(best, 2.0 * n * n * n / t * 1e-9);
  }
  openblas_set_num_threads(saved);
  return best;
}

// The better of two streams over 64 MiB arrays: the STREAM triad a = b + s·c (bytes counted as
// read b, read c, write a; the write allocate is not counted, as in STREAM), and a read-only
// sum (contractions mostly read: a matrix-vector product streams its matrix faster than a
// triad moves data).
double stream_gbs() {
  constexpr std::size_t n = std::size_t{8} << 20;  // doubles per array
  std::vector<double> a(n, 0.0), b(n, 1.0), c(n, 2.0);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const double s = 1.0 + rep;
    const auto t0 = std::chrono::steady_clock::now();
    double* __restrict pa = a.data();
    const double* __restrict pb = b.data();
    const double* __restrict pc = c.data();
    for (std::size_t i = 0; i < n; ++i) pa[i] = pb[i] + s * pc[i];
    const double t = seconds_since(t0);
    if (rep > 0) best = std::max(best, 3.0 * sizeof(double) * n / t * 1e-9);
  }
  double read_best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    const double* __restrict pb = b.data();
    for (std::size_t i = 0; i + 3 < n; i += 4)
      s0 += pb[i], s1 += pb[i + 1], s2 += pb[i + 2], s3 += pb[i + 3];
    const double t = seconds_since(t0);
    volatile double sink = s0 + s1 + s2 + s3;
    (void)sink;
    if (rep > 0) read_best = std::max(read_best, sizeof(double) * n / t * 1e-9);
  }
  volatile double sink = a[n / 2];
  (void)sink;
  return std::max(best, read_best);
}

}  // namespace

Store::Roofline measure_roofline(Dtype dtype) {
  if (!executable_dtype(dtype))
    throw SpecError("the roofline is measured for f32, f64, c64 and c128; got " +
                    std::string(to_string(dtype)));
  Store::Roofline r;
  r.dtype = std::string(to_string(dtype));
  // In real FLOPs: a complex multiply-add is 8 of them, and its GEMM (ZGEMM, CGEMM, or the real
  // form of tensor_gemm) runs at about its real type's rate in those units.
  const bool single = dtype == Dtype::f32 || dtype == Dtype::c64;
  r.peak_gflops = single ? gemm_gflops<float>() : gemm_gflops<double>();
  r.bandwidth_gbs = stream_gbs();
  return r;
}

Store::Roofline machine_roofline(Store& store, const Machine& machine, Dtype dtype) {
  if (auto r = store.roofline(machine.fingerprint(), std::string(to_string(dtype)))) return *r;
  const Store::Roofline r = measure_roofline(dtype);
  store.record_roofline(store.machine_id(machine), r);
  return r;
}

}  // namespace einsumdb
