// einsumdb::Engine, the library's entry point: einsums on caller-owned memory (row-major in
// place, other strides copied), results into caller buffers, the store's transform found under
// other names, the prepared-execution cache, errors that name the operand, and concurrent calls.
#include <cmath>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "einsumdb/canon/canonicalize.hpp"
#include "einsumdb/canon/parse.hpp"
#include "einsumdb/core/error.hpp"
#include "einsumdb/db/location.hpp"
#include "einsumdb/db/retrieve.hpp"
#include "einsumdb/engine/engine.hpp"
#include "einsumdb/engine/this_machine.hpp"
#include "einsumdb/tests/support/temp_dir.hpp"

namespace einsumdb {
namespace {

using json = nlohmann::json;

std::vector<double> random_values(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> v(n);
  for (auto& x : v) x = u(gen);
  return v;
}

TensorRef ref(std::vector<double>& v, std::vector<std::int64_t> shape,
              std::vector<std::int64_t> strides = {}) {
  return {Dtype::f64, v.data(), std::move(shape), std::move(strides)};
}

// C[i,j] = Σ_k A(i,k) B(k,j) with element accessors, for any layout.
template <typename FA, typename FB>
std::vector<double> matmul(int m, int n, int k, FA a, FB b) {
  std::vector<double> c(static_cast<std::size_t>(m * n), 0.0);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      for (int l = 0; l < k; ++l) c[i * n + j] += a(i, l) * b(l, j);
  return c;
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << i;
}

class EngineTest : public ::testing::Test {
 protected:
  EngineOptions options() const {
    EngineOptions o;
    o.db = dir_.path("facts.sqlite");
    return o;
  }
  testing::TempDir dir_{"engine"};
};

TEST_F(EngineTest, AMatrixProductOnCallerMemoryWithoutAStore) {
  Engine engine(options());
  auto a = random_values(5 * 3, 1), b = random_values(3 * 4, 2);
  std::vector<double> c(5 * 4, -7.0);
  engine.einsum("ik,kj->ij", {ref(a, {5, 3}), ref(b, {3, 4})}, ref(c, {5, 4}));
  expect_near(c, matmul(
                     5, 4, 3, [&](int i, int l) { return a[i * 3 + l]; },
                     [&](int l, int j) { return b[l * 4 + j]; }));
  const auto p = engine.prepare("ik,kj->ij", {ref(a, {5, 3}), ref(b, {3, 4})});
  EXPECT_EQ(p->choice().source, "default");
  EXPECT_FALSE(p->choice().stored);
  EXPECT_NE(p->choice().reason.find("no database at " + dir_.path("facts.sqlite")),
            std::string::npos)
      << p->choice().reason;
  // The result as an owned tensor, too.
  const Tensor t = engine.einsum("ik,kj->ij", {ref(a, {5, 3}), ref(b, {3, 4})});
  ASSERT_EQ(t.shape(), (std::vector<std::int64_t>{5, 4}));
  for (std::int64_t k = 0; k < t.size(); ++k) EXPECT_DOUBLE_EQ(t.at(k), c[k]);
}

TEST_F(EngineTest, StridedInputsAreCopiedAndStridedOutputsWritten) {
  Engine engine(options());
  // A as a column-major 5×3 (strides 1, 5), B reversed along both axes (negative strides), C
  // column-major.
  auto a = random_values(15, 3), b = random_values(12, 4);
  std::vector<double> c(20, 0.0);
  const TensorRef B{Dtype::f64, b.data() + 11, {3, 4}, {-4, -1}};
  engine.einsum("ik,kj->ij", {ref(a, {5, 3}, {1, 5}), B}, ref(c, {5, 4}, {1, 5}));
  const auto want = matmul(
      5, 4, 3, [&](int i, int l) { return a[i + 5 * l]; },
      [&](int l, int j) { return b[11 - 4 * l - j]; });
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_NEAR(c[i + 5 * j], want[i * 4 + j], 1e-12);
}

TEST_F(EngineTest, TheStoresTransformIsUsedUnderOtherNames) {
  // A fact for ik,kj->ij with A(6×4), B(4×5): ttgt with M = i, N = j, K = k.
  const BatchedEinsum tuned = parse_spec_text(
      R"({"einsum":"ik,kj->ij","batch":[["A","B"]],"shapes":{"A":[6,4],"B":[4,5]}})");
  const Canonical c = canonicalize(tuned);
  Measurement m;
  m.transform = {"ttgt",
                 {{"m", json::array({{{"index", "i"}}})},
                  {"n", json::array({{{"index", "j"}}})},
                  {"k", json::array({{{"index", "k"}}})}}};
  m.seconds = {1e-6, 1.1e-6};
  m.max_rel_err = 1e-16;
  {
    Store store = open_store_for_writing(dir_.path("facts.sqlite"));
    store.record_run({"engine test", "", "", ""}, this_machine(), {{&c, to_canonical(c, m)}});
  }
  // Z[p,q] = Σ_r X[r,q] · Y[p,r]: operands swapped, every name changed.
  Engine engine(options());
  auto x = random_values(4 * 5, 5), y = random_values(6 * 4, 6);
  std::vector<double> z(6 * 5);
  engine.einsum("rq,pr->pq", {ref(x, {4, 5}), ref(y, {6, 4})}, ref(z, {6, 5}));
  expect_near(z, matmul(
                     6, 5, 4, [&](int p, int r) { return y[p * 4 + r]; },
                     [&](int r, int q) { return x[r * 5 + q]; }));
  const auto p = engine.prepare("rq,pr->pq", {ref(x, {4, 5}), ref(y, {6, 4})});
  EXPECT_EQ(p->choice().source, "best known");
  EXPECT_TRUE(p->choice().stored);
  EXPECT_EQ(p->choice().candidate.strategy, "ttgt");
  // The parameters are in the operands' names: the store's ttgt M/N/K are T1's p, T0's q, r.
  const json& params = p->choice().candidate.params;
  EXPECT_EQ(params["m"], json::array({{{"index", "p"}}})) << params;
  EXPECT_EQ(params["n"], json::array({{{"index", "q"}}})) << params;
  EXPECT_EQ(params["k"], json::array({{{"index", "r"}}})) << params;

  // Another size of the same product: the nearest measured size answers.
  auto x2 = random_values(8 * 10, 7), y2 = random_values(12 * 8, 8);
  const auto near = engine.prepare("rq,pr->pq", {ref(x2, {8, 10}), ref(y2, {12, 8})});
  EXPECT_EQ(near->choice().source, "best known for a nearby size");
  EXPECT_GT(near->choice().distance, 0);
}

TEST_F(EngineTest, RepeatedCallsReuseOnePreparedExecution) {
  Engine engine(options());
  auto a = random_values(16 * 16, 9), b = random_values(16 * 16, 10);
  std::vector<double> c(256);
  for (int i = 0; i < 10; ++i)
    engine.einsum("ik,kj->ij", {ref(a, {16, 16}), ref(b, {16, 16})}, ref(c, {16, 16}));
  EXPECT_EQ(engine.prepared_count(), 1u);
  const auto p1 = engine.prepare("ik,kj->ij", {ref(a, {16, 16}), ref(b, {16, 16})});
  const auto p2 = engine.prepare("ik,kj->ij", {ref(a, {16, 16}), ref(b, {16, 16})});
  EXPECT_EQ(p1.get(), p2.get());
  // The same memory passed twice is one array: A·A is another workload than A·B.
  const auto square = engine.prepare("ik,kj->ij", {ref(a, {16, 16}), ref(a, {16, 16})});
  EXPECT_NE(square.get(), p1.get());
  EXPECT_EQ(square->einsum().batch[0], (std::vector<std::string>{"T0", "T0"}));
  engine.forget();
  EXPECT_EQ(engine.prepared_count(), 0u);
}

TEST_F(EngineTest, ABatchWhoseRowsShareAnOperand) {
  Engine engine(options());
  const BatchedEinsum e = parse_spec_text(
      R"({"einsum":"ij,j->i","batch":[["A","u"],["A","v"]],"shapes":{"A":[7,3],"u":[3],"v":[3]}})");
  auto a = random_values(21, 11), u = random_values(3, 12), v = random_values(3, 13);
  std::vector<double> ru(7), rv(7);
  engine.einsum(e, {{"A", ref(a, {7, 3})}, {"u", ref(u, {3})}, {"v", ref(v, {3})}},
                {ref(ru, {7}), ref(rv, {7})});
  for (int i = 0; i < 7; ++i) {
    double su = 0, sv = 0;
    for (int j = 0; j < 3; ++j) su += a[i * 3 + j] * u[j], sv += a[i * 3 + j] * v[j];
    EXPECT_NEAR(ru[i], su, 1e-12);
    EXPECT_NEAR(rv[i], sv, 1e-12);
  }
  const Results r =
      engine.einsum(e, {{"A", ref(a, {7, 3})}, {"u", ref(u, {3})}, {"v", ref(v, {3})}});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_DOUBLE_EQ(r[1].at(6), rv[6]);
}

// numpy's forms on caller memory: "..." over a batch that broadcasts (a size-1 axis against a
// longer one, the shorter operand's ellipsis aligned at the right), an operand passed twice whose
// uses broadcast differently, and an axis of length 0.
TEST_F(EngineTest, EllipsisBroadcastingAndEmptyAxes) {
  Engine engine(options());
  // A[2,1,3,4] and B[5,4,2]: batch (2,5), each point a 3×4 by 4×2 product.
  auto a = random_values(2 * 1 * 3 * 4, 1), b = random_values(5 * 4 * 2, 2);
  const Tensor c = engine.einsum("...ij,...jk->...ik", {ref(a, {2, 1, 3, 4}), ref(b, {5, 4, 2})});
  ASSERT_EQ(c.shape(), (std::vector<std::int64_t>{2, 5, 3, 2}));
  for (int p = 0; p < 2; ++p)
    for (int q = 0; q < 5; ++q) {
      const auto want = matmul(
          3, 2, 4, [&](int i, int k) { return a[(p * 3 + i) * 4 + k]; },
          [&](int k, int j) { return b[(q * 4 + k) * 2 + j]; });
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 2; ++j)
          EXPECT_NEAR(c.data<double>()[((p * 5 + q) * 3 + i) * 2 + j], want[i * 2 + j], 1e-12);
    }
  // The same memory as "ij" over (1,5) and as "jk": j is 5 in the first use and broadcasts in the
  // second.
  auto v = random_values(5, 3);
  const Tensor s = engine.einsum("ij,jk->ik", {ref(v, {1, 5}), ref(v, {1, 5})});
  ASSERT_EQ(s.shape(), (std::vector<std::int64_t>{1, 5}));
  double total = 0;
  for (double x : v) total += x;
  for (int k = 0; k < 5; ++k) EXPECT_NEAR(s.data<double>()[k], total * v[k], 1e-12);
  // Empty: a (0,3) by (3,2) product is (0,2); a (2,0) by (0,2) one sums nothing.
  std::vector<double> none;
  auto m = random_values(6, 4);
  EXPECT_EQ(engine.einsum("ij,jk->ik", {ref(none, {0, 3}), ref(m, {3, 2})}).shape(),
            (std::vector<std::int64_t>{0, 2}));
  const Tensor z = engine.einsum("ij,jk->ik", {ref(none, {2, 0}), ref(none, {0, 2})});
  ASSERT_EQ(z.size(), 4);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(z.data<double>()[k], 0.0);
  // Mismatched lengths that are not 1 stay an error naming them.
  auto w = random_values(6, 5);
  EXPECT_THROW(engine.einsum("ij,ij->j", {ref(m, {3, 2}), ref(w, {2, 3})}), SpecError);
}

TEST_F(EngineTest, BadInputIsRefusedWithItsName) {
  Engine engine(options());
  auto a = random_values(6, 1), b = random_values(6, 2);
  std::vector<float> f(6);
  std::vector<double> c(4);
  struct Case {
    std::function<void()> call;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[&] {
         engine.einsum("ik,kj->ij", {ref(a, {2, 3})}, ref(c, {2, 2}));
       },
       "has 2 operand(s); 1 were given"},
      {[&] {
         engine.einsum("ik,kj->ij", {ref(a, {6}), ref(b, {3, 2})}, ref(c, {2, 2}));
       },
       "the subscripts 'ik' of operand 0 name 2 axes but it has 1"},
      {[&] {
         engine.einsum("ik,kj->ij", {ref(a, {2, 3}), ref(b, {2, 3})}, ref(c, {2, 2}));
       },
       "length"},
      {[&] {
         engine.einsum("ik,kj->ij", {ref(a, {2, 3}), ref(b, {3, 2})}, ref(c, {4}));
       },
       "output 0 has shape (4,); the result has shape (2, 2)"},
      {[&] {
         engine.einsum("ik,kj->ij", {ref(a, {2, 3}), {Dtype::f64, nullptr, {3, 2}, {}}},
                       ref(c, {2, 2}));
       },
       "operand 1 has no data"},
      {[&] {
         engine.einsum("ik,kj->ij", {ref(a, {2, 3}), {Dtype::i32, b.data(), {3, 2}, {}}},
                       ref(c, {2, 2}));
       },
       "operand 1 has dtype i32"},
      {[&] {
         engine.einsum("ik,kj->ij", {ref(a, {2, 3}), ref(b, {3, 2})},
                       {Dtype::f32, f.data(), {2, 2}, {}});
       },
       "output 0 has dtype f32; the result is f64"},
      {[&] {
         const BatchedEinsum e = parse_spec_text(
             R"({"einsum":"ij,j->i","batch":[["A","u"]],"shapes":{"A":[2,3],"u":[3]}})");
         engine.einsum(e, {{"A", ref(a, {2, 3})}});
       },
       "no data for array 'u'"},
      {[&] {
         const BatchedEinsum e = parse_spec_text(
             R"({"einsum":"ij,j->i","batch":[["A","u"]],"shapes":{"A":[2,3],"u":[3]}})");
         engine.einsum(e, {{"A", ref(a, {2, 3})}, {"u", {Dtype::f32, f.data(), {3}, {}}}});
       },
       "array 'u' has dtype f32; the einsum was prepared for f64"},
      {[&] {
         engine.einsum("ik,kj->ij)", {ref(a, {2, 3}), ref(b, {3, 2})}, ref(c, {2, 2}));
       },
       "column"},
  };
  for (const auto& c : cases) {
    try {
      c.call();
      ADD_FAILURE() << "no error; expected: " << c.message;
    } catch (const SpecError& e) {
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
    }
  }
}

// Several threads call one engine at once, on workloads prepared concurrently and shared.
TEST_F(EngineTest, ConcurrentCallsFromSeveralThreads) {
  Engine engine(options());
  constexpr int kThreads = 4, kCalls = 150;
  std::vector<std::thread> threads;
  std::vector<int> wrong(kThreads, 0);
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int call = 0; call < kCalls; ++call) {
        const int n = 4 + (call + t) % 3 * 5;  // three shapes, shared between the threads
        auto a = random_values(static_cast<std::size_t>(n * n), static_cast<unsigned>(call));
        auto b = random_values(static_cast<std::size_t>(n * n), static_cast<unsigned>(t));
        std::vector<double> c(static_cast<std::size_t>(n * n));
        engine.einsum("ik,kj->ij", {ref(a, {n, n}), ref(b, {n, n})}, ref(c, {n, n}));
        const auto want = matmul(
            n, n, n, [&](int i, int l) { return a[i * n + l]; },
            [&](int l, int j) { return b[l * n + j]; });
        for (std::size_t k = 0; k < c.size(); ++k)
          if (std::abs(c[k] - want[k]) > 1e-12) ++wrong[t];
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(wrong[t], 0) << "thread " << t;
  EXPECT_EQ(engine.prepared_count(), 3u);
}

}  // namespace
}  // namespace einsumdb
