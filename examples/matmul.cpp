// The smallest complete einsumdb program: the canonical key of a spelling, and a matrix product
// on this program's own arrays with the best transform this machine's store knows (the default
// when it knows none), checked against a plain loop.
#include <cmath>
#include <cstdio>
#include <vector>

#include <einsumdb/einsumdb.hpp>

int main() {
  const int m = 64, k = 48, n = 32;
  std::vector<double> a(m * k), b(k * n), c(m * n);
  for (int i = 0; i < m * k; ++i) a[i] = std::sin(i);
  for (int i = 0; i < k * n; ++i) b[i] = std::cos(i);

  try {
    einsumdb::Engine engine;  // the store at $EINSUMDB_DB, else ~/.local/share/einsumdb/
    const einsumdb::TensorRef A{einsumdb::Dtype::f64, a.data(), {m, k}, {}};
    const einsumdb::TensorRef B{einsumdb::Dtype::f64, b.data(), {k, n}, {}};
    const einsumdb::TensorRef C{einsumdb::Dtype::f64, c.data(), {m, n}, {}};
    engine.einsum("ik,kj->ij", {A, B}, C);  // C = A·B, written into c

    const auto prepared = engine.prepare("ik,kj->ij", {A, B});
    const auto canonical = einsumdb::canonicalize(prepared->einsum());
    std::printf("key:       %s\n", canonical.key.c_str());
    std::printf("transform: %s (%s)\n", prepared->choice().candidate.strategy.c_str(),
                prepared->choice().source.c_str());

    double worst = 0;
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        double s = 0;
        for (int l = 0; l < k; ++l) s += a[i * k + l] * b[l * n + j];
        worst = std::fmax(worst, std::fabs(s - c[i * n + j]));
      }
    std::printf("max |error| against a loop: %.3g\n", worst);
    return worst < 1e-10 ? 0 : 1;
  } catch (const einsumdb::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
