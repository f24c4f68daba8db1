// Tensors in memory (the recycling of large blocks), .npy files, and functional operands.
#include <gtest/gtest.h>

#include <cpuid.h>
#include <dlfcn.h>
#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>
#include "einsumdb/canon/metrics.hpp"
#include "einsumdb/canon/parse.hpp"
#include "einsumdb/core/error.hpp"

#include "einsumdb/executor/deadline.hpp"
#include "einsumdb/executor/execute.hpp"
#include "einsumdb/executor/kernels.hpp"
#include "einsumdb/executor/npy.hpp"
#include "einsumdb/executor/permute.hpp"
#include "einsumdb/executor/product.hpp"
#include "einsumdb/executor/small_gemm.hpp"
#include "einsumdb/tests/support/executor_cases.hpp"
#include "einsumdb/tests/support/temp_dir.hpp"
#include "einsumdb/tuner/tuner.hpp"

namespace einsumdb {
namespace {

using testing::binary_spec;
using testing::terms_of;

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

// A function of a real array joins a complex product as numpy would compute it: evaluated in real
// numbers, then promoted; a function of a complex array is evaluated in complex arithmetic (as
// numpy's np.exp(A) * A**3 ... would be). Every strategy that applies agrees with the reference on
// the operand materialized here with std::complex, in c128 and c64.
TEST(Functions, OfRealArraysJoinComplexProductsAndOfComplexOnesComputeInComplex) {
  // F = text(A) times B, A of dtype `a` and B of the complex dtype `b`: every strategy that applies
  // against the reference run on F's values as `value` computes them from A's element k.
  const auto check = [](Dtype a, Dtype b, const std::string& text, const auto& value) {
    nlohmann::json j = nlohmann::json::parse(
        R"J({"einsum": "ik,kj->ij", "batch": [["F", "B"]], "shapes": {"A": [6, 5], "B": [5, 7]}})J");
    j["dtypes"] = {{"A", to_string(a)}, {"B", to_string(b)}};
    j["functions"] = {{"F", text}};
    const Functions functions = take_functions(j);
    const BatchedEinsum e = parse_spec_json(j);
    Arrays data;
    data.emplace("A", Tensor(a, {6, 5}));
    data.emplace("B", Tensor(b, {5, 7}));
    fill_random(data.at("A"), 5);
    fill_random(data.at("B"), 6);
    BatchedEinsum plain = e;
    plain.arrays.at("F").dtype = b;
    Arrays values;
    Tensor f(b, {6, 5});
    for (std::int64_t k = 0; k < f.size(); ++k) f.set_complex(k, value(data.at("A"), k));
    values.emplace("F", std::move(f));
    values.emplace("B", Tensor::view(data.at("B")));
    const Results want = run_reference(Bound(plain, values));
    const Bound fused(e, data, functions);
    int ran = 0;
    for (const auto& s : builtin_strategies()) {
      if (s.rejects(e)) continue;
      const Results got = execute(fused, s.name);
      ASSERT_EQ(got.at(0).dtype(), b) << s.name;
      EXPECT_LE(max_relative_error(got.at(0), want.at(0)), tolerance(b, 5))
          << s.name << " " << text << " " << to_string(b);
      ++ran;
    }
    EXPECT_EQ(ran, 6) << text;  // reference, direct, loop_nest, and the three GEMMs
  };
  check(Dtype::f64, Dtype::c128, "sin(A)+1", [](const Tensor& t, std::int64_t k) {
    return std::complex<double>(std::sin(t.at(k)) + 1);
  });
  // Functions of complex arrays: every function of the grammar, a whole power, and a constant.
  const auto of_complex = [](const Tensor& t, std::int64_t k) {
    const std::complex<double> a = t.at_complex(k);
    return std::exp(a) * (a * a * a) - std::sqrt(a) / 2.0 + std::abs(a) +
           std::sin(a) * std::cos(a) - std::tan(a) / (2.0 + a) + std::log(a) * std::tanh(a) - 1.0;
  };
  const std::string text =
      "exp(A)*A^3 - sqrt(A)/2 + abs(A) + sin(A)*cos(A) - tan(A)/(2+A) + log(A)*tanh(A) - 1";
  for (Dtype dtype : {Dtype::c128, Dtype::c64}) check(dtype, dtype, text, of_complex);
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
  // Over complex numbers: a whole power exactly (repeated squaring), 0 to a power 0, the modulus
  // with no imaginary part, the principal square root, and apply's chunks (a strided read, 300
  // elements: two chunks) in c64 as operator() computes them one by one.
  using C = std::complex<double>;
  EXPECT_EQ(Expression::parse("z^2")(C(1, 2)), C(-3, 4));
  EXPECT_EQ(Expression::parse("z^-1")(C(0, 2)), C(0, -0.5));
  EXPECT_EQ(Expression::parse("z^3")(C(0, 0)), C(0, 0));
  EXPECT_EQ(Expression::parse("abs(z)")(C(3, -4)), C(5, 0));
  EXPECT_EQ(Expression::parse("sqrt(z)")(C(-4, 0)), C(0, 2));
  const Expression g = Expression::parse("2*exp(z)^2 - log(z)/3 + 1");
  std::vector<std::complex<float>> zin(600), zout(300);
  for (std::size_t q = 0; q < zin.size(); ++q)
    zin[q] = {std::sin(0.3f * float(q)), std::cos(0.7f * float(q))};
  g.apply(zin.data(), 2, zout.data(), 300);
  for (std::size_t q = 0; q < zout.size(); ++q) {
    const C want = g(C(zin[2 * q]));
    EXPECT_LE(std::abs(C(zout[q]) - want), 1e-5 * std::max(1.0, std::abs(want))) << q;
  }
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
