// The local executor: the reference loop nest against hand-computed results, every strategy
// against the reference on a table of workloads in f32 and f64 (and complex products), deadlines,
// and the refusal of bad parameters.
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
#include <filesystem>
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
#include "einsumdb/executor/real_form.hpp"
#include "einsumdb/executor/small_gemm.hpp"
#include "einsumdb/tests/support/executor_cases.hpp"
#include "einsumdb/tests/support/temp_dir.hpp"
#include "einsumdb/tuner/tuner.hpp"

namespace einsumdb {
namespace {

using testing::binary_spec;
using testing::terms_of;

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
    {"ii,ij->j", "", {"A=3x3", "B=3x8"}, false},               // diagonal of the smaller operand
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

// Every candidate the tuner enumerates for `bound`'s einsum, on one and two threads, agrees with
// the reference (relative to the size of each row's terms, as verification judges it) and returns
// each row in its promoted dtype; counts the candidates run per strategy in `compared`.
void expect_every_candidate_agrees(const Bound& bound, const std::string& what,
                                   std::map<std::string, int>& compared) {
  const BatchedEinsum& e = bound.einsum();
  std::vector<double> magnitudes;
  const Results ref = run_reference(bound, &magnitudes);
  SpaceOptions space;
  space.threads = {1, 2};
  for (const auto& c : candidates(e, bound.lengths(), space)) {
    const Results got = execute(bound, c.strategy, c.params);
    ASSERT_EQ(got.size(), ref.size());
    for (std::size_t r = 0; r < ref.size(); ++r) {
      const Dtype d = result_dtype(e, r);
      EXPECT_EQ(got[r].dtype(), d) << c.strategy << " " << what;
      EXPECT_LE(max_relative_error(got[r], ref[r], magnitudes[r]),
                tolerance(d, terms_of(e, bound.lengths())))
          << c.strategy << " " << c.params.dump() << " " << what << " row " << r;
    }
    ++compared[c.strategy];
  }
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
      expect_every_candidate_agrees(bound, w.einsum + " " + std::string(to_string(dtype)),
                                    compared);
    }
  }
  EXPECT_GT(rejected, 40);
  for (const char* s :
       {"loop_nest", "ttgt", "loop_over_gemm", "tensor_gemm", "batch_fused", "contraction_tree"})
    EXPECT_GT(compared[s], 10) << s;
  EXPECT_GT(compared["loop_nest"], 300);
}

// The same in complex numbers: every candidate for every workload complex numbers allow (⊗ mul,
// add or sub, ⊕ sum), in c64, in c128, and mixed (the first array f64, the others c64, which numpy
// computes in c128), on one and two threads, agrees with the reference and has the promoted
// dtype. Every strategy but direct (too small a table for it) computes some of them.
TEST(Strategies, EveryCandidateAgreesWithTheReferenceInComplex) {
  std::map<std::string, int> compared;
  for (const std::string dtypes : {"c64", "c128", "mixed"}) {
    for (const auto& w : kWorkloads) {
      BatchedEinsum e = spec_of(w, dtypes == "c128" ? Dtype::c128 : Dtype::c64);
      if (dtypes == "mixed") e.arrays.begin()->second.dtype = Dtype::f64;
      if (complex_rejects(e)) continue;
      const Arrays arrays = random_arrays(e, 11);
      const Bound bound(e, arrays);
      for (std::size_t r = 0; r < e.batch.size(); ++r)  // a row of the f64 array alone is real
        EXPECT_TRUE(is_complex(result_dtype(e, r)) || dtypes == "mixed");
      expect_every_candidate_agrees(bound, w.einsum + " " + dtypes, compared);
    }
  }
  for (const char* s :
       {"loop_nest", "ttgt", "loop_over_gemm", "tensor_gemm", "batch_fused", "contraction_tree"})
    EXPECT_GT(compared[s], 5) << s;
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
// mixed real and complex operands promote as numpy does (f64 with c64 is c128); orders (max, min)
// are refused for complex.
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
    for (const char* strategy : {"reference", "ttgt", "loop_over_gemm", "tensor_gemm", "loop_nest"})
      for (int threads : {1, 2}) {
        const Results got = execute(bound, strategy, {{"threads", threads}});
        ASSERT_EQ(got.at(0).dtype(), dtype) << strategy;
        EXPECT_LE(max_relative_error(got.at(0), want), tol) << strategy << " " << to_string(dtype);
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

// W of the real form (real_form.hpp) from operands large enough to be expanded on several
// threads (kThreadedCopyElements), on 1, 2 and 3 (ranges of an axis shared unevenly): each element
// y of the expanded operand as [[y₀, y₁], [−y₁, y₀]] at W's q and p, wherever its parts lie: beside
// y's last index where it is summed (q 1) or kept (p 1), or apart from it (no summed index). And
// a product through it on two threads against the reference, in real form ("stream_rows" false:
// by default this one streams its large operand as it lies, complex_lines.hpp).
TEST(Strategies, RealFormExpandsLargeOperandsOnSeveralThreads) {
  struct Case {
    const char* spec;
    std::map<char, int> len;
    const char* parts;  // which part of W lies beside y's last index: "q", "p" or neither ("")
  };
  for (const Case& c : {Case{"abk,kj->abj", {{'a', 5}, {'b', 13}, {'k', 16384}, {'j', 70}}, "q"},
                        Case{"kab,kjb->ab", {{'k', 1024}, {'a', 8}, {'b', 130}, {'j', 9}}, "p"},
                        Case{"ab,abc->ab", {{'a', 1000}, {'b', 1100}, {'c', 2}}, ""}}) {
    const BatchedEinsum e = binary_spec(c.spec, c.len, Dtype::c64);
    const Arrays arrays = random_arrays(e, 17);
    const Bound bound(e, arrays);
    for (int threads : {1, 2, 3}) {
      const RealForm f = real_form(bound, 0, threads);
      ASSERT_EQ(f.expanded, 0) << c.spec;  // (the smaller operand)
      const Tensor& y = arrays.at(e.batch[0][0]);
      ASSERT_GE(y.size(), kernels::kThreadedCopyElements) << c.spec << ": too small to share out";
      const Tensor& w = f.arrays.at(f.e.batch[0][0]);
      const std::string& labels = f.e.inputs[0];
      const auto ws = w.strides();
      std::vector<std::int64_t> at;  // W's strides along y's axes, in y's order
      std::int64_t q = 0, p = 0;
      for (std::size_t b = 0; b < labels.size(); ++b)
        (labels[b] == f.summed ? q : labels[b] == f.part ? p : at.emplace_back()) = ws[b];
      const bool pairs = at.back() == 2;  // the two parts of a row of W side by side
      EXPECT_EQ(pairs && q == 1 ? "q" : pairs && p == 1 ? "p" : "", std::string(c.parts)) << c.spec;
      const auto shape = y.shape();
      const float* wd = w.data<float>();
      std::int64_t wrong = 0;
      for (std::int64_t k = 0; k < y.size(); ++k) {
        std::int64_t o = 0;
        for (std::size_t a = shape.size(), r = static_cast<std::size_t>(k); a-- > 0;) {
          o += static_cast<std::int64_t>(r % static_cast<std::size_t>(shape[a])) * at[a];
          r /= static_cast<std::size_t>(shape[a]);
        }
        const auto v = y.at_complex(k);
        const auto re = static_cast<float>(v.real()), im = static_cast<float>(v.imag());
        wrong += wd[o] != re || wd[o + p] != im || wd[o + q] != -im || wd[o + q + p] != re;
      }
      EXPECT_EQ(wrong, 0) << c.spec << " on " << threads << " threads";
    }
    if (std::string(c.parts) == "q") {
      const Results ref = run_reference(bound);
      EXPECT_LE(max_relative_error(
                    execute(bound, "tensor_gemm", {{"threads", 2}, {"stream_rows", false}}).at(0),
                    ref.at(0)),
                tolerance(Dtype::c64, 16384));
    }
  }
}

// A real operand times a complex one of its precision (real_factor, real_form.hpp): the real form
// reads the real operand as it lies, with no W and no summed parts (x, y·p → z·p). ttgt computes
// it so where the complex operand's last index is in the output (one real GEMM, p in that
// operand's free group: ttgt_reads_real_factor); loop_nest
// where the complex operand holds the output's last index (parts_run_with_output), and tensor_gemm
// there too unless it streams the row as complex lines instead (tensor_gemm_reads_real_factor); the
// others convert it. All three agree with the reference on 1 and 2 threads, the factor A or B, in
// c64, in c128, and f64 beside c64 (computed in c128: B converted, A not).
TEST(Strategies, RealFormReadsARealFactorAsItLies) {
  const std::map<char, int> len = {{'i', 37}, {'j', 29}, {'k', 23}, {'a', 9},
                                   {'b', 5},  {'c', 7},  {'d', 6}};
  const auto mixed = [&](const std::string& spec, Dtype a, Dtype b) {
    BatchedEinsum e = binary_spec(spec, len, a);
    e.arrays.at("B").dtype = b;
    return e;
  };
  EXPECT_EQ(real_factor(mixed("ij,jk->ik", Dtype::f32, Dtype::c64), 0), 0);
  EXPECT_EQ(real_factor(mixed("ij,jk->ik", Dtype::f64, Dtype::c64), 0), 0);  // (in c128)
  EXPECT_EQ(real_factor(mixed("jk,ij->ik", Dtype::c128, Dtype::f64), 0), 1);
  EXPECT_EQ(real_factor(mixed("i,i->", Dtype::f32, Dtype::c64), 0), 0);
  EXPECT_EQ(real_factor(mixed("ij,jk->ik", Dtype::c64, Dtype::f32), 0), 1);
  EXPECT_EQ(real_factor(mixed("ij,jk->ik", Dtype::f32, Dtype::c128), 0), -1);  // f32, not f64
  EXPECT_EQ(real_factor(mixed("ij,jk->ik", Dtype::c64, Dtype::c64), 0), -1);
  EXPECT_EQ(real_factor(mixed("ij,jk->ik", Dtype::f64, Dtype::f64), 0), -1);
  BatchedEinsum added = mixed("ij,jk->ik", Dtype::f32, Dtype::c64);
  added.join = JoinOp::add;
  EXPECT_EQ(real_factor(added, 0), -1);
  EXPECT_TRUE(parts_run_with_output(mixed("ij,jk->ik", Dtype::f32, Dtype::c64), 0));
  EXPECT_TRUE(parts_run_with_output(mixed("i,i->", Dtype::f32, Dtype::c64), 0));
  EXPECT_FALSE(parts_run_with_output(mixed("ij,jk->ik", Dtype::c64, Dtype::f32), 0));  // B holds k
  EXPECT_FALSE(parts_run_with_output(mixed("ij,jk->ik", Dtype::f32, Dtype::c128), 0));
  EXPECT_TRUE(ttgt_reads_real_factor(mixed("ji,jk->ik", Dtype::c64, Dtype::f32), 0));
  EXPECT_TRUE(ttgt_reads_real_factor(mixed("ij,jk->ik", Dtype::f32, Dtype::c64), 0));
  EXPECT_FALSE(ttgt_reads_real_factor(mixed("ij,kj->ik", Dtype::f32, Dtype::c64), 0));  // j summed
  EXPECT_FALSE(ttgt_reads_real_factor(mixed("ij,jk->ik", Dtype::c64, Dtype::c64), 0));

  // tensor_gemm converts it where it would stream the row as complex lines with y's parts beside
  // another index than the output's (TCCG case 2 in c64, B real), and reads it as it lies where
  // they lie beside the same one (case 1, A real), streamed or not.
  const Lengths case2 = {{'a', 156}, {'b', 24}, {'c', 296}, {'d', 312}};
  EXPECT_FALSE(
      tensor_gemm_reads_real_factor(mixed("dca,bd->abc", Dtype::c64, Dtype::f32), 0, case2));
  EXPECT_TRUE(
      tensor_gemm_reads_real_factor(mixed("bda,dc->abc", Dtype::f32, Dtype::c64), 0, case2));
  EXPECT_TRUE(
      tensor_gemm_reads_real_factor(mixed("cad,dcb->ab", Dtype::f32, Dtype::c64), 0, case2));
  EXPECT_FALSE(tensor_gemm_reads_real_factor(mixed("ij,jk->ik", Dtype::c64, Dtype::f32), 0, case2));

  // Each strategy names its own rule (Strategy::reads_real_factor): those three, and no other
  // strategy reads a real factor as it lies; the reference alone takes mixed rows unconverted.
  for (const Strategy& s : builtin_strategies()) {
    EXPECT_EQ(s.mixes_dtypes, s.name == "reference") << s.name;
    const bool reads = s.name == "tensor_gemm" || s.name == "loop_nest" || s.name == "ttgt";
    EXPECT_EQ(static_cast<bool>(s.reads_real_factor), reads) << s.name;
  }
  const auto reads = [&](const char* strategy, const std::string& spec, Dtype a, Dtype b,
                         const Lengths& lengths) {
    return find_strategy(strategy)->reads_real_factor(mixed(spec, a, b), 0, lengths);
  };
  EXPECT_TRUE(reads("tensor_gemm", "bda,dc->abc", Dtype::f32, Dtype::c64, case2));
  EXPECT_FALSE(reads("tensor_gemm", "dca,bd->abc", Dtype::c64, Dtype::f32, case2));
  EXPECT_TRUE(reads("loop_nest", "ij,kj->ik", Dtype::f32, Dtype::c64, {}));  // B holds k
  EXPECT_FALSE(reads("loop_nest", "ji,jk->ik", Dtype::c64, Dtype::f32, {}));
  EXPECT_TRUE(reads("ttgt", "ji,jk->ik", Dtype::c64, Dtype::f32, {}));
  EXPECT_FALSE(reads("ttgt", "ij,kj->ik", Dtype::f32, Dtype::c64, {}));  // j summed

  {  // The layout, and the real operand read in place.
    const BatchedEinsum e = mixed("ij,jk->ik", Dtype::f32, Dtype::c64);
    const Arrays arrays = random_arrays(e, 3);
    const Bound bound(e, arrays);
    const RealForm f = real_form(bound, 0);
    EXPECT_EQ(f.real, 0);
    EXPECT_EQ(f.expanded, -1);
    EXPECT_EQ(f.summed, 0);
    EXPECT_EQ(f.e.inputs, (std::vector<std::string>{"ij", std::string("jk") + f.part}));
    EXPECT_EQ(f.e.output, std::string("ik") + f.part);
    EXPECT_EQ(f.e.arrays.at(f.e.batch[0][0]).dtype, Dtype::f32);
    EXPECT_EQ(f.arrays.at(f.e.batch[0][0]).raw(), arrays.at("A").raw());
    EXPECT_EQ(f.arrays.at(f.e.batch[0][1]).raw(), arrays.at("B").raw());
  }

  struct Case {
    const char* spec;
    Dtype a, b;
  };
  int ran = 0;
  for (const Case& c :
       {Case{"ij,jk->ik", Dtype::f32, Dtype::c64}, Case{"jk,ij->ik", Dtype::c128, Dtype::f64},
        Case{"ij,jk->ik", Dtype::f64, Dtype::c64}, Case{"cad,dcb->ab", Dtype::f32, Dtype::c64},
        Case{"dca,bd->abc", Dtype::c64, Dtype::f32}, Case{"kj,abk->abj", Dtype::c128, Dtype::f64},
        Case{"i,i->", Dtype::f64, Dtype::c128},
        // (the real factor holding the output's last index, read as it lies by ttgt alone, and
        // TCCG case 13's layout, the complex operand's last index summed)
        Case{"ij,jk->ik", Dtype::c64, Dtype::f32}, Case{"bij,bjk->bik", Dtype::c128, Dtype::f64},
        Case{"acd,dbc->ab", Dtype::f32, Dtype::c64}}) {
    const BatchedEinsum e = mixed(c.spec, c.a, c.b);
    ASSERT_GE(real_factor(e, 0), 0) << c.spec;
    const Arrays arrays = random_arrays(e, 11);
    const Bound bound(e, arrays);
    const Results ref = run_reference(bound);
    for (const char* strategy : {"tensor_gemm", "loop_nest", "ttgt"}) {
      if (find_strategy(strategy)->rejects(e)) continue;  // (tensor_gemm: not a dot product)
      for (int threads : {1, 2}) {
        const Results got = execute(bound, strategy, {{"threads", threads}});
        ASSERT_EQ(got.at(0).dtype(), ref.at(0).dtype()) << c.spec;
        EXPECT_LE(max_relative_error(got.at(0), ref.at(0)),
                  tolerance(ref.at(0).dtype(), terms_of(e, bound.lengths())))
            << c.spec << " " << strategy << " on " << threads << " threads";
        ++ran;
      }
    }
  }
  EXPECT_EQ(ran, 58);
}

// A small result summed over many elements, on more threads than it has batch points or loops
// that do not sum (TCCG cases 13 and 14 in miniature): ttgt splits the summed elements among the
// threads and loop_over_gemm its summed loops, each thread summing its share into a buffer of its
// own (the first into the result), the buffers added after (kernels::split_sum). On two and three
// threads, in f64, c128 and c64 (by the 3M method too), both agree with the reference: a share
// lost or added twice would not.
TEST(Strategies, ThreadsSplitTheSumOfASmallResult) {
  const std::map<char, int> n = {{'a', 5}, {'b', 6}, {'c', 24}, {'d', 32}};
  for (const std::string spec : {"acd,dbc->ab", "cad,dcb->ab"})
    for (Dtype dtype : {Dtype::f64, Dtype::c128, Dtype::c64}) {
      const BatchedEinsum e = binary_spec(spec, n, dtype);
      const Arrays arrays = random_arrays(e, 23);
      const Bound bound(e, arrays);
      std::vector<double> magnitudes;
      const Results want = run_reference(bound, &magnitudes);
      for (const char* strategy : {"ttgt", "loop_over_gemm"})
        for (int threads : {2, 3})
          for (bool three_m : {false, true}) {
            if (three_m && !is_complex(dtype)) continue;
            nlohmann::json params = {{"threads", threads}};
            if (three_m) params["gemm3m"] = true;
            const Results got = execute(bound, strategy, params);
            EXPECT_LE(max_relative_error(got.at(0), want.at(0), magnitudes.at(0)),
                      tolerance(dtype, terms_of(e, bound.lengths())))
                << strategy << " " << spec << " " << to_string(dtype) << " " << params.dump();
          }
    }
}

// ttgt and loop_over_gemm with "gemm3m" compute complex products by the 3M method (OpenBLAS's
// ?gemm3m): within the tolerance of the reference, in c64, c128 and mixed f64/c64, on one and two
// threads, in place and permuted after (TCCG case 22's shape), and rounded otherwise than the
// conventional product somewhere (the 3M method forms the imaginary part from a product of sums),
// so that the parameter is seen to reach the BLAS; but ttgt's mixed bik,bkj->bij, one real GEMM
// (B's last index j is in the output: ttgt_reads_real_factor), has no 3M form and its bits stay.
// The tuner's spaces offer it for complex einsums only (ttgt's not where every complex row is such
// a real GEMM), and a real einsum or a value other than true or false is refused.
TEST(Strategies, TtgtAndLoopOverGemmComputeComplexProductsByThe3MMethod) {
  // (loop_over_gemm computes TCCG case 22's shape as matrix-vector products, which have no 3M
  // form, and its space does not offer the parameter there.)
  struct Shape {
    std::string spec;
    std::map<char, int> n;
    std::vector<std::string> strategies;
  };
  const std::vector<Shape> shapes = {
      {"bik,bkj->bij", {{'b', 3}, {'i', 40}, {'k', 48}, {'j', 36}}, {"ttgt", "loop_over_gemm"}},
      {"aecf,bfde->abcd",
       {{'a', 3}, {'b', 5}, {'c', 12}, {'d', 10}, {'e', 9}, {'f', 8}},
       {"ttgt"}}};
  for (const std::string dtypes : {"c64", "c128", "mixed"})
    for (const auto& [spec, n, strategies] : shapes) {
      BatchedEinsum e = binary_spec(spec, n, dtypes == "c128" ? Dtype::c128 : Dtype::c64);
      if (dtypes == "mixed") e.arrays.at("A").dtype = Dtype::f64;
      const Arrays arrays = random_arrays(e, 17);
      const Bound bound(e, arrays);
      std::vector<double> magnitudes;
      const Results want = run_reference(bound, &magnitudes);
      const Dtype d = result_dtype(e, 0);
      for (const std::string& strategy : strategies) {
        const Results plain = execute(bound, strategy, {{"threads", 1}});
        for (int threads : {1, 2}) {
          const Results got = execute(bound, strategy, {{"threads", threads}, {"gemm3m", true}});
          ASSERT_EQ(got.at(0).dtype(), d) << strategy;
          EXPECT_LE(max_relative_error(got.at(0), want.at(0), magnitudes.at(0)),
                    tolerance(d, terms_of(e, bound.lengths())))
              << strategy << " " << spec << " " << dtypes << " threads " << threads;
          // (ttgt computes the mixed product as one real GEMM, real_form.hpp: no 3M form; the
          // same bits as on as many threads without the parameter)
          const bool real_gemm = dtypes == "mixed" && strategy == "ttgt" && spec[0] == 'b';
          Results same;
          if (real_gemm) same = execute(bound, strategy, {{"threads", threads}});
          const Results& base = real_gemm ? same : plain;
          bool differs = false;
          for (std::int64_t k = 0; k < got.at(0).size() && !differs; ++k)
            differs = got.at(0).at_complex(k) != base.at(0).at_complex(k);
          EXPECT_EQ(differs, !real_gemm) << strategy << " " << spec << " " << dtypes
                                         << (real_gemm ? ": bits differ from the real GEMM's"
                                                       : ": the same bits as the conventional "
                                                         "product");
        }
      }
      const auto offers = [&](const std::vector<nlohmann::json>& space) {
        return std::any_of(space.begin(), space.end(),
                           [](const nlohmann::json& p) { return p.contains("gemm3m"); });
      };
      EXPECT_EQ(offers(ttgt_space(e, bound.lengths())), dtypes != "mixed" || spec[0] != 'b')
          << spec;
      EXPECT_EQ(offers(loop_over_gemm_space(e, bound.lengths())), strategies.size() == 2) << spec;
    }
  const BatchedEinsum real = binary_spec("bik,bkj->bij", {{'b', 2}, {'i', 4}, {'k', 3}, {'j', 5}});
  const Arrays ra = random_arrays(real, 3);
  const Bound rb(real, ra);
  for (const auto& space :
       {ttgt_space(real, rb.lengths()), loop_over_gemm_space(real, rb.lengths())})
    for (const auto& p : space) EXPECT_FALSE(p.contains("gemm3m")) << p.dump();
  for (const char* strategy : {"ttgt", "loop_over_gemm"}) {
    EXPECT_NO_THROW(execute(rb, strategy, {{"gemm3m", false}})) << strategy;
    try {
      execute(rb, strategy, {{"gemm3m", true}});
      ADD_FAILURE() << strategy << " took gemm3m for a real einsum";
    } catch (const SpecError& err) {
      EXPECT_NE(std::string(err.what()).find("'gemm3m'"), std::string::npos) << err.what();
      EXPECT_NE(std::string(err.what()).find("real"), std::string::npos) << err.what();
    }
    try {
      execute(rb, strategy, {{"gemm3m", "yes"}});
      ADD_FAILURE() << strategy << " took gemm3m=\"yes\"";
    } catch (const SpecError& err) {
      EXPECT_NE(std::string(err.what()).find("true or false"), std::string::npos) << err.what();
    }
  }
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

// Where the process says its OpenBLAS calls are einsumdb's alone (set_blas_calls_exclusive, as the
// einsumdb command does), parallel_for stops OpenBLAS's worker threads before it starts its own;
// otherwise it leaves them. OpenBLAS starts them again on its next threaded call, which computes
// as before.
TEST(Threads, ParallelForStopsOpenBlasWorkersOnlyWhereTheProcessAllowsIt) {
  if (!dlsym(RTLD_DEFAULT, "blas_thread_shutdown_"))
    GTEST_SKIP() << "this OpenBLAS has no pool of threads of its own";
  const auto count = [] {  // of this process
    std::int64_t n = 0;
    for ([[maybe_unused]] const auto& entry :
         std::filesystem::directory_iterator("/proc/self/task"))
      ++n;
    return n;
  };
  // Once the count holds still: a thread that has just been joined, or one OpenBLAS is starting,
  // can be in /proc a moment longer (or sooner) than the call that made it takes.
  const auto threads = [&] {
    std::int64_t n = count();
    for (int i = 0; i < 100; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      const std::int64_t m = count();
      if (m == n) break;
      n = m;
    }
    return n;
  };
  const int saved = openblas_get_num_threads();
  openblas_set_num_threads(2);
  constexpr int n = 600;  // large enough for OpenBLAS to split it between its threads
  std::vector<double> a(n * n, 1.0), b(n * n, 2.0), c(n * n, 0.0);
  const auto gemm = [&] {
    std::fill(c.begin(), c.end(), 0.0);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a.data(), n, b.data(), n,
                0.0, c.data(), n);
  };
  gemm();
  const std::int64_t with_pool = threads();
  const auto nothing = [](std::int64_t, std::int64_t) {};
  kernels::parallel_for(2, 2, nothing);
  EXPECT_EQ(threads(), with_pool) << "the pool was stopped though the process did not allow it";
  set_blas_calls_exclusive(true);
  kernels::parallel_for(2, 2, nothing);
  const std::int64_t stopped = threads();
  kernels::parallel_for(2, 2, nothing);  // a pool already stopped: nothing to do
  set_blas_calls_exclusive(false);
  EXPECT_LT(stopped, with_pool);
  EXPECT_EQ(threads(), stopped);
  gemm();
  EXPECT_EQ(threads(), with_pool);  // started again
  EXPECT_EQ(c[0], 2.0 * n);
  EXPECT_EQ(c[n * n - 1], 2.0 * n);
  openblas_set_num_threads(saved);
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
  EXPECT_NE(message("tensor_gemm", {{"stream_line_tiles", "off"}})
                .find("'stream_line_tiles' must be true"),
            std::string::npos);
  EXPECT_EQ(message("tensor_gemm", {{"stream_line_tiles", false}}), "no error");
  EXPECT_NE(message("tensor_gemm", {{"tiles_across", "rows"}}).find("'tiles_across' must be true"),
            std::string::npos);
  EXPECT_EQ(message("tensor_gemm", {{"tiles_across", false}}), "no error");
  EXPECT_NE(message("tensor_gemm", {{"rows_fetch", "l3"}}).find("'rows_fetch' must be \"l1\""),
            std::string::npos);
  EXPECT_EQ(message("tensor_gemm", {{"rows_fetch", "l1"}}), "no error");
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

}  // namespace
}  // namespace einsumdb
