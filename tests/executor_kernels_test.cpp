// The executor's building blocks: libxsmm's small products and packed edge tiles against plain
// loops, a tensor's permutation into another layout, and a product computed in chunks.
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
#include "einsumdb/executor/expression.hpp"
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

// A copy of 2^20 elements or more is split among the caller's threads along the axis farthest
// apart in both layouts: a gather into row-major order from [1][100][130][97] (split along the
// 130, which is 97 and 9,700 elements apart), with and without a function, and its inverse
// scatter; and a 2-D transpose of 1,100 × 1,000, where every axis is one layout's unit stride and
// the ranges hold whole lines of it (split after 544 rows, not 550). On two threads, every
// element lands where one thread puts it.
TEST(Permute, LargeCopiesSplitAmongThreadsPutEveryElementInPlace) {
  struct Case {
    std::vector<std::int64_t> shape, strides;  // the source's strides per axis of the result
  };
  const std::vector<Case> cases = {{{1, 130, 97, 100}, {130 * 97 * 100, 97, 1, 130 * 97}},
                                   {{1100, 1000}, {1, 1100}}};
  const Expression f = Expression::parse("2*U+1");
  for (const auto& c : cases) {
    std::int64_t total = 1;
    for (auto len : c.shape) total *= len;
    ASSERT_GE(total, kernels::kThreadedCopyElements);
    std::vector<float> src(static_cast<std::size_t>(total));
    for (std::size_t q = 0; q < src.size(); ++q) src[q] = float(q % 9973) * 0.5f;
    // Each element of the result in row-major order: its offset in the source.
    std::vector<std::int64_t> from;
    std::vector<std::int64_t> at(c.shape.size(), 0);
    for (std::int64_t k = 0; k < total; ++k) {
      std::int64_t o = 0;
      for (std::size_t a = 0; a < at.size(); ++a) o += at[a] * c.strides[a];
      from.push_back(o);
      for (std::size_t a = at.size(); a-- > 0;)
        if (++at[a] < c.shape[a])
          break;
        else
          at[a] = 0;
    }
    for (const Expression* fn : {static_cast<const Expression*>(nullptr), &f}) {
      std::vector<float> got(src.size(), -1.0f);
      kernels::copy_strided(src.data(), c.shape, c.strides, got.data(), fn, 2);
      for (std::int64_t k = 0; k < total; ++k) {
        const float x = src[static_cast<std::size_t>(from[static_cast<std::size_t>(k)])];
        ASSERT_EQ(got[static_cast<std::size_t>(k)], fn ? 2 * x + 1 : x)
            << "element " << k << " of " << c.shape.size() << " axes"
            << (fn ? " through 2*U+1" : "");
      }
      if (fn) continue;
      std::vector<float> back(src.size(), -1.0f);
      kernels::copy_into_strided(got.data(), c.shape, back.data(), c.strides, 0, 2);
      EXPECT_EQ(back, src) << c.shape.size() << " axes";
    }
  }
}

// kernels::split_sum on three threads over a 128 × 128 result into a strided output: every share
// lands once (share s writes s + 1 everywhere: 6 in all), and the two threads' buffers (256 KB) are
// one block of tensor memory, mapped on the first call and recycled on the calls after.
TEST(SplitSum, SharesAddUpAndTheirBuffersAreRecycledTensorMemory) {
  constexpr std::int64_t m = 128, n = 128, rs = 1, cs = 130;  // column-major, padded columns
  std::vector<double> c(static_cast<std::size_t>(cs * n), -1.0);
  const auto share = [&](std::int64_t s, double* to, std::int64_t to_rs, std::int64_t to_cs) {
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) to[i * to_rs + j * to_cs] = static_cast<double>(s + 1);
  };
  if (recycles_large_tensors()) release_recycled_memory();
  const std::uint64_t before = fresh_mappings();
  for (int call = 0; call < 4; ++call) {
    kernels::split_sum(3, m, n, c.data(), rs, cs, share);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j)
        ASSERT_EQ(c[static_cast<std::size_t>(i * rs + j * cs)], 6.0)
            << "call " << call << ", element (" << i << ", " << j << ")";
    if (recycles_large_tensors()) {
      EXPECT_EQ(fresh_mappings(), before + 1) << "call " << call;
    }
  }
  EXPECT_EQ(c[static_cast<std::size_t>(m)], -1.0);  // the padding between columns: untouched
}

// ttgt's default orders: M and K in the left operand's order and N in the right one's, but where an
// operand is packed whatever the orders, its free indices in the output's order if the product can
// then be written in place: TCCG case 20 (N as cd, not dc) and case 1 (M as ab, not ba). Not where
// the operands are read in place (ik,kj->ij; kj,ik->ij keeps N as in its operand), nor where the
// output cannot take the product in place anyway (TCCG case 31).
TEST(Product, TtgtOrdersAPackedOperandsIndicesAsTheOutputWhereThatWritesInPlace) {
  const auto orders = [](const std::string& x, const std::string& y, const std::string& z) {
    BatchedEinsum e;
    e.inputs = {x, y};
    e.output = z;
    const GemmGroups g = ttgt_groups(e);
    return g.m + "," + g.n + "," + g.k;
  };
  EXPECT_EQ(orders("aebf", "dfce", "abcd"), "ab,cd,ef");
  EXPECT_EQ(orders("bda", "dc", "abc"), "ab,c,d");
  EXPECT_EQ(orders("ik", "kj", "ij"), "i,j,k");
  EXPECT_EQ(orders("ikl", "lkj", "ij"), "i,j,kl");
  EXPECT_EQ(orders("dega", "gfbc", "abcdef"), "dea,fbc,g");
  EXPECT_EQ(orders("pbda", "pdc", "pcab"), "ab,c,d");  // a batch index outside
  // ... and the products so ordered agree with the reference, in f64 and c128.
  for (const std::string spec : {"aebf,dfce->abcd", "bda,dc->abc", "pbda,pdc->pcab"})
    for (const char* dtype : {"f64", "c128"}) {
      SpecFlags f;
      const auto arrow = spec.find("->"), comma = spec.find(',');
      const auto shape = [](const std::string& name, const std::string& labels) {
        std::string s = name + "=";
        for (std::size_t k = 0; k < labels.size(); ++k)
          s += (k ? "x" : "") + std::to_string(3 + (labels[k] - 'a') % 4);
        return s;
      };
      f.shapes = {shape("A", spec.substr(0, comma)),
                  shape("B", spec.substr(comma + 1, arrow - comma - 1))};
      f.dtypes = {dtype};
      const BatchedEinsum e = read_spec_argument(spec, f);
      const Arrays arrays = random_arrays(e, 7);
      const Bound bound(e, arrays);
      const Results want = run_reference(bound);
      EXPECT_LE(max_relative_error(execute(bound, "ttgt").at(0), want.at(0)),
                tolerance(e.arrays.begin()->second.dtype, terms_of(e, bound.lengths())))
          << spec << " " << dtype;
    }
}

// A result the BLAS cannot write in place is computed into scratch chunk by chunk and each chunk
// scattered into its box of the result: cut at an M index, at a batch index, at an N index
// where the first row index is the result's unit stride, into the smallest chunks the result's
// cache lines allow, with a last partial chunk, and whole; f32, f64 and c128 (but for a function
// of an operand), one and two threads.
// Every element equals the reference's; the scratch holds one chunk, except where neither the
// first row index nor the first column index may be cut (a chunk would write partial lines), or
// where a chunk cut by columns would have too few of them. A narrow chunk is computed
// column-major where OpenBLAS computes it.
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
      // narrow chunks, computed column-major (kColumnMajorChunk) where OpenBLAS computes them
      // (160 summed elements, more than libxsmm takes): 512 rows by 32 columns cut at a, 32
      // values of it a chunk of 8192 elements, 39 of 10000 (the last 25), or whole; the least
      // chunk, 160 rows (asked for one element), stays row-major
      {"ack,kb->abc", {{'a', 64}, {'c', 8}, {'k', 160}, {'b', 32}}, {1, 8192, 10000, 1 << 20}},
      // 64 of 160 columns a chunk (cut at j, the first row index i the result's unit stride),
      // each 512 rows long, computed row-major (libxsmm's; in c128 OpenBLAS's, but summing fewer
      // than kColumnMajorDepth elements)
      {"iek,kj->eji",
       {{'i', 16}, {'e', 32}, {'k', 2}, {'j', 160}},
       {1000, 32768, 1 << 20},
       true,
       false,
       32768},
      // 512 of 768 columns a chunk (cut at j, the first row index i the result's unit stride),
      // each 4096 rows long, the last 256 columns; or whole. Column-major in c128 (OpenBLAS's,
      // summing kColumnMajorDepth elements; in f32 and f64 libxsmm's) but for the whole result,
      // whose rows are fewer than kColumnMajorChunk times its columns
      {"iek,kj->eji", {{'i', 16}, {'e', 256}, {'k', 64}, {'j', 768}}, {1 << 21, 1 << 22}},
      // TCCG case 2's shape: 128 rows by 3 columns, one chunk (c is the result's unit stride),
      // column-major, its sum of 600 split between two threads
      {"dca,bd->abc", {{'a', 8}, {'b', 3}, {'c', 16}, {'d', 600}}, {1 << 20}, false},
      // e the result's unit stride, d (the first column) of stride 6: one chunk
      {"ebaf,dcf->abcde",
       {{'a', 3}, {'b', 4}, {'c', 5}, {'d', 3}, {'e', 6}, {'f', 4}},
       {1, 100},
       false},
  };
  for (const auto& c : cases)
    for (Dtype dtype : {Dtype::f32, Dtype::f64, Dtype::c128}) {
      // (a function of a complex array is evaluated before a strategy runs: strategies.cpp)
      if (dtype == Dtype::c128 && c.function) continue;
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
      // M and K in A's order, N in B's, whichever operands are packed: the cuts these cases
      // describe are of these orders.
      GemmGroups groups = gemm_groups(e);
      groups.m = in_order_of(groups.m, a);
      groups.n = in_order_of(groups.n, b);
      groups.k = in_order_of(groups.k, a);
      for (std::int64_t chunk : c.chunks)
        for (int threads : {1, 2}) {
          Tensor got(dtype, want.shape());
          auto run = [&](auto type) {
            using T = decltype(type);
            auto make = [&](std::int64_t elements) {
              return kernels::Product<T>(groups, len, {a, x.strides()}, {b, y.strides()},
                                         {e.output, got.strides()}, c.function, false, elements);
            };
            const kernels::Product<T> p = make(chunk);
            const bool narrow = c.einsum == "dca,bd->abc" ||
                                (c.einsum == "ack,kb->abc" && chunk >= 8192) ||
                                (c.einsum == "iek,kj->eji" && chunk == 1 << 21 &&
                                 dtype == Dtype::c128 && c.lengths.at('k') == 64);
            EXPECT_EQ(p.column_major_chunks(), narrow) << c.einsum << " chunks of " << chunk;
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
          else if (dtype == Dtype::f64)
            run(double{});
          else
            run(std::complex<double>{});
          EXPECT_LE(max_relative_error(got, want), tol)
              << c.einsum << " " << to_string(dtype) << " chunks of " << chunk << ", " << threads
              << " thread(s)";
        }
    }
}

// Each chunk's GEMM packs all of B, so a chunk holds at least as many rows as the product sums
// (kChunkDepth): `ack,kb->abc` summing 96 elements over 512 rows (a, c) of 16 columns, asked for
// chunks of one element, computes 12 values of a (96 rows) at a time, and lands in place.
TEST(Product, AChunkHoldsAsManyRowsAsTheProductSums) {
  const std::map<char, std::int64_t> len{{'a', 64}, {'c', 8}, {'k', 96}, {'b', 16}};
  static_assert(96 < kernels::kChunkDepth);
  SpecFlags f;
  f.shapes = {"A=64x8x96", "B=96x16"};
  const BatchedEinsum e = read_spec_argument("ack,kb->abc", f);
  const Arrays arrays = random_arrays(e, 3);
  const Bound bound(e, arrays);
  const Results want_all = run_reference(bound);
  const Tensor& want = want_all.at(0);
  const Tensor &x = *bound.operand(0, 0).tensor, &y = *bound.operand(0, 1).tensor;
  Tensor got(Dtype::f64, want.shape());
  const GemmGroups groups = gemm_groups(e);
  ASSERT_EQ(groups.m, "ac");
  auto make = [&](std::int64_t elements) {
    return kernels::Product<double>(groups, len, {"ack", x.strides()}, {"kb", y.strides()},
                                    {"abc", got.strides()}, false, false, elements);
  };
  const std::int64_t operands =
      make(std::numeric_limits<std::int64_t>::max()).scratch() - want.size();
  const kernels::Product<double> p = make(1);
  EXPECT_EQ(p.scratch() - operands, 96 * 16);
  std::vector<double> scratch(static_cast<std::size_t>(p.scratch()));
  p.run(x.data<double>(), nullptr, y.data<double>(), nullptr, got.data<double>(), scratch.data(),
        1);
  EXPECT_LE(max_relative_error(got, want), tolerance(Dtype::f64, 96));
}

}  // namespace
}  // namespace einsumdb
