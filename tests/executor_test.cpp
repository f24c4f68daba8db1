// The local executor: the reference loop nest against hand-computed results, and every strategy
// against the reference on a table of workloads in f32 and f64.
#include <gtest/gtest.h>

#include "canon/error.hpp"
#include "canon/parse.hpp"
#include "executor/execute.hpp"

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
  EXPECT_THROW(Tensor(Dtype::c64, {2}), SpecError);
}

struct Workload {
  std::string einsum, batch;
  std::vector<std::string> shapes;
  bool ttgt;  // whether ttgt applies
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
    {"ij,j->i", "A,B;A,C;D,B", {"A=6x4", "B=4", "C=4", "D=6x4"}, true},  // b = 3, shared
    {"ij,jk->ik", "", {"A=1x1", "B=1x300"}, true},                       // degenerate GEMM
    {"ii,i->i", "", {"A=5x5", "B=5"}, false},                            // diagonal
    {"ij,k->i", "", {"A=4x3", "B=5"}, false},                            // private summed index
    {"ij,jk,kl->il", "", {"A=3x4", "B=4x5", "C=5x2"}, false},            // three operands
};

TEST(Strategies, AgreeWithTheReference) {
  int compared = 0, rejected = 0;
  for (Dtype dtype : {Dtype::f32, Dtype::f64}) {
    for (const auto& w : kWorkloads) {
      SpecFlags f;
      f.batch = w.batch;
      f.shapes = w.shapes;
      f.dtypes = {std::string(to_string(dtype))};
      const BatchedEinsum e = read_spec_argument(w.einsum, f);
      Arrays arrays;
      std::uint64_t seed = 1;
      for (const auto& [name, info] : e.arrays) {
        std::vector<std::int64_t> shape;
        for (const auto& l : info.shape) shape.push_back(l.value);
        Tensor t(dtype, shape);
        fill_random(t, seed++);
        arrays.emplace(name, std::move(t));
      }
      const Results ref = run_reference(e, arrays);
      double terms = 1;
      for (const auto& [l, len] : bind_lengths(e, arrays))
        if (e.output.find(l) == std::string::npos) terms *= static_cast<double>(len);
      for (const auto& s : builtin_strategies()) {
        const auto why = s.rejects(e);
        if (s.name == "ttgt") {
          EXPECT_EQ(!why.has_value(), w.ttgt) << w.einsum;
        }
        if (why) {
          EXPECT_FALSE(why->empty());
          EXPECT_THROW(s.run(e, arrays, nlohmann::json::object()), SpecError);
          ++rejected;
          continue;
        }
        const Results got = s.run(e, arrays, nlohmann::json::object());
        ASSERT_EQ(got.size(), ref.size());
        for (std::size_t r = 0; r < ref.size(); ++r) {
          EXPECT_EQ(got[r].dtype(), dtype);
          EXPECT_LE(max_relative_error(got[r], ref[r]), tolerance(dtype, terms))
              << s.name << " " << w.einsum << " " << to_string(dtype) << " row " << r;
        }
        ++compared;
      }
    }
  }
  EXPECT_EQ(rejected, 6);
  EXPECT_GT(compared, 40);
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

}  // namespace
}  // namespace einsumdb
