// The floor of bench/distributed.sh: the chain (A×B) + (C×(D×E)) as the same sequence
// of calls a user would write by hand in one process — cblas_dgemm three times and one
// element-wise addition into a fourth array — with every array allocated and touched
// beforehand, and this machine's memory-copy bandwidth (memcpy of a buffer far larger than the
// caches), from which the ideal time of moving bytes between ranks is computed.
//   chain_direct --shape square|skewed --s N [--repeat 5]
// Prints one JSON line: {"shape", "s", "seconds": [...], "median_s", "steps_s": {"AB", "DE",
// "CDE", "Z"} (medians per call), "copy_bytes_per_s"}.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "chain_args.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::vector<double> random_matrix(std::size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> a(n);
  for (auto& x : a) x = u(rng);
  return a;
}

// C (m×n) = A (m×k) B (k×n), row-major.
void gemm(int m, int n, int k, const std::vector<double>& a, const std::vector<double>& b,
          std::vector<double>& c) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0, a.data(), k, b.data(), n,
              0.0, c.data(), n);
}

// Bytes per second of memcpy between two touched 256 MiB buffers: the best of five.
double copy_bandwidth() {
  const std::size_t bytes = std::size_t{256} << 20;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  double best = 1e30;
  for (int k = 0; k < 5; ++k) {
    const auto t0 = Clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    best = std::min(best, since(t0));
    src[static_cast<std::size_t>(k)] = dst[bytes - 1 - static_cast<std::size_t>(k)];
  }
  return static_cast<double>(bytes) / best;
}

}  // namespace

int main(int argc, char** argv) {
  ChainArgs a;
  a.repeat = 5;
  if (!parse_chain_args(argc, argv, "chain_direct --shape square|skewed --s N [--repeat 5]", a))
    return 2;
  const int s = a.s, t = a.t(), w = a.w(), repeat = a.repeat;
  const std::string& shape = a.shape;
  const auto n = [](int r, int c) { return static_cast<std::size_t>(r) * c; };
  std::mt19937_64 rng(1234);
  const auto A = random_matrix(n(s, t), rng), B = random_matrix(n(t, s), rng),
             C = random_matrix(n(s, t), rng), D = random_matrix(n(t, w), rng),
             E = random_matrix(n(w, s), rng);
  std::vector<double> AB(n(s, s), 0.0), DE(n(t, s), 0.0), CDE(n(s, s), 0.0), Z(n(s, s), 0.0);

  std::vector<double> seconds, adds, ab, de, cde;
  for (int k = 0; k < repeat; ++k) {
    const auto t0 = Clock::now();
    gemm(s, s, t, A, B, AB);
    ab.push_back(since(t0));
    gemm(t, s, w, D, E, DE);
    de.push_back(since(t0) - ab.back());
    gemm(s, s, t, C, DE, CDE);
    const auto t1 = Clock::now();
    cde.push_back(std::chrono::duration<double>(t1 - t0).count() - ab.back() - de.back());
    const double* x = AB.data();
    const double* y = CDE.data();
    double* z = Z.data();
    for (std::size_t i = 0, size = Z.size(); i < size; ++i) z[i] = x[i] + y[i];
    seconds.push_back(since(t0));
    adds.push_back(since(t1));
  }
  double sum = 0;
  for (double v : Z) sum += std::fabs(v);
  if (!std::isfinite(sum) || sum == 0) {
    std::fprintf(stderr, "chain_direct: the result is not finite or all zero\n");
    return 1;
  }
  std::printf("{\"shape\": \"%s\", \"s\": %d, \"seconds\": [", shape.c_str(), s);
  for (std::size_t k = 0; k < seconds.size(); ++k) std::printf("%s%.6f", k ? ", " : "", seconds[k]);
  std::printf(
      "], \"median_s\": %.6f, \"steps_s\": {\"AB\": %.6f, \"DE\": %.6f, \"CDE\": %.6f, "
      "\"Z\": %.6f}, \"copy_bytes_per_s\": %.4g}\n",
      median(seconds), median(ab), median(de), median(cde), median(adds), copy_bandwidth());
  return 0;
}
