// tensor_gemm's stages, each on its own (executor/tensor_gemm/): the scatter tables, the blocking,
// the packing, the micro-kernel, the write-out, the macro-kernel and the streamed algorithm; then
// the whole strategy against the reference, on the shapes each of its choices is made for.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "einsumdb/canon/metrics.hpp"
#include "einsumdb/executor/deadline.hpp"
#include "einsumdb/executor/execute.hpp"
#include "einsumdb/executor/isa.hpp"
#include "einsumdb/executor/tensor_gemm/blocking.hpp"
#include "einsumdb/executor/tensor_gemm/complex_lines.hpp"
#include "einsumdb/executor/tensor_gemm/line_kernel.hpp"
#include "einsumdb/executor/tensor_gemm/macro_kernel.hpp"
#include "einsumdb/executor/tensor_gemm/micro_kernel.hpp"
#include "einsumdb/executor/tensor_gemm/packing.hpp"
#include "einsumdb/executor/tensor_gemm/scatter.hpp"
#include "einsumdb/executor/tensor_gemm/streamed.hpp"
#include "einsumdb/executor/tensor_gemm/wide_kernel.hpp"
#include "einsumdb/executor/tensor_gemm/write_out.hpp"
#include "einsumdb/executor/variants.hpp"
#include "einsumdb/tests/support/executor_cases.hpp"
#include "einsumdb/tuner/tuner.hpp"

namespace einsumdb::tensor_gemm {
namespace {

using Lengths = std::map<char, std::int64_t>;

std::vector<std::int64_t> entries(const Table& t) {
  return std::vector<std::int64_t>(t.data(), t.data() + t.size());
}

Table table(const std::vector<std::int64_t>& v) {
  Table t(static_cast<std::int64_t>(v.size()));
  std::copy(v.begin(), v.end(), t.data());
  return t;
}

// n values of T from a fixed seed, in memory aligned to a cache line (a Tensor's).
template <typename T>
Tensor random_values(std::int64_t n, unsigned seed) {
  Tensor t(std::is_same_v<T, double> ? Dtype::f64 : Dtype::f32, {n});
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  for (std::int64_t i = 0; i < n; ++i) t.data<T>()[i] = static_cast<T>(u(rng));
  return t;
}

// ---- scatter tables

TEST(Scatter, OffsetsListTheGroupRowMajorAtTheTensorsStrides) {
  // A tensor "abc" of 2 × 3 × 4, row-major; the group "ca" (a fastest), and "cz" with z absent.
  const Lengths len{{'a', 2}, {'b', 3}, {'c', 4}, {'z', 3}};
  const std::vector<std::int64_t> strides{12, 4, 1};
  const Table ca = offsets("ca", len, "abc", strides);
  ASSERT_EQ(ca.size(), 8);
  for (std::int64_t c = 0; c < 4; ++c)
    for (std::int64_t a = 0; a < 2; ++a) EXPECT_EQ(ca[c * 2 + a], c * 1 + a * 12);
  const Table cz = offsets("cz", len, "abc", strides);
  ASSERT_EQ(cz.size(), 12);
  for (std::int64_t c = 0; c < 4; ++c)
    for (std::int64_t z = 0; z < 3; ++z) EXPECT_EQ(cz[c * 3 + z], c);
  EXPECT_EQ(offsets("", len, "abc", strides).size(), 1);  // a scalar: one entry, offset 0
  EXPECT_EQ(offsets("", len, "abc", strides)[0], 0);
}

TEST(Scatter, SpacingIsEvenPerBlockOrUneven) {
  const Table t = table({0, 2, 4, 6, 10, 11, 13, 14, 20});
  EXPECT_EQ(spacing(t, 4), (std::vector<std::int64_t>{2, kUneven, 1}));
  EXPECT_EQ(spacing(t, 3), (std::vector<std::int64_t>{2, kUneven, kUneven}));
  EXPECT_EQ(spacing(table({5, 5, 5}), 3), (std::vector<std::int64_t>{0}));
}

TEST(Scatter, UnitRunsAreUnevenBlocksOfWholeRuns) {
  // Blocks of 16: runs of 8 at 0 and 100; runs of 8 then 7 and a stray one; one even block.
  std::vector<std::int64_t> v;
  for (std::int64_t i = 0; i < 8; ++i) v.push_back(i);
  for (std::int64_t i = 0; i < 8; ++i) v.push_back(100 + i);
  for (std::int64_t i = 0; i < 8; ++i) v.push_back(200 + i);
  for (std::int64_t i = 0; i < 7; ++i) v.push_back(300 + i);
  v.push_back(400);
  for (std::int64_t i = 0; i < 16; ++i) v.push_back(500 + 3 * i);
  const Table t = table(v);
  const auto step = spacing(t, 16);
  EXPECT_EQ(unit_runs(t, 16, 8, step), (std::vector<char>{1, 0, 0}));
}

TEST(Scatter, LineGroupsStartWhereRowsContinueEachOthersLines) {
  // MR = 2, a line of 4: panels 0-3 hold rows at 100 + 10·i + j (panel j, row i), a group; panels
  // 4-7 hold rows that do not continue each other.
  const std::int64_t mr = 2, line = 4;
  std::vector<std::int64_t> cm;
  for (std::int64_t j = 0; j < line; ++j)
    for (std::int64_t i = 0; i < mr; ++i) cm.push_back(100 + 10 * i + j);
  for (std::int64_t k = 0; k < 8; ++k) cm.push_back(1000 + 7 * k);
  EXPECT_EQ(line_groups(table(cm), mr, line), (std::vector<char>{1, 0, 0, 0, 0, 0, 0, 0}));
  // Without a group: nothing, not a vector of zeros.
  cm.erase(cm.begin(), cm.begin() + 8);
  EXPECT_TRUE(line_groups(table(cm), mr, line).empty());
}

// ---- blocking

MicroKernel<double> shape_of_kernel(std::int64_t mr, std::int64_t nr, std::int64_t mc,
                                    std::int64_t kc) {
  MicroKernel<double> k;  // the sizes alone: no kernel to run
  k.mr = k.packmr = mr;
  k.nr = k.packnr = nr;
  k.mc = mc;
  k.kc = kc;
  k.nc = 4080;
  return k;
}

// The wide micro-kernel runs where the kernels run AVX-512 and the sum takes several of BLIS's
// passes: where "kernel" says wide, or by default in doubles over an output beyond the cache on an
// Intel processor. It fetches its tiles' lines during the sum (fetches_tile), so that its passes
// over a large output stay KC long where BLIS's kernel's grow to up to twice that.
TEST(Blocking, TheWideKernelTakesSumsOfSeveralPasses) {
  const std::int64_t kc = MicroKernel<double>::get().kc, several = 4 * kc;
  EXPECT_EQ(wide_kernel_runs<double>(several, 1e3, true), streams());
  EXPECT_EQ(wide_kernel_runs<float>(4 * MicroKernel<float>::get().kc, 1e3, true), streams());
  EXPECT_FALSE(wide_kernel_runs<double>(kc, 1e9, true));  // one pass
  EXPECT_FALSE(wide_kernel_runs<double>(several, 1e9, false));
  EXPECT_EQ(wide_kernel_runs<double>(several, 1e9, std::nullopt),
            streams() && __builtin_cpu_is("intel"));
  EXPECT_FALSE(wide_kernel_runs<double>(several, 1e6, std::nullopt));  // the cache holds it
  EXPECT_FALSE(wide_kernel_runs<float>(4 * MicroKernel<float>::get().kc, 1e9, std::nullopt));

  auto k = shape_of_kernel(16, 14, 240, 256);
  Contraction p;
  p.K = 3000;
  block_sizes(k, p, true, 16);
  EXPECT_EQ(p.kc, 500);  // six passes of up to 512
  k.fetches_tile = true;
  block_sizes(k, p, true, 16);
  EXPECT_EQ(p.kc, 256);
}

TEST(Blocking, TheSummedElementsGoInOnePassUpToAQuarterOverKC) {
  const auto k = shape_of_kernel(8, 24, 72, 256);
  Contraction p;
  p.K = 320;  // 256 + 64: one pass, and MC rows scaled by KC over the depth, in whole panels
  block_sizes(k, p, false, k.mr);
  EXPECT_EQ(p.kc, 320);
  EXPECT_EQ(p.mc, 72 * 256 / 320 / 8 * 8);
  p.K = 321;  // past the quarter: BLIS's KC
  block_sizes(k, p, false, k.mr);
  EXPECT_EQ(p.kc, 256);
  EXPECT_EQ(p.mc, 72);
  // An output too large for the cache: passes of up to 2 KC in equal shares.
  p.K = 1000;
  block_sizes(k, p, true, k.mr);
  EXPECT_EQ(p.kc, 500);
  // A block holds a whole line group however deep it is.
  p.K = 64;
  block_sizes(k, p, false, 8 * 64);
  EXPECT_EQ(p.mc, 8 * 64);
  // With our own micro-kernel: BLIS's KC however large the output, and blocks of A at most a third
  // of L2 (in whole panels), never fewer rows than a panel.
  p.own_tiles = true;
  p.K = 1000;
  block_sizes(k, p, true, k.mr);
  EXPECT_EQ(p.kc, 256);
  EXPECT_EQ(p.mc, std::min<std::int64_t>(72, l2_bytes() / 3 / (256 * 8) / 8 * 8));
  const auto wide = shape_of_kernel(8, 24, 4000, 256);
  block_sizes(wide, p, true, wide.mr);
  EXPECT_EQ(p.mc, std::max<std::int64_t>(8, l2_bytes() / 3 / (256 * 8) / 8 * 8));
  EXPECT_LT(p.mc * 256 * 8, l2_bytes() / 3 + 8 * 256 * 8);
}

// A block's tiles go along its columns by default where our kernel writes them from its registers
// in one pass, their rows in runs of a line (16 doubles as two runs of 8) and at least half the
// columns a line after the last; down the rows wherever any of those fails, and where a tile's
// rows are a single line.
TEST(Blocking, TilesGoAlongTheColumnsWhereTheColumnsContinueTheirRunsOfRows) {
  const auto k = shape_of_kernel(16, 14, 2560, 256);
  Contraction p;
  p.line_tiles = true;
  p.M = 64, p.N = 28, p.K = p.kc = 24;
  p.row_runs = {1, 1, 1, 1};
  p.cn = Table(p.N);
  const auto columns = [&](auto at) {
    for (std::int64_t j = 0; j < p.N; ++j) p.cn[j] = at(j);
  };
  columns([](std::int64_t j) { return 8 * j + 1000 * (j / 16); });  // 26 of 27 steps a line
  EXPECT_TRUE(tiles_across_by_default(k, p));
  EXPECT_FALSE(tiles_across_by_default(shape_of_kernel(8, 24, 72, 256), p));  // a line of rows
  p.line_tiles = false;
  EXPECT_FALSE(tiles_across_by_default(k, p));
  p.line_tiles = true, p.kc = 12;  // two passes: the second adds to the output
  EXPECT_FALSE(tiles_across_by_default(k, p));
  p.kc = 24, p.row_runs[0] = 0;  // rows in one run of 16
  EXPECT_FALSE(tiles_across_by_default(k, p));
  p.row_runs[0] = 1;
  columns([](std::int64_t j) { return 16 * j; });  // two lines apart
  EXPECT_FALSE(tiles_across_by_default(k, p));
  columns([](std::int64_t j) { return 8 * j + 1000 * (j / 2); });  // half of them a line on
  EXPECT_TRUE(tiles_across_by_default(k, p));
  columns([](std::int64_t j) { return 8 * j + 1000 * (j % 2); });  // none
  EXPECT_FALSE(tiles_across_by_default(k, p));
}

TEST(Blocking, TilesOfSummedIndicesLeaveEachPassWholeLines) {
  // A line of X's index per line of Y's, unless a pass of KC would then not hold a whole tile:
  // floats with a KC of 128 take 8 of each of 16 lines per pass.
  EXPECT_EQ(sum_tile<double>(shape_of_kernel(6, 8, 72, 256)), 8);
  EXPECT_EQ(sum_tile<float>(shape_of_kernel(6, 16, 168, 256)), 16);
  EXPECT_EQ(sum_tile<float>(shape_of_kernel(6, 16, 168, 1024)), 16);
  EXPECT_EQ(sum_tile<double>(shape_of_kernel(16, 14, 144, 128)), 8);
  EXPECT_EQ(sum_tile<float>(shape_of_kernel(6, 16, 168, 128)), 8);
}

// The summed indices of TCCG case 13 in complex numbers in real form (acd,dbc->ab: W = apcdq, the
// expanded acd, against dbcq, real_form.hpp): both run along their parts q, and above them along d
// and along c. The tiles are of d and c, each element's two parts at consecutive depths: a tile of
// 16 floats' depths is 8 values of d (a line of W) for each of 8 values of c, and dbcq's line of 8
// values of c and their parts lies at depths 16 apart in pairs. Lengths that leave partial tiles.
// Parts of any other length are no parts: a summed index of 3 shared at unit stride tiles nothing.
TEST(Blocking, ComplexPartsGoInsideTilesOfTheSummedIndicesAboveThem) {
  const Lengths len{{'a', 3}, {'p', 2}, {'c', 19}, {'d', 21}, {'b', 5}, {'q', 2}};
  const auto strides = [&](const std::string& l) { return kernels::row_major_strides(l, len); };
  const std::int64_t big = std::int64_t{1} << 30;
  const auto r =
      tiles("cdq", len, "apcdq", strides("apcdq"), "dbcq", strides("dbcq"), big, big, 16, 16, true);
  ASSERT_TRUE(r);
  const std::vector<std::int64_t> x = entries(r->x), z = entries(r->z);
  ASSERT_EQ(x.size(), 19u * 21 * 2);
  // Every (c, d, q) once, at the same element of both.
  std::set<std::pair<std::int64_t, std::int64_t>> seen, want;
  for (std::size_t i = 0; i < x.size(); ++i) seen.insert({x[i], z[i]});
  for (std::int64_t c = 0; c < 19; ++c)
    for (std::int64_t d = 0; d < 21; ++d)
      for (std::int64_t q = 0; q < 2; ++q)
        want.insert({c * 42 + d * 2 + q, d * 5 * 19 * 2 + c * 2 + q});
  EXPECT_EQ(seen, want);
  for (std::size_t i = 0; i < x.size(); i += 2) {  // each element's parts side by side
    EXPECT_EQ(x[i + 1], x[i] + 1) << i;
    EXPECT_EQ(z[i + 1], z[i] + 1) << i;
  }
  for (std::int64_t i = 0; i < 16; ++i) EXPECT_EQ(x[static_cast<std::size_t>(i)], x[0] + i);
  for (std::int64_t j = 0; j < 8; ++j)  // a line of dbcq: pairs 16 depths apart
    EXPECT_EQ(z[static_cast<std::size_t>(16 * j)], z[0] + 2 * j) << j;
  // Those pairs are one run of the block's depths, packed through registers (depth_runs).
  const std::vector<DepthRun> runs = depth_runs(z.data(), 256, 16);
  ASSERT_FALSE(runs.empty());
  EXPECT_TRUE(runs[0].pairs);
  EXPECT_EQ(runs[0].step, 16);
  EXPECT_EQ(runs[0].count, 16);
  const Lengths three{{'a', 3}, {'c', 19}, {'d', 21}, {'b', 5}, {'q', 3}};
  const auto s3 = [&](const std::string& l) { return kernels::row_major_strides(l, three); };
  EXPECT_FALSE(tiles("cdq", three, "acdq", s3("acdq"), "dbcq", s3("dbcq"), big, big, 16, 16, true));
}

// With BLIS's AVX2 (Haswell) tile in doubles, 6 rows by a line of columns, blocks at least KC deep
// hold kHaswellRows rows, scaled by KC over their depth like BLIS's MC; shallower ones, other tiles
// and floats, BLIS's MC.
TEST(Blocking, BlocksOfTheHaswellTileHoldMoreRowsWhenDeep) {
  const auto haswell = shape_of_kernel(6, 8, 72, 256);
  ASSERT_TRUE(haswell_tile<double>(haswell));
  Contraction p;
  p.K = 3000;
  block_sizes(haswell, p, false, haswell.mr);
  EXPECT_EQ(p.kc, 256);
  EXPECT_EQ(p.mc, kHaswellRows);
  p.K = 1000;  // an output too large for the cache: two passes of 500
  block_sizes(haswell, p, true, haswell.mr);
  EXPECT_EQ(p.kc, 500);
  EXPECT_EQ(p.mc, kHaswellRows * 256 / 500 / 6 * 6);
  p.K = 24;  // shallower than KC: BLIS's MC, scaled
  block_sizes(haswell, p, false, haswell.mr);
  EXPECT_EQ(p.mc, 72 * 256 / 24 / 6 * 6);
  const auto skx = shape_of_kernel(16, 14, 144, 256);
  EXPECT_FALSE(haswell_tile<double>(skx));
  EXPECT_FALSE(haswell_tile<double>(shape_of_kernel(6, 16, 72, 256)));  // (a line is 8 doubles)
  p.K = 3000;
  block_sizes(skx, p, false, skx.mr);
  EXPECT_EQ(p.mc, 144);
  MicroKernel<float> floats;  // the Haswell tile in floats, 6 by 16: BLIS's MC
  floats.mr = floats.packmr = 6;
  floats.nr = floats.packnr = 16;
  floats.mc = 168;
  floats.kc = 256;
  floats.nc = 4080;
  ASSERT_TRUE(haswell_tile<float>(floats));
  block_sizes(floats, p, false, floats.mr);
  EXPECT_EQ(p.mc, 168);
}

TEST(Blocking, RowsGoInTilesWhereOperandAndOutputRunAlongDifferentIndices) {
  // X "ab" runs along b, Z "ba" along a, both too large for the cache: panels of 16 values of b
  // for each of 8 values of a (a line of Z).
  const Lengths len{{'a', 64}, {'b', 64}};
  const std::int64_t big = std::int64_t{64} << 20, panel = 16, line = 8;
  const Rows r = group_rows("ab", len, "ab", {64, 1}, "ba", {64, 1}, big, big, panel, line, false);
  ASSERT_EQ(r.x.size(), 64 * 64);
  std::set<std::int64_t> seen;
  for (std::int64_t i = 0; i < r.x.size(); ++i) {
    const std::int64_t a = r.x[i] / 64, b = r.x[i] % 64;
    EXPECT_EQ(r.z[i], b * 64 + a) << "entry " << i;  // the same element in both tensors
    seen.insert(r.x[i]);
    if (i % panel) {
      EXPECT_EQ(r.x[i], r.x[i - 1] + 1) << "a panel reads X along b";
    }
  }
  EXPECT_EQ(seen.size(), 64u * 64u);  // every element once
  // Row i of the line's 8 panels continues one line of Z: line groups, at every 8th panel.
  const auto groups = line_groups(r.z, panel, line);
  ASSERT_EQ(groups.size(), 64u * 64u / panel);
  for (std::size_t q = 0; q < groups.size(); ++q) EXPECT_EQ(groups[q], q % line == 0) << q;
  // X with its parts below the group (a complex operand in real form, "abq" at strides 128, 2, 1)
  // and Z "baq": the same tiles, X's and Z's offsets those of the complex elements, where Z is at
  // least half of X; not where it is less, nor where the parts are more than a quarter of a line.
  const Lengths parts{{'a', 64}, {'b', 64}, {'q', 2}};
  const Rows c =
      group_rows("ab", parts, "abq", {128, 2, 1}, "baq", {128, 2, 1}, big, big, panel, line, false);
  ASSERT_EQ(c.x.size(), r.x.size());
  for (std::int64_t i = 0; i < c.x.size(); ++i) {
    EXPECT_EQ(c.x[i], 2 * r.x[i]) << "entry " << i;
    EXPECT_EQ(c.z[i], 2 * r.z[i]) << "entry " << i;
  }
  const Rows third = group_rows("ab", parts, "abq", {128, 2, 1}, "baq", {128, 2, 1}, big, big / 3,
                                panel, line, false);
  const Rows wide = group_rows("ab", {{'a', 64}, {'b', 64}, {'q', 4}}, "abq", {256, 4, 1}, "baq",
                               {256, 4, 1}, big, big, panel, line, false);
  // Tiled, the second panel is the next value of a; in X's order (the larger), the next values of
  // b; in Z's (X no larger), the next values of a.
  EXPECT_EQ(c.x[panel], 128);
  EXPECT_EQ(third.x[panel], 2 * panel);
  EXPECT_EQ(wide.x[panel], panel * 256);
  // Where X fits in the cache, no tiles: the rows follow Z, the tensor that goes to memory.
  const Rows small =
      group_rows("ab", len, "ab", {64, 1}, "ba", {64, 1}, 1 << 20, big, panel, line, false);
  for (std::int64_t i = 1; i < small.z.size(); ++i) EXPECT_EQ(small.z[i], small.z[i - 1] + 1);
}

// Our own micro-kernel writes its tiles from its registers (and the rows and columns follow the
// output) where it runs, in one summed pass, into an output beyond the cache (TCCG's ccsd_t
// shapes: 24 summed, 151 MB in floats); not into an output the cache holds, nor over several
// passes, where the output is read back.
TEST(Blocking, OurKernelWritesTheTilesOfOnePassIntoALargeOutput) {
  const MicroKernel<float>& k = MicroKernel<float>::get();
  EXPECT_EQ(line_tiles_write_out(k, 24, std::int64_t{151} << 20), own_kernel_runs());
  EXPECT_FALSE(line_tiles_write_out(k, 24, std::int64_t{1} << 20));
  EXPECT_FALSE(line_tiles_write_out(k, 4 * k.kc, std::int64_t{151} << 20));
}

TEST(Blocking, APackingSpanCoversALinesWorthOfRowsApart) {
  // Rows "cd" of an operand that runs along c (stride 1) with d at stride 8: the rows of a line
  // lie 72 apart (d's length), so a span of 8 × 72 rows is packed at once, where AVX-512 lets
  // the packing transpose them.
  const auto k = shape_of_kernel(16, 14, 128, 256);
  const Lengths len{{'c', 8}, {'d', 72}};
  Contraction p;
  p.am = offsets("cd", len, "dc", {8, 1});
  p.M = p.am.size();
  p.K = 256;
  block_sizes(k, p, false, k.mr);
  const std::int64_t big = std::int64_t{64} << 20;
  EXPECT_EQ(packing_span(k, p, big), streams() ? 8 * 72 : 0);
  EXPECT_EQ(packing_span(k, p, 1 << 20), 0);  // an operand that fits in the cache
  p.row_lines.assign(static_cast<std::size_t>(p.M / k.mr), 0);
  p.row_lines[0] = 1;
  EXPECT_EQ(packing_span(k, p, big), 0);  // line groups take the blocks' rows
}

// ---- packing

// What pack() must write: panel q, depth d, row i at q·pack_width·depth + d·pack_width + i, the
// element src[row + col], zero past the last row.
template <typename T>
void expect_packed(const T* src, const std::vector<std::int64_t>& row,
                   const std::vector<std::int64_t>& col, std::int64_t width,
                   std::int64_t pack_width, const std::vector<T>& dst) {
  const auto rows = static_cast<std::int64_t>(row.size()),
             depth = static_cast<std::int64_t>(col.size());
  const std::int64_t panels = (rows + width - 1) / width;
  ASSERT_GE(static_cast<std::int64_t>(dst.size()), panels * pack_width * depth);
  for (std::int64_t q = 0; q < panels; ++q)
    for (std::int64_t d = 0; d < depth; ++d)
      for (std::int64_t i = 0; i < pack_width; ++i) {
        const std::int64_t r = q * width + i;
        const T want = i < width && r < rows ? src[row[r] + col[d]] : T{0};
        ASSERT_EQ(dst[q * pack_width * depth + d * pack_width + i], want)
            << "panel " << q << ", depth " << d << ", row " << i;
      }
}

template <typename T>
void pack_both_ways() {
  const Tensor src = random_values<T>(64 * 64, 3);
  const T* s = src.data<T>();
  std::vector<std::int64_t> col{0, 64, 3 * 64, 7 * 64, 8 * 64};
  std::vector<std::int64_t> along(21), gathered(21);
  std::iota(along.begin(), along.end(), 5);  // consecutive rows: copied along them
  for (std::size_t i = 0; i < gathered.size(); ++i)
    gathered[i] = static_cast<std::int64_t>((i * 7) % 61);  // copied element by element
  for (const auto& row : {along, gathered}) {
    std::vector<T> dst(3 * 10 * col.size(), T{-7});
    pack(s, row.data(), static_cast<std::int64_t>(row.size()), col.data(),
         static_cast<std::int64_t>(col.size()), 8, 10, dst.data());
    expect_packed(s, row, col, 8, 10, dst);
  }
}

TEST(Packing, PanelsHoldTheBlockRowByRowZeroPastTheLast) {
  pack_both_ways<double>();
  pack_both_ways<float>();
}

// Rows gathered row by row whose depths come in runs that lie one after another in the tensor
// (pack_runs: a register's lanes of them transposed at a time): runs one depth apart (the rows of
// ik in ik,kj->ij), broken every 20 depths, and runs `step` depths apart (an operand along the
// slower index of a tile of summed indices, acd,dbc->ab's dbc), with depths left over at the end;
// panels of 6 rows (A's with BLIS's Haswell tile, a register and a part), of a line, of a line and
// a bit, each padded to a few more; the elements past the last panel untouched.
template <typename T>
void pack_runs_of_depths() {
  constexpr std::int64_t line = kLineElements<T>;
  const Tensor src = random_values<T>(64 * 64 * 16, 5);
  const T* s = src.data<T>();
  std::vector<std::int64_t> row(21);
  for (std::size_t i = 0; i < row.size(); ++i)
    row[i] = static_cast<std::int64_t>((i * 7) % 23) * 131;
  std::vector<std::int64_t> one(45), apart(5 * 11);
  for (std::size_t p = 0; p < one.size(); ++p) one[p] = static_cast<std::int64_t>(p + p / 20 * 100);
  for (std::size_t p = 0; p < apart.size(); ++p)  // 5 depths a step, 11 runs' worth each
    apart[p] = static_cast<std::int64_t>((p % 5) * 4096 + p / 5);
  for (const std::int64_t width : {std::int64_t{6}, line, line + 2})
    for (const std::int64_t pad : {0, 3})
      for (const auto& col : {one, apart}) {
        const std::int64_t pack_width = width + pad;
        const std::int64_t panels = (static_cast<std::int64_t>(row.size()) + width - 1) / width;
        const auto used = static_cast<std::size_t>(panels * pack_width) * col.size();
        std::vector<T> dst(used + 2 * line, T{-7});
        pack(s, row.data(), static_cast<std::int64_t>(row.size()), col.data(),
             static_cast<std::int64_t>(col.size()), width, pack_width, dst.data());
        expect_packed(s, row, col, width, pack_width, dst);
        for (std::size_t i = used; i < dst.size(); ++i)
          ASSERT_EQ(dst[i], T{-7}) << "width " << width << ", past the panels at " << i - used;
      }
}

TEST(Packing, RunsOfDepthsConsecutiveInTheTensorGoThroughRegisters) {
  pack_runs_of_depths<double>();
  pack_runs_of_depths<float>();
}

// Packs `b` rows (at `row`) of the blocks of `col` from each start to each end, in panels of 12,
// a line and two lines of rows, and checks each block's panels hold its depths (expect_packed).
template <typename T>
void expect_blocks_packed(const T* s, const std::vector<std::int64_t>& row,
                          const std::vector<std::int64_t>& col,
                          std::initializer_list<std::int64_t> starts,
                          const std::function<std::vector<std::int64_t>(std::int64_t)>& ends) {
  constexpr std::int64_t line = kLineElements<T>;
  const auto b = static_cast<std::int64_t>(row.size());
  for (const std::int64_t width : {std::int64_t{12}, line, 2 * line})
    for (const std::int64_t start : starts)
      for (const std::int64_t end : ends(start)) {
        const std::vector<std::int64_t> block(col.begin() + start, col.begin() + end);
        const std::int64_t panels = (b + width - 1) / width;
        std::vector<T> dst(static_cast<std::size_t>(panels * width * (end - start)), T{-7});
        pack(s, row.data(), b, block.data(), end - start, width, width, dst.data());
        expect_packed(s, row, block, width, width, dst);
      }
}

// The operand along the slower index of a tile of summed indices (dbc in acd,dbc->ab: a line of c
// for each line of d, sum_tile), packed in blocks that start and end inside tiles, as a block of
// KC = 384 floats does against tiles of 256: runs a line apart cut short at the blocks' edges, and
// the last tiles narrower (d and c a line and a half long: runs half a line apart, and half a line
// long). Each block's panels hold its depths, whatever their runs (pack_run_lines, depth_runs).
template <typename T>
void pack_blocks_inside_tiles() {
  constexpr std::int64_t line = kLineElements<T>;
  const std::int64_t c = line + line / 2, d = line + line / 2, b = 21;
  const Tensor src = random_values<T>(d * b * c, 9);  // dbc, c fastest
  const T* s = src.data<T>();
  std::vector<std::int64_t> row(b), col;
  for (std::int64_t i = 0; i < b; ++i) row[static_cast<std::size_t>(i)] = i * c;
  for (std::int64_t c0 = 0; c0 < c; c0 += line)    // a line of c
    for (std::int64_t d0 = 0; d0 < d; d0 += line)  // for each line of d
      for (std::int64_t j = c0; j < std::min(c, c0 + line); ++j)
        for (std::int64_t i = d0; i < std::min(d, d0 + line); ++i) col.push_back(i * b * c + j);
  const auto depth = static_cast<std::int64_t>(col.size());
  expect_blocks_packed(s, row, col, {0, line * line / 2, line * line / 2 + 3},
                       [&](std::int64_t start) -> std::vector<std::int64_t> {
                         return {depth, depth - line / 2, start + line * line};
                       });
}

TEST(Packing, BlocksStartingAndEndingInsideTilesOfSummedElements) {
  pack_blocks_inside_tiles<double>();
  pack_blocks_inside_tiles<float>();
}

// The operand whose summed elements come in pairs a tile's width apart (dbcq in the real form of
// acd,dbc->ab: tiles()), packed in blocks that start and end inside tiles and inside pairs (a block
// that starts at an odd depth holds half a pair first): each block's panels hold its depths.
template <typename T>
void pack_pairs_inside_tiles() {
  constexpr std::int64_t line = kLineElements<T>, half = line / 2;
  const std::int64_t c = line + 3, d = half + 3, b = 21;
  const Tensor src = random_values<T>(d * b * c * 2, 11);  // dbcq
  const T* s = src.data<T>();
  std::vector<std::int64_t> row(b), col;
  for (std::int64_t i = 0; i < b; ++i) row[static_cast<std::size_t>(i)] = i * c * 2;
  for (std::int64_t c0 = 0; c0 < c; c0 += half)    // half a line of c (with its parts)
    for (std::int64_t d0 = 0; d0 < d; d0 += half)  // for each half line of d
      for (std::int64_t j = c0; j < std::min(c, c0 + half); ++j)
        for (std::int64_t i = d0; i < std::min(d, d0 + half); ++i)
          for (std::int64_t q = 0; q < 2; ++q) col.push_back(i * b * c * 2 + j * 2 + q);
  const auto depth = static_cast<std::int64_t>(col.size());
  expect_blocks_packed(s, row, col, {0, line * half, line * half + 3},
                       [&](std::int64_t start) -> std::vector<std::int64_t> {
                         return {depth, depth - 5, start + line * half};
                       });
}

TEST(Packing, PairsOfDepthsInsideTilesOfSummedElements) {
  pack_pairs_inside_tiles<double>();
  pack_pairs_inside_tiles<float>();
}

// Rows 2 apart at depths in pairs 1 apart (a complex operand in real form: the rows' real and
// imaginary parts), split from one run per pair: panels of a line and a bit of rows (f64: 8 in 10,
// f32: 16 in 18), panels of whole rows and of a few (21 rows), a panel with a row out of step
// (gathered); and depths not all in pairs (gathered).
template <typename T>
void pack_pairs_of_depths() {
  constexpr std::int64_t line = kLineElements<T>;
  const std::int64_t width = line + 2, pack_width = line + 3;
  const Tensor src = random_values<T>(64 * 64, 7);
  const T* s = src.data<T>();
  std::vector<std::int64_t> paired{0, 1, 128, 129, 3 * 128, 3 * 128 + 1}, unpaired{0, 1, 128};
  std::vector<std::int64_t> two(2 * width + 5), broken = two;
  for (std::size_t i = 0; i < two.size(); ++i) two[i] = 3 + 2 * static_cast<std::int64_t>(i);
  broken[width + 3] += 1;  // the second panel gathered
  for (const auto& col : {paired, unpaired})
    for (const auto& row : {two, broken}) {
      const std::int64_t panels = (static_cast<std::int64_t>(row.size()) + width - 1) / width;
      std::vector<T> dst(static_cast<std::size_t>(panels * pack_width) * col.size(), T{-7});
      pack(s, row.data(), static_cast<std::int64_t>(row.size()), col.data(),
           static_cast<std::int64_t>(col.size()), width, pack_width, dst.data());
      expect_packed(s, row, col, width, pack_width, dst);
    }
}

TEST(Packing, RowsTwoApartSplitFromTheirPartnersAtPairedDepths) {
  pack_pairs_of_depths<double>();
  pack_pairs_of_depths<float>();
}

TEST(Packing, RunsSharingCacheLinesPackAcrossAsTheyGatherElementByElement) {
  // Rows "cd" of a tensor "dc" (c at unit stride, 8 values: a line each d), c outer in the table:
  // runs of 8 rows (8 values of d for one c) share their lines with the other values of c.
  const Lengths len{{'c', 8}, {'d', 32}, {'k', 6}};
  const std::vector<std::int64_t> strides{8 * 32, 8, 1};  // "kdc"
  const Table row = offsets("cd", len, "kdc", strides), col = offsets("k", len, "kdc", strides);
  const Tensor src = random_values<double>(6 * 32 * 8, 5);
  const double* s = src.data<double>();
  std::vector<double> across(static_cast<std::size_t>(row.size() * col.size()), -7);
  pack(s, row.data(), row.size(), col.data(), col.size(), 16, 16, across.data(), true);
  expect_packed(s, entries(row), entries(col), 16, 16, across);
  std::vector<double> scratch(across.size());
  const std::vector<char> none(static_cast<std::size_t>(row.size() / 16), 0);
  const auto done =
      pack_across(s, row.data(), row.size(), col.data(), col.size(), 16, 16, scratch.data(), none);
  // With AVX-512 every run shares its lines; without, nothing goes across. (pack_across as this
  // file compiled it: for the widest set of the machine that runs it.)
  if constexpr (EINSUMDB_AVX512) {
    EXPECT_EQ(std::count(done.begin(), done.end(), 1), row.size());
  } else {
    EXPECT_TRUE(done.empty());
  }
}

// ---- the micro-kernel

template <typename T>
void micro_kernel_computes_a_tile() {
  const MicroKernel<T>& k = MicroKernel<T>::get();
  ASSERT_GT(k.mr, 0);
  ASSERT_GT(k.nr, 0);
  ASSERT_LE(k.mr * k.nr, kMaxTile);
  const std::int64_t depth = 37;
  // A: mr × depth row-major, B: depth × nr row-major, packed as the macro-kernel packs them.
  const Tensor a = random_values<T>(k.mr * depth, 11), b = random_values<T>(depth * k.nr, 13);
  std::vector<std::int64_t> ar(static_cast<std::size_t>(k.mr)), ak(depth), bn(k.nr), bk(depth);
  for (std::int64_t i = 0; i < k.mr; ++i) ar[i] = i * depth;
  for (std::int64_t l = 0; l < depth; ++l) ak[l] = l, bk[l] = l * k.nr;
  for (std::int64_t j = 0; j < k.nr; ++j) bn[j] = j;
  Tensor apanel = random_values<T>(k.packmr * depth, 1),
         bpanel = random_values<T>(k.packnr * depth, 2);
  T* ap = apanel.data<T>();
  T* bp = bpanel.data<T>();
  pack(a.data<T>(), ar.data(), k.mr, ak.data(), depth, k.mr, k.packmr, ap);
  pack(b.data<T>(), bn.data(), k.nr, bk.data(), depth, k.nr, k.packnr, bp);
  auxinfo_t aux{};
  bli_auxinfo_set_schema_a(BLIS_PACKED_ROW_PANELS, &aux);
  bli_auxinfo_set_schema_b(BLIS_PACKED_COL_PANELS, &aux);
  bli_auxinfo_set_is_a(1, &aux);
  bli_auxinfo_set_is_b(1, &aux);
  bli_auxinfo_set_ps_a(k.packmr * depth, &aux);
  bli_auxinfo_set_ps_b(k.packnr * depth, &aux);
  bli_auxinfo_set_next_a(ap, &aux);
  bli_auxinfo_set_next_b(bp, &aux);
  // Written column-major with a gap (rs 1, cs mr + 3), then added to (beta 1).
  const std::int64_t cs = k.mr + 3;
  const double tolerance = std::is_same_v<T, float> ? 1e-4 : 1e-12;
  std::vector<T> c(static_cast<std::size_t>(cs * k.nr), T{1});
  T one = 1, zero = 0;
  k.run(k.mr, k.nr, depth, &one, ap, bp, &zero, c.data(), 1, cs, &aux, k.cntx);
  k.run(k.mr, k.nr, depth, &one, ap, bp, &one, c.data(), 1, cs, &aux, k.cntx);
  for (std::int64_t i = 0; i < k.mr; ++i)
    for (std::int64_t j = 0; j < k.nr; ++j) {
      double want = 0;
      for (std::int64_t l = 0; l < depth; ++l)
        want += static_cast<double>(a.data<T>()[i * depth + l]) * b.data<T>()[l * k.nr + j];
      EXPECT_NEAR(c[static_cast<std::size_t>(i + j * cs)], 2 * want, tolerance) << i << ", " << j;
    }
  for (std::int64_t j = 0; j < k.nr; ++j)  // the gap between columns untouched
    for (std::int64_t i = k.mr; i < cs; ++i) EXPECT_EQ(c[static_cast<std::size_t>(i + j * cs)], 1);
}

TEST(MicroKernel, ComputesATileFromPackedPanels) {
  micro_kernel_computes_a_tile<double>();
  micro_kernel_computes_a_tile<float>();
}

// ---- write-out

// A column-major tile of a multiple of a line's rows (f64: 16, f32: 32) whose columns are
// contiguous in the output, its corner written row by row through register transposes: rows evenly
// spaced, then unevenly; 11 columns (short of a line in both dtypes) and a line and a bit (f64:
// 11, f32: 19); set, then added. Then line groups: tiles interleaved element by element, and
// (AVX-512) tiles column-major one after the other, transposed a line square at a time.
template <typename T>
void tiles_reach_the_output_as_a_loop_would_write_them() {
  constexpr std::int64_t line = kLineElements<T>;
  const std::int64_t mr = 2 * line, mrb = mr - 3, rs = 40;
  for (const std::int64_t nrb : {std::int64_t{11}, line + 3}) {
    const Tensor tile = random_values<T>(mr * nrb, 17);
    const T* t = tile.data<T>();
    for (const bool even : {true, false}) {
      std::vector<std::int64_t> rows(static_cast<std::size_t>(mrb));
      for (std::int64_t i = 0; i < mrb; ++i) rows[i] = even ? i * rs : (i * 7 % mrb) * rs + i % 3;
      std::vector<T> out(static_cast<std::size_t>(rs * mrb + line), T(0.5)), want = out;
      for (std::int64_t i = 0; i < mrb; ++i)
        for (std::int64_t n = 0; n < nrb; ++n) want[rows[i] + n] = t[n * mr + i];
      transpose_out(t, mr, mrb, nrb, out.data(), rows.data(), false, false);
      EXPECT_EQ(out, want) << "nrb " << nrb << (even ? ", even rows" : ", uneven rows");
      for (std::int64_t i = 0; i < mrb; ++i)
        for (std::int64_t n = 0; n < nrb; ++n) want[rows[i] + n] += t[n * mr + i];
      transpose_out(t, mr, mrb, nrb, out.data(), rows.data(), true, false);
      EXPECT_EQ(out, want) << "nrb " << nrb << (even ? ", even rows" : ", uneven rows")
                           << ", added";
    }
  }

  // Along evenly spaced runs (3 apart, then 2), the other direction at offsets of its own, two
  // pairs of them side by side (a complex result's parts) and the last one alone; set, then added.
  const Tensor tile = random_values<T>(mr * 14, 17);
  const T* t = tile.data<T>();
  const std::vector<std::int64_t> at{0, 40, 41, 90, 91, 7};
  for (const std::int64_t step : {3, 2}) {
    std::vector<T> along(200, T(0.25)), expected = along;
    for (const bool add : {false, true}) {
      for (std::size_t j = 0; j < at.size(); ++j)
        for (std::int64_t i = 0; i < 5; ++i) {
          T& e = expected[at[j] + i * step];
          e = (add ? e : T(0)) + t[static_cast<std::int64_t>(j) * 2 + i * mr];
        }
      write_along(t, mr, 2, 5, 6, along.data(), step, at.data(), add, false);
      EXPECT_EQ(along, expected) << "step " << step << (add ? ", added" : "");
    }
  }

  // A line group, element (i, n) of tile j going to cm[i] + cn[n] + j, each line whole (streamed,
  // where the build can): tiles of gr rows interleaved, element (i, n) of tile j at
  // group[(i + n·gr)·line + j]; then tiles of a line's rows column-major one after the other,
  // tile j at group + j·gr·gc.
  const std::int64_t gc = 3;
  const std::vector<std::int64_t> cn{2048, 4096, 6144};
  for (const bool transposed : {false, true}) {
#if !EINSUMDB_AVX512
    if (transposed) continue;
#endif
    const std::int64_t gr = transposed ? line : 4;
    const Tensor group = random_values<T>(gr * gc * line, 19);
    const T* g = group.data<T>();
    Tensor target(std::is_same_v<T, double> ? Dtype::f64 : Dtype::f32, {8192});
    std::vector<std::int64_t> cm(static_cast<std::size_t>(gr));
    for (std::int64_t i = 0; i < gr; ++i) cm[i] = i * 128;
    write_lines(g, gr, gc, transposed, gc, target.data<T>(), cm.data(), cn.data(), false, true);
    for (std::int64_t i = 0; i < gr; ++i)
      for (std::int64_t n = 0; n < gc; ++n)
        for (std::int64_t j = 0; j < line; ++j)
          ASSERT_EQ(target.data<T>()[cm[i] + cn[n] + j],
                    transposed ? g[j * gr * gc + n * gr + i] : g[(i + n * gr) * line + j])
              << (transposed ? "transposed" : "interleaved") << " row " << i << ", column " << n;
  }
}

TEST(WriteOut, TilesReachTheOutputAsALoopWouldWriteThem) {
  tiles_reach_the_output_as_a_loop_would_write_them<double>();
  tiles_reach_the_output_as_a_loop_would_write_them<float>();
}

// ---- our own micro-kernel

#if EINSUMDB_AVX512
// line_tile: the tile of two packed panels summed over `depth`, each column's two registers of
// rows stored at their own addresses (far apart, the columns unevenly spaced), streamed, set or
// added, and set or added with a register's rows in two runs (LineRows' split); the columns past
// `columns` and every other element of the output left alone; both dtypes, sums shorter and longer
// than the fetches' tail and the unrolled loop, a full and a narrow tile.
template <typename T, LineWrite write>
void line_tile_writes_each_run_to_its_own_lines(int top_split, int bottom_split) {
  constexpr std::int64_t W = 64 / sizeof(T), NR = kLineTileColumns<T>;
  const std::vector<std::int64_t> cn = [&] {
    std::vector<std::int64_t> at;
    for (std::int64_t j = 0; j < NR; ++j) at.push_back((j < 5 ? j : j + 7) * 2 * W);
    return at;
  }();
  // Row i's offset before its column's: top rows from W (after top_split, from 100·W), bottom rows
  // from 50·W (after bottom_split, from 150·W + 3); each region's columns span at most 42·W.
  const auto row = [&](std::int64_t i) -> std::int64_t {
    if (i < W) return i < top_split ? W + i : 100 * W + i;
    return i - W < bottom_split ? 50 * W + i - W : 150 * W + 3 + i - W;
  };
  const std::int64_t size = 200 * W;
  for (std::int64_t depth :
       {std::int64_t{1}, std::int64_t{3}, std::int64_t{24}, std::int64_t{37}, 38 + 6 * NR})
    for (std::int64_t columns : {NR, NR - 5}) {
      const Tensor a = random_values<T>(2 * W * depth, 41), b = random_values<T>(NR * depth, 43);
      Tensor c = random_values<T>(size, 47);
      const Tensor before = random_values<T>(size, 47);
      T* out = c.data<T>();
      const LineRows<T> top{out + row(0), out + 100 * W, top_split},
          bottom{out + row(W), out + 150 * W + 3, bottom_split};
      line_tile<T, write>(
          depth, a.data<T>(), b.data<T>(), top, bottom,
          [&](int j) { return cn[static_cast<std::size_t>(j)]; }, columns);
      _mm_sfence();
      std::vector<char> written(static_cast<std::size_t>(size), 0);
      for (std::int64_t j = 0; j < columns; ++j)
        for (std::int64_t i = 0; i < 2 * W; ++i) {
          const std::int64_t at = row(i) + cn[static_cast<std::size_t>(j)];
          double want = write == LineWrite::add ? before.data<T>()[at] : 0;
          for (std::int64_t p = 0; p < depth; ++p)
            want += static_cast<double>(a.data<T>()[p * 2 * W + i]) * b.data<T>()[p * NR + j];
          ASSERT_NEAR(out[at], want, sizeof(T) == 4 ? 1e-4 : 1e-12)
              << "depth " << depth << ", row " << i << ", column " << j << ", splits " << top_split
              << " " << bottom_split;
          written[static_cast<std::size_t>(at)] = 1;
        }
      for (std::int64_t at = 0; at < size; ++at)
        if (!written[static_cast<std::size_t>(at)]) {
          ASSERT_EQ(out[at], before.data<T>()[at])
              << "depth " << depth << ", columns " << columns << ": element " << at;
        }
    }
}

template <typename T>
void line_tile_writes_each_way() {
  constexpr int W = 64 / sizeof(T);
  line_tile_writes_each_run_to_its_own_lines<T, LineWrite::stream>(W, W);
  for (const auto& [top, bottom] : {std::pair{W, W}, {5, W}, {W, 3}, {1, W - 1}}) {
    line_tile_writes_each_run_to_its_own_lines<T, LineWrite::set>(top, bottom);
    line_tile_writes_each_run_to_its_own_lines<T, LineWrite::add>(top, bottom);
  }
}

#endif  // EINSUMDB_AVX512

#if EINSUMDB_AVX512
// wide_tile: the tile of two packed panels summed over `depth` into an output whose columns are
// `cs` apart, every way its callers ask: whole tiles with unit row stride set (beta 0, the output
// never read: it holds NaN) or added (beta 1), from the registers; and through the buffer, a tile
// with fewer rows or columns, rows `rs` apart, alpha and beta other than 0 and 1. The elements
// outside the tile are left alone. Sums shorter and longer than the fetches' tail.
template <typename T>
void wide_tile_writes_each_way() {
  constexpr std::int64_t MR = kWideRows<T>, NR = kWideColumns;
  const T nan = std::numeric_limits<T>::quiet_NaN();
  for (const std::int64_t depth : {1, 5, 16, 17, 300})
    for (const auto& [m, n, rs, alpha, beta] :
         {std::tuple<std::int64_t, std::int64_t, std::int64_t, T, T>{MR, NR, 1, 1, 0},
          {MR, NR, 1, 1, 1},
          {MR, 4, 1, 1, 1},
          {MR - 3, NR, 1, 1, 0},
          {5, 2, 1, 1, 1},
          {MR, NR, NR + 1, 1, 1},
          {MR, NR, 1, 2, T(0.5)},
          {MR, NR, 1, T(-1), 0}}) {
      const std::int64_t cs = rs == 1 ? MR + 5 : 1;  // rows apart: columns adjacent
      const std::int64_t size = (MR - 1) * rs + (NR - 1) * cs + 1 + 8;
      const Tensor before = random_values<T>(size, 59);
      Tensor c = random_values<T>(size, 59);
      T* out = c.data<T>();
      std::vector<char> inside(static_cast<std::size_t>(size), 0);
      for (std::int64_t j = 0; j < n; ++j)
        for (std::int64_t i = 0; i < m; ++i) {
          inside[static_cast<std::size_t>(i * rs + j * cs)] = 1;
          if (beta == 0) out[i * rs + j * cs] = nan;
        }
      // The panels past the tile's rows and columns are zero, as packed (packing.hpp).
      Tensor ap = random_values<T>(MR * depth, 51), bp = random_values<T>(NR * depth, 53);
      for (std::int64_t p = 0; p < depth; ++p) {
        for (std::int64_t i = m; i < MR; ++i) ap.data<T>()[p * MR + i] = 0;
        for (std::int64_t j = n; j < NR; ++j) bp.data<T>()[p * NR + j] = 0;
      }
      T al = alpha, be = beta;
      wide_tile<T>(m, n, depth, &al, ap.data<T>(), bp.data<T>(), &be, out, rs, cs, nullptr,
                   nullptr);
      const std::string what = "depth " + std::to_string(depth) + ", " + std::to_string(m) + "x" +
                               std::to_string(n) + " rs " + std::to_string(rs) + " alpha " +
                               std::to_string(alpha) + " beta " + std::to_string(beta);
      for (std::int64_t at = 0; at < size; ++at) {
        if (!inside[static_cast<std::size_t>(at)]) {
          ASSERT_EQ(out[at], before.data<T>()[at]) << what << ": element " << at;
          continue;
        }
        const std::int64_t j = rs == 1 ? at / cs : at % rs, i = rs == 1 ? at % cs : at / rs;
        double sum = 0;
        for (std::int64_t p = 0; p < depth; ++p)
          sum += static_cast<double>(ap.data<T>()[p * MR + i]) * bp.data<T>()[p * NR + j];
        const double want = alpha * sum + (beta == 0 ? 0.0 : beta * before.data<T>()[at]);
        ASSERT_NEAR(out[at], want, sizeof(T) == 4 ? 1e-3 : 1e-11)
            << what << ": row " << i << ", column " << j;
      }
    }
}
#endif  // EINSUMDB_AVX512

TEST(WideKernel, ComputesEachWayItsCallersAsk) {
#if EINSUMDB_AVX512
  wide_tile_writes_each_way<double>();
  wide_tile_writes_each_way<float>();
#else
  GTEST_SKIP() << "wide_tile is compiled for AVX-512 only";
#endif
}

TEST(LineKernel, WritesEachRunOfATileToItsOwnLines) {
#if EINSUMDB_AVX512
  EXPECT_EQ(line_tile_fits(MicroKernel<float>::get()), own_kernel_runs());
  line_tile_writes_each_way<double>();
  line_tile_writes_each_way<float>();
#else
  GTEST_SKIP() << "line_tile is compiled for AVX-512 only";
#endif
}

// ---- the macro-kernel

// C[m, n] = Σ A[m, k] B[k, n] over the tables of a Contraction, summed in double.
template <typename T>
void expect_product(const Contraction& p, const T* a, const T* b, const T* c, double tolerance) {
  for (std::int64_t i = 0; i < p.M; ++i)
    for (std::int64_t j = 0; j < p.N; ++j) {
      double want = 0;
      for (std::int64_t l = 0; l < p.K; ++l)
        want += static_cast<double>(a[p.am[i] + p.ak[l]]) * b[p.bn[j] + p.bk[l]];
      ASSERT_NEAR(c[p.cm[i] + p.cn[j]], want, tolerance) << "row " << i << ", column " << j;
    }
}

TEST(MacroKernel, ComputesEveryTileOverBlocksPassesAndUnevenRowsAndColumns) {
  // A "mk", B "kn", C "nm" (the output's unit stride among the rows); the rows and the columns in
  // orders that leave some panels unevenly spaced in C; several blocks of rows and three summed
  // passes.
  const MicroKernel<double>& k = MicroKernel<double>::get();
  const std::int64_t M = 5 * k.mr + 3, N = 2 * k.nr + 5, K = 150;
  const Lengths len{{'m', M}, {'n', N}, {'k', K}};
  const Tensor a = random_values<double>(M * K, 23), b = random_values<double>(K * N, 29);
  Tensor c(Dtype::f64, {M * N});
  Contraction p;
  std::vector<std::int64_t> order(static_cast<std::size_t>(M));
  std::iota(order.begin(), order.end(), 0);
  std::reverse(order.begin() + k.mr, order.begin() + 2 * k.mr + 2);  // uneven around panel 1
  p.am = Table(M), p.cm = Table(M);
  for (std::int64_t i = 0; i < M; ++i) p.am[i] = order[i] * K, p.cm[i] = order[i];
  // The columns too, so that some tiles are uneven both ways (written element by element).
  std::vector<std::int64_t> cols(static_cast<std::size_t>(N));
  std::iota(cols.begin(), cols.end(), 0);
  std::reverse(cols.begin() + k.nr - 2, cols.begin() + 2 * k.nr);
  p.bn = Table(N), p.cn = Table(N);
  for (std::int64_t j = 0; j < N; ++j) p.bn[j] = cols[j], p.cn[j] = cols[j] * M;
  p.ak = offsets("k", len, "mk", {K, 1});
  p.bk = offsets("k", len, "kn", {N, 1});
  p.ab = table({0});
  p.bb = table({0});
  p.cb = table({0});
  p.M = M, p.N = N, p.K = K;
  p.kc = 64;
  p.mc = 2 * k.mr;
  p.row_step = spacing(p.cm, k.mr);
  p.row_runs = unit_runs(p.cm, k.mr, kLineElements<double>, p.row_step);
  p.col_step = spacing(p.cn, k.nr);
  ASSERT_NE(std::count(p.row_step.begin(), p.row_step.end(), kUneven), 0);
  ASSERT_NE(std::count(p.col_step.begin(), p.col_step.end(), kUneven), 0);
  const std::int64_t a_elems = (p.mc + k.mr) / k.mr * k.packmr * p.kc,
                     b_elems = (std::min(k.nc, N) + k.nr) / k.nr * k.packnr * p.kc;
  Tensor space(Dtype::f64, {a_elems + b_elems + 16});
  double* ap = space.data<double>();
  double* bp = ap + (a_elems + 7) / 8 * 8;
  const Gemm<double> gemm(p, a.data<double>(), b.data<double>(), c.data<double>());
  gemm.run(0, 0, M, 0, N, ap, bp);
  expect_product(p, a.data<double>(), b.data<double>(), c.data<double>(), 1e-11);
  // A range of rows and columns alone (a thread's share) leaves the rest as it was.
  std::fill(c.data<double>(), c.data<double>() + M * N, 0.0);
  gemm.run(0, k.mr, M, k.nr, N, ap, bp);
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j)
      if (i < k.mr || j < k.nr) {
        ASSERT_EQ(c.data<double>()[p.cm[i] + p.cn[j]], 0.0);
      }
}

// ---- the streamed algorithm

TEST(Streamed, ATallSkinnyProductStreamsItsRowsInPlace) {
  // ik,kj->ij with 8 columns: W = B packed once, X = A streamed a few rows at a time.
  const Lengths len{{'i', 1000}, {'k', 48}, {'j', 8}};
  const auto s = streamed<double>("ik", {48, 1}, "kj", {8, 1}, "ij", {8, 1}, len);
  ASSERT_TRUE(s.has_value());
  EXPECT_FALSE(s->swap);
  EXPECT_EQ(s->x_rs, 48);
  EXPECT_EQ(s->x_ds, 1);
  std::int64_t rows = 0;
  for (const Piece& p : s->pieces) rows += p.rows;
  EXPECT_EQ(rows, 1000);
  const Tensor a = random_values<double>(1000 * 48, 31), b = random_values<double>(48 * 8, 37);
  for (const bool own : {false, true}) {  // libxsmm's kernel, ours (rows_kernel.hpp)
    Tensor c(Dtype::f64, {1000 * 8});
    ASSERT_TRUE(
        run_streamed<double>(*s, a.data<double>(), b.data<double>(), c.data<double>(), 2, own));
    for (std::int64_t i = 0; i < 1000; ++i)
      for (std::int64_t j = 0; j < 8; ++j) {
        double want = 0;
        for (std::int64_t l = 0; l < 48; ++l)
          want += a.data<double>()[i * 48 + l] * b.data<double>()[l * 8 + j];
        ASSERT_NEAR(c.data<double>()[i * 8 + j], want, 1e-12) << i << ", " << j << ", " << own;
      }
  }
  // Wide columns are not streamed: W's row of the output would not be a few vectors.
  EXPECT_FALSE(streamed<double>("ik", {48, 1}, "kj", {512, 1}, "ij", {512, 1},
                                {{'i', 1000}, {'k', 48}, {'j', 512}})
                   .has_value());
}

// Streamed rows go in pieces of a line's rows or more on average: rows that X breaks every 8 (a
// line of doubles) are streamed in 5 pieces, every 7 not at all (Pieces' capacity is that bound).
TEST(Streamed, RowsArePiecesOfALineOrMoreOnAverage) {
  for (const std::int64_t r : {8, 7}) {
    const Lengths len{{'a', 5}, {'i', r}, {'k', 48}, {'j', 8}};
    const auto s =
        streamed<double>("aik", {(r + 1) * 48, 48, 1}, "kj", {8, 1}, "aij", {r * 8, 8, 1}, len);
    ASSERT_EQ(s.has_value(), r == 8) << r;
    if (s) {
      EXPECT_EQ(s->pieces.size(), 5u);
    }
  }
}

// Our own kernel for streamed rows, on the shapes of its columns (a full vector last or a half
// one, part full or whole, up to four vectors), on X's two layouts: rows contiguous at
// each summed element (bda,dc->abc, TCCG case 1's shape) and each row's summed elements
// contiguous (ik,kj->ij); rows left over from its tiles of R rows included.
template <typename T>
void own_rows_kernel_computes(std::int64_t n, bool narrow) {
  constexpr std::int64_t lanes = 64 / sizeof(T);
  const double tolerance = std::is_same_v<T, float> ? 1e-4 : 1e-12;
  {
    const std::int64_t A = 29, B = 3, D = 37;
    const Lengths len{{'a', A}, {'b', B}, {'c', n}, {'d', D}};
    const std::vector<std::int64_t> xs{D * A, A, 1}, ws{n, 1}, zs{B * n, n, 1};
    const auto s = streamed<T>("bda", xs, "dc", ws, "abc", zs, len);
    ASSERT_TRUE(s.has_value()) << n;
    ASSERT_EQ(s->x_rs, 1);
    const Tensor x = random_values<T>(B * D * A, 51), w = random_values<T>(D * n, 53);
    Tensor z(dtype_of<T>(), {A * B * n});
    // (With AVX2 alone, our AVX2 kernel takes this layout: rows_line_block.)
    const bool ours = streams() || own_rows_avx2<T>(*s);
    ASSERT_EQ(run_streamed_own<T>(*s, x.data<T>(), w.data<T>(), z.data<T>(), 2, true, narrow),
              ours);
    if (!ours) return;
    for (std::int64_t a = 0; a < A; ++a)
      for (std::int64_t b = 0; b < B; ++b)
        for (std::int64_t c = 0; c < n; ++c) {
          double want = 0;
          for (std::int64_t d = 0; d < D; ++d)
            want +=
                static_cast<double>(x.data<T>()[b * D * A + d * A + a]) * w.data<T>()[d * n + c];
          ASSERT_NEAR(z.data<T>()[a * zs[0] + b * zs[1] + c], want, tolerance)
              << n << (narrow ? " narrow: " : " wide: ") << a << ", " << b << ", " << c;
        }
  }
  if (!streams()) return;
  const std::int64_t M = 3 * lanes + 5, K = 41;
  const Lengths len{{'i', M}, {'k', K}, {'j', n}};
  const auto s = streamed<T>("ik", {K, 1}, "kj", {n, 1}, "ij", {n + 3, 1}, len);
  ASSERT_TRUE(s.has_value()) << n;
  ASSERT_EQ(s->x_ds, 1);
  const Tensor x = random_values<T>(M * K, 55), w = random_values<T>(K * n, 57);
  Tensor z(dtype_of<T>(), {M * (n + 3)});
  std::fill(z.data<T>(), z.data<T>() + z.size(), T{7});
  ASSERT_TRUE(run_streamed_own<T>(*s, x.data<T>(), w.data<T>(), z.data<T>(), 1, true, narrow));
  for (std::int64_t i = 0; i < M; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (std::int64_t l = 0; l < K; ++l)
        want += static_cast<double>(x.data<T>()[i * K + l]) * w.data<T>()[l * n + j];
      ASSERT_NEAR(z.data<T>()[i * (n + 3) + j], want, tolerance)
          << n << (narrow ? " narrow: " : " wide: ") << i << ", " << j;
    }
    for (std::int64_t j = n; j < n + 3; ++j)  // past the columns: untouched
      ASSERT_EQ(z.data<T>()[i * (n + 3) + j], T{7}) << n << ": " << i << ", " << j;
  }
}

TEST(Streamed, OurOwnKernelComputesEveryShapeOfColumns) {
  // (The widths streamed() takes: each row of the output fills three quarters of its vectors.)
  for (const bool narrow : {true, false}) {
    for (const std::int64_t n : {8, 12, 16, 20, 24, 28, 32}) {
      own_rows_kernel_computes<double>(n, narrow);
      if (HasFatalFailure()) return;
    }
    for (const std::int64_t n : {12, 16, 24, 25, 32, 40, 48, 56, 60, 64}) {
      own_rows_kernel_computes<float>(n, narrow);
      if (HasFatalFailure()) return;
    }
  }
#if EINSUMDB_AVX512
  // Wider than four vectors: libxsmm's kernel (run_streamed falls back to it). Narrow, up to four
  // half vectors, then full ones.
  for (const RowsShape shape : {RowsShape::narrow, RowsShape::wide}) {
    EXPECT_FALSE(rows_kernel<float>(65, shape));
    EXPECT_FALSE(rows_kernel<double>(33, shape));
    EXPECT_TRUE(rows_kernel<double>(32, shape));
  }
  EXPECT_EQ(rows_kernel<float>(24, RowsShape::narrow).rows, 8);  // three half vectors
  EXPECT_EQ(rows_kernel<float>(24, RowsShape::wide).rows, 12);   // one full, one half
  // Full width, 24 floats over rows contiguous in X (bda above) go through the tile of 16 rows
  // along them instead (rows_across_tile): A = 29 is one whole tile and one of 13 rows.
  EXPECT_TRUE(rows_across(24, RowsShape::wide));
  EXPECT_FALSE(rows_across(24, RowsShape::narrow));
  EXPECT_FALSE(rows_across(16, RowsShape::wide));
  EXPECT_EQ(rows_kernel<float>(40, RowsShape::narrow).rows, 8);  // past four halves: full ones
  // "rows_fetch": "l1" takes the tiles that fetch into L1 as well, the same shape otherwise.
  for (const RowsShape shape : {RowsShape::narrow, RowsShape::wide}) {
    const RowsKernel<double> l2 = rows_kernel<double>(24, shape),
                             l1 = rows_kernel<double>(24, shape, true);
    EXPECT_NE(l1.tile, l2.tile);
    EXPECT_NE(l1.one, l2.one);
    EXPECT_EQ(l1.rows, l2.rows);
    EXPECT_EQ(l1.width, l2.width);
  }
#endif
}

// The strides of `layout`, row-major in the lengths `len`.
std::vector<std::int64_t> row_major(const std::string& layout, const Lengths& len) {
  std::vector<std::int64_t> st(layout.size());
  std::int64_t n = 1;
  for (std::size_t a = layout.size(); a-- > 0;) st[a] = n, n *= len.at(layout[a]);
  return st;
}

// The sum xl,bd->zl itself, element by element, in row-major x, w and the output (each index's
// value by its label; an array rather than a map, which took most of the test's time under the
// sanitizers, where the test is unoptimized).
template <typename T>
std::vector<double> streamed_lines_want(const std::string& xl, const std::string& zl,
                                        const Lengths& len, const Tensor& x, const Tensor& w) {
  const auto xs = row_major(xl, len), ws = row_major("bd", len), zs = row_major(zl, len);
  std::int64_t nz = 1;
  for (char c : zl) nz *= len.at(c);
  std::vector<double> want(static_cast<std::size_t>(nz));
  std::array<std::int64_t, 128> at{};
  const auto of = [](char c) { return static_cast<std::size_t>(c); };
  const std::int64_t d_stride = xs[xl.find('d')];
  for (std::int64_t o = 0; o < nz; ++o) {
    for (std::size_t a = 0; a < zl.size(); ++a) at[of(zl[a])] = o / zs[a] % len.at(zl[a]);
    std::int64_t xo = 0;  // X's element at d = 0
    for (std::size_t a = 0; a < xl.size(); ++a)
      if (xl[a] != 'd') xo += at[of(xl[a])] * xs[a];
    const T* wb = w.data<T>() + at[of('b')] * ws[0];
    for (std::int64_t d = 0; d < len.at('d'); ++d)
      want[o] += static_cast<double>(x.data<T>()[xo + d * d_stride]) * wb[d];
  }
  return want;
}

// A streamed-lines plan of xl,bd->zl (rows and lines from X, columns b from W, summed over d) run
// through our kernel where `own` asks and it takes the plan (with AVX-512, in floats where `ours`;
// with AVX2 alone, in both where `ours_avx2`), otherwise libxsmm's, against the sum itself.
template <typename T>
void streamed_lines_compute(const std::string& xl, const std::string& zl, const Lengths& len,
                            bool own, bool ours = true, bool ours_avx2 = true,
                            std::optional<bool> ours_wide = std::nullopt) {
  const double tolerance = std::is_same_v<T, float> ? 1e-4 : 1e-12;
  const auto xs = row_major(xl, len), ws = row_major("bd", len), zs = row_major(zl, len);
  const auto s = streamed_lines<T>(xl, xs, "bd", ws, zl, zs, len);
  ASSERT_TRUE(s.has_value()) << xl << "->" << zl;
  ASSERT_FALSE(s->in_place);
  const bool avx2 = writes_stream() && !streams();
  EXPECT_EQ(own_lines_avx2<T>(*s), avx2 && ours_avx2) << xl << "->" << zl;
  std::int64_t nx = 1, nz = 1;
  for (char c : xl) nx *= len.at(c);
  for (char c : zl) nz *= len.at(c);
  const Tensor x = random_values<T>(nx, 41), w = random_values<T>(len.at('b') * len.at('d'), 43);
  const std::vector<double> want = streamed_lines_want<T>(xl, zl, len, x, w);
  // With AVX-512, our tiles of 16 rows (full-width registers: where `ours_wide`, by default
  // `ours`) and of 8 (half-width), whichever this processor would take.
  const auto takes = [&](int rows) {
    return own && (avx2 ? ours_avx2
                        : (rows == 16 ? ours_wide.value_or(ours) : ours) && streams() &&
                              std::is_same_v<T, float>);
  };
  // Whole aligned lines of the output around the cache or not.
  const std::vector<int> tile_rows =
      (takes(16) || takes(8)) && streams() ? std::vector<int>{16, 8} : std::vector<int>{0};
  for (const bool stream : {false, true})
    for (const int rows : tile_rows) {
      const bool taken = takes(rows);
      Tensor z(dtype_of<T>(), {nz});
      std::fill(z.data<T>(), z.data<T>() + nz, T{7});
      ASSERT_EQ(run_streamed_lines_own<T>(*s, x.data<T>(), w.data<T>(), z.data<T>(), 2, stream, own,
                                          rows),
                taken)
          << xl << "->" << zl;
      if (!taken) {
        ASSERT_TRUE(
            run_streamed_lines<T>(*s, x.data<T>(), w.data<T>(), z.data<T>(), 2, stream, false));
      }
      for (std::int64_t o = 0; o < nz; ++o)
        ASSERT_NEAR(z.data<T>()[o], want[o], tolerance)
            << xl << "->" << zl
            << (own ? " (ours, " + std::to_string(rows) + " rows)" : " (libxsmm's)")
            << (stream ? ", streamed" : "") << " at " << o;
    }
}

// Lines of the output come whole from transposed tiles, through either kernel (ours in floats), in
// doubles and floats: dca,bd->abc (TCCG case 2's shape, small; the output runs along c, X along
// a), with rows past a register's (a = 21, 24, 29: past 16 by 5, 8 and 13; our kernel's last 8 of
// 24 in pair tiles of eight values of c, which c = 19, 37 and 801 leave three, five and one of),
// lines past a tile's four values of c and a line's (c = 19 and 37: staged whole, c = 801: a
// line's worth at a time), columns past a tile's six (b = 7); and dcea,bd->eabc, where e follows
// a in X and a piece takes several of its values (a = 16, e = 8). Our kernel leaves the plan to
// libxsmm's where X's values of c lie a multiple of 4 KB apart (a = 1024 floats), where neither
// they nor the summed elements lie within a page (a = 1100) in tiles of half-width registers (it
// takes that one in full-width tiles), and where the summed elements' lines all fall on one set of
// L1 (c · a = 1024 floats apart); our AVX2 kernel leaves the first and the last (the summed
// elements' lines of both on one set) and takes the second.
TEST(Streamed, LinesOfTheOutputComeWholeFromTransposedTiles) {
  for (const bool own : {true, false}) {
    for (const std::int64_t a : {24, 21, 29})
      for (const std::int64_t c : {20, 19, 37, 801}) {
        const Lengths len{{'a', a}, {'b', 7}, {'c', c}, {'d', 16}};
        streamed_lines_compute<double>("dca", "abc", len, own);
        if (HasFatalFailure()) return;
        if (a >= 16) streamed_lines_compute<float>("dca", "abc", len, own);
        if (HasFatalFailure()) return;
      }
    for (const auto& [a, c] : {std::pair{1024, 18}, {1100, 18}, {64, 16}}) {
      streamed_lines_compute<float>("dca", "abc", {{'a', a}, {'b', 6}, {'c', c}, {'d', 3}}, own,
                                    false, a == 1100, a == 1100);
      if (HasFatalFailure()) return;
    }
    const Lengths len{{'a', 16}, {'b', 6}, {'c', 19}, {'d', 4}, {'e', 8}};
    const auto s = streamed_lines<float>("dcea", row_major("dcea", len), "bd", row_major("bd", len),
                                         "eabc", row_major("eabc", len), len);
    ASSERT_TRUE(s.has_value());
    EXPECT_EQ(s->pieces.front().rows, 16 * 8);  // all of e's values in a piece
    streamed_lines_compute<double>("dcea", "eabc", len, own);
    streamed_lines_compute<float>("dcea", "eabc", len, own);
    if (HasFatalFailure()) return;
  }
}

// Our AVX2 streamed-lines kernel (run_streamed_lines_avx2: rows_line_block's tiles, one value of
// the lines' index at a time) on dca,bd->abc, TCCG case 2's shape: lines of rows part full (a = 21,
// 29: in doubles, pieces of up to 24 rows, lines of 8; in floats, lines of 16), lines of the output
// part full (c = 19) and many (c = 37), columns past a block of six and a line (b = 13), an output
// larger than the cache (its whole aligned lines streamed or not); and on dcea,bd->eabc, whose
// pieces take several of e's values, which lie apart in the output. On one thread and two. Run
// directly, so on any processor with AVX2, whatever its widest set.
#if EINSUMDB_AVX2
template <typename T>
void lines_avx2_compute(const std::string& xl, const std::string& zl, const Lengths& len) {
  const double tolerance = std::is_same_v<T, float> ? 1e-4 : 1e-12;
  const auto s = streamed_lines<T>(xl, row_major(xl, len), "bd", row_major("bd", len), zl,
                                   row_major(zl, len), len);
  ASSERT_TRUE(s.has_value()) << xl << "->" << zl;
  std::int64_t nx = 1, nz = 1;
  for (char c : xl) nx *= len.at(c);
  for (char c : zl) nz *= len.at(c);
  const Tensor x = random_values<T>(nx, 87), w = random_values<T>(len.at('b') * len.at('d'), 89);
  const std::vector<double> want = streamed_lines_want<T>(xl, zl, len, x, w);
  for (const bool stream : {false, true})
    for (const int threads : {1, 2}) {
      Tensor z(dtype_of<T>(), {nz});
      std::fill(z.data<T>(), z.data<T>() + nz, T{7});
      run_streamed_lines_avx2<T>(*s, x.data<T>(), w.data<T>(), z.data<T>(), threads, stream);
      for (std::int64_t o = 0; o < nz; ++o)
        ASSERT_NEAR(z.data<T>()[o], want[o], tolerance)
            << xl << "->" << zl << " a = " << len.at('a') << ", b = " << len.at('b')
            << ", c = " << len.at('c') << (stream ? ", streamed" : "") << ", threads " << threads
            << " at " << o;
    }
}

TEST(Streamed, LinesGoThroughOurAvx2KernelOneValueAtATime) {
  for (const auto& [a, b, c, d] :
       {std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>{21, 13, 19, 7},
        {29, 7, 37, 16},
        {16, 24, 37, 5},
        {64, 24, 700, 2}}) {
    const Lengths len{{'a', a}, {'b', b}, {'c', c}, {'d', d}};
    lines_avx2_compute<double>("dca", "abc", len);
    if (a >= 16) lines_avx2_compute<float>("dca", "abc", len);
    if (HasFatalFailure()) return;
  }
  const Lengths len{{'a', 16}, {'b', 6}, {'c', 19}, {'d', 5}, {'e', 8}};
  lines_avx2_compute<double>("dcea", "eabc", len);
  lines_avx2_compute<float>("dcea", "eabc", len);
}

// The same tiles on complex operands (run_complex_lines_avx2, complex_lines.hpp): each part of X's
// rows a row of T, each part of W's columns a column, combined on the way out. Against the
// combination of four real products, each the sum itself (streamed_lines_want): Xr·Wr − Xi·Wi and
// Xr·Wi + Xi·Wr. In complex doubles, a row's parts are a quarter of a line: 21 rows leave the last
// line of T's rows part full, and T's columns lie whole lines apart (42 reals rounded up to 48).
template <typename R>
void complex_lines_avx2_compute(const std::string& xl, const std::string& zl, const Lengths& len) {
  const double tolerance = std::is_same_v<R, float> ? 1e-4 : 1e-12;
  auto s = complex_lines<R>(xl, row_major(xl, len), "bd", row_major("bd", len), zl,
                            row_major(zl, len), len);
  ASSERT_TRUE(s.has_value()) << xl << "->" << zl;
  ASSERT_FALSE(s->in_place);
  std::int64_t nx = 1, nz = 1;
  for (char c : xl) nx *= len.at(c);
  for (char c : zl) nz *= len.at(c);
  const std::int64_t nw = len.at('b') * len.at('d');
  const Tensor xr = random_values<R>(nx, 61), xi = random_values<R>(nx, 67);
  const Tensor wr = random_values<R>(nw, 71), wi = random_values<R>(nw, 73);
  const auto product = [&](const Tensor& x, const Tensor& w) {
    return streamed_lines_want<R>(xl, zl, len, x, w);
  };
  const std::vector<double> rr = product(xr, wr), ii = product(xi, wi), ri = product(xr, wi),
                            ir = product(xi, wr);
  const auto interleave = [](const Tensor& re, const Tensor& im, std::int64_t n) {
    std::vector<R> v(static_cast<std::size_t>(2 * n));
    for (std::int64_t i = 0; i < n; ++i) v[2 * i] = re.data<R>()[i], v[2 * i + 1] = im.data<R>()[i];
    return v;
  };
  const std::vector<R> x = interleave(xr, xi, nx), w = interleave(wr, wi, nw);
  // Also over the pieces of all of uz's values each (StreamedLines::whole_runs, which the plan
  // takes where the output's lines lie 4 KB apart and the tiles fit L2).
  for (const bool stream : {false, true})
    for (const int threads : {1, 2})
      for (const bool whole : {false, true}) {
        s->whole_runs = whole;
        std::vector<R> z(static_cast<std::size_t>(2 * nz), R{7});
        run_complex_lines_avx2<R>(*s, x.data(), w.data(), z.data(), threads, stream);
        for (std::int64_t o = 0; o < nz; ++o) {
          const auto at = static_cast<std::size_t>(o);
          ASSERT_NEAR(z[2 * at], rr[at] - ii[at], tolerance)
              << xl << "->" << zl << " a = " << len.at('a') << ", c = " << len.at('c')
              << (stream ? ", streamed" : "") << ", threads " << threads
              << (whole ? ", whole runs" : "") << " at " << o << " (real)";
          ASSERT_NEAR(z[2 * at + 1], ri[at] + ir[at], tolerance)
              << xl << "->" << zl << " a = " << len.at('a') << ", c = " << len.at('c')
              << (stream ? ", streamed" : "") << ", threads " << threads
              << (whole ? ", whole runs" : "") << " at " << o << " (imag)";
        }
      }
}

// Our AVX2 tiles take complex plans where they take real ones (own_lines_avx2, in complex
// elements): these shapes wherever the kernels run AVX2 alone, and not efbad,cf->abcde (TCCG case
// 6's layout) where its summed elements lie 4 KB apart, all their lines on one set of L1. And they
// compute them: rows whose parts leave a line of T part full (a = 21 in doubles, 13 in floats),
// columns past a block of six reals (b = 7: 14 columns of T), lines of the output part full and
// many (c = 19, 37), and pieces over several values of the next index (dcea->eabc).
TEST(Streamed, ComplexLinesGoThroughOurAvx2Kernel) {
  for (const auto& [a, b, c, d] :
       {std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>{21, 7, 19, 7},
        {13, 24, 37, 5},
        {32, 3, 9, 16}}) {
    const Lengths len{{'a', a}, {'b', b}, {'c', c}, {'d', d}};
    const std::int64_t rows = a;  // (a structured binding, which a lambda cannot capture)
    const auto taken = [&](auto part) {
      using R = decltype(part);
      const auto s = complex_lines<R>("dca", row_major("dca", len), "bd", row_major("bd", len),
                                      "abc", row_major("abc", len), len);
      ASSERT_TRUE(s.has_value());
      EXPECT_EQ(own_lines_avx2<std::complex<R>>(*s), writes_stream() && !streams())
          << "a = " << rows;
    };
    taken(0.0);
    taken(0.0f);
    complex_lines_avx2_compute<double>("dca", "abc", len);
    complex_lines_avx2_compute<float>("dca", "abc", len);
    if (HasFatalFailure()) return;
  }
  const Lengths len{{'a', 8}, {'b', 6}, {'c', 19}, {'d', 5}, {'e', 8}};
  complex_lines_avx2_compute<double>("dcea", "eabc", len);
  complex_lines_avx2_compute<float>("dcea", "eabc", len);
  // f's values b·a·d = 256 complex doubles (4 KB) apart.
  const Lengths apart{{'a', 4}, {'b', 4}, {'c', 6}, {'d', 16}, {'e', 8}, {'f', 3}};
  const auto s =
      complex_lines<double>("efbad", row_major("efbad", apart), "cf", row_major("cf", apart),
                            "abcde", row_major("abcde", apart), apart);
  ASSERT_TRUE(s.has_value());
  EXPECT_FALSE(own_lines_avx2<std::complex<double>>(*s));
}
#endif

// The summed elements' lines of X spread over the sets of L1 (summed_lines_spread, which both our
// streamed-lines kernels ask) in TCCG case 2's layout (dca, d 738 KB apart in doubles: eight sets)
// and case 7's (ecbfa, f 384 bytes apart), not in case 6's (efbad, f 384 KB apart: one set), so
// that our AVX2 kernel takes the first two where it runs and leaves the third to libxsmm's, whose
// calls there fetch X two calls ahead rather than one (lines_fetch_ahead).
TEST(Streamed, SummedElementsWhoseLinesShareOneSetAreLeftToLibxsmm) {
  const bool avx2 = writes_stream() && !streams();
  const auto spread = [&](const std::string& xl, const std::string& wl, const std::string& zl,
                          const Lengths& len, bool want) {
    const auto s = streamed_lines<double>(xl, row_major(xl, len), wl, row_major(wl, len), zl,
                                          row_major(zl, len), len);
    ASSERT_TRUE(s.has_value()) << xl;
    EXPECT_EQ(summed_lines_spread<double>(*s), want) << xl;
    EXPECT_EQ(own_lines_avx2<double>(*s), avx2 && want) << xl;
    EXPECT_EQ(lines_fetch_ahead<double>(*s), want ? 1 : 2) << xl;
  };
  spread("dca", "bd", "abc", {{'a', 312}, {'b', 24}, {'c', 296}, {'d', 312}}, true);
  spread("ecbfa", "fd", "abcde", {{'a', 48}, {'b', 32}, {'c', 32}, {'d', 24}, {'e', 48}, {'f', 48}},
         true);
  spread("efbad", "cf", "abcde", {{'a', 48}, {'b', 32}, {'c', 24}, {'d', 32}, {'e', 48}, {'f', 32}},
         false);
}

// A streamed-lines call fetches the part of X of the call `ahead` calls on: in its own piece while
// it has as many calls left, then among the next piece's, at most its last.
TEST(Streamed, CallsFetchAheadIntoTheNextPiece) {
  const Piece p{1000, 0, 64, 8}, next{2000, 0, 64, 8}, short_next{3000, 0, 64, 1};
  const std::int64_t x_us = 10;
  EXPECT_EQ(fetched_lines(p, next, 0, 1, x_us), 1010);
  EXPECT_EQ(fetched_lines(p, next, 0, 2, x_us), 1020);
  EXPECT_EQ(fetched_lines(p, next, 5, 2, x_us), 1070);
  EXPECT_EQ(fetched_lines(p, next, 6, 2, x_us), 2000);
  EXPECT_EQ(fetched_lines(p, next, 7, 2, x_us), 2010);
  EXPECT_EQ(fetched_lines(p, next, 7, 1, x_us), 2000);
  EXPECT_EQ(fetched_lines(p, short_next, 7, 2, x_us), 3000);
  EXPECT_EQ(fetched_lines(p, p, 7, 2, x_us), 1010);  // the last piece: its own calls again
}

// Streamed lines in floats: TCCG's 72 values of the operand's unit-stride index a (four and a half
// vectors) in one piece where the summed elements lie beyond them (case 4's layout, deca: e 216
// apart), in 48 + 24 where the summed elements continue their run (dcea: e 72 apart).
TEST(Streamed, FloatPiecesAreWholeWhereTheSummedElementsLieApart) {
  const Lengths len{{'a', 72}, {'b', 6}, {'c', 3}, {'d', 17}, {'e', 5}};
  const std::vector<std::int64_t> ws{5, 1}, zs{6 * 3 * 17, 3 * 17, 17, 1};
  const auto rows = [&](const std::string& xl, const std::vector<std::int64_t>& xs) {
    const auto s = streamed_lines<float>(xl, xs, "be", ws, "abcd", zs, len);
    std::set<std::int64_t> r;
    if (s)
      for (const Piece& p : s->pieces) r.insert(p.rows);
    return r;
  };
  EXPECT_EQ(rows("deca", {5 * 3 * 72, 3 * 72, 72, 1}), (std::set<std::int64_t>{72}));
  EXPECT_EQ(rows("dcea", {3 * 5 * 72, 5 * 72, 72, 1}), (std::set<std::int64_t>{24, 48}));
}

// A plan's pieces are counted before they are made: Pieces holds what it was made for, in order,
// and refuses one more. TCCG case 5's plan (ebad,ce->abcd, in place: 15,552 pieces covering its
// 72^3 rows once, one run of d's 72 values for each of the 5,184 others) lies in recycled memory:
// made again, as every run makes it, it maps nothing afresh.
TEST(Streamed, PiecesOfAPlanAreCountedAndComeFromRecycledMemory) {
  Pieces few(2);
  few.push_back({1, 2, 3, 4});
  few.push_back({5, 6, 7, 8});
  EXPECT_THROW(few.push_back({9, 9, 9, 9}), Error);
  ASSERT_EQ(few.size(), 2u);
  EXPECT_EQ(few.front().x, 1);
  EXPECT_EQ(few.back().lines, 8);
  EXPECT_EQ(std::distance(few.begin(), few.end()), 2);

  const Lengths len{{'a', 72}, {'b', 72}, {'c', 24}, {'d', 72}, {'e', 72}};
  const auto plan = [&] {
    return streamed_lines<double>("ebad", row_major("ebad", len), "ce", row_major("ce", len),
                                  "abcd", row_major("abcd", len), len);
  };
  const auto s = plan();
  ASSERT_TRUE(s && s->in_place);
  std::int64_t rows = 0;
  for (const Piece& p : s->pieces) rows += p.rows * p.lines;
  EXPECT_EQ(rows, 72 * 72 * 72);
  EXPECT_GT(s->pieces.size(), 10000u);
  EXPECT_EQ(s->runs.size(), 72u * 72u);
  for (const Piece& r : s->runs) EXPECT_EQ(r.rows, 72);
  EXPECT_TRUE(s->whole.empty());
  if (recycles_large_tensors()) {
    EXPECT_TRUE(plan());  // beside s: blocks of its own, kept when it is dropped
    const std::uint64_t before = fresh_mappings();
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(plan());
    EXPECT_EQ(fresh_mappings(), before);
  }
}

// Where one piece takes all of ux's values and they leave its last vector part full, a piece takes
// the fewest values of the next index in X that fill whole vectors: TCCG case 4's layout (deca,
// a = 72 floats, four and a half vectors) two values of c at a time where c's length is even, one
// where it is odd. Computed through either kernel (ours in floats) in floats and doubles (a = 24
// and 12, a line and a half, then e's values two at a time, in tiles cut where e's value changes),
// on two threads, streamed or not, and agreeing with the reference.
TEST(Streamed, PiecesTakeValuesOfTheNextIndexWhereOneLeavesAVectorPartFull) {
  for (const std::int64_t c : {4, 3}) {
    const Lengths len{{'a', 72}, {'b', 6}, {'c', c}, {'d', 17}, {'e', 5}};
    const auto s = streamed_lines<float>("deca", {5 * c * 72, c * 72, 72, 1}, "be", {5, 1}, "abcd",
                                         {6 * c * 17, c * 17, 17, 1}, len);
    ASSERT_TRUE(s.has_value());
    for (const Piece& p : s->pieces) EXPECT_EQ(p.rows, c % 2 == 0 ? 144 : 72) << "c = " << c;
  }
  const Lengths floats{{'a', 24}, {'b', 6}, {'c', 19}, {'d', 5}, {'e', 4}};
  const auto s =
      streamed_lines<float>("dcea", row_major("dcea", floats), "bd", row_major("bd", floats),
                            "eabc", row_major("eabc", floats), floats);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->pieces.front().rows, 48);
  EXPECT_EQ(s->span, 24);
  for (const bool own : {true, false}) {
    streamed_lines_compute<float>("dcea", "eabc", floats, own);
    if (HasFatalFailure()) return;
    streamed_lines_compute<double>("dcea", "eabc",
                                   {{'a', 12}, {'b', 6}, {'c', 19}, {'d', 5}, {'e', 4}}, own);
    if (HasFatalFailure()) return;
  }
}

// In place, in floats (a line of 16): where ux's values leave a line part full, the rows' indices
// that run on from ux in both X and the output make one run with it, cut into pieces of whole
// lines (TCCG case 9's shape, ea,ebcd->abcd with d = 24, c = 4, b = 3: 288 rows in four pieces of
// 64 and one of 32); where ux's values are whole lines (d = 32), each value of c and b is a piece
// of its own.
TEST(Streamed, InPlaceRowsThatRunOnInBothAreOnePieceOfWholeLines) {
  const auto plan = [](std::int64_t d, std::int64_t a_stride) {
    const Lengths len{{'a', 5}, {'b', 3}, {'c', 4}, {'d', d}, {'e', 6}};
    const std::int64_t n = 3 * 4 * d;
    const std::vector<std::int64_t> ws{5, 1}, xs{n, 4 * d, d, 1}, zs{a_stride, 4 * d, d, 1};
    return streamed_lines<float>("ea", ws, "ebcd", xs, "abcd", zs, len);
  };
  const auto s = plan(24, 3 * 4 * 24);
  ASSERT_TRUE(s.has_value());
  EXPECT_TRUE(s->in_place);
  std::vector<std::int64_t> rows, at;
  for (const Piece& p : s->pieces) rows.push_back(p.rows), at.push_back(p.c);
  EXPECT_EQ(rows, (std::vector<std::int64_t>{64, 64, 64, 64, 32}));
  EXPECT_EQ(at, (std::vector<std::int64_t>{0, 64, 128, 192, 256}));

  // Whole lines already: a piece per value of c and b.
  const auto whole = plan(32, 3 * 4 * 32);
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(whole->pieces.size(), 12u);
  for (const Piece& p : whole->pieces) EXPECT_EQ(p.rows, 32);
}

// Our in-place kernel (place_kernel.hpp) on ec,abed->abcd, TCCG case 11's shape, with the output's
// columns c `pad` elements further apart than d's run: each run of d summed whole, its last
// register under a mask where the run ends inside it (d = 20, 33), the last tile of columns short
// (c = 5 against two, 11 against eight), on one thread and two, in ordinary stores and where
// `stream` asks and the tile is whole aligned lines (d = 72 unpadded: two columns of 576 bytes), in
// streaming ones. The padding between runs is left as it was. With `narrow` false, its tiles of
// 512-bit registers, also on ebad (case 5's layout: the summed elements e apart from the run).
void place_kernel_computes(std::int64_t d, std::int64_t c, std::int64_t pad, bool narrow = true,
                           const std::string& xl = "abed") {
  const Lengths len{{'a', 2}, {'b', 3}, {'c', c}, {'d', d}, {'e', 7}};
  const std::int64_t cs = d + pad;
  const bool apart = xl == "ebad";
  const std::vector<std::int64_t> ws{c, 1},
      xs = apart ? std::vector<std::int64_t>{3 * 2 * d, 2 * d, d, 1}
                 : std::vector<std::int64_t>{3 * 7 * d, 7 * d, d, 1},
      zs{3 * c * cs, c * cs, cs, 1};
  // X's element (a, b, e, o).
  const auto at = [&](std::int64_t a, std::int64_t b, std::int64_t e, std::int64_t o) {
    return apart ? e * xs[0] + b * xs[1] + a * xs[2] + o : a * xs[0] + b * xs[1] + e * xs[2] + o;
  };
  const auto s = streamed_lines<float>("ec", ws, xl, xs, "abcd", zs, len);
  ASSERT_TRUE(s.has_value()) << d;
  ASSERT_TRUE(s->in_place);
  EXPECT_EQ(s->run, d);
  ASSERT_TRUE((narrow ? own_place<float>(*s) : own_place_wide<float>(*s)) || !streams()) << d;
  const Tensor w = random_values<float>(7 * c, 61), x = random_values<float>(6 * 7 * d, 67);
  for (const int threads : {1, 2})
    for (const bool stream : {false, true}) {
      Tensor z(Dtype::f32, {6 * c * cs + 16});  // 64-byte aligned, as the library allocates
      std::fill(z.data<float>(), z.data<float>() + z.size(), 7.0f);
      const bool ran = run_streamed_place_own<float>(
          *s, x.data<float>(), w.data<float>(), z.data<float>(), threads, stream, true, narrow);
      // (With AVX2 alone, our AVX2 kernel takes the summed elements apart: ebad.)
      ASSERT_EQ(ran, streams() || own_place_chunks<float>(*s)) << d;
      if (!ran) return;
      for (std::int64_t ab = 0; ab < 6; ++ab)
        for (std::int64_t ci = 0; ci < c; ++ci)
          for (std::int64_t o = 0; o < cs; ++o) {
            const float got = z.data<float>()[ab * c * cs + ci * cs + o];
            if (o >= d) {
              ASSERT_EQ(got, 7.0f)
                  << "padding, d = " << d << " at " << ab << ", " << ci << ", " << o;
              continue;
            }
            double want = 0;
            for (std::int64_t e = 0; e < 7; ++e)
              want += static_cast<double>(w.data<float>()[e * c + ci]) *
                      x.data<float>()[at(ab / 3, ab % 3, e, o)];
            ASSERT_NEAR(got, want, 1e-4)
                << xl << ", d = " << d << ", c = " << c << ", pad " << pad
                << (stream ? ", streamed" : "") << (narrow ? "" : ", 512-bit") << ", threads "
                << threads << " at " << ab << ", " << ci << ", " << o;
          }
    }
}

// The in-place plan of ec,X->abcd in floats, d's run `d` long: X = abed (TCCG case 11's layout)
// or ebad (case 5's); nothing where the plan is not in place.
std::optional<StreamedLines> in_place_plan(std::int64_t d, const std::string& xl) {
  const Lengths len{{'a', 2}, {'b', 3}, {'c', 5}, {'d', d}, {'e', 7}};
  auto s = streamed_lines<float>("ec", row_major("ec", len), xl, row_major(xl, len), "abcd",
                                 row_major("abcd", len), len);
  if (!s || !s->in_place) return std::nullopt;
  return s;
}

TEST(Streamed, InPlaceRunsGoWholeThroughOurKernel) {
  for (const auto& [d, c, pad] : {std::tuple{72, 5, 0},
                                  {72, 6, 0},
                                  {72, 5, 3},
                                  {20, 11, 0},
                                  {20, 11, 5},
                                  {33, 6, 2},
                                  {40, 9, 0},
                                  {79, 3, 1}}) {
    place_kernel_computes(d, c, pad);
    if (HasFatalFailure()) return;
  }
  // Not ours: runs of whole 512-bit registers (d = 32: libxsmm's fill them), longer than
  // kPlaceVectors registers (d = 88), or whose summed elements lie apart in X (ebad: e past a, b).
  const auto takes = [](std::int64_t d, const std::string& xl) {
    const auto s = in_place_plan(d, xl);
    return s.has_value() && own_place<float>(*s);
  };
  EXPECT_EQ(takes(72, "abed"), streams());
  EXPECT_FALSE(takes(32, "abed"));
  EXPECT_FALSE(takes(88, "abed"));
  EXPECT_FALSE(takes(72, "ebad"));
}

// In 512-bit registers (where the processor runs them at full width), runs of more than four
// registers and at most five, the last part full, whether the summed elements continue the run
// (abed: four columns to a tile) or lie apart (ebad: five): tiles of columns whole and short
// (c = 5, 6, 11).
TEST(Streamed, InPlaceRunsOfFiveRegistersGoWholeThroughOurWideKernel) {
  for (const std::string xl : {"abed", "ebad"})
    for (const auto& [d, c, pad] :
         {std::tuple{72, 5, 0}, {72, 6, 3}, {72, 11, 0}, {79, 11, 1}, {66, 9, 2}}) {
      place_kernel_computes(d, c, pad, /*narrow=*/false, xl);
      if (HasFatalFailure()) return;
    }
  const auto takes = [](std::int64_t d, const std::string& xl) {
    const auto s = in_place_plan(d, xl);
    return s.has_value() && own_place_wide<float>(*s);
  };
  EXPECT_EQ(takes(72, "abed"), streams());
  EXPECT_EQ(takes(72, "ebad"), streams());
  EXPECT_FALSE(takes(64, "abed"));  // whole registers: libxsmm's fill them
  EXPECT_FALSE(takes(48, "ebad"));
  EXPECT_FALSE(takes(88, "abed"));
}

// Our AVX2 streamed-rows kernel (rows_line_block, rows_kernel.hpp) on bda,dc->abc, TCCG case 1's
// shape, X's rows contiguous at each summed element d, and with a batch index e in all three
// (ebda,edc->eabc): pieces whose rows end part-way through a line (a = 21 and 37: in doubles,
// lines of 8 and pieces of up to 24 rows; in floats, lines of 16), columns that end part-way
// through a block of six and through a line (c = 13, 40), and an output larger than the cache in
// doubles (its whole lines streamed), on one thread and two.
// Run directly, so on any processor with AVX2, whatever its widest set.
#if EINSUMDB_AVX2
template <typename T>
void rows_avx2_compute(std::int64_t A, std::int64_t B, std::int64_t C, std::int64_t D,
                       std::int64_t E) {
  const Lengths len{{'a', A}, {'b', B}, {'c', C}, {'d', D}, {'e', E}};
  const auto s = streamed<T>("ebda", row_major("ebda", len), "edc", row_major("edc", len), "eabc",
                             row_major("eabc", len), len);
  ASSERT_TRUE(s.has_value()) << A << ", " << C;
  ASSERT_EQ(s->x_rs, 1);
  EXPECT_EQ(own_rows_avx2<T>(*s), writes_stream() && !streams());
  EXPECT_EQ(s->large, E * A * B * C * static_cast<std::int64_t>(sizeof(T)) > kCachedBytes);
  const Tensor x = random_values<T>(E * B * D * A, 81), w = random_values<T>(E * D * C, 83);
  const double tolerance = std::is_same_v<T, float> ? 1e-4 : 1e-12;
  for (const int threads : {1, 2}) {
    Tensor z(dtype_of<T>(), {E * A * B * C});
    std::fill(z.data<T>(), z.data<T>() + z.size(), T{7});
    run_streamed_rows_avx2<T>(*s, x.data<T>(), w.data<T>(), z.data<T>(), threads);
    for (std::int64_t e = 0; e < E; ++e)
      for (std::int64_t a = 0; a < A; ++a)
        for (std::int64_t b = 0; b < B; ++b)
          for (std::int64_t c = 0; c < C; ++c) {
            double want = 0;
            for (std::int64_t d = 0; d < D; ++d)
              want += static_cast<double>(x.data<T>()[((e * B + b) * D + d) * A + a]) *
                      w.data<T>()[(e * D + d) * C + c];
            ASSERT_NEAR(z.data<T>()[((e * A + a) * B + b) * C + c], want, tolerance)
                << "a = " << A << ", c = " << C << ", threads " << threads << " at " << e << ", "
                << a << ", " << b << ", " << c;
          }
  }
}

TEST(Streamed, RowsContiguousAtEachSummedElementGoThroughOurAvx2Kernel) {
  for (const auto& [a, b, c, d, e] :
       {std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t>{21, 3, 13,
                                                                                         7, 1},
        {37, 2, 12, 9, 2},
        {37, 3, 30, 40, 1},
        {24, 5, 40, 31, 2},
        {312, 208, 24, 2, 1}}) {
    rows_avx2_compute<double>(a, b, c, d, e);
    rows_avx2_compute<float>(a, b, c, d, e);
    if (HasFatalFailure()) return;
  }
  // Not ours: each row's summed elements contiguous in X (ik,kj->ij), where libxsmm's kernel reads
  // X as it lies.
  const Lengths len{{'i', 100}, {'k', 48}, {'j', 8}};
  const auto s = streamed<double>("ik", {48, 1}, "kj", {8, 1}, "ij", {8, 1}, len);
  ASSERT_TRUE(s.has_value());
  EXPECT_FALSE(own_rows_avx2<double>(*s));
}
#endif

// Our AVX2 in-place kernel (place_chunk, place_kernel.hpp) on ebad,ce->abcd, TCCG case 5's shape,
// whose summed elements e lie apart from d's run in X, with the output's columns c `pad` elements
// further apart than the run: runs of one chunk or several, the last chunk short and its last
// register under a mask where the run ends inside one (d = 20 doubles: five registers, a chunk of
// three and one of two; d = 33 floats), the last tile of columns short (c = 5 against four), on one
// thread and two, in the chunks' shape the library runs and in another. The padding between runs
// is left as it was.
template <typename T, int V, int J>
void place_chunks_compute(std::int64_t d, std::int64_t c, std::int64_t pad) {
  const Lengths len{{'a', 2}, {'b', 3}, {'c', c}, {'d', d}, {'e', 7}};
  const std::int64_t cs = d + pad;
  const std::vector<std::int64_t> ws{7, 1}, xs{3 * 2 * d, 2 * d, d, 1},
      zs{3 * c * cs, c * cs, cs, 1};
  const auto s = streamed_lines<T>("ce", ws, "ebad", xs, "abcd", zs, len);
  ASSERT_TRUE(s.has_value()) << d;
  ASSERT_TRUE(s->in_place);
  EXPECT_EQ(s->run, d);
  EXPECT_EQ(own_place_chunks<T>(*s), writes_stream() && !streams()) << d;
  const Tensor w = random_values<T>(c * 7, 71), x = random_values<T>(7 * 6 * d, 73);
  for (const int threads : {1, 2}) {
    Tensor z(dtype_of<T>(), {6 * c * cs + 16});
    std::fill(z.data<T>(), z.data<T>() + z.size(), T{7});
    run_place_chunks<T, V, J>(*s, x.data<T>(), w.data<T>(), z.data<T>(), threads);
    for (std::int64_t ab = 0; ab < 6; ++ab)  // (a, b) as one index: b·2 + a in X, a·3 + b in z
      for (std::int64_t ci = 0; ci < c; ++ci)
        for (std::int64_t o = 0; o < cs; ++o) {
          const std::int64_t a = ab / 3, b = ab % 3;
          const T got = z.data<T>()[a * 3 * c * cs + b * c * cs + ci * cs + o];
          if (o >= d) {
            ASSERT_EQ(got, T{7}) << "padding, d = " << d << " at " << ab << ", " << ci << ", " << o;
            continue;
          }
          double want = 0;
          for (std::int64_t e = 0; e < 7; ++e)
            want += static_cast<double>(w.data<T>()[ci * 7 + e]) *
                    x.data<T>()[e * 6 * d + b * 2 * d + a * d + o];
          ASSERT_NEAR(got, want, 1e-4)
              << "d = " << d << ", c = " << c << ", pad " << pad << ", threads " << threads
              << " at " << ab << ", " << ci << ", " << o;
        }
  }
}

TEST(Streamed, InPlaceRunsWhoseSumLiesApartGoThroughOurAvx2Kernel) {
  if (!writes_stream()) GTEST_SKIP() << "the kernels do not run AVX2 here";
  for (const auto& [d, c, pad] :
       {std::tuple{72, 24, 0}, {72, 5, 0}, {20, 4, 3}, {33, 9, 0}, {40, 1, 1}, {16, 6, 2}}) {
    place_chunks_compute<double, kChunkRegisters, kChunkColumns>(d, c, pad);
    place_chunks_compute<double, 2, 6>(d, c, pad);
    place_chunks_compute<float, kChunkRegisters, kChunkColumns>(d, c, pad);
    if (HasFatalFailure()) return;
  }
  // Not ours: summed elements that continue the run in X (TCCG case 11's abed), or one pass over
  // a panel larger than half of L2.
  const auto takes = [](std::int64_t d, std::int64_t e, const std::string& xl) {
    const Lengths len{{'a', 2}, {'b', 3}, {'c', 5}, {'d', d}, {'e', e}};
    const auto s = streamed_lines<double>("ec", row_major("ec", len), xl, row_major(xl, len),
                                          "abcd", row_major("abcd", len), len);
    return s.has_value() && s->in_place && own_place_chunks<double>(*s);
  };
  EXPECT_EQ(takes(72, 7, "ebad"), !streams());
  EXPECT_FALSE(takes(72, 7, "abed"));
  EXPECT_FALSE(takes(72, l2_bytes() / 8 / 72, "ebad"));
}

}  // namespace
}  // namespace einsumdb::tensor_gemm

// ---- the whole strategy

namespace einsumdb {
namespace {

using testing::binary_spec;
using testing::terms_of;

// tensor_gemm on the 48 contractions of the TCCG benchmark (tests/data/tccg.jsonl) at two sets
// of lengths: short ones, that wrap index runs inside micro-tiles, and longer ones, that give
// whole micro-panels and partial ones at the edges; in f32, f64, c64 and c128 (complex streamed
// as it lies, complex_lines.hpp, on 1 and 2 threads, or in real form, real_form.hpp, on one; not
// under a cap of the kernels), on 1 and 2 threads, and where it streams an operand, on its packed
// path too: equal to the reference every time.
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
      for (Dtype dtype : {Dtype::f32, Dtype::f64, Dtype::c64, Dtype::c128}) {
        // The real form runs the real kernels the f32 and f64 runs test under every cap
        // (EINSUMDB_ISA): complex once, with the processor's own.
        if (is_complex(dtype) && kernel_isa() != supported_isa()) continue;
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
            // (Complex on two threads where it streams: the real form's threads are f64's.)
            if (is_complex(dtype) && threads == 2 && (packed || !streams)) continue;
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
// lengths that make both tensors over 8 MB and leave partial tiles at every edge. In complex
// numbers too (the parts below the rows' indices in real form, parts_below), in c64, whose output
// is at least half the operand.
TEST(Strategies, TensorGemmTilesLargeTensorsContiguousAlongDifferentIndices) {
  for (const auto& [spec, f_len, dtype] : {std::tuple{"efbad,cf->abcde", 6, Dtype::f64},
                                           {"ecbfa,fd->abcde", 17, Dtype::f64},
                                           {"efbad,cf->abcde", 6, Dtype::c64},
                                           {"ecbfa,fd->abcde", 17, Dtype::c64}}) {
    if (is_complex(dtype) && kernel_isa() != supported_isa()) continue;
    const BatchedEinsum e = binary_spec(
        spec, {{'a', 33}, {'b', 17}, {'c', 6}, {'d', 18}, {'e', 19}, {'f', f_len}}, dtype);
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
// straddling the blocks of KC summed elements, in the real dtypes (a tile is a line of each
// operand's index: sum_tile; the packing of one operand transposes runs of depths a line apart) and
// the complex ones (the tiles in real form are of the indices above the parts, each element's parts
// side by side: ComplexPartsGoInsideTilesOfTheSummedIndicesAboveThem).
TEST(Strategies, TensorGemmTilesTheSummedIndicesOfLargeOperandsContiguousAlongDifferentOnes) {
  for (Dtype dtype : {Dtype::f64, Dtype::f32, Dtype::c128, Dtype::c64}) {
    const int ab = dtype == Dtype::f64 || dtype == Dtype::c64 ? 10 : dtype == Dtype::c128 ? 5 : 20;
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

// The operands' and the output's layouts of a binary einsum such as "ij,jk->ik".
std::array<std::string, 3> binary_layouts(const std::string& spec) {
  const auto arrow = spec.find("->"), comma = spec.find(',');
  return {spec.substr(0, comma), spec.substr(comma + 1, arrow - comma - 1), spec.substr(arrow + 2)};
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
          // TCCG case 4's 72 values of the operand's unit-stride index: three pieces of 24 in
          // f64, one of four and a half vectors in f32; the output's lines cut short (d = 19).
          {"deca,be->abcd",
           {{'a', 72}, {'b', 5}, {'c', 3}, {'d', 19}, {'e', 6}},
           Dtype::f32,
           "lines"},
          {"deca,be->abcd",
           {{'a', 72}, {'b', 5}, {'c', 3}, {'d', 19}, {'e', 6}},
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
          // ... and in floats where ux's values leave a line part full (d = 24) and the rows'
          // next indices run on in both (c, b): one run of 288 rows, in pieces of whole lines.
          {"ea,ebcd->abcd",
           {{'a', 5}, {'b', 3}, {'c', 4}, {'d', 24}, {'e', 6}},
           Dtype::f32,
           "lines"},
      },
      17);
}

// The same in complex numbers (complex_lines.hpp): the operand streamed as it lies, its parts two
// rows of each of its rows, against the other's parts as two columns of each of its columns, each
// complex result combined from four real ones as the tiles go out. Lines cut short (13 values: a
// line holds 4 complex doubles, 8 complex floats), rows in pieces over several values of a second
// index, one summed element and many, a batch index, either operand on the left, an output larger
// than the cache (its lines streamed around it), one thread and two, both complex dtypes; and where
// the operand's unit-stride index is too short for a line, the real form's path (real_form.hpp).
// Streamed rows likewise, where the large operand's rows are contiguous at each summed element
// (TCCG case 1): each row's parts two of the kernel's rows, each output row combined from two of
// its results. And in place (below). Each agrees with the reference, streamed or not.
TEST(Strategies, TensorGemmStreamsAComplexOperandWithItsPartsAsRows) {
  expect_paths(
      {
          {"dca,bd->abc", {{'a', 37}, {'b', 6}, {'c', 13}, {'d', 20}}, Dtype::c128, "lines"},
          {"bd,dca->abc", {{'a', 37}, {'b', 6}, {'c', 13}, {'d', 20}}, Dtype::c64, "lines"},
          {"dca,bd->abc", {{'a', 16}, {'b', 6}, {'c', 16}, {'d', 1}}, Dtype::c128, "lines"},
          {"efbad,cf->abcde",
           {{'a', 6}, {'b', 2}, {'c', 5}, {'d', 16}, {'e', 11}, {'f', 7}},
           Dtype::c128,
           "lines"},
          {"efbad,cf->abcde",
           {{'a', 4}, {'b', 2}, {'c', 3}, {'d', 16}, {'e', 20}, {'f', 3}},
           Dtype::c64,
           "lines"},
          {"ecbfa,fd->abcde",
           {{'a', 24}, {'b', 3}, {'c', 2}, {'d', 5}, {'e', 11}, {'f', 7}},
           Dtype::c64,
           "lines"},
          {"deca,be->abcd",
           {{'a', 72}, {'b', 5}, {'c', 3}, {'d', 19}, {'e', 6}},
           Dtype::c128,
           "lines"},
          {"deca,be->abcd",  // one piece of 36 complex floats, four and a half vectors of parts
           {{'a', 36}, {'b', 5}, {'c', 3}, {'d', 19}, {'e', 6}},
           Dtype::c64,
           "lines"},
          {"deca,be->abcd",  // pieces of two values of c: 72 complex floats, nine vectors
           {{'a', 36}, {'b', 5}, {'c', 4}, {'d', 19}, {'e', 6}},
           Dtype::c64,
           "lines"},
          {"zdca,zbd->zabc",
           {{'a', 9}, {'b', 6}, {'c', 8}, {'d', 5}, {'z', 3}},
           Dtype::c64,
           "lines"},
          {"dca,bd->abc", {{'a', 3}, {'b', 6}, {'c', 13}, {'d', 20}}, Dtype::c128, "packed"},
          // Streamed rows (TCCG case 1): rows in pieces with a short last one, one summed
          // element and many, a batch index, either operand on the left, columns that end
          // part of a line.
          {"bda,dc->abc", {{'a', 37}, {'b', 29}, {'c', 24}, {'d', 300}}, Dtype::c128, "rows"},
          {"dc,bda->abc", {{'a', 37}, {'b', 29}, {'c', 7}, {'d', 7}}, Dtype::c64, "rows"},
          {"bda,dc->abc", {{'a', 50}, {'b', 3}, {'c', 6}, {'d', 1}}, Dtype::c64, "rows"},
          {"zbda,zdc->zabc",
           {{'a', 30}, {'b', 7}, {'c', 16}, {'d', 9}, {'z', 3}},
           Dtype::c128,
           "rows"},
      },
      23);
  expect_paths(
      {{"bda,dc->abc", {{'a', 640}, {'b', 40}, {'c', 24}, {'d', 30}}, Dtype::c128, "rows"}}, 37,
      true);
  expect_paths({{"efbad,cf->abcde",
                 {{'a', 24}, {'b', 8}, {'c', 6}, {'d', 16}, {'e', 32}, {'f', 5}},
                 Dtype::c128,
                 "lines"}},
               29, true);
  // In place (the operand runs along the output's unit-stride index: TCCG cases 5 and 9-11), each
  // tile's rows are a run of the output's, its columns evenly spaced; rows that run on together in
  // both make one run, cut into pieces of whole lines (d = 12 in c64). And in several passes of
  // the summed elements (TCCG case 19's shape, the columns' operand too large for one: 7000
  // summed elements by 20 columns are 2.2 MB of complex doubles, 1.1 MB of complex floats; the
  // last pass shorter), each pass's combined tiles added to the output.
  expect_paths(
      {
          {"ebad,ce->abcd",
           {{'a', 3}, {'b', 4}, {'c', 6}, {'d', 24}, {'e', 5}},
           Dtype::c128,
           "lines"},
          {"ec,abed->abcd",
           {{'a', 3}, {'b', 4}, {'c', 6}, {'d', 37}, {'e', 5}},
           Dtype::c64,
           "lines"},
          {"ea,ebcd->abcd",
           {{'a', 5}, {'b', 3}, {'c', 4}, {'d', 12}, {'e', 6}},
           Dtype::c64,
           "lines"},
          // 72 columns of complex doubles (1152 bytes), TCCG case 10's.
          {"eb,aecd->abcd",
           {{'a', 2}, {'b', 72}, {'c', 3}, {'d', 20}, {'e', 9}},
           Dtype::c128,
           "lines"},
          {"adec,ebd->abc",
           {{'a', 2}, {'b', 20}, {'c', 24}, {'d', 70}, {'e', 100}},
           Dtype::c128,
           "lines"},
          {"adec,ebd->abc",
           {{'a', 2}, {'b', 20}, {'c', 24}, {'d', 70}, {'e', 100}},
           Dtype::c64,
           "lines"},
      },
      31);
  // In place in an output larger than the cache, its columns a multiple of 4 KB apart (TCCG case
  // 9's, 72³ complex floats; here 256 KB): combined results streamed around the cache (with AVX2 as
  // with AVX-512), where ordinary stores would have the columns share their sets of L1 (the
  // baseline's, which leaves it to the real form).
  expect_paths({{"ea,ebcd->abcd",
                 {{'a', 40}, {'b', 64}, {'c', 32}, {'d', 16}, {'e', 3}},
                 Dtype::c64,
                 kernel_isa() == Isa::baseline ? "packed" : "lines"}},
               41, true);
}

// The complex plans' own choices (complex_lines.hpp), on contiguous operands: in complex floats, a
// run that five vectors hold goes in one piece (TCCG case 4's 36 values, 4.5 vectors of parts) and
// a longer one in shares of four vectors (72: three pieces of 24); complex doubles take up to 2 KB
// of columns (72 of them, TCCG case 10's; not 129); and in place, the summed elements go in as
// many passes as the real plan's (case 19's shape), which transposed lines cannot take.
TEST(Strategies, TensorGemmComplexPlansCutPiecesAndPassesAsTheRealOnes) {
  using namespace einsumdb::tensor_gemm;
  const auto plan = [](const std::string& spec, const std::map<char, std::int64_t>& len,
                       auto part) {
    const auto [x, y, z] = binary_layouts(spec);
    return complex_lines<decltype(part)>(x, kernels::row_major_strides(x, len), y,
                                         kernels::row_major_strides(y, len), z,
                                         kernels::row_major_strides(z, len), len);
  };
  const std::map<char, std::int64_t> case4 = {{'a', 36}, {'b', 5}, {'c', 3}, {'d', 19}, {'e', 6}};
  auto s = plan("deca,be->abcd", case4, 0.0f);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->longest, 36);
  auto longer = case4;
  longer['a'] = 72;
  s = plan("deca,be->abcd", longer, 0.0f);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->longest, 24);
  const std::map<char, std::int64_t> case10 = {{'a', 2}, {'b', 72}, {'c', 3}, {'d', 20}, {'e', 9}};
  EXPECT_TRUE(plan("eb,aecd->abcd", case10, 0.0));
  auto wider = case10;
  wider['b'] = 129;
  EXPECT_FALSE(plan("eb,aecd->abcd", wider, 0.0));
  const std::map<char, std::int64_t> case19 = {
      {'a', 2}, {'b', 20}, {'c', 24}, {'d', 70}, {'e', 100}};
  const auto strides = [&](const std::string& l) { return kernels::row_major_strides(l, case19); };
  const auto real = streamed_lines<std::complex<double>>(
      "adec", strides("adec"), "ebd", strides("ebd"), "abc", strides("abc"), case19);
  ASSERT_TRUE(real);  // in place, in passes
  EXPECT_TRUE(real->in_place);
  EXPECT_LT(real->kc, static_cast<std::int64_t>(real->wk.size()));
  s = plan("adec,ebd->abc", case19, 0.0);
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->in_place);
  EXPECT_EQ(s->kc, real->kc);
}

// Where the large operand's summed elements lie apart (each kernel call reads its runs at all of
// them) and are many, streamed lines take runs of three vectors rather than four: TCCG case 2's
// 312 summed elements (dca,bd->abc) in f64 and c64, but not 200 (four vectors at each, 50 KB), and
// not floats' runs of five.
TEST(Strategies, TensorGemmStreamedLinesShortenRunsOverManySummedElementsApart) {
  using namespace einsumdb::tensor_gemm;
  const auto longest = [](std::int64_t a, std::int64_t d, auto element) {
    const std::map<char, std::int64_t> len = {{'a', a}, {'b', 24}, {'c', 8}, {'d', d}};
    const auto st = [&](const std::string& l) { return kernels::row_major_strides(l, len); };
    const auto s =
        streamed_lines<decltype(element)>("dca", st("dca"), "bd", st("bd"), "abc", st("abc"), len);
    return s ? s->longest : std::int64_t{-1};
  };
  EXPECT_EQ(longest(312, 312, 0.0), 24);
  EXPECT_EQ(longest(312, 200, 0.0), 32);
  EXPECT_EQ(longest(156, 312, std::complex<float>()), 24);
  EXPECT_EQ(longest(156, 200, std::complex<float>()), 32);
  EXPECT_EQ(longest(312, 312, 0.0f), 80);
}

// Through libxsmm's kernel, streamed lines whose rows and columns lie 4 KB or more apart in the
// output, over summed elements that lie apart in the operand (TCCG case 4's shape,
// deca,be->abcd), take all of the output's unit-stride index in each piece, so that each row and
// column goes out as one run: d = 21 and 37 (lines and part of one), once with the output larger
// than the cache, its whole lines streamed, and in complex doubles. Not where the summed elements
// continue the rows' run (case 3's shape, dbea,ec->abcd), nor where the columns lie near each other
// (case 7's, ecbfa,fd->abcde), nor where a piece's rows take two values of c, 21 elements apart in
// the output (a's 72 floats, four and a half vectors), nor where a run is one line. Each agrees
// with the reference, on one thread and two.
TEST(Strategies, TensorGemmStreamedLinesTakeWholeRunsWhereTheirLinesLieApart) {
  using namespace einsumdb::tensor_gemm;
  const auto whole = [](const std::string& spec, const std::map<char, std::int64_t>& len,
                        auto element) {
    const auto [x, y, z] = binary_layouts(spec);
    const auto st = [&](const std::string& l) { return kernels::row_major_strides(l, len); };
    const auto s = streamed_lines<decltype(element)>(x, st(x), y, st(y), z, st(z), len);
    EXPECT_TRUE(s) << spec;
    return s && s->whole_runs;
  };
  const std::map<char, std::int64_t> apart = {{'a', 72}, {'b', 5}, {'c', 64}, {'d', 21}, {'e', 6}};
  const std::map<char, std::int64_t> floats = {{'a', 64}, {'b', 5}, {'c', 63}, {'d', 37}, {'e', 6}};
  EXPECT_TRUE(whole("deca,be->abcd", apart, 0.0));
  EXPECT_TRUE(whole("deca,be->abcd", floats, 0.0f));
  EXPECT_FALSE(whole("deca,be->abcd", apart, 0.0f));  // rows over two values of c
  EXPECT_FALSE(whole("dbea,ec->abcd", apart, 0.0));   // the summed elements continue a's run
  // A piece's buffer (d × 24 rows × 5 columns of doubles) and W within three quarters of L2.
  auto within = apart, beyond = apart;
  within['d'] = l2_bytes() / 2 / (24 * 5 * 8);
  beyond['d'] = l2_bytes() / (24 * 5 * 8) + 8;
  EXPECT_TRUE(whole("deca,be->abcd", within, 0.0));
  EXPECT_FALSE(whole("deca,be->abcd", beyond, 0.0));
  auto one_line = apart;
  one_line['d'] = 8;
  EXPECT_FALSE(whole("deca,be->abcd", one_line, 0.0));
  auto near = apart;  // columns 13 × 21 doubles apart
  near['c'] = 13;
  EXPECT_FALSE(whole("deca,be->abcd", near, 0.0));
  EXPECT_FALSE(whole("ecbfa,fd->abcde",
                     {{'a', 72}, {'b', 4}, {'c', 3}, {'d', 5}, {'e', 21}, {'f', 6}}, 0.0));
  const std::map<char, std::int64_t> large = {{'a', 72}, {'b', 8}, {'c', 64}, {'d', 37}, {'e', 3}};
  EXPECT_TRUE(whole("deca,be->abcd", large, 0.0));
  // Complex doubles (complex_lines.hpp): a's 36 values in pieces of 12.
  const std::map<char, std::int64_t> complex = {
      {'a', 36}, {'b', 5}, {'c', 16}, {'d', 21}, {'e', 6}};
  EXPECT_TRUE(whole("deca,be->abcd", complex, std::complex<double>()));
  const auto st = [&](const std::string& l) { return kernels::row_major_strides(l, complex); };
  const auto c128 = streamed_lines<std::complex<double>>("deca", st("deca"), "be", st("be"), "abcd",
                                                         st("abcd"), complex);
  ASSERT_TRUE(c128);
  EXPECT_EQ(c128->longest, 12);
  const auto lengths = [](const std::map<char, std::int64_t>& len) {
    return std::map<char, int>(len.begin(), len.end());
  };
  expect_paths({{"deca,be->abcd", lengths(apart), Dtype::f64, "lines"},
                {"deca,be->abcd", lengths(floats), Dtype::f32, "lines"},
                {"deca,be->abcd", lengths(large), Dtype::f64, "lines"},
                {"deca,be->abcd", lengths(complex), Dtype::c128, "lines"}},
               53);
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
          // TCCG case 9's shape in floats: d's 72 values leave a line half full, and d, c and b
          // run on together in both, as one run of rows in pieces of whole lines.
          {"ea,ebcd->abcd",
           {{'a', 40}, {'b', 32}, {'c', 24}, {'d', 72}, {'e', 6}},
           Dtype::f32,
           tensor_gemm_streams() ? "lines" : "packed"},
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
// each line transposed in registers into up to eight of them (pack_across, packing_span).
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
// one libxsmm kernel per run of its columns (Gemm::write_around), or where they are two runs of a
// line each (f32's tile of 32 rows over f = 16), by our own micro-kernel a line at a time
// (Gemm::write_lines_around; it fails here with the runs swapped), or with AVX2, where each row
// of BLIS's Haswell tile is a whole line, by our own micro-kernel row by row wherever the rows lie
// (Gemm::stream_rows; it fails here with uneven rows taken as evenly spaced). Rows even and columns
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
        const std::string what = "e=" + std::to_string(e_len) + " f=" + std::to_string(f_len) +
                                 " g=" + std::to_string(g);
        for (bool stream_even : {false, true})
          expect_tensor_gemm_agrees(bound, ref, what, {{"stream_even", stream_even}});
        // Our kernel's tiles in ordinary stores (stream_line_tiles), the runs as the streamed ones.
        expect_tensor_gemm_agrees(bound, ref, what, {{"stream_line_tiles", false}});
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

// Streamed rows go through our own kernel (rows_kernel.hpp) by default where the kernels run
// AVX-512 (and with AVX2 alone, on TCCG case 1's shape), libxsmm's with "kernel": "blis", and the
// tuner's space has the latter beside the
// default; each way agrees with the reference, on one and two threads, in f32 and f64, on TCCG
// case 1's shape (rows contiguous at each summed element) and a tall, skinny product.
TEST(Strategies, TensorGemmStreamsRowsThroughOurKernelOrLibxsmms) {
  const Strategy* s = find_strategy("tensor_gemm");
  ASSERT_NE(s, nullptr);
  for (Dtype dtype : {Dtype::f32, Dtype::f64})
    for (const auto& [spec, lengths] :
         {std::pair<const char*, std::map<char, int>>{"bda,dc->abc",
                                                      {{'a', 61}, {'b', 7}, {'c', 24}, {'d', 45}}},
          {"ik,kj->ij", {{'i', 500}, {'j', 12}, {'k', 70}}}}) {
      const BatchedEinsum e = binary_spec(spec, lengths, dtype);
      const Arrays arrays = random_arrays(e, 41);
      const Bound bound(e, arrays);
      ASSERT_EQ(tensor_gemm_path(bound), "rows") << spec;
      Lengths len;
      for (const auto& [c, n] : lengths) len[c] = n;
      const auto space = s->space(e, len);
      // (With AVX2 alone, case 1's shape goes through our AVX2 kernel: rows_line_block.)
      const bool ours = tensor_gemm::streams() ||
                        (std::string(spec) == "bda,dc->abc" && tensor_gemm::writes_stream());
      EXPECT_EQ(std::count(space.begin(), space.end(), nlohmann::json{{"kernel", "blis"}}),
                ours ? 1 : 0)
          << spec;
      // Where our AVX-512 kernel's rows_tile runs (not the floats of case 1's shape on a processor
      // that runs 512 bits whole, which rows_across_tile takes), its fetches into L1 beside.
      const bool across = dtype == Dtype::f32 && std::string(spec) == "bda,dc->abc" &&
                          !tensor_gemm::runs_in_halves();
      EXPECT_EQ(std::count(space.begin(), space.end(), nlohmann::json{{"rows_fetch", "l1"}}),
                tensor_gemm::streams() && !across ? 1 : 0)
          << spec << " " << to_string(dtype);
      const Results ref = run_reference(bound);
      for (const char* kernel : {"own", "blis"})
        expect_tensor_gemm_agrees(bound, ref, std::string(spec) + " " + kernel,
                                  {{"kernel", kernel}});
      for (const char* level : {"l1", "l2"})
        for (const int threads : {1, 2})
          expect_tensor_gemm_agrees(bound, ref, std::string(spec) + " rows_fetch " + level,
                                    {{"rows_fetch", level}, {"threads", threads}});
      expect_tensor_gemm_agrees(bound, ref, spec);
    }
}

// `spec` at `lengths` streams its lines; in floats, where `ours`, and in doubles, where
// `ours_in_doubles`, through our own kernel by default with libxsmm's beside it in the tuner's
// space; otherwise without it (in doubles, with no choice of kernel there at all).
// Either kernel agrees with the reference, on one and two threads, in floats and doubles.
void streamed_lines_agree(const char* spec, const std::map<char, int>& lengths, unsigned seed,
                          bool ours, bool ours_in_doubles = false) {
  const Strategy* s = find_strategy("tensor_gemm");
  ASSERT_NE(s, nullptr);
  for (Dtype dtype : {Dtype::f32, Dtype::f64}) {
    const BatchedEinsum e = binary_spec(spec, lengths, dtype);
    const Arrays arrays = random_arrays(e, seed);
    const Bound bound(e, arrays);
    ASSERT_EQ(tensor_gemm_path(bound), "lines") << spec;
    Lengths len;
    for (const auto& [c, n] : lengths) len[c] = n;
    const auto space = s->space(e, len);
    if (dtype == Dtype::f32 || ours_in_doubles) {
      EXPECT_EQ(std::count(space.begin(), space.end(), nlohmann::json{{"kernel", "blis"}}),
                (dtype == Dtype::f32 ? ours : ours_in_doubles) ? 1 : 0)
          << spec << " " << to_string(dtype);
    } else {
      for (const auto& p : space) EXPECT_FALSE(p.contains("kernel")) << spec << ": " << p;
    }
    const Results ref = run_reference(bound);
    for (const char* kernel : {"own", "blis"})
      for (const int threads : {1, 2})
        expect_tensor_gemm_agrees(
            bound, ref, std::string(spec) + " " + std::string(to_string(dtype)) + " " + kernel,
            {{"kernel", kernel}, {"threads", threads}});
  }
}

// Streamed lines (TCCG case 2's shape, small) go through our kernel by default: with AVX-512 in
// floats, where own_lines takes them (in doubles, libxsmm's); with AVX2 alone in both
// (own_lines_avx2).
TEST(Strategies, TensorGemmStreamsLinesThroughOurKernel) {
  const bool avx2 = tensor_gemm::writes_stream() && !tensor_gemm::streams();
  streamed_lines_agree("dca,bd->abc", {{'a', 40}, {'b', 24}, {'c', 37}, {'d', 50}}, 43,
                       tensor_gemm::streams() || avx2, avx2);
}

// Complex streamed lines (the same shape in c64 and c128, complex_lines.hpp) go through our AVX2
// tiles by default where the kernels run AVX2 alone (own_lines_avx2), and the tuner's space
// then has libxsmm's kernel beside them; with AVX-512, libxsmm's alone, and no choice of kernel.
// Either agrees with the reference, on one and two threads.
TEST(Strategies, TensorGemmStreamsComplexLinesThroughOurAvx2Kernel) {
  const bool avx2 = tensor_gemm::writes_stream() && !tensor_gemm::streams();
  const Strategy* s = find_strategy("tensor_gemm");
  ASSERT_NE(s, nullptr);
  const std::map<char, int> lengths{{'a', 40}, {'b', 24}, {'c', 37}, {'d', 50}};
  Lengths len;
  for (const auto& [c, n] : lengths) len[c] = n;
  for (Dtype dtype : {Dtype::c64, Dtype::c128}) {
    const BatchedEinsum e = binary_spec("dca,bd->abc", lengths, dtype);
    const Arrays arrays = random_arrays(e, 67);
    const Bound bound(e, arrays);
    ASSERT_EQ(tensor_gemm_path(bound), "lines") << to_string(dtype);
    const auto space = s->space(e, len);
    EXPECT_EQ(std::count(space.begin(), space.end(), nlohmann::json{{"kernel", "blis"}}),
              avx2 ? 1 : 0)
        << to_string(dtype);
    const Results ref = run_reference(bound);
    for (const char* kernel : {"own", "blis"})
      for (const int threads : {1, 2})
        expect_tensor_gemm_agrees(bound, ref,
                                  std::string(to_string(dtype)) + " " + kernel + " " +
                                      std::to_string(threads) + " threads",
                                  {{"kernel", kernel}, {"threads", threads}});
  }
}

// Streamed lines in place (TCCG case 11's shape, ec,abed->abcd, with its run of 72 floats) go
// through our in-place kernel by default in floats where the kernels run AVX-512: in 256-bit
// registers where the processor runs 512-bit operations in halves, in 512-bit ones (five, the last
// part full) where it runs them whole; in doubles, libxsmm's. In ec,aebd->acbd, b follows d in
// both the operand and the output: d's 20 values and b's 3 make one run of 60, which the summed
// elements continue (our 256-bit kernel takes it only so; the 512-bit one, runs past 64 values).
// In ebad,ce->abcd (TCCG case 5's shape), the summed elements lie apart from the run of 72: the
// 512-bit kernel takes it too, and with AVX2 alone our AVX2 kernel, in floats and doubles.
TEST(Strategies, TensorGemmRunsInPlaceLinesThroughOurKernelWhereRegistersGoInHalves) {
  const bool wide = tensor_gemm::streams() && !tensor_gemm::runs_in_halves();
  const bool avx2 = tensor_gemm::writes_stream() && !tensor_gemm::streams();
  streamed_lines_agree("ec,abed->abcd", {{'a', 3}, {'b', 4}, {'c', 13}, {'d', 72}, {'e', 9}}, 47,
                       tensor_gemm::runs_in_halves() || wide);
  streamed_lines_agree("ebad,ce->abcd", {{'a', 2}, {'b', 3}, {'c', 5}, {'d', 72}, {'e', 6}}, 63,
                       wide || avx2, avx2);
  streamed_lines_agree("ec,aebd->acbd", {{'a', 2}, {'b', 3}, {'c', 5}, {'d', 20}, {'e', 7}}, 53,
                       tensor_gemm::runs_in_halves());
}

// Streamed lines in place whose summed elements lie apart from the run (TCCG case 5's shape,
// ebad,ce->abcd: e past b, a and d) go through our AVX2 kernel (place_chunk) by default in floats
// and doubles where the kernels run AVX2 alone, and the tuner's space has libxsmm's beside it; with
// AVX-512, libxsmm's, in both. Runs of whole registers and one that ends inside one (d = 20, 21).
TEST(Strategies, TensorGemmRunsApartInPlaceLinesThroughOurAvx2Kernel) {
  const bool avx2 = tensor_gemm::writes_stream() && !tensor_gemm::streams();
  streamed_lines_agree("ebad,ce->abcd", {{'a', 3}, {'b', 2}, {'c', 9}, {'d', 20}, {'e', 7}}, 59,
                       avx2, avx2);
  streamed_lines_agree("ebad,ce->abcd", {{'a', 2}, {'b', 3}, {'c', 5}, {'d', 21}, {'e', 6}}, 61,
                       avx2, avx2);
}

// Whole tiles go to our own micro-kernel (line_kernel.hpp) by default in floats where a large
// output is read back in several summed passes, otherwise to BLIS's; "kernel" chooses, and in
// floats the tuner's space has the one the default does not run. Each way agrees with the
// reference: a product summed over several passes (the kernel sets the output, then adds to it)
// with edge tiles on both sides, a contraction whose tiles are even in the output (written in
// place) or not (through the buffer), and one whose registers of rows go in two runs (our kernel
// writes them in place under masks), in f32 and f64, on one and two threads.
TEST(Strategies, TensorGemmRunsOurKernelOrBlisAndTheTunerTriesBoth) {
  const Strategy* s = find_strategy("tensor_gemm");
  ASSERT_NE(s, nullptr);
  for (Dtype dtype : {Dtype::f32, Dtype::f64}) {
    for (const auto& [spec, lengths] :
         {std::pair<const char*, std::map<char, int>>{"ik,kj->ij",
                                                      {{'i', 200}, {'j', 150}, {'k', 1000}}},
          {"aebf,dfce->abcd", {{'a', 20}, {'b', 9}, {'c', 21}, {'d', 10}, {'e', 6}, {'f', 70}}},
          // Rows d of 40 in panels of 32 and registers of 16: some in two runs (split_tile).
          {"aecf,bfde->abcd", {{'a', 4}, {'b', 5}, {'c', 6}, {'d', 40}, {'e', 6}, {'f', 100}}}}) {
      const BatchedEinsum e = binary_spec(spec, lengths, dtype);
      Lengths len;
      for (const auto& [c, n] : lengths) len[c] = n;
      const auto space = s->space(e, len);
      const auto offered = std::count_if(space.begin(), space.end(), [](const nlohmann::json& p) {
        return p == nlohmann::json{{"kernel", "own"}};  // small outputs: BLIS's by default
      });
      EXPECT_EQ(offered, dtype == Dtype::f32 && tensor_gemm::own_kernel_runs() ? 1 : 0) << spec;
      const Arrays arrays = random_arrays(e, 37);
      const Bound bound(e, arrays);
      const Results ref = run_reference(bound);
      for (const char* kernel : {"own", "blis"})
        expect_tensor_gemm_agrees(bound, ref, std::string(spec) + " " + kernel,
                                  {{"kernel", kernel}});
    }
  }
  // Ours by default over an output beyond the cache read back in several passes only.
  const std::int64_t passes = 4 * tensor_gemm::MicroKernel<float>::get().kc;
  EXPECT_EQ(tensor_gemm::own_kernel_by_default(passes, 100e6), tensor_gemm::own_kernel_runs());
  EXPECT_FALSE(tensor_gemm::own_kernel_by_default(passes, 1e6));
  EXPECT_FALSE(
      tensor_gemm::own_kernel_by_default(tensor_gemm::MicroKernel<float>::get().kc, 100e6));
  const BatchedEinsum e = binary_spec("ik,kj->ij", {{'i', 4}, {'j', 4}, {'k', 4}});
  const Arrays arrays = random_arrays(e, 1);
  const Bound bound(e, arrays);
  for (const nlohmann::json& bad : {nlohmann::json("mine"), nlohmann::json(true)}) {
    try {
      execute(bound, "tensor_gemm", {{"kernel", bad}});
      ADD_FAILURE() << "accepted kernel " << bad.dump();
    } catch (const SpecError& error) {
      EXPECT_NE(std::string(error.what()).find("'kernel' must be \"own\", \"blis\" or \"wide\""),
                std::string::npos)
          << error.what();
    }
  }
}

// The wide micro-kernel (wide_kernel.hpp) takes the packed path where the sum takes several of
// BLIS's passes ("kernel": "wide"; by default in doubles on Intel's processors with AVX-512) and
// agrees with the reference: a product with edge tiles on both sides (200 rows: six tiles of 32
// and 8; 151 columns: 25 of 6 and 1) over 700 summed elements, a contraction whose output
// interleaves the operands' indices, and one summed over two indices, in f32 and f64, on one and
// two threads and with the sum split between them. The tuner's space offers it exactly where it
// applies: on the packed path, not on a sum of one pass. By default it runs in doubles over an
// output beyond the cache on Intel's processors with AVX-512, and nowhere else.
TEST(Strategies, TensorGemmWideKernelTakesSumsOfSeveralPasses) {
  const Strategy* s = find_strategy("tensor_gemm");
  ASSERT_NE(s, nullptr);
  for (Dtype dtype : {Dtype::f32, Dtype::f64}) {
    const nlohmann::json other = {{"kernel", "wide"}};  // (outputs the cache holds: BLIS's)
    int taken = 0;  // cases where it applies (aecf,bfde->abcd at least, where the kernels run it)
    for (const auto& [spec, lengths] :
         {std::pair<const char*, std::map<char, int>>{"ik,kj->ij",
                                                      {{'i', 200}, {'j', 151}, {'k', 700}}},
          {"aecf,bfde->abcd", {{'a', 5}, {'b', 7}, {'c', 9}, {'d', 6}, {'e', 5}, {'f', 120}}},
          {"acd,dbc->ab", {{'a', 70}, {'b', 45}, {'c', 13}, {'d', 61}}},
          {"ik,kj->ij", {{'i', 200}, {'j', 151}, {'k', 300}}}}) {  // one pass
      const BatchedEinsum e = binary_spec(spec, lengths, dtype);
      Lengths len;
      for (const auto& [c, n] : lengths) len[c] = n;
      const auto space = s->space(e, len);
      const Arrays arrays = random_arrays(e, 61);
      const Bound bound(e, arrays);
      const std::int64_t summed = kernels::product(gemm_groups(e).k, len);
      const std::int64_t kc = dtype == Dtype::f32 ? tensor_gemm::MicroKernel<float>::get().kc
                                                  : tensor_gemm::MicroKernel<double>::get().kc;
      const bool applies =
          tensor_gemm::streams() && tensor_gemm_path(bound) == "packed" && summed > kc + kc / 4;
      EXPECT_EQ(std::count(space.begin(), space.end(), other), applies ? 1 : 0)
          << spec << " " << to_string(dtype) << " " << tensor_gemm_path(bound);
      taken += applies;
      const Results ref = run_reference(bound);
      for (const char* kernel : {"wide", "blis"})
        expect_tensor_gemm_agrees(bound, ref, std::string(spec) + " " + kernel,
                                  {{"kernel", kernel}});
      expect_tensor_gemm_agrees(bound, ref, std::string(spec) + " split",
                                {{"kernel", "wide"}, {"split_sum", true}});
    }
    EXPECT_GE(taken, tensor_gemm::streams() ? 1 : 0) << to_string(dtype);
  }
}

// The measurement of whether ordinary stores read a line first writes its passes into the memory
// its first caller offers (a result not yet computed, which tensor_gemm then overwrites) where
// that holds them, mapping no block of its own; later calls measure nothing. Each test runs in a
// process of its own under ctest, so the first call is this one.
TEST(Blocking, StoreMeasurementWritesTheFirstCallersScratch) {
  if (!recycles_large_tensors()) GTEST_SKIP() << "no recycled blocks to count";
  Tensor scratch(Dtype::f64, {(std::int64_t{256} << 20) / 8}, Tensor::Uninitialized{});
  const std::uint64_t before = fresh_mappings();
  const bool reads = tensor_gemm::scattered_stores_read_lines(scratch.raw(), scratch.bytes());
  EXPECT_EQ(fresh_mappings(), before);
  EXPECT_EQ(tensor_gemm::scattered_stores_read_lines(), reads);
  EXPECT_EQ(fresh_mappings(), before);
}

// Which way of writing even tiles is faster depends on the processor, so the tuner tries both
// where the choice applies: an output over 8 MB summed over 24 elements or fewer (TCCG's ccsd_t
// shape, scaled), in f64 and f32 (whose output is then half the bytes), and not where more are
// summed or the output fits in the cache. Each candidate runs and agrees with the reference (both
// ways on tiles whose columns lie apart: TensorGemmOrdersACachedOperandsIndicesForTheOutput).
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
  if (!tensor_gemm::writes_stream()) {       // baseline kernels: every tile takes ordinary stores
    EXPECT_EQ(both.size(), 1u);
    GTEST_SKIP() << "tensor_gemm does not write around the cache with the baseline kernels";
  }
  // (Beside them, the two ways of storing our own kernel's tiles where it writes them:
  // TensorGemmSpaceOffersOrdinaryStoresForOurKernelsTiles.)
  const auto even = [&](std::map<char, int> l, Dtype dtype) {
    std::vector<nlohmann::json> out;
    for (const auto& p : space(l, dtype))
      if (p.contains("stream_even")) out.push_back(p);
    return out;
  };
  EXPECT_EQ(both[0], nlohmann::json::object());
  ASSERT_EQ(even(len, Dtype::f64).size(), 1u);
  // The default streams them where this machine's ordinary stores read a line before writing it
  // (measured once per process), and with the AVX-512 kernels where a tile's columns lie apart in
  // the output; the candidate is the other way. Here the output's two fastest indices, f and e,
  // come from different operands: a tile's columns adjoin.
  EXPECT_FALSE(tensor_gemm::tile_columns_apart("dega", "gfbc", "abcdef"));
  EXPECT_EQ(tensor_gemm::streams_even_tiles_by_default("dega", "gfbc", "abcdef"),
            tensor_gemm::scattered_stores_read_lines());
  EXPECT_EQ(even(len, Dtype::f64)[0]["stream_even"].get<bool>(),
            !tensor_gemm::streams_even_tiles_by_default("dega", "gfbc", "abcdef"));
  // In efga,gdbc->abcdef (TCCG case 37) both come from efga: its columns lie apart, 16 · 24
  // elements from each other.
  EXPECT_TRUE(tensor_gemm::tile_columns_apart("efga", "gdbc", "abcdef"));
  EXPECT_TRUE(tensor_gemm::tile_columns_apart("gdbc", "efga", "abcdef"));
  EXPECT_FALSE(tensor_gemm::tile_columns_apart("ab", "b", "a"));  // one output index
  EXPECT_EQ(tensor_gemm::streams_even_tiles_by_default("efga", "gdbc", "abcdef"),
            tensor_gemm::streams() || tensor_gemm::scattered_stores_read_lines());
  {
    Lengths lengths;
    for (const auto& [c, n] : len) lengths[c] = n;
    std::vector<nlohmann::json> apart;
    for (const auto& p : s->space(binary_spec("efga,gdbc->abcdef", len, Dtype::f64), lengths))
      if (p.contains("stream_even")) apart.push_back(p);
    ASSERT_EQ(apart.size(), 1u);
    EXPECT_EQ(apart[0]["stream_even"].get<bool>(),
              !tensor_gemm::streams_even_tiles_by_default("efga", "gdbc", "abcdef"));
  }
  auto f32 = len;
  f32['a'] = 8;  // 12.6 MB in f64, 6.3 MB in f32
  EXPECT_EQ(even(f32, Dtype::f64).size(), 1u);
  // (In floats, BLIS's kernel beside ours: TensorGemmRunsOurKernelOrBlissAndTheTunerTriesBoth.)
  EXPECT_EQ(space(f32, Dtype::f32).size(), tensor_gemm::own_kernel_runs() ? 2u : 1u);
  auto deep = len;
  deep['g'] = 25;
  EXPECT_EQ(even(deep, Dtype::f64).size(), 0u);
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

// Where our own kernel writes the tiles of a large output from its registers in one summed pass
// (TCCG's ccsd_t shape, scaled to 18.9 MB in f64 and 12.6 MB in f32), they stream by default where
// this machine's ordinary stores read a line first and are stored in ordinary stores where they do
// not, and the tuner's space has the other way beside the default, in real and complex types alike
// (a complex row in real form, its parts summed); not where the output fits in the cache. Each way
// agrees with the reference on one and two threads, in f64, f32 and c64, and so do the stored
// tiles beside even tiles written in place, which our kernel then takes too.
TEST(Strategies, TensorGemmSpaceOffersOrdinaryStoresForOurKernelsTiles) {
  const Strategy* s = find_strategy("tensor_gemm");
  ASSERT_NE(s, nullptr);
  const std::map<char, int> len = {{'a', 12}, {'b', 8},  {'c', 8}, {'d', 12},
                                   {'e', 16}, {'f', 16}, {'g', 6}};
  EXPECT_EQ(tensor_gemm::line_tiles_stream_by_default(),
            tensor_gemm::scattered_stores_read_lines());
  const nlohmann::json other = {
      {"stream_line_tiles", !tensor_gemm::line_tiles_stream_by_default()}};
  const nlohmann::json same = {{"stream_line_tiles", tensor_gemm::line_tiles_stream_by_default()}};
  for (const Dtype dtype : {Dtype::f64, Dtype::f32, Dtype::c64, Dtype::c128}) {
    const BatchedEinsum e = binary_spec("dega,gfbc->abcdef", len, dtype);
    Lengths lengths;
    for (const auto& [c, n] : len) lengths[c] = n;
    const auto space = s->space(e, lengths);
    const std::int64_t summed = is_complex(dtype) ? 12 : 6;
    const double bytes = 12.0 * 8 * 8 * 12 * 16 * 16 * static_cast<double>(dtype_bytes(dtype));
    const bool writes = tensor_gemm::line_tiles_may_write(dtype, summed, bytes);
    const Dtype part = dtype == Dtype::c64 ? Dtype::f32 : dtype == Dtype::c128 ? Dtype::f64 : dtype;
    EXPECT_EQ(writes, tensor_gemm::line_tiles_may_write(part, summed, bytes)) << to_string(dtype);
    EXPECT_EQ(std::count(space.begin(), space.end(), other), writes ? 1 : 0) << to_string(dtype);
    EXPECT_EQ(std::count(space.begin(), space.end(), same), 0) << to_string(dtype);
    EXPECT_FALSE(tensor_gemm::line_tiles_may_write(dtype, summed, 1 << 20));
  }
  if (!tensor_gemm::line_tiles_may_write(Dtype::f32, 6, 12.0 * 8 * 8 * 12 * 16 * 16 * 4))
    GTEST_SKIP() << "our own kernel does not write tiles from its registers here (AVX-512 and "
                    "BLIS's AVX-512 tile)";
  for (const Dtype dtype : {Dtype::f64, Dtype::f32, Dtype::c64}) {
    const BatchedEinsum e = binary_spec("dega,gfbc->abcdef", len, dtype);
    const Arrays arrays = random_arrays(e, 37);
    const Bound bound(e, arrays);
    const Results ref = run_reference(bound);
    ASSERT_GT(ref.at(0).bytes(), 8u << 20);
    for (bool stream : {true, false})
      expect_tensor_gemm_agrees(bound, ref, "dega,gfbc->abcdef", {{"stream_line_tiles", stream}});
    // Stored, with the even tiles written in place rather than streamed: in f64 those (16 rows, f,
    // by 14 columns, d and e, one run of the output) go through our kernel too, on any machine.
    expect_tensor_gemm_agrees(bound, ref, "dega,gfbc->abcdef",
                              {{"stream_line_tiles", false}, {"stream_even", false}});
  }
}

// A block's tiles along its columns (tiles_across) or down its rows give the same output, bit for
// bit, and the reference's, on one and two threads: TCCG's ccsd_t shapes scaled to 9.2 MB in f32
// with partial panels of rows (b·c·f = 1,008 in panels of 32) and columns (a·d·e = 2,288 in panels
// of 12 or 14), where a tile's rows lie in two runs of a line and its columns continue them
// (dega,gfbc->abcdef: f and e), where its columns lie apart (efga,gdbc->abcdef), and summed over
// 200 elements, whose packed panels of B do not all fit half of L2 at once, so that the columns go
// in several chunks. The tuner's space has them down the rows wherever our kernel writes tiles
// from its registers.
TEST(Strategies, TensorGemmTilesAcrossTheColumnsAgreeWithTilesDownTheRows) {
  const Strategy* s = find_strategy("tensor_gemm");
  ASSERT_NE(s, nullptr);
  const nlohmann::json down = {{"tiles_across", false}};
  for (const auto& [spec, g] :
       {std::pair{"dega,gfbc->abcdef", 6}, {"efga,gdbc->abcdef", 6}, {"dega,gfbc->abcdef", 200}}) {
    const std::map<char, int> len = {{'a', 13}, {'b', 7},  {'c', 9}, {'d', 11},
                                     {'e', 16}, {'f', 16}, {'g', g}};
    for (const Dtype dtype : {Dtype::f32, Dtype::f64}) {
      if (g > 6 && dtype == Dtype::f64) continue;  // (one pass in floats alone)
      const BatchedEinsum e = binary_spec(spec, len, dtype);
      Lengths lengths;
      for (const auto& [c, n] : len) lengths[c] = n;
      const double bytes = 13.0 * 7 * 9 * 11 * 16 * 16 * static_cast<double>(dtype_bytes(dtype));
      const auto space = s->space(e, lengths);
      EXPECT_EQ(std::count(space.begin(), space.end(), down),
                tensor_gemm::line_tiles_may_write(dtype, g, bytes) ? 1 : 0)
          << spec << " " << to_string(dtype);
      const Arrays arrays = random_arrays(e, 41);
      const Bound bound(e, arrays);
      const Results ref = run_reference(bound);
      ASSERT_GT(ref.at(0).bytes(), 8u << 20);
      for (int threads : {1, 2}) {
        nlohmann::json across = {{"tiles_across", true}, {"threads", threads}};
        nlohmann::json rows = {{"tiles_across", false}, {"threads", threads}};
        const Results a = execute(bound, "tensor_gemm", across);
        const Results r = execute(bound, "tensor_gemm", rows);
        const std::string what =
            std::string(spec) + " " + std::string(to_string(dtype)) + " " + across.dump();
        EXPECT_LE(max_relative_error(a.at(0), ref.at(0)), tolerance(dtype, terms_of(e, lengths)))
            << what;
        ASSERT_EQ(a.at(0).bytes(), r.at(0).bytes()) << what;
        EXPECT_EQ(std::memcmp(a.at(0).raw(), r.at(0).raw(), a.at(0).bytes()), 0) << what;
      }
      expect_tensor_gemm_agrees(bound, ref, spec);  // (the default, and with streamed rows off)
    }
  }
}

// Complex products on the layouts of TCCG cases 2-8 and of a plain product, both operands complex
// and one real, in real form (real_form.hpp; B read as it lies where A holds the output's last
// index, cases 2-8, and converted to A's dtype in the plain product): equal to the reference on
// one and two threads (and where it streams, on the packed path too).
TEST(Strategies, TensorGemmComputesComplexAndMixedProducts) {
  if (kernel_isa() != supported_isa()) GTEST_SKIP() << "complex runs with the processor's kernels";
  const std::map<char, int> len = {{'a', 9}, {'b', 5}, {'c', 7}, {'d', 6}, {'e', 10}, {'f', 3}};
  for (const char* spec : {"dca,bd->abc", "dbea,ec->abcd", "deca,be->abcd", "ebad,ce->abcd",
                           "efbad,cf->abcde", "ecbfa,fd->abcde", "efcad,bf->abcde", "ab,bc->ac"})
    for (const Dtype dtype : {Dtype::c64, Dtype::c128})
      for (const bool mixed : {false, true}) {
        BatchedEinsum e = binary_spec(spec, len, dtype);
        if (mixed) e.arrays.at("B").dtype = dtype == Dtype::c64 ? Dtype::f32 : Dtype::f64;
        const Arrays arrays = random_arrays(e, 37);
        const Bound bound(e, arrays);
        const Results ref = run_reference(bound);
        expect_tensor_gemm_agrees(bound, ref, std::string(spec) + (mixed ? " B real" : ""));
      }
}

// BLIS's kernels follow einsumdb's (isa.hpp): Skylake-X's where the kernels run AVX-512, never the
// generic ones where they run AVX2, and under a cap (EINSUMDB_ISA) the cap's: Haswell's for AVX2,
// the generic ones for the baseline.
// (Read before any test: tensor_gemm sets it for BLIS when it first loads it.)
const bool user_chose_blis_kernels = std::getenv("BLIS_ARCH_TYPE") != nullptr;

TEST(Strategies, TensorGemmUsesVectorKernelsWhereTheCpuHasThem) {
  const std::string kernel = tensor_gemm_kernel();
  ASSERT_FALSE(kernel.empty());
  if (user_chose_blis_kernels) GTEST_SKIP() << "BLIS_ARCH_TYPE chooses BLIS's kernels";
  const Isa isa = kernel_isa();
  if (isa == Isa::avx512) {
    EXPECT_EQ(kernel.rfind("skx", 0), 0u) << kernel;
  } else if (isa == Isa::avx2) {
    EXPECT_EQ(kernel.rfind("generic", 0), std::string::npos) << kernel;
    if (isa < supported_isa()) {
      EXPECT_EQ(kernel.rfind("haswell", 0), 0u) << kernel;
    }
  } else if (isa < supported_isa()) {
    EXPECT_EQ(kernel.rfind("generic", 0), 0u) << kernel;
  }
}

// A small result summed over many elements (TCCG case 13's shape, acd,dbc->ab): the threads split
// the summed range by default (sums_split), each into an output of its own added to the result,
// or the columns with "split_sum" false; on 1, 2 and 3 threads, the passes shared unevenly, in
// floats and doubles, against the reference. A large result keeps the split of rows or columns.
TEST(Strategies, TensorGemmThreadsSplitALongSumOverASmallResult) {
  EXPECT_TRUE(tensor_gemm::sums_split(40, 36, 5000, 1, false));
  EXPECT_FALSE(tensor_gemm::sums_split(5184, 5184, 5184, 1, true));
  EXPECT_FALSE(tensor_gemm::sums_split(5184, 72, 5184, 1, true));  // (TCCG case 19)
  for (Dtype dtype : {Dtype::f32, Dtype::f64}) {
    const BatchedEinsum e =
        binary_spec("acd,dbc->ab", {{'a', 40}, {'b', 36}, {'c', 30}, {'d', 37}}, dtype);
    const Arrays arrays = random_arrays(e, 13);
    const Bound bound(e, arrays);
    const Results ref = run_reference(bound);
    for (const bool split : {true, false})
      for (const int threads : {1, 2, 3}) {
        const Results got =
            execute(bound, "tensor_gemm", {{"split_sum", split}, {"threads", threads}});
        EXPECT_LE(max_relative_error(got.at(0), ref.at(0)),
                  tolerance(dtype, terms_of(bound.einsum(), bound.lengths())))
            << to_string(dtype) << " split_sum " << split << ", " << threads << " threads";
      }
  }
}

}  // namespace
}  // namespace einsumdb
