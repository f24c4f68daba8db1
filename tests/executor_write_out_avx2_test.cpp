// tensor_gemm's write-out stage in its AVX2 compilation (transpose.hpp, write_out.hpp,
// complex_lines.hpp): a cache line in two 256-bit registers, its squares transposed, runs copied
// under masks and streamed, tiles transposed into the output, complex results combined from real
// ones; and the packing of a complex operand's parts (packing.hpp). The library compiles these
// routines for each instruction set (isa_target.hpp); this file compiles them for AVX2 as the
// library does (EINSUMDB_ISA_LEVEL=1, tests/CMakeLists.txt), whatever the machine's widest set, and
// checks every element and every element around them against a plain loop. Skipped where the
// processor lacks AVX2 or FMA.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "einsumdb/executor/tensor_gemm/complex_lines.hpp"
#include "einsumdb/executor/tensor_gemm/packing.hpp"
#include "einsumdb/executor/tensor_gemm/stream_tile.hpp"
#include "einsumdb/executor/tensor_gemm/transpose.hpp"
#include "einsumdb/executor/tensor_gemm/write_out.hpp"

static_assert(EINSUMDB_AVX2 && !EINSUMDB_AVX512, "compiled for AVX2 (tests/CMakeLists.txt)");

EINSUMDB_TARGET_BEGIN
namespace einsumdb::tensor_gemm {
namespace {

// d[i·ldd + u] <- column i of the line square whose row u is at q + u·ld, through registers:
// loaded and transposed at once (load_transposed), or the first h rows loaded under a mask and
// then transposed (transpose_block), as write_lines_out does at the edge of a piece.
template <typename T>
void transposed_square(const T* q, std::int64_t ld, std::int64_t h, T* d, std::int64_t ldd) {
  using V = Lanes<T>;
  constexpr std::int64_t L = V::width;
  decltype(V::loadu(q)) r[L];
  if (h == L) {
    load_transposed(q, ld, r);
  } else {
    for (std::int64_t u = 0; u < L; ++u) r[u] = V::load(V::first(u < h ? L : 0), q + u * ld);
    transpose_block(r);
  }
  for (std::int64_t i = 0; i < L; ++i) V::storeu(d + i * ldd, r[i]);
}

// stream_tile, called from this region as the macro-kernel calls it.
template <typename T>
void streamed_tile(std::int64_t k, const T* a, const T* b, T* c, const std::int64_t* row) {
  stream_tile(k, a, b, c, row);
  _mm_sfence();
}

// A line square of complex results, as write_complex_lines_out makes it: row u of T's columns
// (j, 0) and (j, 1) at re + u·ld and im + u·ld, combined and transposed, d[i·ldd + 2u] and
// d[i·ldd + 2u + 1] <- the parts of the result u of complex row i.
template <typename R>
void combined_square(const R* re, const R* im, std::int64_t ld, R* d, std::int64_t ldd) {
  using V = Lanes<R>;
  constexpr std::int64_t L = V::width / 2;  // complex numbers in a line
  Line<R> r[L];
  for (std::int64_t u = 0; u < L; ++u) r[u] = combine(V::loadu(re + u * ld), V::loadu(im + u * ld));
  transpose_pairs(r);
  for (std::int64_t i = 0; i < L; ++i) V::storeu(d + i * ldd, r[i]);
}

// pack_pairs, called from this region as pack calls it.
template <typename T>
std::vector<char> packed_pairs(const T* src, const std::vector<std::int64_t>& row,
                               const std::vector<std::int64_t>& col, std::int64_t width,
                               std::int64_t pack_width, T* dst) {
  return pack_pairs(src, row.data(), static_cast<std::int64_t>(row.size()), col.data(),
                    static_cast<std::int64_t>(col.size()), width, pack_width, dst);
}

}  // namespace
}  // namespace einsumdb::tensor_gemm
EINSUMDB_TARGET_END

namespace einsumdb::tensor_gemm {
namespace {

bool runs_avx2() {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

template <typename T>
std::vector<T> values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> u(-500, 500);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(u(rng)) / 8;  // exact in both types, sums too
  return v;
}

// A buffer of whole cache lines with a marker in every element, so that an element written where
// it should not be shows.
template <typename T>
struct Lines {
  static constexpr T kMarker = T(-12345);
  explicit Lines(std::size_t n) : store(n + 64 / sizeof(T), kMarker) {}
  T* at(std::size_t i) {  // element i of the buffer, the buffer starting on a line
    const auto base = reinterpret_cast<std::uintptr_t>(store.data());
    const std::size_t skip = (64 - base % 64) % 64 / sizeof(T);
    return store.data() + skip + i;
  }
  std::vector<T> store;
};

template <typename T>
class WriteOutAvx2 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!runs_avx2()) GTEST_SKIP() << "this processor runs no AVX2 and FMA";
  }
};
using Types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(WriteOutAvx2, Types);

// Every square, whole and with each number of rows at the edge, against the transpose by index.
TYPED_TEST(WriteOutAvx2, TransposesLineSquaresInTwoRegistersPerLine) {
  using T = TypeParam;
  constexpr std::int64_t L = 64 / sizeof(T), ld = L + 3, ldd = L + 5;
  const std::vector<T> q = values<T>(L * ld, 7);
  for (std::int64_t h = 1; h <= L; ++h) {
    std::vector<T> d(L * ldd, T(-1));
    transposed_square(q.data(), ld, h, d.data(), ldd);
    for (std::int64_t i = 0; i < L; ++i)
      for (std::int64_t u = 0; u < L; ++u)
        ASSERT_EQ(d[i * ldd + u], u < h ? q[u * ld + i] : T(0))
            << "h " << h << ", column " << i << ", row " << u;
  }
}

// copy_run at every length up to three lines and a half, from every place on a line, set and
// added, streamed and not: each element right, none outside the run touched.
TYPED_TEST(WriteOutAvx2, CopiesRunsOfEveryLengthFromEveryPlaceOnALine) {
  using T = TypeParam;
  constexpr std::int64_t L = 64 / sizeof(T);
  const std::vector<T> t = values<T>(4 * L, 11), old = values<T>(6 * L, 13);
  for (const bool accumulate : {false, true})
    for (const bool stream : {false, true})
      for (std::int64_t start = 0; start < L; ++start)
        for (std::int64_t n = 0; n <= 3 * L + L / 2; ++n) {
          Lines<T> out(6 * L);
          for (std::int64_t i = start; i < start + n; ++i) *out.at(i) = old[i];
          copy_run(t.data(), n, out.at(start), accumulate, stream);
          _mm_sfence();
          for (std::int64_t i = 0; i < 6 * L; ++i) {
            const bool in = i >= start && i < start + n;
            const T want = !in ? Lines<T>::kMarker : t[i - start] + (accumulate ? old[i] : T(0));
            ASSERT_EQ(*out.at(i), want)
                << "start " << start << ", length " << n << ", element " << i
                << (accumulate ? ", added" : ", set") << (stream ? ", streamed" : "");
          }
        }
}

// transpose_out: the corner of a column-major tile of two lines' rows, any number of rows and
// columns, its rows scattered in the output (one row's place a line and a half from the last,
// the next's not on a line), set and added, streamed and not.
TYPED_TEST(WriteOutAvx2, TransposesTilesIntoScatteredRows) {
  using T = TypeParam;
  constexpr std::int64_t L = 64 / sizeof(T), mr = 2 * L, nr = L + 4;
  const std::vector<T> tile = values<T>(mr * nr, 17);
  std::vector<std::int64_t> rows(mr);
  for (std::int64_t i = 0; i < mr; ++i) rows[i] = i * (3 * L / 2 + nr) + (i % 3) * 5;
  const std::int64_t size = rows.back() + nr + L;
  const std::vector<T> old = values<T>(size, 19);
  for (const bool accumulate : {false, true})
    for (const bool stream : {false, true})
      for (const std::int64_t mrb : {std::int64_t{1}, L - 1, L, mr - 3, mr})
        for (const std::int64_t nrb : {std::int64_t{1}, L - 2, L, nr}) {
          Lines<T> out(size);
          for (std::int64_t i = 0; i < size; ++i) *out.at(i) = old[i];
          transpose_out(tile.data(), mr, mrb, nrb, out.at(0), rows.data(), accumulate, stream);
          _mm_sfence();
          std::vector<T> want(old);
          for (std::int64_t i = 0; i < mrb; ++i)
            for (std::int64_t n = 0; n < nrb; ++n)
              want[rows[i] + n] = tile[n * mr + i] + (accumulate ? old[rows[i] + n] : T(0));
          for (std::int64_t e = 0; e < size; ++e)
            ASSERT_EQ(*out.at(e), want[e])
                << mrb << " rows, " << nrb << " columns, element " << e
                << (accumulate ? ", added" : ", set") << (stream ? ", streamed" : "");
        }
}

// write_lines: a line group's tiles, each column-major one after the other (`transposed`), row i of
// tile j at cm[i] + j, so that row i and column n of the group is one whole line at cm[i] + cn[n].
TYPED_TEST(WriteOutAvx2, WritesALineGroupWholeLineByLine) {
  using T = TypeParam;
  constexpr std::int64_t L = 64 / sizeof(T), mr = 2 * L, nr = 6;
  const std::vector<T> group = values<T>(L * mr * nr, 23);
  std::vector<std::int64_t> cm(mr), cn(nr);
  for (std::int64_t i = 0; i < mr; ++i) cm[i] = i * L * (nr + 1);
  for (std::int64_t n = 0; n < nr; ++n) cn[n] = n * L;
  const std::int64_t size = mr * L * (nr + 1);
  for (const bool stream : {false, true})
    for (const std::int64_t nrb : {std::int64_t{1}, nr}) {
      Lines<T> out(size);
      write_lines(group.data(), mr, nr, true, nrb, out.at(0), cm.data(), cn.data(), false, stream);
      _mm_sfence();
      std::vector<T> want(size, Lines<T>::kMarker);
      for (std::int64_t j = 0; j < L; ++j)
        for (std::int64_t i = 0; i < mr; ++i)
          for (std::int64_t n = 0; n < nrb; ++n)
            want[cm[i] + cn[n] + j] = group[j * mr * nr + n * mr + i];
      for (std::int64_t e = 0; e < size; ++e)
        ASSERT_EQ(*out.at(e), want[e])
            << nrb << " columns, element " << e << (stream ? ", streamed" : "");
    }
}

// stream_tile: 6 rows by a line from BLIS's packed panels (the 6 rows' values, then the line of
// columns', at each summed element), each row a line of the output, the rows three lines apart or
// unevenly spaced, summed over 1, 5 and 24 elements; the lines between the rows stay untouched.
// And which of BLIS's tiles it takes: 6 rows by a line, written row by row, packed to exactly
// that.
TYPED_TEST(WriteOutAvx2, StreamsBlisHaswellTilesFromRegisters) {
  using T = TypeParam;
  constexpr std::int64_t L = 64 / sizeof(T), rows = kStreamTileRows, rs = 3 * L;
  struct Panels {
    std::int64_t mr, nr, packmr, packnr;
    bool prefers_rows;
  };
  EXPECT_TRUE(stream_tile_fits<T>(Panels{rows, L, rows, L, true}));
  EXPECT_FALSE(stream_tile_fits<T>(Panels{rows, L, rows, L, false}));  // column-major tiles
  EXPECT_FALSE(stream_tile_fits<T>(Panels{rows, 2 * L, rows, 2 * L, true}));
  EXPECT_FALSE(stream_tile_fits<T>(Panels{8, L, 8, L, true}));
  const std::int64_t even[rows] = {0, rs, 2 * rs, 3 * rs, 4 * rs, 5 * rs};
  // Gaps of rs, 2·rs and a single line between rows.
  const std::int64_t uneven[rows] = {0, rs, 2 * rs, 4 * rs, 4 * rs + L, 6 * rs};
  for (const std::int64_t* row : {even, uneven})
    for (const std::int64_t k : {1, 5, 24}) {
      const std::vector<T> a = values<T>(k * rows, 29), b = values<T>(k * L, 31);
      const std::int64_t size = row[rows - 1] + rs;
      Lines<T> out(size);
      streamed_tile(k, a.data(), b.data(), out.at(0), row);
      for (std::int64_t e = 0; e < size; ++e) {
        const std::int64_t* at = std::find(row, row + rows, e / L * L);
        const std::int64_t i = at - row, j = e % L;
        T want = Lines<T>::kMarker;
        if (i < rows) {
          want = 0;
          for (std::int64_t p = 0; p < k; ++p) want += a[p * rows + i] * b[p * L + j];
        }
        ASSERT_EQ(*out.at(e), want) << (row == even ? "even" : "uneven") << ", summed over " << k
                                    << ", row " << i << ", element " << j;
      }
    }
}

// Complex results (complex_lines.hpp): a line square of T's column pairs combined, each result
// re[2i] − im[2i + 1] + i·(re[2i + 1] + im[2i]), and transposed complex number by complex number,
// rows ld apart and the output's ldd, every element around them untouched.
TYPED_TEST(WriteOutAvx2, CombinesComplexResultsAndTransposesThemByPairs) {
  using R = TypeParam;
  constexpr std::int64_t W = 64 / sizeof(R), L = W / 2, ld = W + 6, ldd = 2 * W;
  const std::vector<R> re = values<R>(L * ld, 37), im = values<R>(L * ld, 41);
  Lines<R> out(L * ldd);
  combined_square(re.data(), im.data(), ld, out.at(0), ldd);
  for (std::int64_t e = 0; e < L * ldd; ++e) {
    const std::int64_t i = e / ldd, u = e % ldd / 2, part = e % 2;
    R want = Lines<R>::kMarker;
    if (e % ldd < W) {
      const R* x = re.data() + u * ld + 2 * i;
      const R* y = im.data() + u * ld + 2 * i;
      want = part == 0 ? x[0] - y[1] : x[1] + y[0];
    }
    ASSERT_EQ(*out.at(e), want) << "complex row " << i << ", result " << u << ", part " << part;
  }
}

// A complex operand's panels in real form (packing.hpp): rows 2 apart (a row's two parts) at
// depths in pairs 1 apart, each panel's rows and partners one run split in registers. Panels of a
// line and a bit (partial), and of a few rows, zero past the last row; a panel with a row out of
// step is left to be gathered, and depths not all in pairs pack nothing.
TYPED_TEST(WriteOutAvx2, SplitsRowsFromTheirPartnersAtPairedDepths) {
  using T = TypeParam;
  constexpr std::int64_t line = 64 / sizeof(T), width = line + 2, pack_width = line + 3;
  const std::vector<T> src = values<T>(64 * 64, 43);
  const std::vector<std::int64_t> paired{0, 1, 128, 129, 3 * 128, 3 * 128 + 1}, unpaired{0, 1, 128};
  std::vector<std::int64_t> two(2 * width + 5), broken;
  for (std::size_t i = 0; i < two.size(); ++i) two[i] = 3 + 2 * static_cast<std::int64_t>(i);
  broken = two;
  broken[width + 3] += 1;  // the second panel is not a run of pairs
  const std::int64_t panels = (static_cast<std::int64_t>(two.size()) + width - 1) / width;
  const std::int64_t depth = static_cast<std::int64_t>(paired.size());
  for (const bool out_of_step : {false, true}) {
    const std::vector<std::int64_t>& row = out_of_step ? broken : two;
    std::vector<T> dst(static_cast<std::size_t>(panels * pack_width * depth), T{-7});
    const std::vector<char> done =
        packed_pairs(src.data(), row, paired, width, pack_width, dst.data());
    ASSERT_EQ(done.size(), static_cast<std::size_t>(panels));
    for (std::int64_t q = 0; q < panels; ++q) {
      EXPECT_EQ(done[q] != 0, !out_of_step || q != 1) << "panel " << q;
      if (!done[q]) continue;
      for (std::int64_t p = 0; p < depth; ++p)
        for (std::int64_t i = 0; i < pack_width; ++i) {
          const std::int64_t r = q * width + i;
          const T want = i < width && r < static_cast<std::int64_t>(row.size())
                             ? src[row[r] + paired[p]]
                             : T{0};
          ASSERT_EQ(dst[(q * depth + p) * pack_width + i], want)
              << "panel " << q << ", depth " << p << ", row " << i;
        }
    }
  }
  std::vector<T> dst(static_cast<std::size_t>(panels * pack_width * 3), T{-7});
  EXPECT_TRUE(packed_pairs(src.data(), two, unpaired, width, pack_width, dst.data()).empty());
}

}  // namespace
}  // namespace einsumdb::tensor_gemm
