// The local executor: the reference loop nest against hand-computed results, and every strategy
// against the reference on a table of workloads in f32 and f64.
#include <gtest/gtest.h>

#include <cpuid.h>
#include <dlfcn.h>
#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>
#include "einsumdb/canon/error.hpp"
#include "einsumdb/canon/metrics.hpp"
#include "einsumdb/canon/parse.hpp"

#include "einsumdb/executor/deadline.hpp"
#include "einsumdb/executor/execute.hpp"
#include "einsumdb/executor/kernels.hpp"
#include "einsumdb/executor/npy.hpp"
#include "einsumdb/executor/permute.hpp"
#include "einsumdb/executor/product.hpp"
#include "einsumdb/executor/small_gemm.hpp"
#include "einsumdb/tests/support/temp_dir.hpp"
#include "einsumdb/tuner/tuner.hpp"

namespace einsumdb {
namespace {

Tensor from(Dtype d, std::vector<std::int64_t> shape, const std::vector<double>& values) {
  Tensor t(d, std::move(shape));
  EXPECT_EQ(static_cast<std::size_t>(t.size()), values.size());
  for (std::size_t k = 0; k < values.size(); ++k) t.set(static_cast<std::int64_t>(k), values[k]);
  return t;
}

std::vector<double> values(const Tensor& t) {
  std::vector<double> v;
  for (std::int64_t k = 0; k < t.size(); ++k) v.push_back(t.at(k));
  return v;
}

TEST(Reference, HandComputedResults) {
  SpecFlags f;
  f.batch = "A,B";
  f.shapes = {"A=2x2", "B=2x2"};
  Arrays a;
  a.emplace("A", from(Dtype::f64, {2, 2}, {1, 2, 3, 4}));
  a.emplace("B", from(Dtype::f64, {2, 2}, {5, 6, 7, 8}));
  auto run = [&](const std::string& einsum, const std::string& join = "",
                 const std::string& agg = "") {
    SpecFlags g = f;
    g.join = join;
    g.agg = agg;
    return values(run_reference(read_spec_argument(einsum, g), a).at(0));
  };
  EXPECT_EQ(run("ij,jk->ik"), (std::vector<double>{19, 22, 43, 50}));
  EXPECT_EQ(run("ij,kj->ik"), (std::vector<double>{17, 23, 39, 53}));
  EXPECT_EQ(run("ij,ij->"), (std::vector<double>{70}));
  EXPECT_EQ(run("ii,jj->"), (std::vector<double>{5 * 13}));  // traces
  EXPECT_EQ(run("ij,ij->ij", "sqdiff"), (std::vector<double>{16, 16, 16, 16}));
  EXPECT_EQ(run("ij,jk->ik", "add", "max"), (std::vector<double>{9, 10, 11, 12}));
  EXPECT_EQ(run("ij,jk->ik", "absdiff", "min"), (std::vector<double>{4, 5, 2, 3}));
  EXPECT_EQ(run("ij,jk->ik", "sub", "max"), (std::vector<double>{-4, -5, -2, -3}));
  EXPECT_EQ(run("ji,jk->ik", "max", "max"), (std::vector<double>{7, 8, 7, 8}));
}

TEST(Reference, BindsLengthsAndRefusesMismatches) {
  SpecFlags f;
  f.shapes = {"A=Nx3", "B=3"};
  const BatchedEinsum e = read_spec_argument("ij,j->i", f);
  Arrays a;
  a.emplace("A", Tensor(Dtype::f64, {5, 3}));
  a.emplace("B", Tensor(Dtype::f64, {3}));
  EXPECT_EQ(bind_lengths(e, a), (std::map<char, std::int64_t>{{'i', 5}, {'j', 3}}));
  EXPECT_EQ(run_reference(e, a).at(0).shape(), std::vector<std::int64_t>{5});
  Arrays bad;
  bad.emplace("A", Tensor(Dtype::f64, {5, 4}));
  bad.emplace("B", Tensor(Dtype::f64, {3}));
  try {
    run_reference(e, bad);
    FAIL();
  } catch (const SpecError& err) {
    EXPECT_NE(std::string(err.what()).find("array 'A' axis 1 has length 4 but the spec says 3"),
              std::string::npos)
        << err.what();
  }
  Arrays missing;
  missing.emplace("A", Tensor(Dtype::f64, {5, 3}));
  EXPECT_THROW(run_reference(e, missing), SpecError);
  Arrays wrong_dtype;
  wrong_dtype.emplace("A", Tensor(Dtype::f32, {5, 3}));
  wrong_dtype.emplace("B", Tensor(Dtype::f64, {3}));
  EXPECT_THROW(run_reference(e, wrong_dtype), SpecError);
  EXPECT_THROW(Tensor(Dtype::i32, {2}), SpecError);
}

struct Workload {
  std::string einsum, batch;
  std::vector<std::string> shapes;
  bool ttgt;  // whether ttgt applies
  std::string join = "", agg = "";
};

const std::vector<Workload> kWorkloads = {
    {"ik,kj->ij", "", {"A=7x5", "B=5x9"}, true},
    {"ki,kj->ij", "", {"A=5x7", "B=5x9"}, true},         // transposed left operand
    {"ik,jk->ji", "", {"A=7x5", "B=9x5"}, true},         // transposed right and output
    {"bik,bkj->bij", "", {"A=3x4x5", "B=3x5x6"}, true},  // batch index
    {"ibk,kjb->bji", "", {"A=4x3x5", "B=5x6x3"}, true},  // batch index, scattered
    {"i,j->ij", "", {"A=7", "B=9"}, true},               // outer product
    {"ij,ij->", "", {"A=6x7", "B=6x7"}, true},           // reduction to a scalar
    {"ijk,jkl->il", "", {"A=3x4x5", "B=4x5x6"}, true},   // two contracted indices
    {"ij,j->i", "A,B;A,C;A,D", {"A=6x4", "B=4", "C=4", "D=4"}, true},  // b = 3, shared matrix
    {"ij,j->i", "A,B;C,D", {"A=6x4", "B=4", "C=6x4", "D=4"}, true},    // b = 2, nothing shared
    {"ik,kj->ij", "A,B;C,B", {"A=5x6", "B=6x7", "C=5x6"}, true},       // b = 2, shared right
    {"ij,jk->ik", "", {"A=1x1", "B=1x300"}, true},                     // degenerate GEMM
    {"abc,cd->abd", "", {"A=3x4x5", "B=5x6"}, true},                   // fusable M group
    {"xre,eri->xei", "", {"A=3x2x70", "B=70x2x5"}, true},              // batch mid-output, in place
    {"ej,rij->eri", "", {"A=150x7", "B=3x5x7"}, true},         // tall: blocks of rows and a tail
    {"ki,kj->ij", "", {"A=6x150", "B=6x9"}, true},             // tall, column-major left operand
    {"ij,jk->ik", "", {"A=5x7", "B=7x300"}, true},             // wide: blocks of columns
    {"ik,kj->ij", "", {"A=4x200", "B=200x3"}, true},           // K beyond the small kernels
    {"ii,i->i", "", {"A=5x5", "B=5"}, false},                  // diagonal
    {"ij,k->i", "", {"A=4x3", "B=5"}, false},                  // private summed index
    {"ijk->ki", "", {"A=3x4x5"}, false},                       // one operand
    {"ij,jk,kl->il", "", {"A=3x4", "B=4x5", "C=5x2"}, false},  // three operands
    {"fe,ifj,fej->ei", "J,M,F;J,M,G", {"J=4x9", "M=5x4x3", "F=4x9x3", "G=4x9x3"}, false},
    {"ij,jk,kl,lm->im", "", {"A=3x4", "B=4x5", "C=5x2", "D=2x3"}, false},  // four operands
    // DG-FEM's three operators, long enough along e for tiled trees (blocks of 16, a tail)
    {"fe,ifj,fej->ei", "J,M,F;J,M,G", {"J=4x40", "M=5x4x3", "F=4x40x3", "G=4x40x3"}, false},
    {"xre,rij,ej->xei", "", {"A=2x3x37", "B=3x4x5", "C=37x5"}, false},
    {"xre,rij,ej->xei", "J,D,U;J,D,V", {"J=2x3x37", "D=3x4x5", "U=37x5", "V=37x5"}, false},
    {"xre,rij,xej->ei", "", {"A=2x3x37", "B=3x4x5", "C=2x37x5"}, false},
    {"ni,gg,kl->il", "", {"A=2x4", "B=4x4", "C=5x2"}, false},  // a trace among three operands
    {"ij,jk->ik", "", {"A=4x5", "B=5x3"}, false, "sqdiff", "sum"},
    {"ij,jk->ik", "A,B;C,B", {"A=4x5", "B=5x3", "C=4x5"}, false, "absdiff", "max"},
    {"ij,jk,k->i", "", {"A=4x5", "B=5x3", "C=3"}, false, "add", "max"},
    // Element-wise: nothing summed, so each element is written once whatever ⊕ is
    {"ij,ij->ij", "", {"A=6x70", "B=6x70"}, false, "add", "sum"},
    {"ijk,kj->jik", "", {"A=3x4x5", "B=5x4"}, false, "sub", "max"},
    {"ij,ji->ij", "A,B;C,B", {"A=5x9", "B=9x5", "C=5x9"}, false, "max", "min"},
    {"ij,ij,j->ij", "", {"A=4x33", "B=4x33", "C=33"}, false, "mul", "min"},
};

BatchedEinsum spec_of(const Workload& w, Dtype dtype) {
  SpecFlags f;
  f.batch = w.batch;
  f.shapes = w.shapes;
  f.dtypes = {std::string(to_string(dtype))};
  f.join = w.join;
  f.agg = w.agg;
  return read_spec_argument(w.einsum, f);
}

double terms_of(const BatchedEinsum& e, const std::map<char, std::int64_t>& lengths) {
  return reduction_terms(e, lengths);
}

// libxsmm's kernels against a plain loop: tall and wide products with tails, a column-major
// A, a transposed B, accumulation, both dtypes; shapes beyond the limits are declined untouched.
template <typename T>
void check_small_gemm() {
  struct Case {
    std::int64_t m, n, k;
    bool at, accumulate;
  };
  const Case cases[] = {{1, 1, 1, false, false},      {7, 5, 3, false, true},
                        {150, 35, 35, false, false},  {150, 35, 35, true, true},
                        {129, 105, 35, false, false}, {3, 300, 20, false, true},
                        {5, 70, 128, true, false},    {64, 64, 64, false, true}};
  for (const auto& c : cases) {
    const std::int64_t lda = c.at ? c.m + 3 : c.k + 2, ldb = c.n + 1, ldc = c.n + 4;
    std::vector<T> a(static_cast<std::size_t>(lda * (c.at ? c.k : c.m))),
        b(static_cast<std::size_t>(ldb * c.k)), z(static_cast<std::size_t>(ldc * c.m));
    for (std::size_t q = 0; q < a.size(); ++q) a[q] = T(std::sin(0.37 * double(q)));
    for (std::size_t q = 0; q < b.size(); ++q) b[q] = T(std::cos(0.11 * double(q)));
    for (std::size_t q = 0; q < z.size(); ++q) z[q] = T(0.5 * double(q % 7));
    std::vector<T> want = z;
    for (std::int64_t i = 0; i < c.m; ++i)
      for (std::int64_t j = 0; j < c.n; ++j) {
        double sum = c.accumulate ? double(want[i * ldc + j]) : 0;
        for (std::int64_t l = 0; l < c.k; ++l)
          sum += double(c.at ? a[i + l * lda] : a[i * lda + l]) * double(b[l * ldb + j]);
        want[i * ldc + j] = T(sum);
      }
    std::vector<T> got = z;
    ASSERT_TRUE(kernels::small_gemm(c.m, c.n, c.k, a.data(), lda, c.at, b.data(), ldb, got.data(),
                                    ldc, c.accumulate))
        << c.m << "x" << c.n << "x" << c.k;
    double worst = 0;
    for (std::int64_t i = 0; i < c.m; ++i)
      for (std::int64_t j = 0; j < ldc; ++j) {
        const std::size_t q = static_cast<std::size_t>(i * ldc + j);
        if (j >= c.n) {
          EXPECT_EQ(got[q], z[q]) << "wrote past column " << c.n;  // the padding is untouched
          continue;
        }
        worst = std::max(worst, std::abs(double(got[q]) - double(want[q])));
      }
    EXPECT_LE(worst, (std::is_same_v<T, float> ? 1e-4 : 1e-12) * double(c.k))
        << c.m << "x" << c.n << "x" << c.k << (c.at ? " A transposed" : "");
  }
  // Beyond the limits: nothing computed, false returned.
  std::vector<T> a(300 * 300, T(1)), b(300 * 300, T(1)), z(300 * 300, T(-1));
  EXPECT_FALSE(
      kernels::small_gemm(300, 300, 4, a.data(), 4, false, b.data(), 300, z.data(), 300, false));
  EXPECT_FALSE(
      kernels::small_gemm(10, 10, 200, a.data(), 200, false, b.data(), 10, z.data(), 10, false));
  EXPECT_FALSE(kernels::small_gemm(200, 128, 128, a.data(), 128, false, b.data(), 128, z.data(),
                                   128, false));
  EXPECT_TRUE(std::all_of(z.begin(), z.end(), [](T v) { return v == T(-1); }));
}

TEST(SmallGemm, AgreesWithALoopAndDeclinesLargeShapes) {
  check_small_gemm<double>();
  check_small_gemm<float>();
}

// An edge tile of a packed GEMM through libxsmm against a plain loop: panels as BLIS packs them
// (A's rows MR apart per summed element, B's columns NR apart), the tile written column-major and
// row-major into a larger output at a leading dimension, with and without accumulation; only the
// tile's elements change. A tile with neither stride 1 is declined untouched.
template <typename T>
void check_packed_tile() {
  constexpr std::int64_t mr = 16, nr = 14;  // the panels' widths (any at least m and n)
  struct Case {
    std::int64_t m, n, k;
    bool column_major, accumulate;
  };
  const Case cases[] = {{16, 10, 312, true, false}, {16, 10, 312, true, true},
                        {16, 2, 72, false, false},  {7, 14, 33, false, true},
                        {3, 5, 1, true, true},      {16, 13, 600, false, false}};
  for (const auto& c : cases) {
    std::vector<T> a(static_cast<std::size_t>(mr * c.k)), b(static_cast<std::size_t>(nr * c.k));
    for (std::size_t q = 0; q < a.size(); ++q) a[q] = T(std::sin(0.37 * double(q)));
    for (std::size_t q = 0; q < b.size(); ++q) b[q] = T(std::cos(0.11 * double(q)));
    const std::int64_t ld = 40, rs = c.column_major ? 1 : ld, cs = c.column_major ? ld : 1;
    std::vector<T> z(static_cast<std::size_t>(ld * ld));
    for (std::size_t q = 0; q < z.size(); ++q) z[q] = T(0.5 * double(q % 7));
    std::vector<T> want = z;
    for (std::int64_t i = 0; i < c.m; ++i)
      for (std::int64_t j = 0; j < c.n; ++j) {
        double sum = c.accumulate ? double(want[i * rs + j * cs]) : 0;
        for (std::int64_t l = 0; l < c.k; ++l) sum += double(a[i + l * mr]) * double(b[l * nr + j]);
        want[i * rs + j * cs] = T(sum);
      }
    std::vector<T> got = z;
    ASSERT_TRUE(kernels::packed_tile(c.m, c.n, c.k, a.data(), mr, b.data(), nr, got.data(), rs, cs,
                                     c.accumulate))
        << c.m << "x" << c.n << "x" << c.k;
    double worst = 0;
    for (std::size_t q = 0; q < z.size(); ++q) {
      const std::int64_t i = c.column_major ? q % ld : q / ld, j = c.column_major ? q / ld : q % ld;
      if (i >= c.m || j >= c.n)
        EXPECT_EQ(got[q], z[q]) << "wrote outside the tile at " << i << ", " << j;
      else
        worst = std::max(worst, std::abs(double(got[q]) - double(want[q])));
    }
    EXPECT_LE(worst, (std::is_same_v<T, float> ? 1e-4 : 1e-12) * double(c.k))
        << c.m << "x" << c.n << "x" << c.k << (c.column_major ? " column-major" : " row-major");
  }
  std::vector<T> a(mr * 8, T(1)), b(nr * 8, T(1)), z(64 * 64, T(-1));
  EXPECT_FALSE(kernels::packed_tile(4, 4, 8, a.data(), mr, b.data(), nr, z.data(), 2, 64, false));
  EXPECT_TRUE(std::all_of(z.begin(), z.end(), [](T v) { return v == T(-1); }));
}

TEST(SmallGemm, PackedEdgeTilesAgreeWithALoop) {
  check_packed_tile<double>();
  check_packed_tile<float>();
}

// Every candidate the tuner enumerates for every strategy (on 1 and 2 threads) agrees with the
// reference, in f32 and f64; the strategies that do not apply say why and refuse to run.
TEST(Strategies, EveryCandidateAgreesWithTheReference) {
  std::map<std::string, int> compared;
  int rejected = 0;
  for (Dtype dtype : {Dtype::f32, Dtype::f64}) {
    for (const auto& w : kWorkloads) {
      const BatchedEinsum e = spec_of(w, dtype);
      const Arrays arrays = random_arrays(e, 7);
      const Bound bound(e, arrays);
      const Results ref = run_reference(bound);
      const double tol = tolerance(dtype, terms_of(e, bound.lengths()));
      for (const auto& s : builtin_strategies()) {
        const auto why = s.rejects(e);
        if (s.name == "ttgt") {
          EXPECT_EQ(!why.has_value(), w.ttgt) << w.einsum;
        }
        if (why) {
          EXPECT_FALSE(why->empty());
          EXPECT_THROW(execute(bound, s.name), SpecError) << s.name << " " << w.einsum;
          ++rejected;
        }
      }
      SpaceOptions space;
      space.threads = {1, 2};
      for (const auto& c : candidates(e, bound.lengths(), space)) {
        const Results got = execute(bound, c.strategy, c.params);
        ASSERT_EQ(got.size(), ref.size());
        for (std::size_t r = 0; r < ref.size(); ++r) {
          EXPECT_EQ(got[r].dtype(), dtype);
          EXPECT_LE(max_relative_error(got[r], ref[r]), tol)
              << c.strategy << " " << c.params.dump() << " " << w.einsum << " " << to_string(dtype)
              << " row " << r;
        }
        ++compared[c.strategy];
      }
    }
  }
  EXPECT_GT(rejected, 40);
  for (const char* s :
       {"loop_nest", "ttgt", "loop_over_gemm", "tensor_gemm", "batch_fused", "contraction_tree"})
    EXPECT_GT(compared[s], 10) << s;
  EXPECT_GT(compared["loop_nest"], 300);
}

// tensor_gemm on the 48 contractions of the TCCG benchmark (tests/data/tccg.jsonl) at two sets
// of lengths: short ones, that wrap index runs inside micro-tiles, and longer ones, that give
// whole micro-panels and partial ones at the edges; in both dtypes, on 1 and 2 threads, and where
// it streams an operand, on its packed path too: equal to
// the reference every time.
TEST(Strategies, TensorGemmAgreesWithTheReferenceOnEveryTccgContraction) {
  std::ifstream in(std::string(EINSUMDB_TEST_DATA) + "/tccg.jsonl");
  ASSERT_TRUE(in) << "tests/data/tccg.jsonl";
  const std::map<char, int> short_lengths = {{'a', 7}, {'b', 5}, {'c', 9}, {'d', 6},
                                             {'e', 4}, {'f', 3}, {'g', 5}};
  const std::map<char, int> long_lengths = {{'a', 19}, {'b', 6}, {'c', 17}, {'d', 5},
                                            {'e', 18}, {'f', 3}, {'g', 4}};
  int cases = 0;
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  for (const auto& lengths : {short_lengths, long_lengths})
    for (const std::string& line : lines) {
      const auto c = nlohmann::json::parse(line);
      const std::string tccg = c["tccg"];
      const auto dash = tccg.find('-'), dash2 = tccg.rfind('-');
      const std::string out = tccg.substr(0, dash), a = tccg.substr(dash + 1, dash2 - dash - 1),
                        b = tccg.substr(dash2 + 1);
      auto shape = [&](const std::string& name, const std::string& labels) {
        std::string s = name + "=";
        for (std::size_t k = 0; k < labels.size(); ++k)
          s += (k ? "x" : "") + std::to_string(lengths.at(labels[k]));
        return s;
      };
      for (Dtype dtype : {Dtype::f32, Dtype::f64}) {
        SpecFlags f;
        f.shapes = {shape("A", a), shape("B", b)};
        f.dtypes = {std::string(to_string(dtype))};
        const BatchedEinsum e = read_spec_argument(a + "," + b + "->" + out, f);
        const Arrays arrays = random_arrays(e, 11);
        const Bound bound(e, arrays);
        const Results ref = run_reference(bound);
        const double tol = tolerance(dtype, terms_of(e, bound.lengths()));
        const bool streams = tensor_gemm_path(bound) != "packed";
        for (bool packed : {false, true})
          for (int threads : {1, 2}) {
            if (packed && !streams) continue;
            nlohmann::json params = {{"threads", threads}};
            if (packed) params["stream_rows"] = false;
            const Results got = execute(bound, "tensor_gemm", params);
            EXPECT_LE(max_relative_error(got.at(0), ref.at(0)), tol)
                << "case " << c["case"] << " " << e.einsum_string() << " " << to_string(dtype)
                << " " << params.dump();
          }
      }
      ++cases;
    }
  EXPECT_EQ(cases, 2 * 48);
}

// A two-operand einsum "x,y->z" with arrays A and B of these lengths per index.
BatchedEinsum binary_spec(const std::string& spec, const std::map<char, int>& n,
                          Dtype dtype = Dtype::f64) {
  SpecFlags f;
  f.dtypes = {std::string(to_string(dtype))};
  const std::string x = spec.substr(0, spec.find(',')),
                    y = spec.substr(spec.find(',') + 1, spec.find('-') - spec.find(',') - 1);
  for (const auto& [name, labels] : {std::pair{"A", x}, std::pair{"B", y}}) {
    std::string shape = std::string(name) + "=";
    for (std::size_t k = 0; k < labels.size(); ++k)
      shape += (k ? "x" : "") + std::to_string(n.at(labels[k]));
    f.shapes.push_back(shape);
  }
  return read_spec_argument(spec, f);
}

// The reference runs a product summed over two operands in a loop of its own; the general loop
// must give the same numbers, bit for bit in real numbers. The same einsum with a third operand of
// ones (a label of length 1, which adds no term) goes through the general loop: x·y·1 = x·y
// exactly, and the terms of each element are taken in the same order. Diagonals, a scalar result,
// an outer product, batches, an operand read across its rows; f64, f32 (computed in double) and
// c128.
TEST(Reference, AProductIsComputedAsTheGeneralLoopComputesIt) {
  for (Dtype dtype : {Dtype::f64, Dtype::f32, Dtype::c128})
    for (const std::string spec : {"ij,jk->ik", "ji,jk->ik", "ii,ij->j", "ij,ij->", "i,j->ij",
                                   "bij,bjk->bik", "aefb,fdce->abcd"}) {
      std::map<char, int> n;
      for (char c : spec)
        if (std::isalpha(static_cast<unsigned char>(c))) n[c] = 3 + (c % 5);
      const BatchedEinsum two = binary_spec(spec, n, dtype);
      SpecFlags f;
      f.dtypes = {std::string(to_string(dtype))};
      for (const auto& [name, info] : two.arrays) {
        std::string shape = name + "=";
        for (std::size_t k = 0; k < info.shape.size(); ++k)
          shape += (k ? "x" : "") + std::to_string(info.shape[k].value);
        f.shapes.push_back(shape);
      }
      f.shapes.push_back("C=1");
      const std::string arrow = spec.substr(spec.find('-'));
      const BatchedEinsum three =
          read_spec_argument(spec.substr(0, spec.find('-')) + ",z" + arrow, f);
      Arrays arrays = random_arrays(two, 29);
      Tensor one(dtype, {1});
      one.set_complex(0, 1.0);
      arrays.emplace("C", std::move(one));
      std::vector<double> m2, m3;
      const Results ra = run_reference(Bound(two, arrays), &m2);
      const Results rb = run_reference(Bound(three, arrays), &m3);
      const Tensor &a = ra.at(0), &b = rb.at(0);
      ASSERT_EQ(a.size(), b.size()) << spec;
      if (is_complex(dtype)) {
        // GCC vectorizes a complex product into a fused multiply-add-subtract (vfmaddsub), which
        // -ffp-contract=off does not prevent; the two loops may round its parts differently.
        EXPECT_LE(max_relative_error(a, b), 1e-14) << spec;
      } else {
        for (std::int64_t k = 0; k < a.size(); ++k)
          ASSERT_EQ(a.at(k), b.at(k)) << spec << " " << to_string(dtype) << " element " << k;
      }
      EXPECT_EQ(m2, m3) << spec;
    }
}

// Complex einsums: every strategy that computes them agrees with a complex product written out
// here (and the reference with it), in c64 and c128, on one and two threads, with no conjugation;
// mixed real and complex operands promote as numpy does (f64 with c64 is c128); the strategies
// that compute in real numbers say so, and orders (max, min) are refused for complex.
TEST(Strategies, ComplexProductsAgreeWithAComplexLoop) {
  for (Dtype dtype : {Dtype::c64, Dtype::c128}) {
    const BatchedEinsum e =
        binary_spec("bik,bkj->bij", {{'b', 3}, {'i', 7}, {'k', 5}, {'j', 6}}, dtype);
    Arrays arrays = random_arrays(e, 13);
    const Tensor &a = arrays.at("A"), &b = arrays.at("B");
    Tensor want(Dtype::c128, {3, 7, 6});
    for (int q = 0; q < 3; ++q)
      for (int i = 0; i < 7; ++i)
        for (int j = 0; j < 6; ++j) {
          std::complex<double> acc = 0;
          for (int k = 0; k < 5; ++k)
            acc += a.at_complex((q * 7 + i) * 5 + k) * b.at_complex((q * 5 + k) * 6 + j);
          want.set_complex((q * 7 + i) * 6 + j, acc);
        }
    EXPECT_NE(want.at_complex(0).imag(), 0.0);
    const Bound bound(e, arrays);
    const double tol = tolerance(dtype, 5);
    for (const char* strategy : {"reference", "ttgt", "loop_over_gemm"})
      for (int threads : {1, 2}) {
        const Results got = execute(bound, strategy, {{"threads", threads}});
        ASSERT_EQ(got.at(0).dtype(), dtype) << strategy;
        EXPECT_LE(max_relative_error(got.at(0), want), tol) << strategy << " " << to_string(dtype);
      }
    for (const char* strategy : {"tensor_gemm", "loop_nest"}) {
      const auto why = find_strategy(strategy)->rejects(e);
      ASSERT_TRUE(why.has_value()) << strategy;
      EXPECT_NE(why->find("computes in f32 and f64"), std::string::npos) << *why;
    }
  }
  // Three operands (contraction_tree) and rows sharing an operand (batch_fused).
  SpecFlags f;
  f.shapes = {"A=6x5", "B=5x4", "C=4x3"};
  f.dtypes = {"c128"};
  const BatchedEinsum chain = parse_spec_flags("ij,jk,kl->il", f);
  const Arrays ca = random_arrays(chain, 3);
  const Bound cb(chain, ca);
  const Results cref = run_reference(cb);
  EXPECT_LE(max_relative_error(execute(cb, "contraction_tree").at(0), cref.at(0)),
            tolerance(Dtype::c128, 20));
  SpecFlags g;
  g.batch = "A,B;A,C";
  g.shapes = {"A=6x5", "B=5", "C=5"};
  g.dtypes = {"c64"};
  const BatchedEinsum rows = parse_spec_flags("ij,j->i", g);
  const Arrays ra = random_arrays(rows, 4);
  const Bound rb(rows, ra);
  const Results rref = run_reference(rb), fused = execute(rb, "batch_fused");
  for (std::size_t r = 0; r < 2; ++r)
    EXPECT_LE(max_relative_error(fused.at(r), rref.at(r)), tolerance(Dtype::c64, 5));
  // Mixed: f64 with c64 computes in c128; f32 with c64 in c64.
  SpecFlags m;
  m.shapes = {"A=4x3", "B=3"};
  m.dtypes = {"A=f64", "B=c64"};
  const BatchedEinsum mixed = parse_spec_flags("ij,j->i", m);
  const Arrays ma = random_arrays(mixed, 5);
  EXPECT_EQ(run_reference(mixed, ma).at(0).dtype(), Dtype::c128);
  EXPECT_EQ(promote_dtypes(Dtype::f32, Dtype::c64), Dtype::c64);
  EXPECT_EQ(promote_dtypes(Dtype::f64, Dtype::f32), Dtype::f64);
  // No order among complex numbers.
  SpecFlags o = f;
  o.join = "max";
  const BatchedEinsum ordered = parse_spec_flags("ij,jk,kl->il", o);
  EXPECT_THROW(default_candidate(ordered), SpecError);
}

// Axes of length 0: every strategy returns numpy's result without running (an empty result, or
// sums of nothing: 0), and the reference agrees.
TEST(Strategies, EmptyAxesGiveEmptyResultsOrSumsOfNothing) {
  const BatchedEinsum empty_out = binary_spec("ij,jk->ik", {{'i', 0}, {'j', 3}, {'k', 2}});
  const BatchedEinsum nothing = binary_spec("ij,jk->ik", {{'i', 2}, {'j', 0}, {'k', 2}});
  for (const auto* e : {&empty_out, &nothing}) {
    const Arrays arrays = random_arrays(*e, 1);
    const Bound bound(*e, arrays);
    const Results ref = run_reference(bound);
    for (const auto& s : builtin_strategies()) {
      if (s.rejects(*e)) continue;
      const Results got = execute(bound, s.name);
      ASSERT_EQ(got.at(0).shape(), ref.at(0).shape()) << s.name;
      for (std::int64_t k = 0; k < got.at(0).size(); ++k) EXPECT_EQ(got.at(0).at(k), 0.0) << s.name;
    }
  }
}

// tensor_gemm's result on one and on two threads, against the reference result `ref`; `what`
// names the case in a failure.
// Where tensor_gemm streams an operand by default, its packed path (stream_rows false) as well,
// so that the tests written for the packed path keep testing it.
void expect_tensor_gemm_agrees(const Bound& bound, const Results& ref, const std::string& what,
                               nlohmann::json params = nlohmann::json::object()) {
  const Dtype dtype = ref.at(0).dtype();
  std::vector<nlohmann::json> runs = {params};
  if (!params.contains("stream_rows") && tensor_gemm_path(bound) != "packed")
    runs.push_back(params), runs.back()["stream_rows"] = false;
  for (auto run : runs)
    for (int threads : {1, 2}) {
      run["threads"] = threads;
      const Results got = execute(bound, "tensor_gemm", run);
      EXPECT_LE(max_relative_error(got.at(0), ref.at(0)),
                tolerance(dtype, terms_of(bound.einsum(), bound.lengths())))
          << what << " " << to_string(dtype) << " " << run.dump();
    }
}

// Where an operand and the output are both larger than the cache and run at unit stride along
// different indices, tensor_gemm orders the rows in tiles of the two; TCCG cases 6 and 7 at
// lengths that make both tensors over 8 MB and leave partial tiles at every edge.
TEST(Strategies, TensorGemmTilesLargeTensorsContiguousAlongDifferentIndices) {
  for (const auto& [spec, f_len] : {std::pair{"efbad,cf->abcde", 6}, {"ecbfa,fd->abcde", 17}}) {
    const BatchedEinsum e =
        binary_spec(spec, {{'a', 33}, {'b', 17}, {'c', 6}, {'d', 18}, {'e', 19}, {'f', f_len}});
    const Arrays arrays = random_arrays(e, 5);
    const Bound bound(e, arrays);
    ASSERT_GT(arrays.at("A").bytes(), 8u << 20) << spec;
    const Results ref = run_reference(bound);
    ASSERT_GT(ref.at(0).bytes(), 8u << 20) << spec;
    expect_tensor_gemm_agrees(bound, ref, spec);
  }
}

// Where both operands are larger than the cache and run at unit stride along different summed
// indices, tensor_gemm takes the summed indices in tiles of the two (TCCG case 13, acd,dbc->ab),
// and where only one of them does, in that one's order (case 14, cad,dcb->ab: dcb runs along b);
// both at lengths that make both operands over 8 MB, with partial tiles at every edge and a tile
// straddling the blocks of KC summed elements, in both dtypes (a tile's width is in bytes).
TEST(Strategies, TensorGemmTilesTheSummedIndicesOfLargeOperandsContiguousAlongDifferentOnes) {
  for (Dtype dtype : {Dtype::f64, Dtype::f32}) {
    const int ab = dtype == Dtype::f64 ? 10 : 20;
    for (const char* spec : {"acd,dbc->ab", "cad,dcb->ab"}) {
      const BatchedEinsum e =
          binary_spec(spec, {{'a', ab}, {'b', ab + 1}, {'c', 331}, {'d', 333}}, dtype);
      const Arrays arrays = random_arrays(e, 7);
      const Bound bound(e, arrays);
      ASSERT_GT(arrays.at("A").bytes(), 8u << 20) << spec;
      ASSERT_GT(arrays.at("B").bytes(), 8u << 20) << spec;
      const Results ref = run_reference(bound);
      expect_tensor_gemm_agrees(bound, ref, spec);
    }
  }
}

// Where the output's unit-stride index belongs to an operand with few free elements (TCCG case 1,
// bda,dc->abc with a short c), tensor_gemm puts the other operand on the rows' side; either
// spelling, row counts on both sides of the rule's threshold, one summed pass (d = 300 is one
// too, up to 1.25 KC) and two, edge tiles on both sides. (The tiles' rows run across the output's
// lines: they go out transposed through registers, edge tiles as well.)
TEST(Strategies, TensorGemmPutsTheLargeOperandOnTheRowsSideWhenTheOtherHasFewElements) {
  for (const char* spec : {"bda,dc->abc", "dc,bda->abc"}) {
    for (int c : {1, 5, 24, 63, 64, 65}) {
      for (int d : {7, 300, 400}) {
        const BatchedEinsum e = binary_spec(spec, {{'a', 37}, {'b', 29}, {'c', c}, {'d', d}});
        const Arrays arrays = random_arrays(e, 11);
        const Bound bound(e, arrays);
        const Results ref = run_reference(bound);
        const std::string what =
            std::string(spec) + " c=" + std::to_string(c) + " d=" + std::to_string(d);
        expect_tensor_gemm_agrees(bound, ref, what);  // both paths where it streams
      }
    }
  }
}

// A contraction at given lengths and the path tensor_gemm takes for it (tensor_gemm_path).
struct PathCase {
  const char* spec;
  std::map<char, int> len;
  Dtype dtype;
  const char* path;
};

// Each case takes its path and agrees with the reference, streamed or not, with one thread and two,
// and the tuner measures BLIS's path too wherever an operand streams. With `large`, each output is
// larger than the cache.
void expect_paths(const std::vector<PathCase>& cases, unsigned seed, bool large = false) {
  for (const PathCase& c : cases) {
    const BatchedEinsum e = binary_spec(c.spec, c.len, c.dtype);
    const Arrays arrays = random_arrays(e, seed);
    const Bound bound(e, arrays);
    std::string what = std::string(c.spec) + " " + std::string(to_string(c.dtype));
    for (const auto& [index, n] : c.len)
      what += " " + std::string(1, index) + "=" + std::to_string(n);
    EXPECT_EQ(tensor_gemm_path(bound), c.path) << what;
    const Results ref = run_reference(bound);
    if (large) {
      EXPECT_GT(ref.at(0).bytes(), 8u << 20) << what;
    }
    expect_tensor_gemm_agrees(bound, ref, what);  // both paths where it streams
    const auto space = find_strategy("tensor_gemm")->space(e, bound.lengths());
    EXPECT_EQ(std::count(space.begin(), space.end(), nlohmann::json{{"stream_rows", false}}),
              std::string(c.path) == "packed" ? 0 : 1)
        << what;
  }
}

// Where the output's unit-stride index belongs to an operand with few free elements, contiguous in
// the output, and the other operand runs at unit stride along its rows (TCCG case 1, bda,dc->abc)
// or along its summed indices (a tall, skinny ik,kj->ij), each evenly spaced, tensor_gemm streams
// that operand's rows through libxsmm in place. Both spellings, runs of rows that end in short
// pieces, one summed element and many, batch indices (on one thread and two: over the batch and
// over the pieces), both dtypes; and where it does not apply (too few columns to fill a vector,
// too many for the cache, summed indices unevenly spaced, the output's unit-stride index in both
// operands), BLIS's path. Each agrees with the reference, streamed or not.
TEST(Strategies, TensorGemmStreamsTheRowsOfAProductWithFewColumns) {
  expect_paths(
      {
          {"bda,dc->abc", {{'a', 37}, {'b', 29}, {'c', 24}, {'d', 300}}, Dtype::f64, "rows"},
          {"dc,bda->abc", {{'a', 37}, {'b', 29}, {'c', 24}, {'d', 7}}, Dtype::f64, "rows"},
          {"bda,dc->abc", {{'a', 50}, {'b', 3}, {'c', 6}, {'d', 1}}, Dtype::f64, "rows"},
          {"bda,dc->abc", {{'a', 37}, {'b', 29}, {'c', 128}, {'d', 40}}, Dtype::f64, "rows"},
          {"bda,dc->abc", {{'a', 37}, {'b', 29}, {'c', 40}, {'d', 40}}, Dtype::f32, "rows"},
          {"ik,kj->ij", {{'i', 1000}, {'j', 24}, {'k', 70}}, Dtype::f64, "rows"},
          {"ik,kj->ij", {{'i', 333}, {'j', 13}, {'k', 5}}, Dtype::f32, "rows"},
          {"zbda,zdc->zabc",
           {{'a', 30}, {'b', 7}, {'c', 16}, {'d', 9}, {'z', 3}},
           Dtype::f64,
           "rows"},
          {"zbda,dc->zabc",
           {{'a', 30}, {'b', 7}, {'c', 16}, {'d', 9}, {'z', 3}},
           Dtype::f64,
           "rows"},
          {"bdea,edc->abc",
           {{'a', 20}, {'b', 9}, {'c', 16}, {'d', 5}, {'e', 6}},
           Dtype::f64,
           "rows"},
          {"bda,dc->abc", {{'a', 37}, {'b', 29}, {'c', 4}, {'d', 40}}, Dtype::f64, "packed"},
          {"bda,dc->abc", {{'a', 37}, {'b', 29}, {'c', 129}, {'d', 40}}, Dtype::f64, "packed"},
          // (Too many summed elements for the rows: the product streams in place, in passes.)
          {"ik,kj->ij", {{'i', 100}, {'j', 24}, {'k', 6000}}, Dtype::f64, "lines"},
          {"bdae,edc->abc",
           {{'a', 20}, {'b', 9}, {'c', 16}, {'d', 5}, {'e', 6}},
           Dtype::f64,
           "packed"},
          {"bdac,dc->abc", {{'a', 20}, {'b', 9}, {'c', 16}, {'d', 5}}, Dtype::f64, "packed"},
      },
      13);
}

// Where the output's unit-stride index belongs to the large operand, which runs at unit stride
// along another of its rows (TCCG cases 2-4 and 6-8, dca,bd->abc and its kin), with few columns,
// tensor_gemm streams that operand in lines: a tile per value of the output's index, a line's
// worth at a time, transposed on the way out. Lines cut short at the end of their index (13 = 8 +
// 5 values), rows in pieces with a short last one or over several values of a second index, one
// summed element and many, a batch index, both dtypes (a float line is 16 values), one thread and
// two; where that operand runs along the output's own unit-stride index (TCCG cases 5, 10, 11 and
// 19), the tiles go in place, between columns evenly spaced in the output, in several summed passes
// where the columns' operand would not fit the cache in one; and where it does not apply (the
// operand's unit-stride index too short to fill a vector; in place, columns unevenly spaced, or 4
// KB apart in an output the cache holds), BLIS's path. Each agrees with the reference, streamed or
// not, and the tuner measures both.
TEST(Strategies, TensorGemmStreamsLinesOfAnOperandContiguousAlongAnotherRow) {
  expect_paths(
      {
          {"dca,bd->abc", {{'a', 37}, {'b', 6}, {'c', 13}, {'d', 20}}, Dtype::f64, "lines"},
          {"bd,dca->abc", {{'a', 37}, {'b', 6}, {'c', 13}, {'d', 20}}, Dtype::f64, "lines"},
          {"dca,bd->abc", {{'a', 37}, {'b', 6}, {'c', 21}, {'d', 20}}, Dtype::f32, "lines"},
          {"dca,bd->abc", {{'a', 16}, {'b', 6}, {'c', 16}, {'d', 1}}, Dtype::f64, "lines"},
          {"ecbfa,fd->abcde",
           {{'a', 24}, {'b', 3}, {'c', 2}, {'d', 5}, {'e', 11}, {'f', 7}},
           Dtype::f64,
           "lines"},
          {"efbad,cf->abcde",
           {{'a', 3}, {'b', 2}, {'c', 4}, {'d', 9}, {'e', 17}, {'f', 8}},
           Dtype::f64,
           "lines"},
          // Rows over several values of the index that follows in the operand (a after d):
          // three, four and eight of them, whole lines and lines cut short.
          {"efbad,cf->abcde",
           {{'a', 6}, {'b', 2}, {'c', 5}, {'d', 16}, {'e', 11}, {'f', 7}},
           Dtype::f64,
           "lines"},
          {"efbad,cf->abcde",
           {{'a', 4}, {'b', 3}, {'c', 6}, {'d', 8}, {'e', 16}, {'f', 5}},
           Dtype::f64,
           "lines"},
          {"efbad,cf->abcde",
           {{'a', 4}, {'b', 2}, {'c', 3}, {'d', 16}, {'e', 20}, {'f', 3}},
           Dtype::f32,
           "lines"},
          {"zdca,zbd->zabc",
           {{'a', 9}, {'b', 6}, {'c', 8}, {'d', 5}, {'z', 3}},
           Dtype::f64,
           "lines"},
          {"dca,bd->abc", {{'a', 5}, {'b', 6}, {'c', 13}, {'d', 20}}, Dtype::f64, "packed"},
          // The operand runs along the output's own unit-stride index: tiles written in place.
          {"ebad,ce->abcd",
           {{'a', 3}, {'b', 4}, {'c', 6}, {'d', 24}, {'e', 5}},
           Dtype::f64,
           "lines"},
          {"ec,abed->abcd",
           {{'a', 3}, {'b', 4}, {'c', 6}, {'d', 37}, {'e', 5}},
           Dtype::f32,
           "lines"},
          {"ebad,cge->abcgd",
           {{'a', 3}, {'b', 4}, {'c', 2}, {'d', 24}, {'e', 5}, {'g', 3}},
           Dtype::f64,
           "lines"},
          // ... over several passes of the summed elements where their columns' operand is too
          // large
          // for one (TCCG case 19's shape; the last pass shorter; 2 and 3 passes with 1 MB of L2).
          {"adec,ebd->abc",
           {{'a', 2}, {'b', 20}, {'c', 24}, {'d', 70}, {'e', 100}},
           Dtype::f64,
           "lines"},
          {"adec,ebd->abc",
           {{'a', 2}, {'b', 20}, {'c', 32}, {'d', 82}, {'e', 82}},
           Dtype::f32,
           "lines"},
          // ... but not where the columns are unevenly spaced, or a multiple of 4 KB apart.
          {"ebad,cge->acbgd",
           {{'a', 3}, {'b', 4}, {'c', 2}, {'d', 24}, {'e', 5}, {'g', 3}},
           Dtype::f64,
           "packed"},
          {"ea,ebcd->abcd",
           {{'a', 5}, {'b', 4}, {'c', 4}, {'d', 32}, {'e', 6}},
           Dtype::f64,
           "packed"},
      },
      17);
}

// Where the output is larger than the cache, the streamed kernels write it around the cache, in
// non-temporal stores of whole lines: streamed rows (TCCG case 1's shape, with a batch index),
// lines transposed on their way out (cases 6 and 2's; with e = 132 the rows do not all start on a
// line and take ordinary stores, with e = 136 they do), and in place (cases 9 and 11's), where
// columns a multiple of 4 KB apart no longer share their sets of the cache (ea,ebcd->abcd streams
// only so, so it is packed on a build without AVX-512's non-temporal stores), f64 and f32. Each
// agrees with the reference, with one thread and two, streamed or not.
TEST(Strategies, TensorGemmStreamsALargeOutputAroundTheCache) {
  expect_paths(
      {
          {"bda,dc->abc", {{'a', 220}, {'b', 220}, {'c', 24}, {'d', 20}}, Dtype::f64, "rows"},
          {"zbda,dc->zabc",
           {{'a', 150}, {'b', 100}, {'c', 24}, {'d', 9}, {'z', 3}},
           Dtype::f64,
           "rows"},
          {"ea,ebcd->abcd",
           {{'a', 80}, {'b', 8}, {'c', 16}, {'d', 128}, {'e', 6}},
           Dtype::f64,
           tensor_gemm_streams() ? "lines" : "packed"},
          {"ec,abed->abcd",
           {{'a', 32}, {'b', 32}, {'c', 40}, {'d', 64}, {'e', 5}},
           Dtype::f32,
           "lines"},
          {"ebad,ce->abcd",
           {{'a', 30}, {'b', 30}, {'c', 24}, {'d', 72}, {'e', 7}},
           Dtype::f64,
           "lines"},
          // Tiles transposed on their way out, each line streamed whole (TCCG cases 6 and 2).
          {"efbad,cf->abcde",
           {{'a', 8}, {'b', 8}, {'c', 10}, {'d', 16}, {'e', 132}, {'f', 3}},
           Dtype::f64,
           "lines"},
          {"efbad,cf->abcde",
           {{'a', 8}, {'b', 8}, {'c', 10}, {'d', 16}, {'e', 136}, {'f', 3}},
           Dtype::f64,
           "lines"},
          {"dca,bd->abc", {{'a', 72}, {'b', 12}, {'c', 1248}, {'d', 5}}, Dtype::f64, "lines"},
      },
      23, true);
}

// Where the output's unit-stride index is among the rows and the operand's another one (TCCG cases
// 3-8), tiles of consecutive micro-panels continue one another's output lines, and tensor_gemm
// computes such a group and writes each line whole. TCCG case 6 with the output over 8 MB, panels
// left over at the edges of both indices (d = 37: 16 + 16 + 5 rows in f64, 32 + 5 in f32; e = 19:
// lines of 8 + 8 + 3 and 16 + 3), partial column panels (c = 6 and 64), one summed pass (the lines
// are streamed) and two (the second adds to them), both dtypes, 1 and 2 threads.
TEST(Strategies, TensorGemmWritesWholeOutputLinesFromGroupsOfTiles) {
  struct Shape {
    Dtype dtype;
    int a, b, c, f;
  };
  for (const Shape& s : {Shape{Dtype::f64, 33, 17, 6, 6}, Shape{Dtype::f32, 33, 17, 6, 6},
                         Shape{Dtype::f64, 7, 4, 64, 333}}) {
    const BatchedEinsum e = binary_spec(
        "efbad,cf->abcde", {{'a', s.a}, {'b', s.b}, {'c', s.c}, {'d', 37}, {'e', 19}, {'f', s.f}},
        s.dtype);
    const Arrays arrays = random_arrays(e, 17);
    const Bound bound(e, arrays);
    ASSERT_GT(arrays.at("A").bytes(), 8u << 20);
    const Results ref = run_reference(bound);
    ASSERT_GT(ref.at(0).bytes(), 8u << 20);
    expect_tensor_gemm_agrees(bound, ref, "c=" + std::to_string(s.c) + " f=" + std::to_string(s.f));
  }
}

// TCCG case 28's shape (eafb,fdec->abcd: the rows in tiles of c, the operand's fastest, and d, the
// output's), scaled so that both are over 8 MB with one summed pass: c = 24 leaves 8 rows per line
// of d after the line group of 16, in panels that hold two values of d; e × f = 36 summed elements
// make row blocks of 106 panels, which would end inside a group of 8 (the test fails when they
// end 3 rows early). (The panels written a line per run, unit_runs, are among those of
// TensorGemmAgreesWithTheReferenceOnEveryTccgContraction.)
TEST(Strategies, TensorGemmComputesLineGroupsWhole) {
  const BatchedEinsum e = binary_spec(
      "eafb,fdec->abcd", {{'a', 6}, {'b', 6}, {'c', 24}, {'d', 1300}, {'e', 6}, {'f', 6}});
  const Arrays arrays = random_arrays(e, 19);
  const Bound bound(e, arrays);
  ASSERT_GT(arrays.at("B").bytes(), 8u << 20);
  const Results ref = run_reference(bound);
  ASSERT_GT(ref.at(0).bytes(), 8u << 20);
  expect_tensor_gemm_agrees(bound, ref, "eafb,fdec->abcd");
}

// Where the rows follow the output (d, over several passes of the summed elements) and their
// operand runs along another of their indices (fdec along c), a line of the operand holds the
// same row of eight panels, and tensor_gemm packs the rows of a line's worth of panels at once,
// each line transposed in registers into up to eight of them (Gemm::pack_across, packing_span).
// TCCG case 28's shape with the operand and the output over 8 MB: c = 16, lines whole, and c =
// 13, lines that start at a different value of c in each row and hold the last values of c of one
// value of e and the first of the next; spans of 960 and 1,152 rows; 1 and 2 threads. Checked
// against ttgt's result (the operands transposed for OpenBLAS's GEMM, itself checked against the
// reference loops by EveryCandidateAgreesWithTheReference): the loops take a minute here.
TEST(Strategies, TensorGemmPacksTheRunsOfALineOfTheOperandTogether) {
  for (const auto& [c_len, d_len] : {std::pair{16, 120}, {13, 144}}) {
    const BatchedEinsum e =
        binary_spec("eafb,fdec->abcd",
                    {{'a', 24}, {'b', 24}, {'c', c_len}, {'d', d_len}, {'e', 24}, {'f', 24}});
    const Arrays arrays = random_arrays(e, 29);
    const Bound bound(e, arrays);
    ASSERT_GT(arrays.at("B").bytes(), 8u << 20);
    const Results ref = execute(bound, "ttgt", nlohmann::json::object());
    ASSERT_GT(ref.at(0).bytes(), 8u << 20);
    expect_tensor_gemm_agrees(bound, ref, "c = " + std::to_string(c_len));
  }
}

// The output follows its own order, not tiles of the operand's and its own unit-stride indices,
// where the operand runs at unit stride along a summed index (TCCG case 26, aefb,fdce->abcd: fdce
// along e), whose packing reads whole lines in any order of the rows, and where the summed
// elements take several passes over an output too large for the cache (case 28, eafb,fdec->abcd,
// whose fdec runs along c and the output along d), which each pass reads back. Both shapes with
// the operand and the output over 8 MB and two long passes (the second adds).
TEST(Strategies, TensorGemmFollowsTheOutputWhereTilesWouldNotHelp) {
  for (const char* spec : {"aefb,fdce->abcd", "eafb,fdec->abcd"}) {
    const BatchedEinsum e =
        binary_spec(spec, {{'a', 24}, {'b', 24}, {'c', 24}, {'d', 80}, {'e', 24}, {'f', 24}});
    const Arrays arrays = random_arrays(e, 23);
    const Bound bound(e, arrays);
    ASSERT_GT(arrays.at("B").bytes(), 8u << 20);
    const Results ref = run_reference(bound);
    ASSERT_GT(ref.at(0).bytes(), 8u << 20);
    expect_tensor_gemm_agrees(bound, ref, spec);
  }
}

// TCCG's ccsd_t contractions interleave the operands' indices in the output: a micro-tile's
// columns (or rows) straddle two values of an outer index wherever an index's length is not a
// multiple of the tile's, and such tiles are computed into a buffer and copied out, or, where
// the output streams past the cache and the tile's rows are whole lines of it, written there by
// one libxsmm kernel per run of its columns (Gemm::write_around). Rows even and columns
// straddling, rows straddling and columns even, and both; an output over 8 MB with one summed
// pass (the tiles stream past the cache, even ones too with stream_even, else written in place) and
// a summed index longer than a pass (the copy adds); both dtypes (f32's tile is 32 rows), 1 and 2
// threads.
TEST(Strategies, TensorGemmCopiesOutTilesThatStraddleAnOuterIndex) {
  for (Dtype dtype : {Dtype::f64, Dtype::f32}) {
    for (const auto& [e_len, f_len] : {std::pair{16, 16}, {14, 20}, {16, 20}}) {
      for (int g : {5, 300}) {
        const BatchedEinsum e = binary_spec("dfga,gebc->abcdef",
                                            {{'a', g > 256 ? 2 : 23},
                                             {'b', 6},
                                             {'c', 7},
                                             {'d', 10},
                                             {'e', e_len},
                                             {'f', f_len},
                                             {'g', g}},
                                            dtype);
        const Arrays arrays = random_arrays(e, 13);
        const Bound bound(e, arrays);
        const Results ref = run_reference(bound);
        if (g < 256) {
          ASSERT_GT(ref.at(0).bytes(), 8u << 20);
        }
        for (bool stream_even : {false, true})
          expect_tensor_gemm_agrees(bound, ref,
                                    "e=" + std::to_string(e_len) + " f=" + std::to_string(f_len) +
                                        " g=" + std::to_string(g),
                                    {{"stream_even", stream_even}});
      }
    }
  }
}

// Fetching the next block of rows' lines during this block's micro-kernel calls (fetch_ahead)
// changes only when memory is read, never what is packed: TCCG case 2's shape (dca,bd->abc: 16
// consecutive a of the operand to a panel, 312 summed, a 5.2 MB operand over L2) and case 3's
// (dbea,ec->abcd: panels that straddle two values of b among those that do not), with the rows
// in many blocks, the last one short; f64 and f32, on and off, 1 and 2 threads.
TEST(Strategies, TensorGemmFetchesTheNextBlockAheadWithoutChangingTheResult) {
  for (Dtype dtype : {Dtype::f64, Dtype::f32}) {
    for (const auto& [spec, lengths] :
         {std::pair<const char*, std::map<char, int>>{
              "dca,bd->abc", {{'a', 45}, {'b', 24}, {'c', 47}, {'d', 312}}},
          {"dbea,ec->abcd", {{'a', 30}, {'b', 9}, {'c', 24}, {'d', 21}, {'e', 72}}}}) {
      const BatchedEinsum e = binary_spec(spec, lengths, dtype);
      const Arrays arrays = random_arrays(e, 31);
      const Bound bound(e, arrays);
      const Results ref = run_reference(bound);
      for (bool ahead : {true, false})
        expect_tensor_gemm_agrees(bound, ref, spec, {{"fetch_ahead", ahead}});
    }
  }
}

// A run under a deadline that has passed stops at its first check with DeadlineExceeded, on one
// thread and on two (the threads a run starts inherit the deadline); under an inner deadline not
// yet passed, and with none, the same runs complete and agree with the reference. Each strategy
// checks between pieces of work: loop_nest every 64th pass around its innermost loop, ttgt
// between its packing and its GEMM calls, loop_over_gemm before each GEMM call, tensor_gemm before
// each block of the summed indices.
TEST(Deadline, StopsARunThatPassedItAndOnlyThatRun) {
  std::map<std::string, int> stopped;
  for (const auto& [spec, lengths] :
       {std::pair<const char*, std::map<char, int>>{"dca,bd->abc",
                                                    {{'a', 40}, {'b', 24}, {'c', 70}, {'d', 96}}},
        {"bik,kj->bij", {{'b', 6}, {'i', 50}, {'j', 40}, {'k', 30}}}}) {
    const BatchedEinsum e = binary_spec(spec, lengths);
    const Arrays arrays = random_arrays(e, 5);
    const Bound bound(e, arrays);
    const Results ref = run_reference(bound);
    const double tol = tolerance(Dtype::f64, terms_of(e, bound.lengths()));
    // tensor_gemm streams these (in lines, in rows) and checks between pieces; its packed path
    // checks too.
    EXPECT_EQ(tensor_gemm_path(bound), std::string(spec) == "dca,bd->abc" ? "lines" : "rows");
    std::vector<std::pair<std::string, nlohmann::json>> applied;
    for (const char* name : {"loop_nest", "ttgt", "loop_over_gemm", "tensor_gemm"})
      if (!find_strategy(name)->rejects(e)) applied.push_back({name, nlohmann::json::object()});
    applied.push_back({"tensor_gemm", {{"stream_rows", false}}});
    const std::string what = spec;  // (a structured binding is not captured)
    const auto with_threads = [](nlohmann::json params, int threads) {
      params["threads"] = threads;
      return params;
    };
    auto agrees = [&](const std::string& name, const nlohmann::json& params, int threads) {
      const Results got = execute(bound, name, with_threads(params, threads));
      EXPECT_LE(max_relative_error(got.at(0), ref.at(0)), tol)
          << name << " " << params.dump() << " " << what;
    };
    {
      Deadline passed(0);
      while (!passed.passed()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      for (const auto& [name, params] : applied)
        for (int threads : {1, 2}) {
          EXPECT_THROW(execute(bound, name, with_threads(params, threads)), DeadlineExceeded)
              << name << " " << params.dump() << " " << spec << " threads=" << threads;
          ++stopped[name + params.dump()];
        }
      {
        Deadline later(3600);
        for (const auto& [name, params] : applied) agrees(name, params, 2);
      }
      EXPECT_THROW(execute(bound, "tensor_gemm"), DeadlineExceeded) << "the outer deadline again";
    }
    for (const auto& [name, params] : applied) agrees(name, params, 1);
  }
  for (const char* name : {"loop_nest{}", "ttgt{}", "loop_over_gemm{}", "tensor_gemm{}",
                           "tensor_gemm{\"stream_rows\":false}"})
    EXPECT_GT(stopped[name], 0) << name;
}

// Where the operand of a group of indices fits in the cache and the output does not, the group
// follows the output's order, or, where tiles are not written around the cache (stream_even
// false), the operand's where that leaves fewer micro-panels unevenly spaced in the output. TCCG's
// ccsd_t shapes with a 302 MB output scaled to 19-38 MB: case 31 (dega,gfbc->abcdef: the columns a,
// d, e even in the output's order, not in the operand's), case 36 (dfgc,geab->abcdef: the columns
// a, b, e even in the operand's order, e = 16 straddling the tiles in the output's), case 38
// (efgb,gdac->abcdef: d = 24 and c merge into one even step in the output's order) and case 39
// (efgc,gdab->abcdef: uneven in the output's order); even tiles in place and through the buffer.
TEST(Strategies, TensorGemmOrdersACachedOperandsIndicesForTheOutput) {
  // d = 24 where it is the output's step-256 index (cases 38 and 39), otherwise 12.
  for (const auto& [spec, d] : {std::pair{"dega,gfbc->abcdef", 12},
                                {"dfgc,geab->abcdef", 12},
                                {"efgb,gdac->abcdef", 24},
                                {"efgc,gdab->abcdef", 24}}) {
    const std::map<char, int> lengths = {{'a', 12}, {'b', 8},  {'c', 8}, {'d', d},
                                         {'e', 16}, {'f', 16}, {'g', 6}};
    const BatchedEinsum e = binary_spec(spec, lengths);
    const Arrays arrays = random_arrays(e, 29);
    const Bound bound(e, arrays);
    ASSERT_LT(arrays.at("A").bytes(), 8u << 20) << spec;
    ASSERT_LT(arrays.at("B").bytes(), 8u << 20) << spec;
    const Results ref = run_reference(bound);
    ASSERT_GT(ref.at(0).bytes(), 8u << 20) << spec;
    for (bool stream_even : {false, true})
      expect_tensor_gemm_agrees(bound, ref, spec, {{"stream_even", stream_even}});
  }
}

// Which way of writing even tiles is faster depends on the processor, so the tuner tries both
// where the choice applies: an output over 8 MB summed over 24 elements or fewer (TCCG's ccsd_t
// shape, scaled), in f64 and f32 (whose output is then half the bytes), and not where more are
// summed or the output fits in the cache. Each candidate runs and agrees with the reference.
TEST(Strategies, TensorGemmSpaceOffersBothWritesOfEvenTilesWhereTheyDiffer) {
  const Strategy* s = find_strategy("tensor_gemm");
  ASSERT_NE(s, nullptr);
  const std::map<char, int> len = {{'a', 12}, {'b', 8},  {'c', 8}, {'d', 12},
                                   {'e', 16}, {'f', 16}, {'g', 6}};
  auto space = [&](std::map<char, int> l, Dtype dtype) {
    const BatchedEinsum e = binary_spec("dega,gfbc->abcdef", l, dtype);
    Lengths lengths;
    for (const auto& [c, n] : l) lengths[c] = n;
    return s->space(e, lengths);
  };
  const auto both = space(len, Dtype::f64);  // 18.9 MB
  if (!tensor_gemm_streams()) {  // built without AVX-512: every tile takes ordinary stores
    EXPECT_EQ(both.size(), 1u);
    GTEST_SKIP() << "tensor_gemm does not write around the cache on this build (no AVX-512)";
  }
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0], nlohmann::json::object());
  ASSERT_TRUE(both[1].contains("stream_even"));
  // The default streams them on Intel's processors and AMD's before Zen 5 (family 26).
  __builtin_cpu_init();
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool amd = __builtin_cpu_is("amd") && __get_cpuid(1, &eax, &ebx, &ecx, &edx);
  const unsigned base = (eax >> 8) & 0xF;
  const bool before_zen5 = amd && base + (base == 0xF ? (eax >> 20) & 0xFF : 0) < 0x1A;
  EXPECT_EQ(both[1]["stream_even"].get<bool>(), !(__builtin_cpu_is("intel") || before_zen5));
  auto f32 = len;
  f32['a'] = 8;  // 12.6 MB in f64, 6.3 MB in f32
  EXPECT_EQ(space(f32, Dtype::f64).size(), 2u);
  EXPECT_EQ(space(f32, Dtype::f32).size(), 1u);
  auto deep = len;
  deep['g'] = 25;
  EXPECT_EQ(space(deep, Dtype::f64).size(), 1u);
  auto small = len;
  small['a'] = small['d'] = 4;  // 2.1 MB
  EXPECT_EQ(space(small, Dtype::f64).size(), 1u);

  const BatchedEinsum e = binary_spec("dega,gfbc->abcdef", len);
  const Arrays arrays = random_arrays(e, 31);
  const Bound bound(e, arrays);
  const Results ref = run_reference(bound);
  for (const auto& params : both) {
    const Results got = execute(bound, "tensor_gemm", params);
    EXPECT_LE(max_relative_error(got.at(0), ref.at(0)),
              tolerance(Dtype::f64, terms_of(e, bound.lengths())))
        << params.dump();
  }
}

// BLIS 0.9 runs its generic C kernels on CPUs it does not know (AMD's Zen 4), and its AVX2 kernels
// on an Intel processor whose brand string names no model it knows; tensor_gemm picks vector
// kernels wherever the CPU has them, and the AVX-512 ones wherever it has AVX-512.
// BLIS exports CBLAS too; the BLAS calls of the other strategies must still reach OpenBLAS (which
// is linked first), whose threads kernels::BlasThreads sets.
TEST(Strategies, BlasCallsReachOpenBlasWithBlisLinked) {
  Dl_info info{};
  ASSERT_NE(dladdr(reinterpret_cast<void*>(&cblas_dgemm), &info), 0);
  ASSERT_NE(info.dli_fname, nullptr);
  EXPECT_NE(std::string(info.dli_fname).find("openblas"), std::string::npos) << info.dli_fname;
}

TEST(Strategies, TensorGemmUsesVectorKernelsWhereTheCpuHasThem) {
  const std::string kernel = tensor_gemm_kernel();
  ASSERT_FALSE(kernel.empty());
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    EXPECT_EQ(kernel.rfind("generic", 0), std::string::npos) << kernel;
  }
  if (!std::getenv("BLIS_ARCH_TYPE") && __builtin_cpu_supports("avx512f") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512cd")) {
    EXPECT_EQ(kernel.rfind("skx", 0), 0u) << kernel;
  }
}

TEST(Strategies, BadParametersAreRefusedByName) {
  const BatchedEinsum e = spec_of(kWorkloads[0], Dtype::f64);
  const Arrays arrays = random_arrays(e, 1);
  const Bound bound(e, arrays);
  auto message = [&](const std::string& strategy, const nlohmann::json& params) {
    try {
      execute(bound, strategy, params);
    } catch (const SpecError& err) {
      return std::string(err.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("loop_nest", {{"order", index_list_param("ij")}}).find("every index"),
            std::string::npos);
  EXPECT_NE(message("loop_nest", {{"speed", 3}}).find("unknown parameter 'speed'"),
            std::string::npos);
  EXPECT_NE(message("ttgt", {{"threads", 0}}).find("'threads'"), std::string::npos);
  EXPECT_NE(message("tensor_gemm", {{"stream_even", "yes"}}).find("'stream_even' must be true"),
            std::string::npos);
  EXPECT_EQ(message("tensor_gemm", {{"stream_even", false}}), "no error");
  EXPECT_NE(message("tensor_gemm", {{"fetch_ahead", 1}}).find("'fetch_ahead' must be true"),
            std::string::npos);
  EXPECT_EQ(message("tensor_gemm", {{"fetch_ahead", false}}), "no error");
  EXPECT_NE(message("tensor_gemm", {{"stream_rows", "no"}}).find("'stream_rows' must be true"),
            std::string::npos);
  EXPECT_EQ(message("tensor_gemm", {{"stream_rows", false}}), "no error");
  EXPECT_NE(message("ttgt", {{"m", index_list_param("k")}}).find("'m' must order"),
            std::string::npos);
  EXPECT_NE(message("loop_over_gemm", {{"m", index_list_param("i")}}).find("'n' is missing"),
            std::string::npos);
  EXPECT_NE(message("contraction_tree", {}).find("3 or more operands"), std::string::npos);
  EXPECT_NE(message("batch_fused", {}).find("one"), std::string::npos);
  EXPECT_NE(message("warp", {}).find("unknown strategy 'warp'"), std::string::npos);
  // Tiles of a contraction tree: named index, size, and an index the output keeps.
  const auto gradient = std::find_if(kWorkloads.begin(), kWorkloads.end(), [](const Workload& w) {
    return w.einsum == "xre,rij,ej->xei";
  });
  ASSERT_NE(gradient, kWorkloads.end());
  const BatchedEinsum tree = spec_of(*gradient, Dtype::f64);
  const Arrays tree_arrays = random_arrays(tree, 1);
  const Bound tree_bound(tree, tree_arrays);
  auto tile = [&](const nlohmann::json& t) {
    try {
      execute(tree_bound, "contraction_tree", {{"tile", t}});
    } catch (const SpecError& err) {
      return std::string(err.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(tile({index_param('j'), 4}).find("only an index the output keeps"), std::string::npos);
  EXPECT_NE(tile({index_param('e'), 0}).find("size ≥ 1"), std::string::npos);
  EXPECT_NE(tile("e").find("'tile' is"), std::string::npos);
  EXPECT_EQ(tile({index_param('e'), 100}), "no error");  // one tile: the untiled tree
  const BatchedEinsum sq = parse_spec_json(nlohmann::json::parse(
      R"({"einsum": "ij,jk,kl->il", "batch": [["A", "B", "C"]], "ops": {"join": "add", "agg": "max"},
          "shapes": {"A": [3, 4], "B": [4, 5], "C": [5, 40]}})"));
  EXPECT_FALSE(contraction_tree_tiles(
      sq, default_contraction_path(sq, {{'i', 3}, {'j', 4}, {'k', 5}, {'l', 40}}), 'l'));
  // batch_fused's tile runs the fused einsum as a tiled tree, and only so.
  const BatchedEinsum rows = parse_spec_json(nlohmann::json::parse(
      R"({"einsum": "xre,rij,ej->xei", "batch": [["J", "D", "U"], ["J", "D", "V"]],
          "shapes": {"J": [2, 3, 37], "D": [3, 4, 5], "U": [37, 5], "V": [37, 5]}})"));
  const Arrays rows_arrays = random_arrays(rows, 1);
  const Bound rows_bound(rows, rows_arrays);
  auto fused = [&](const nlohmann::json& params) {
    try {
      execute(rows_bound, "batch_fused", params);
    } catch (const SpecError& err) {
      return std::string(err.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(fused({{"tile", {index_param('j'), 4}}}).find("batch_fused: "), std::string::npos);
  EXPECT_NE(fused({{"tile", {index_param('j'), 4}}}).find("only an index the output keeps"),
            std::string::npos);
  EXPECT_NE(fused({{"inner", "loop_nest"}, {"tile", {index_param('e'), 4}}}).find("inner is"),
            std::string::npos);
  EXPECT_EQ(fused({{"tile", {index_param('e'), 8}}}), "no error");
  // Rows that read the same arrays leave nothing to stack (found by the fuzzer).
  const BatchedEinsum same = parse_spec_json(nlohmann::json::parse(
      R"({"einsum": "ik,j->i", "batch": [["A", "B"], ["A", "B"]],
          "shapes": {"A": [1, 4], "B": [4]}})"));
  ASSERT_TRUE(batch_fused_rejects(same).has_value());
  EXPECT_NE(batch_fused_rejects(same)->find("nothing to stack"), std::string::npos);
}

// Functional operands: fused into the pass that reads the array, equal to contracting the
// materialized expression.
TEST(Functions, AgreeWithMaterializedOperands) {
  struct Case {
    std::string spec;
  };
  const std::vector<std::string> specs = {
      R"J({"einsum": "ik,kj->ij", "batch": [["F", "B"]], "shapes": {"A": [6, 5], "B": [5, 7]},
          "functions": {"F": "2*A+1"}})J",
      R"J({"einsum": "ij,j->i", "batch": [["A", "S"], ["A", "T"]],
          "shapes": {"A": [6, 4], "q": [4], "r": [4]}, "functions": {"S": "sin(q)", "T": "r*r"}})J",
      R"J({"einsum": "ki,kj->ij", "batch": [["F", "F"]], "shapes": {"A": [5, 4]},
          "functions": {"F": "exp(-A^2/2)"}})J",
      R"J({"einsum": "ij,jk,kl->il", "batch": [["A", "G", "C"]],
          "shapes": {"A": [3, 4], "B": [4, 5], "C": [5, 2]}, "functions": {"G": "abs(B)-0.5"}})J",
      R"J({"einsum": "xre,rij,ej->xei", "batch": [["J", "G", "V"]],
          "shapes": {"J": [2, 3, 35], "D": [3, 4, 4], "U": [35, 4]},
          "functions": {"G": "D*D", "V": "U-1"}})J",
      R"J({"einsum": "ij,jk->ik", "batch": [["F", "B"]], "shapes": {"A": [4, 5], "B": [5, 3]},
          "ops": {"join": "sqdiff", "agg": "max"}, "functions": {"F": "A/3"}})J",
  };
  int compared = 0;
  for (const auto& text : specs)
    for (Dtype dtype : {Dtype::f32, Dtype::f64}) {
      nlohmann::json j = nlohmann::json::parse(text);
      j["dtype"] = std::string(to_string(dtype));
      const Functions functions = take_functions(j);
      const BatchedEinsum e = parse_spec_json(j);
      // The data: the functions' arrays, and the arrays used directly.
      Arrays data, materialized;
      std::uint64_t seed = 3;
      for (const auto& [name, info] : e.arrays) {
        std::vector<std::int64_t> shape;
        for (const auto& l : info.shape) shape.push_back(l.value);
        const auto f = functions.find(name);
        const std::string source = f == functions.end() ? name : f->second.array();
        if (!data.count(source)) {
          Tensor t(dtype, shape);
          fill_random(t, seed++);
          data.emplace(source, std::move(t));
        }
        Tensor m(dtype, shape);
        for (std::int64_t k = 0; k < m.size(); ++k) {
          const double x = data.at(source).at(k);
          m.set(k, f == functions.end() ? x : f->second(x));
        }
        materialized.emplace(name, std::move(m));
      }
      const Bound fused(e, data, functions), plain(e, materialized);
      const Results want = run_reference(plain);
      const double tol = tolerance(dtype, terms_of(e, plain.lengths()) * 4);
      SpaceOptions space;
      space.threads = {1, 2};
      std::vector<Candidate> all = candidates(e, plain.lengths(), space);
      all.push_back({"reference", nlohmann::json::object()});
      for (const auto& c : all) {
        const Results got = execute(fused, c.strategy, c.params);
        for (std::size_t r = 0; r < want.size(); ++r)
          EXPECT_LE(max_relative_error(got[r], want[r]), tol)
              << c.strategy << " " << c.params.dump() << " " << text;
        ++compared;
      }
    }
  EXPECT_GT(compared, 100);
}

// copy_layout against an element-by-element copy: 2-, 4-, 8- and 16-byte elements; transposes
// of two axes with whole and partial micro-blocks and blocks; permutations of 3 to 6 axes, with
// axes of length 1 and rows and columns that are runs of several axes; sub-views with padding,
// reversed axes, and an empty tensor; a result over 8 MiB (written with streaming stores) with
// padded rows; runs longer than the offset tables; each also as a piece of a large destination
// (streaming stores). Every element of dst outside the copy keeps its old value.
TEST(Permute, CopyLayoutCopiesEveryElementToItsPlace) {
  struct Case {
    std::vector<std::int64_t> shape, src, dst;  // strides in elements
  };
  auto row_major = [](const std::vector<std::int64_t>& shape, std::vector<int> order = {}) {
    // Strides of a contiguous layout whose axes, slowest first, are `order` (default 0, 1, …).
    if (order.empty())
      for (std::size_t a = 0; a < shape.size(); ++a) order.push_back(int(a));
    std::vector<std::int64_t> s(shape.size());
    std::int64_t at = 1;
    for (std::size_t q = order.size(); q-- > 0;) s[order[q]] = at, at *= shape[order[q]];
    return s;
  };
  std::vector<Case> cases;
  for (const auto& rc : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {8, 8}, {4, 4}, {37, 53}, {300, 7}, {7, 300}, {129, 131}, {3, 4100}, {520, 520}})
    cases.push_back({{rc.first, rc.second},
                     row_major({rc.first, rc.second}, {1, 0}),
                     row_major({rc.first, rc.second})});
  const std::vector<std::int64_t> s4 = {9, 1, 13, 6}, s5 = {5, 8, 3, 1, 11};
  for (const auto& order : std::vector<std::vector<int>>{{3, 2, 1, 0}, {2, 0, 3, 1}, {1, 3, 0, 2}})
    cases.push_back({s4, row_major(s4, order), row_major(s4)});
  for (const auto& order : std::vector<std::vector<int>>{{4, 2, 1, 0, 3}, {2, 4, 0, 3, 1}})
    cases.push_back({s5, row_major(s5), row_major(s5, order)});  // written permuted
  cases.push_back({{17, 19}, {1, 40}, {20, 1}});                 // padded rows on both sides
  cases.push_back({{33, 29}, {-1, 64}, {29, 1}});                // a reversed axis
  const std::vector<std::int64_t> s6 = {6, 5, 4, 7, 3, 8};
  cases.push_back({s6, row_major(s6, {3, 4, 2, 5, 0, 1}), row_major(s6)});
  cases.push_back({{1001, 2100}, {1, 1001}, {2104, 1}});
  // runs longer than the offset tables (4096 elements), cut into pieces: src's, then dst's
  cases.push_back({{5000, 9}, {1, 5000}, {9, 1}});
  cases.push_back({{9, 5000}, {1, 9}, {5000, 1}});
  cases.push_back({{6, 0, 5}, {1, 6, 6}, {5, 5, 1}});  // empty
  cases.push_back({{}, {}, {}});                       // a scalar
  for (std::size_t bytes : {2, 4, 8, 16})
    for (const auto& c : cases) {
      std::int64_t src_lo = 0, src_hi = 0, dst_hi = 0, points = 1;
      for (std::size_t a = 0; a < c.shape.size(); ++a) {
        const std::int64_t reach = (c.shape[a] - 1) * c.src[a];
        (reach < 0 ? src_lo : src_hi) += reach;
        dst_hi += (c.shape[a] - 1) * c.dst[a];
        points *= c.shape[a];
      }
      if (points == 0) dst_hi = src_hi = 0;
      const auto b = static_cast<std::int64_t>(bytes);
      std::vector<unsigned char> src((src_hi - src_lo + 1) * b), space((dst_hi + 1) * b + 64, 0xA5);
      for (std::size_t q = 0; q < src.size(); ++q) src[q] = static_cast<unsigned char>(q * 7 + 3);
      // dst on a cache line, as the executor's tensors are
      const std::size_t skip = (64 - reinterpret_cast<std::uintptr_t>(space.data()) % 64) % 64;
      unsigned char* dst = space.data() + skip;
      std::vector<unsigned char> want(dst, dst + (dst_hi + 1) * b);
      std::vector<std::int64_t> at(c.shape.size(), 0);
      for (std::int64_t p = 0; p < points; ++p) {
        std::int64_t i = -src_lo, o = 0;
        for (std::size_t a = 0; a < at.size(); ++a) i += at[a] * c.src[a], o += at[a] * c.dst[a];
        std::copy_n(src.begin() + i * b, b, want.begin() + o * b);
        for (std::size_t a = at.size(); a-- > 0;)
          if (++at[a] < c.shape[a])
            break;
          else
            at[a] = 0;
      }
      // Alone, and as a piece of a destination of 1 GiB (streaming stores where lines align).
      for (std::size_t whole : {std::size_t{0}, std::size_t{1} << 30}) {
        std::fill(space.begin(), space.end(), 0xA5);
        kernels::copy_layout(src.data() - src_lo * b, c.src, dst, c.dst, c.shape, bytes, whole);
        EXPECT_TRUE(std::equal(want.begin(), want.end(), dst))
            << bytes << "-byte elements, shape of " << c.shape.size() << " axes, first length "
            << (c.shape.empty() ? 1 : c.shape[0]) << ", whole " << whole;
      }
    }
}

// A result the BLAS cannot write in place is computed into scratch chunk by chunk and each chunk
// scattered into its box of the result: cut at an M index, at a batch index, at an N index
// where the first row index is the result's unit stride, into the smallest chunks the result's
// cache lines allow, with a last partial chunk, and whole; f32 and f64, one and two threads.
// Every element equals the reference's; the scratch holds one chunk, except where neither the
// first row index nor the first column index may be cut (a chunk would write partial lines), or
// where a chunk cut by columns would have too few of them.
TEST(Product, ResultComputedInChunksLandsInPlace) {
  struct Case {
    std::string einsum;
    std::map<char, int> lengths;
    std::vector<std::int64_t> chunks;
    bool chunked = true;           // whether chunks smaller than the result are possible
    bool function = false;         // A read as through a function (packed, so not an outer product)
    std::int64_t whole_below = 0;  // chunks smaller hold the whole result (too few columns)
  };
  const std::vector<Case> cases = {
      // TCCG 33's shape: rows d, e, c, each of a stride of 16 or more in the result
      {"degc,gfab->abcdef",
       {{'a', 3}, {'b', 4}, {'c', 5}, {'d', 3}, {'e', 16}, {'f', 16}, {'g', 6}},
       {1, 700, 4000, 10000, 1 << 20}},
      // batch p, q not flat in the result; i its unit stride (no cut there)
      {"pqik,pqkj->pjqi",
       {{'p', 3}, {'q', 4}, {'i', 16}, {'k', 5}, {'j', 6}},
       {1, 200, 500, 1 << 20}},
      // an outer product per batch point
      {"pqi,pqj->pjqi", {{'p', 3}, {'q', 5}, {'i', 16}, {'j', 4}}, {5, 100, 1 << 20}, true, true},
      // the first row index, e, is the result's unit stride: cut at the column index c (a
      // stride of 16 there), every row of a range of at least 64 columns per chunk
      {"efbad,cf->abcde",
       {{'a', 2}, {'b', 2}, {'c', 128}, {'d', 2}, {'e', 8}, {'f', 2}},
       {100, 4096, 5000, 1 << 20},
       true,
       false,
       4096},
      // TCCG 46's shape: rows f, a, b with f the unit stride; columns d, e, c (d of stride e·f)
      {"gfab,degc->abcdef",
       {{'a', 2}, {'b', 2}, {'c', 8}, {'d', 4}, {'e', 4}, {'f', 16}, {'g', 2}},
       {2048, 4096, 6000, 1 << 20},
       true,
       false,
       4096},
      // the batch index p is the result's unit stride: cut by columns, every batch point in each
      {"pik,pkjl->jlip",
       {{'p', 3}, {'i', 16}, {'k', 2}, {'j', 16}, {'l', 8}},
       {1, 3072, 1 << 20},
       true,
       false,
       3072},
      // e the result's unit stride, d (the first column) of stride 6: one chunk
      {"ebaf,dcf->abcde",
       {{'a', 3}, {'b', 4}, {'c', 5}, {'d', 3}, {'e', 6}, {'f', 4}},
       {1, 100},
       false},
  };
  for (const auto& c : cases)
    for (Dtype dtype : {Dtype::f32, Dtype::f64}) {
      const auto arrow = c.einsum.find("->"), comma = c.einsum.find(',');
      const std::string a = c.einsum.substr(0, comma),
                        b = c.einsum.substr(comma + 1, arrow - comma - 1);
      auto shape = [&](const std::string& name, const std::string& labels) {
        std::string s = name + "=";
        for (std::size_t k = 0; k < labels.size(); ++k)
          s += (k ? "x" : "") + std::to_string(c.lengths.at(labels[k]));
        return s;
      };
      SpecFlags f;
      f.shapes = {shape("A", a), shape("B", b)};
      f.dtypes = {std::string(to_string(dtype))};
      const BatchedEinsum e = read_spec_argument(c.einsum, f);
      const Arrays arrays = random_arrays(e, 5);
      const Bound bound(e, arrays);
      const Results want_all = run_reference(bound);
      const Tensor& want = want_all.at(0);
      const double tol = tolerance(dtype, terms_of(e, bound.lengths()));
      const auto& len = bound.lengths();
      const Tensor &x = *bound.operand(0, 0).tensor, &y = *bound.operand(0, 1).tensor;
      for (std::int64_t chunk : c.chunks)
        for (int threads : {1, 2}) {
          Tensor got(dtype, want.shape());
          auto run = [&](auto type) {
            using T = decltype(type);
            auto make = [&](std::int64_t elements) {
              return kernels::Product<T>(ttgt_groups(e), len, {a, x.strides()}, {b, y.strides()},
                                         {e.output, got.strides()}, c.function, false, elements);
            };
            const kernels::Product<T> p = make(chunk);
            // The scratch beyond the packed operands: the whole result with one chunk.
            const std::int64_t operands =
                make(std::numeric_limits<std::int64_t>::max()).scratch() - want.size();
            const std::int64_t held = p.scratch() - operands;
            if (!c.chunked || chunk >= want.size() || chunk < c.whole_below)
              EXPECT_EQ(held, want.size()) << c.einsum << " chunks of " << chunk;
            else
              EXPECT_LE(held, std::max<std::int64_t>(chunk, want.size() / 3))
                  << c.einsum << " chunks of " << chunk;
            std::vector<T> scratch(static_cast<std::size_t>(p.scratch()));
            p.run(x.data<T>(), nullptr, y.data<T>(), nullptr, got.data<T>(), scratch.data(),
                  threads);
          };
          if (dtype == Dtype::f32)
            run(float{});
          else
            run(double{});
          EXPECT_LE(max_relative_error(got, want), tol)
              << c.einsum << " " << to_string(dtype) << " chunks of " << chunk << ", " << threads
              << " thread(s)";
        }
    }
}

// Packing through a function: short runs are gathered and then evaluated in place, long runs
// evaluated as they are read; either way each element is f of its source.
TEST(Functions, PackingEvaluatesShortAndLongRuns) {
  const Expression f = Expression::parse("2*U*sin(U)+U-1");
  struct Case {
    std::vector<std::int64_t> shape, strides;
  };
  // A source of 4·3·100 doubles read as: runs of 3 across a transposition, runs of 100, and a
  // reversed-order gather of runs of 4.
  const std::vector<Case> cases = {
      {{100, 4, 3}, {1, 300, 100}}, {{4, 3, 100}, {300, 100, 1}}, {{3, 100, 4}, {100, 1, 300}}};
  std::vector<double> src(1200);
  for (std::size_t q = 0; q < src.size(); ++q) src[q] = std::sin(0.7 * double(q));
  for (const auto& c : cases) {
    std::vector<double> got(src.size(), -7.0);
    kernels::copy_strided(src.data(), c.shape, c.strides, got.data(), &f);
    std::size_t k = 0;
    for (std::int64_t i = 0; i < c.shape[0]; ++i)
      for (std::int64_t j = 0; j < c.shape[1]; ++j)
        for (std::int64_t l = 0; l < c.shape[2]; ++l, ++k) {
          const double x = src[i * c.strides[0] + j * c.strides[1] + l * c.strides[2]];
          ASSERT_NEAR(got[k], f(x), 1e-12) << "element " << k << " of shape " << c.shape[2];
        }
  }
}

TEST(Functions, ExpressionsParseAndRefuseClearly) {
  const Expression f = Expression::parse("2*A+1");
  EXPECT_EQ(f.array(), "A");
  EXPECT_DOUBLE_EQ(f(3), 7);
  EXPECT_DOUBLE_EQ(Expression::parse("-x^2")(3), -9);
  EXPECT_DOUBLE_EQ(Expression::parse("2^x^2")(3), 512);  // right-associative
  EXPECT_DOUBLE_EQ(Expression::parse("(q - 1) / 4")(9), 2);
  EXPECT_DOUBLE_EQ(Expression::parse("sqrt(abs(q))")(-16), 4);
  std::vector<double> in{0, 1, 2, 3}, out(4);
  Expression::parse("sin(A)*A").apply(in.data(), 1, out.data(), 4);
  for (int i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(out[i], std::sin(in[i]) * in[i]);
  auto error = [](const std::string& text) {
    try {
      Expression::parse(text);
    } catch (const SpecError& err) {
      return std::string(err.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error("2*A+").find("position 4"), std::string::npos);
  EXPECT_NE(error("A+B").find("as well as"), std::string::npos);
  EXPECT_NE(error("sinh(A)").find("unknown function 'sinh'"), std::string::npos);
  EXPECT_NE(error("3+4").find("reads no array"), std::string::npos);
  EXPECT_NE(error("(A").find("expected ')'"), std::string::npos);
  EXPECT_NE(error(std::string(200, '(') + "A" + std::string(200, ')')).find("nested"),
            std::string::npos);
  nlohmann::json j = nlohmann::json::parse(
      R"J({"einsum": "i->", "batch": [["F"]], "shapes": {"A": [3]}, "functions": {"F": "B+1"}})J");
  EXPECT_THROW(take_functions(j), SpecError);
}

// .npy files written by numpy (Debian's python3-numpy) read back exactly, and ours read in numpy.
TEST(Npy, ReadsARegionWithoutTheRest) {
  testing::TempDir dir("npy_region");
  Tensor t(Dtype::f64, {5, 6, 7});
  fill_random(t, 3);
  write_npy(dir.path("t.npy"), t);
  auto check = [&](std::vector<std::int64_t> start, std::vector<std::int64_t> length) {
    const Tensor r = read_npy_region(dir.path("t.npy"), start, length);
    ASSERT_EQ(r.shape(), length);
    std::int64_t k = 0;
    for (std::int64_t a = 0; a < length[0]; ++a)
      for (std::int64_t b = 0; b < length[1]; ++b)
        for (std::int64_t c = 0; c < length[2]; ++c, ++k)
          EXPECT_EQ(r.at(k), t.at(((start[0] + a) * 6 + start[1] + b) * 7 + start[2] + c));
  };
  check({1, 2, 3}, {3, 2, 4});  // a run per row
  check({2, 0, 0}, {2, 6, 7});  // one contiguous run
  check({0, 3, 0}, {5, 3, 7});  // runs of whole trailing rows
  check({4, 5, 6}, {1, 1, 1});
  EXPECT_THROW(read_npy_region(dir.path("t.npy"), {4, 0, 0}, {2, 6, 7}), SpecError);
  EXPECT_THROW(read_npy_region(dir.path("t.npy"), {0, 0}, {1, 1}), SpecError);
  // Fortran order (numpy's), read whole and cut.
  const std::string script =
      "import numpy as np; a = np.arange(30.0).reshape(5, 6); "
      "np.save('" +
      dir.path("f.npy") + "', np.asfortranarray(a))";
  ASSERT_EQ(std::system((std::string(EINSUMDB_PYTHON) + " -c \"" + script + "\"").c_str()), 0);
  const Tensor f = read_npy_region(dir.path("f.npy"), {1, 2}, {3, 2});
  EXPECT_EQ(f.at(0), 8.0);   // a[1, 2]
  EXPECT_EQ(f.at(5), 21.0);  // a[3, 3]
}

TEST(Npy, RoundTripsAndReadsNumpyFiles) {
  testing::TempDir dir("npy");
  Tensor t(Dtype::f32, {3, 4, 2});
  fill_random(t, 5);
  write_npy(dir.path("t.npy"), t);
  const Tensor back = read_npy(dir.path("t.npy"));
  EXPECT_EQ(back.shape(), t.shape());
  EXPECT_EQ(max_relative_error(back, t), 0.0);
  Tensor scalar(Dtype::f64, {});
  scalar.set(0, 2.5);
  write_npy(dir.path("s.npy"), scalar);
  EXPECT_EQ(read_npy(dir.path("s.npy")).at(0), 2.5);

  const std::string script =
      "import numpy as np\n"
      "a = np.arange(24, dtype=np.float64).reshape(2, 3, 4)\n"
      "np.save('" +
      dir.path("c.npy") +
      "', a)\n"
      "np.save('" +
      dir.path("f.npy") +
      "', np.asfortranarray(a))\n"
      "np.save('" +
      dir.path("i.npy") +
      "', a.astype(np.int32))\n"
      "b = np.load('" +
      dir.path("t.npy") +
      "')\n"
      "assert b.shape == (3, 4, 2) and b.dtype == np.float32, b\n";
  std::ofstream(dir.path("make.py")) << script;
  ASSERT_EQ(std::system((std::string(EINSUMDB_PYTHON) + " " + dir.path("make.py")).c_str()), 0);
  for (const char* name : {"c.npy", "f.npy"}) {
    const Tensor c = read_npy(dir.path(name));
    EXPECT_EQ(c.shape(), (std::vector<std::int64_t>{2, 3, 4}));
    for (std::int64_t k = 0; k < 24; ++k) EXPECT_EQ(c.at(k), static_cast<double>(k)) << name;
  }
  EXPECT_THROW(read_npy(dir.path("i.npy")), SpecError);  // int32: named, refused
  // Truncated and corrupted files are refused before anything large is allocated.
  {
    std::ifstream in(dir.path("c.npy"), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(dir.path("short.npy"), std::ios::binary) << bytes.substr(0, bytes.size() - 8);
    std::string huge = bytes;
    huge.replace(huge.find("(2, 3, 4)"), 9, "(9999999999, 99999)");
    std::ofstream(dir.path("huge.npy"), std::ios::binary) << huge;
    std::ofstream(dir.path("text.npy")) << "not numpy at all";
  }
  for (const char* name : {"short.npy", "huge.npy", "text.npy"}) {
    try {
      read_npy(dir.path(name));
      ADD_FAILURE() << name;
    } catch (const SpecError& err) {
      EXPECT_NE(std::string(err.what()).find(name), std::string::npos) << err.what();
    }
  }
  EXPECT_THROW(read_npy(dir.path("absent.npy")), Error);
}

// A result that cancels to nearly zero is judged against the size of what was summed: an
// error at the rounding level of the terms passes, one far above it does not.
TEST(Strategies, VerificationScalesByTheTermsNotTheCancelledResult) {
  SpecFlags f;
  f.shapes = {"A=1000", "B=1000"};
  const BatchedEinsum e = read_spec_argument("i,i->", f);
  Arrays a;
  a.emplace("A", Tensor(Dtype::f64, {1000}));
  a.emplace("B", Tensor(Dtype::f64, {1000}));
  fill_random(a.at("A"), 11);
  for (std::int64_t k = 0; k < 1000; ++k) {  // pairs a, a times +1, -1: Σ A·B cancels
    if (k % 2) a.at("A").set(k, a.at("A").at(k - 1));
    a.at("B").set(k, k % 2 ? -1.0 : 1.0);
  }
  std::vector<double> scale;
  const Results want = run_reference(Bound(e, a), &scale);
  ASSERT_EQ(scale.size(), 1u);
  double sum_abs = 0;
  for (std::int64_t k = 0; k < 1000; ++k) sum_abs += std::abs(a.at("A").at(k));
  EXPECT_NEAR(scale[0], sum_abs, 1e-9 * sum_abs);
  Results close, far;
  close.emplace_back(Dtype::f64, std::vector<std::int64_t>{});
  far.emplace_back(Dtype::f64, std::vector<std::int64_t>{});
  close[0].set(0, want[0].at(0) + 50 * 1.1e-16 * sum_abs);  // rounding-sized
  far[0].set(0, want[0].at(0) + 1e-6 * sum_abs);
  const double tol = tolerance(Dtype::f64, 2000);
  EXPECT_LE(verification_error(close, want, scale), tol);
  EXPECT_GT(verification_error(far, want, scale), tol);
  // Against the result's own size alone, the rounding-sized error would have been refused.
  EXPECT_LT(std::abs(want[0].at(0)), 1e-12 * sum_abs);
  EXPECT_GT(verification_error(close, want), tol);
}

TEST(Strategies, ToleranceCatchesAWrongResult) {
  Tensor a(Dtype::f64, {3}), b(Dtype::f64, {3});
  fill_random(a, 3);
  fill_random(b, 3);
  EXPECT_EQ(max_relative_error(a, a), 0.0);
  b.set(1, a.at(1) + 1e-3);
  b.set(0, a.at(0));
  b.set(2, a.at(2));
  EXPECT_GT(max_relative_error(b, a), tolerance(Dtype::f64, 1000));
  EXPECT_GT(max_relative_error(Tensor(Dtype::f64, {2}), a), 1.0);  // shape differs: inf
}

// Large tensors come from mappings of their own that are kept when freed: the next tensor of the
// same size gets the same block (its pages already written), huge-page aligned from 4 MiB on, and
// a zero-filled tensor on a reused block is zero however the block was left.
TEST(Tensor, LargeBlocksAreReusedAndZeroFilledOnRequest) {
  if (!recycles_large_tensors())
    GTEST_SKIP() << "under AddressSanitizer tensors are heap blocks, so that it watches them";
  release_recycled_memory();  // none of the blocks the tests before this one left
  const auto address = [](const Tensor& t) { return reinterpret_cast<std::uintptr_t>(t.raw()); };
  std::uintptr_t large = 0, mid = 0;
  {
    Tensor t(Dtype::f64, {1024, 1024}, Tensor::Uninitialized{});  // 8 MiB
    large = address(t);
    EXPECT_EQ(large % (std::uintptr_t{2} << 20), 0u);
    std::fill_n(t.data<double>(), t.size(), 7.0);
    Tensor u(Dtype::f32, {256, 512}, Tensor::Uninitialized{});  // 512 KiB
    mid = address(u);
    EXPECT_EQ(mid % 4096, 0u);
    std::fill_n(u.data<float>(), u.size(), -1.0f);
  }
  const Tensor t(Dtype::f64, {1024, 1024});
  EXPECT_EQ(address(t), large);
  EXPECT_TRUE(std::all_of(t.data<double>(), t.data<double>() + t.size(),
                          [](double v) { return v == 0.0; }));
  const Tensor u(Dtype::f32, {512, 256});
  EXPECT_EQ(address(u), mid);
  EXPECT_TRUE(
      std::all_of(u.data<float>(), u.data<float>() + u.size(), [](float v) { return v == 0.0f; }));
  // A cached block more than a quarter larger than the request is not taken.
  const std::uintptr_t eight = [&] {
    const Tensor x(Dtype::f64, {1024, 1024}, Tensor::Uninitialized{});
    return address(x);
  }();
  const Tensor five(Dtype::f64, {640, 1024});  // 5 MiB
  EXPECT_NE(address(five), eight);
  EXPECT_TRUE(std::all_of(five.data<double>(), five.data<double>() + five.size(),
                          [](double v) { return v == 0.0; }));
}

// glibc maps a block of 128 KiB or more afresh for each request, or returns freed heap pages
// to the system when it trims, so a kernel's 128 KiB result (a 128 × 128 product) wrote new
// pages on every call: tensors of that size are recycled too, and their pages stay written
// however the heap is trimmed in between (the tuner's probe saw 0.40 instead of 0.05 ms).
TEST(Tensor, ResultsOf128KiBWriteNoNewPagesWhenAllocatedAgain) {
  if (!recycles_large_tensors())
    GTEST_SKIP() << "under AddressSanitizer tensors are heap blocks, so that it watches them";
  auto cycle = [] {
    Tensor t(Dtype::f64, {128, 128}, Tensor::Uninitialized{});  // 128 KiB
    std::fill_n(t.data<double>(), t.size(), 1.0);
  };
  cycle();
  rusage before{};
  getrusage(RUSAGE_SELF, &before);
  for (int k = 0; k < 20; ++k) {
    malloc_trim(0);  // as other work in the process may
    cycle();
  }
  rusage after{};
  getrusage(RUSAGE_SELF, &after);
  EXPECT_LT(after.ru_minflt - before.ru_minflt, 32) << "32 pages: one tensor's";
}

// release_recycled_memory() unmaps the cached blocks: the next tensor of a freed one's size is a
// new mapping (zero, where a reused block would still hold what was written into it).
TEST(Tensor, ReleasedBlocksAreNotReused) {
  if (!recycles_large_tensors())
    GTEST_SKIP() << "under AddressSanitizer tensors are heap blocks, so that it watches them";
  {
    Tensor t(Dtype::f64, {768, 1024}, Tensor::Uninitialized{});  // 6 MiB
    std::fill_n(t.data<double>(), t.size(), 3.0);
  }
  release_recycled_memory();
  const Tensor t(Dtype::f64, {768, 1024}, Tensor::Uninitialized{});
  EXPECT_TRUE(std::all_of(t.data<double>(), t.data<double>() + t.size(),
                          [](double v) { return v == 0.0; }));
}

}  // namespace
}  // namespace einsumdb
