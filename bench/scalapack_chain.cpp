// The baseline of bench/distributed.sh: the chain (A×B) + (C×(D×E)) with ScaLAPACK —
// pdgemm three times and pdgeadd once on a BLACS process grid (block-cyclic, square blocks) —
// timed the way einsumdb times a graph: inputs in place beforehand, the slowest rank's time.
//   mpirun -np P scalapack_chain --shape square|skewed --s N [--nb 128] [--repeat 3]
// Prints one JSON line: {"np", "grid", "shape", "s", "nb", "seconds": [...], "median_s"}.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "chain_args.hpp"

extern "C" {
void Cblacs_pinfo(int* me, int* procs);
void Cblacs_get(int context, int what, int* value);
void Cblacs_gridinit(int* context, const char* order, int rows, int cols);
void Cblacs_gridinfo(int context, int* rows, int* cols, int* row, int* col);
void Cblacs_gridexit(int context);
int numroc_(const int* n, const int* nb, const int* iproc, const int* isrcproc, const int* nprocs);
void descinit_(int* desc, const int* m, const int* n, const int* mb, const int* nb,
               const int* irsrc, const int* icsrc, const int* context, const int* lld, int* info);
void pdgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k,
             const double* alpha, const double* a, const int* ia, const int* ja, const int* desca,
             const double* b, const int* ib, const int* jb, const int* descb, const double* beta,
             double* c, const int* ic, const int* jc, const int* descc);
void pdgeadd_(const char* trans, const int* m, const int* n, const double* alpha, const double* a,
              const int* ia, const int* ja, const int* desca, const double* beta, double* c,
              const int* ic, const int* jc, const int* descc);
}

namespace {

struct Grid {
  int context = 0, rows = 1, cols = 1, row = 0, col = 0;
};

// A distributed m×n matrix: its descriptor and this process's block-cyclic piece.
struct Matrix {
  int m = 0, n = 0;
  int desc[9] = {};
  std::vector<double> local;
};

Matrix make(const Grid& g, int m, int n, int nb, std::mt19937_64* rng) {
  Matrix a;
  a.m = m, a.n = n;
  const int zero = 0;
  const int lr = numroc_(&m, &nb, &g.row, &zero, &g.rows);
  const int lc = numroc_(&n, &nb, &g.col, &zero, &g.cols);
  const int lld = std::max(1, lr);
  int info = 0;
  descinit_(a.desc, &m, &n, &nb, &nb, &zero, &zero, &g.context, &lld, &info);
  if (info != 0) {
    std::fprintf(stderr, "scalapack_chain: descinit failed (%d)\n", info);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  a.local.assign(static_cast<std::size_t>(lld) * static_cast<std::size_t>(std::max(1, lc)), 0.0);
  if (rng) {
    std::uniform_real_distribution<double> u(-1, 1);
    for (auto& x : a.local) x = u(*rng);
  }
  return a;
}

void gemm(const Matrix& a, const Matrix& b, Matrix& c) {
  const int one = 1;
  const double alpha = 1, beta = 0;
  pdgemm_("N", "N", &c.m, &c.n, &a.n, &alpha, a.local.data(), &one, &one, a.desc, b.local.data(),
          &one, &one, b.desc, &beta, c.local.data(), &one, &one, c.desc);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ChainArgs a;
  if (!parse_chain_args(argc, argv,
                        "scalapack_chain --shape square|skewed --s N [--nb 128] [--repeat 3]", a)) {
    MPI_Finalize();
    return 2;
  }
  const int s = a.s, nb = a.nb, repeat = a.repeat;
  const std::string& shape = a.shape;
  int me = 0, procs = 1;
  Cblacs_pinfo(&me, &procs);
  // The squarest grid, fewer rows than columns.
  Grid g;
  for (int r = 1; r * r <= procs; ++r)
    if (procs % r == 0) g.rows = r;
  g.cols = procs / g.rows;
  Cblacs_get(-1, 0, &g.context);
  Cblacs_gridinit(&g.context, "Row", g.rows, g.cols);
  Cblacs_gridinfo(g.context, &g.rows, &g.cols, &g.row, &g.col);

  // Section 9 of the EinDecomp paper: square s×s, or A s×.1s, B .1s×s, C s×.1s, D .1s×10s,
  // E 10s×s.
  const int t = a.t(), w = a.w();
  std::mt19937_64 rng(1234 + static_cast<unsigned>(me));
  Matrix A = make(g, s, t, nb, &rng), B = make(g, t, s, nb, &rng), C = make(g, s, t, nb, &rng),
         D = make(g, t, w, nb, &rng), E = make(g, w, s, nb, &rng);
  Matrix AB = make(g, s, s, nb, nullptr), DE = make(g, t, s, nb, nullptr),
         Z = make(g, s, s, nb, nullptr);

  std::vector<double> seconds;
  for (int k = 0; k < repeat; ++k) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    gemm(A, B, AB);
    gemm(D, E, DE);
    gemm(C, DE, Z);
    const int one = 1;
    const double alpha = 1, beta = 1;
    pdgeadd_("N", &Z.m, &Z.n, &alpha, AB.local.data(), &one, &one, AB.desc, &beta, Z.local.data(),
             &one, &one, Z.desc);
    const double mine = MPI_Wtime() - t0;
    double slowest = 0;
    MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    seconds.push_back(slowest);
  }
  // A finite result, so that nothing above was skipped.
  double sum = 0;
  for (double x : Z.local) sum += std::fabs(x);
  double total = 0;
  MPI_Reduce(&sum, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  if (me == 0) {
    std::vector<double> sorted = seconds;
    std::sort(sorted.begin(), sorted.end());
    std::printf(
        "{\"np\": %d, \"grid\": [%d, %d], \"shape\": \"%s\", \"s\": %d, \"nb\": %d, "
        "\"seconds\": [",
        procs, g.rows, g.cols, shape.c_str(), s, nb);
    for (std::size_t k = 0; k < seconds.size(); ++k)
      std::printf("%s%.6f", k ? ", " : "", seconds[k]);
    std::printf("], \"median_s\": %.6f, \"checksum_finite\": %s}\n", sorted[sorted.size() / 2],
                std::isfinite(total) && total > 0 ? "true" : "false");
  }
  Cblacs_gridexit(g.context);
  MPI_Finalize();
  return 0;
}
