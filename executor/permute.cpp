// copy_layout: a permutation at memory speed. A copy whose two layouts are contiguous along
// different axes is a transposition, repeated over the other axes: the columns are the run of
// axes contiguous in dst, the rows the run contiguous in src. Done element by element along
// dst's rows it reads one element per src line, and with the large (often power-of-two)
// strides of tensor layouts the lines of a column evict one another before their neighbours
// are read: each element then costs a whole line's transfer, up to 8 (16 for floats) times the
// traffic of what follows (bench/permute.sh times both).
// Here micro-blocks of one cache line square (8 × 8 doubles, 16 × 16 floats, 4 × 4 complex
// doubles) are transposed in vector registers, so that each src line is read whole and each dst
// line written whole, with streaming stores when the result is larger than the cache; the
// micro-blocks go down a block of src rows strip by strip, prefetching the next strip's lines.
#include "einsumdb/executor/permute.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <type_traits>

// (GCC 12's AVX-512 intrinsics start some results from _mm512_undefined_*(), which its
// -Wuninitialized reports at the header's lines when they are inlined.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include "einsumdb/executor/isa_target.hpp"  // this file: once per instruction set
#include "einsumdb/executor/kernels.hpp"
#include "einsumdb/executor/line_transpose.hpp"

EINSUMDB_TARGET_BEGIN
namespace einsumdb::kernels::EINSUMDB_ISA_NS {
namespace {

struct Axis {
  std::int64_t len, s, d;  // length, src stride, dst stride (elements)
};

// A complex128 element's bits.
struct Bytes16 {
  std::uint64_t lo, hi;
};

// The copy's axes without those of length 1, ordered by dst stride (the largest first), with
// neighbours that are one flat axis in both layouts merged.
std::vector<Axis> normalized(const std::vector<std::int64_t>& shape,
                             const std::vector<std::int64_t>& src_strides,
                             const std::vector<std::int64_t>& dst_strides) {
  std::vector<Axis> axes;
  for (std::size_t a = 0; a < shape.size(); ++a)
    if (shape[a] != 1) axes.push_back({shape[a], src_strides[a], dst_strides[a]});
  std::stable_sort(axes.begin(), axes.end(), [](const Axis& x, const Axis& y) {
    return std::llabs(x.d) > std::llabs(y.d) ||
           (std::llabs(x.d) == std::llabs(y.d) && std::llabs(x.s) > std::llabs(y.s));
  });
  std::vector<Axis> out;
  for (const Axis& a : axes) {
    if (!out.empty() && out.back().s == a.s * a.len && out.back().d == a.d * a.len) {
      out.back() = {out.back().len * a.len, a.s, a.d};
      continue;
    }
    out.push_back(a);
  }
  return out;
}

// Calls f(src offset, dst offset) for every point of `axes` (an odometer, the last axis
// fastest).
template <typename F>
void for_each_point(const std::vector<Axis>& axes, F&& f) {
  std::int64_t total = 1;
  for (const Axis& a : axes) total *= a.len;
  std::vector<std::int64_t> at(axes.size(), 0);
  std::int64_t s = 0, d = 0;
  for (std::int64_t p = 0; p < total; ++p) {
    f(s, d);
    for (std::size_t a = axes.size(); a-- > 0;) {
      s += axes[a].s, d += axes[a].d;
      if (++at[a] < axes[a].len) break;
      s -= axes[a].s * axes[a].len, d -= axes[a].d * axes[a].len;
      at[a] = 0;
    }
  }
}

// Elements in a cache line: the side of the square a micro-block transposes, so that each src
// line it reads and each dst line it writes is whole.
template <typename T>
constexpr std::int64_t kLine = 64 / static_cast<std::int64_t>(sizeof(T));

// Src rows per block. A strip reads one line of each; the next strip's lines are prefetched
// (they lie at src's large stride, where the hardware prefetchers do not look). 128 rows: a
// strip's lines and the next strip's (2 × 128 × 64 B = 16 KiB) stay in the L1 cache beside the
// micro-blocks' dst lines, and 128 lines requested ahead cover the memory's latency at its
// bandwidth (bench/permute.sh times other block sizes).
constexpr std::int64_t kBlockRows = 128;

#if EINSUMDB_AVX512
// A micro-block in one go, by element size: the L × L transpose of the src lines s + col[j]
// (j < L, each loaded whole into one register) into out[i], and a store of one register (one
// line), non-temporal or not (the transposes: line_transpose.hpp).
template <std::size_t Bytes>
struct Lines;

template <>
struct Lines<8> {  // 8 × 8 doubles' bits
  using R = __m512d;
  static void transpose(const void* from, const std::int64_t* col, R out[8]) {
    const auto* s = static_cast<const double*>(from);
    R r[8], t[8];
    for (int j = 0; j < 8; ++j) r[j] = _mm512_loadu_pd(s + col[j]);
    for (int j = 0; j < 8; j += 2) {  // lane l of t[j + e]: column 2l + e of rows j, j + 1
      t[j] = _mm512_unpacklo_pd(r[j], r[j + 1]);
      t[j + 1] = _mm512_unpackhi_pd(r[j], r[j + 1]);
    }
    for (int e = 0; e < 2; ++e) {  // columns 2l + e
      __m512i o[4];
      transpose_lanes(_mm512_castpd_si512(t[e]), _mm512_castpd_si512(t[2 + e]),
                      _mm512_castpd_si512(t[4 + e]), _mm512_castpd_si512(t[6 + e]), o);
      for (int l = 0; l < 4; ++l) out[2 * l + e] = _mm512_castsi512_pd(o[l]);
    }
  }
  template <bool stream>
  static void put(void* at, R v) {
    if constexpr (stream)
      _mm512_stream_pd(static_cast<double*>(at), v);
    else
      _mm512_storeu_pd(static_cast<double*>(at), v);
  }
};

template <>
struct Lines<16> {  // 4 × 4 complex doubles' bits: the transpose of the lanes alone
  using R = __m512i;
  static void transpose(const void* from, const std::int64_t* col, R out[4]) {
    const auto* s = static_cast<const Bytes16*>(from);
    transpose_lanes(_mm512_loadu_si512(s + col[0]), _mm512_loadu_si512(s + col[1]),
                    _mm512_loadu_si512(s + col[2]), _mm512_loadu_si512(s + col[3]), out);
  }
  template <bool stream>
  static void put(void* at, R v) {
    if constexpr (stream)
      _mm512_stream_si512(static_cast<__m512i*>(at), v);
    else
      _mm512_storeu_si512(at, v);
  }
};

template <>
struct Lines<4> {  // 16 × 16 floats' bits
  using R = __m512;
  static void transpose(const void* from, const std::int64_t* col, R out[16]) {
    const auto* s = static_cast<const float*>(from);
    R r[16];
    for (int j = 0; j < 16; ++j) r[j] = _mm512_loadu_ps(s + col[j]);
    transpose16(r, out);
  }
  template <bool stream>
  static void put(void* at, R v) {
    if constexpr (stream)
      _mm512_stream_ps(static_cast<float*>(at), v);
    else
      _mm512_storeu_ps(static_cast<float*>(at), v);
  }
};
#elif EINSUMDB_AVX2
// A register transpose by element size: the V × V transpose of the src rows s + row[j] (j < V)
// into out[i], and a store of one register, non-temporal or not.
template <std::size_t Bytes>
struct Registers;

template <>
struct Registers<8> {  // 4 × 4 doubles' bits
  using R = __m256d;
  static void transpose(const void* from, const std::int64_t* row, R out[4]) {
    const auto* s = static_cast<const double*>(from);
    const R r[4] = {_mm256_loadu_pd(s + row[0]), _mm256_loadu_pd(s + row[1]),
                    _mm256_loadu_pd(s + row[2]), _mm256_loadu_pd(s + row[3])};
    transpose4(r, out);
  }
  template <bool stream>
  static void put(void* at, R v) {
    if constexpr (stream)
      _mm256_stream_pd(static_cast<double*>(at), v);
    else
      _mm256_storeu_pd(static_cast<double*>(at), v);
  }
};

template <>
struct Registers<16> : Registers<8> {  // 2 × 2 complex doubles' bits, stored as doubles' are
  static void transpose(const void* from, const std::int64_t* row, R out[2]) {
    const auto* s = static_cast<const Bytes16*>(from);
    const R r0 = _mm256_loadu_pd(reinterpret_cast<const double*>(s + row[0])),
            r1 = _mm256_loadu_pd(reinterpret_cast<const double*>(s + row[1]));
    out[0] = _mm256_permute2f128_pd(r0, r1, 0x20);
    out[1] = _mm256_permute2f128_pd(r0, r1, 0x31);
  }
};

template <>
struct Registers<4> {  // 8 × 8 floats' bits
  using R = __m256;
  static void transpose(const void* from, const std::int64_t* row, R out[8]) {
    const auto* s = static_cast<const float*>(from);
    R r[8];
    for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(s + row[j]);
    transpose8(r, out);
  }
  template <bool stream>
  static void put(void* at, R v) {
    if constexpr (stream)
      _mm256_stream_ps(static_cast<float*>(at), v);
    else
      _mm256_storeu_ps(static_cast<float*>(at), v);
  }
};
#endif

// One micro-block: d[j + row[i]] = s[i + col[j]] for i, j < kLine<T>, written row by row, each
// dst row's line in one store (AVX-512) or two consecutive ones (AVX); `stream`: with
// non-temporal stores (whole aligned lines only), which leave the caches to the block's src and
// spare reading dst's lines first.
template <typename T, bool stream>
inline void micro(const T* s, const std::int64_t* col, T* d, const std::int64_t* row) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8 || sizeof(T) == 16);
  constexpr std::int64_t L = kLine<T>;
#if EINSUMDB_AVX512
  // Each src line is loaded whole, once: with AVX's half lines, the 16 lines of a float block at
  // a power-of-two stride (one L1 set of 12 ways) were each fetched twice.
  using X = Lines<sizeof(T)>;
  typename X::R out[L];
  X::transpose(s, col, out);
  for (std::int64_t i = 0; i < L; ++i) X::template put<stream>(d + row[i], out[i]);
#elif EINSUMDB_AVX2
  constexpr std::int64_t V = L / 2;
  using X = Registers<sizeof(T)>;
  for (std::int64_t h = 0; h < L; h += V) {  // dst rows h..h+V: columns 0..V, V..L
    typename X::R lo[V], hi[V];
    X::transpose(s + h, col, lo);
    X::transpose(s + h, col + V, hi);
    for (std::int64_t q = 0; q < V; ++q) {
      X::template put<stream>(d + row[h + q], lo[q]);
      X::template put<stream>(d + row[h + q] + V, hi[q]);
    }
  }
#else
  for (std::int64_t i = 0; i < L; ++i)
    for (std::int64_t j = 0; j < L; ++j) d[j + row[i]] = s[i + col[j]];
#endif
}

// d[j + row[i]] = s[i + col[j]] for i < rows, j < cols: src is contiguous along i, dst along j
// (each a run of one or more axes; `col` and `row` give the other side's offsets). Within a
// block of kBlockRows src rows (values of j), strips of one cache line of src (kLine values of
// i) are transposed micro-block by micro-block down the block: each src line is read whole by
// one strip, each dst line written whole by one micro-block. `s_next`: the src of the next
// transposition (or null), whose first lines the last strip prefetches.
template <typename T, bool stream>
void transpose(const T* s, const std::int64_t* col, T* d, const std::int64_t* row,
               std::int64_t rows, std::int64_t cols, const T* s_next) {
  constexpr std::int64_t L = kLine<T>;
  for (std::int64_t j0 = 0; j0 < cols; j0 += kBlockRows) {
    const std::int64_t j1 = std::min(cols, j0 + kBlockRows);
    std::int64_t i = 0;
    for (; i + L <= rows; i += L) {
      // The lines the next strip reads: this block's next line, else the next block's first,
      // else the next transposition's (`ahead`: how far its rows are from this block's).
      const T* next = i + 2 * L <= rows ? s + i + L : j1 < cols ? s : s_next;
      const std::int64_t ahead = i + 2 * L <= rows ? 0 : j1 < cols ? kBlockRows : -j0;
      std::int64_t j = j0;
      for (; j + L <= j1; j += L) {
        if (next && j + ahead + L <= cols)
          for (std::int64_t q = 0; q < L; ++q) __builtin_prefetch(next + col[j + ahead + q]);
        micro<T, stream>(s + i, col + j, d + j, row + i);
      }
      for (; j < j1; ++j)
        for (std::int64_t q = 0; q < L; ++q) d[j + row[i + q]] = s[i + q + col[j]];
    }
    for (; i < rows; ++i)
      for (std::int64_t j = j0; j < j1; ++j) d[j + row[i]] = s[i + col[j]];
  }
}

// The offsets of a run of axes (the first fastest) along `stride` (Axis::s or Axis::d).
std::vector<std::int64_t> offsets(const std::vector<Axis>& run, std::int64_t Axis::*stride) {
  std::vector<std::int64_t> out{0};
  for (const Axis& a : run) {
    const std::size_t n = out.size();
    out.resize(n * static_cast<std::size_t>(a.len));
    for (std::int64_t k = 1; k < a.len; ++k)
      for (std::size_t q = 0; q < n; ++q) out[k * n + q] = out[q] + k * (a.*stride);
  }
  return out;
}

// Takes from `axes` the run that is contiguous in src (`stride` = &Axis::s) or in dst
// (&Axis::d) from its unit-stride axis on: the axis of stride 1, the one whose stride is that
// one's length, and so on, while the run holds at most kRunElements (its first axis may be
// longer: it is then cut into pieces, see copy_axes). Empty when no axis has stride 1.
constexpr std::int64_t kRunElements = 4096;
std::vector<Axis> take_run(std::vector<Axis>& axes, std::int64_t Axis::*stride) {
  std::vector<Axis> run;
  std::int64_t want = 1;
  for (;;) {
    const auto a =
        std::find_if(axes.begin(), axes.end(), [&](const Axis& x) { return x.*stride == want; });
    if (a == axes.end() || (!run.empty() && want * a->len > kRunElements)) return run;
    run.push_back(*a);
    want *= a->len;
    axes.erase(a);
  }
}

std::int64_t elements(const std::vector<Axis>& run) {
  std::int64_t n = 1;
  for (const Axis& a : run) n *= a.len;
  return n;
}

// Results larger than this are written with non-temporal stores (where their lines align):
// they would not stay in the cache anyway.
constexpr std::size_t kStreamBytes = std::size_t{8} << 20;

// The transposition of copy_axes: `cols` the run contiguous in dst, `rows` the run contiguous in
// src, each at least a cache line long, `outer` the other axes.
template <typename T>
void transpose_runs(const T* src, T* dst, std::vector<Axis> cols, std::vector<Axis> rows,
                    const std::vector<Axis>& outer, std::size_t whole_bytes) {
  // Streaming stores where the result is larger than the cache and every micro-block's rows
  // start on a line.
  const std::int64_t nc = elements(cols), nr = elements(rows);
  std::int64_t points = nc * nr;
  bool aligned = reinterpret_cast<std::uintptr_t>(dst) % 64 == 0;
  for (const Axis& a : rows) aligned = aligned && a.d % kLine<T> == 0;
  for (const Axis& a : outer) points *= a.len, aligned = aligned && a.d % kLine<T> == 0;
  const bool stream = aligned && std::max(static_cast<std::size_t>(points) * sizeof(T),
                                          whole_bytes) >= kStreamBytes;
  // The offset tables hold at most kRunElements each: a run longer than that is one axis, cut
  // into pieces (kRunElements a multiple of a line, so the pieces keep their alignment).
  const Axis col_axis = cols[0], row_axis = rows[0];
  cols[0].len = std::min(cols[0].len, kRunElements);
  rows[0].len = std::min(rows[0].len, kRunElements);
  const std::vector<std::int64_t> col = offsets(cols, &Axis::s), row = offsets(rows, &Axis::d);
  for (std::int64_t c0 = 0; c0 < nc; c0 += std::ssize(col))
    for (std::int64_t r0 = 0; r0 < nr; r0 += std::ssize(row)) {
      const std::int64_t m = std::min(std::ssize(col), nc - c0),
                         n = std::min(std::ssize(row), nr - r0);
      const T* s = src + c0 * col_axis.s + r0;  // (a cut run is a single axis of unit stride)
      T* d = dst + c0 + r0 * row_axis.d;
      // Each transposition is given the next one's src, to prefetch its first lines.
      const T* last = nullptr;
      T* last_dst = nullptr;
      auto step = [&](const T* next) {
        if (stream)
          transpose<T, true>(last, col.data(), last_dst, row.data(), n, m, next);
        else
          transpose<T, false>(last, col.data(), last_dst, row.data(), n, m, next);
      };
      for_each_point(outer, [&](std::int64_t so, std::int64_t dof) {
        if (last) step(s + so);
        last = s + so, last_dst = d + dof;
      });
      step(nullptr);
    }
#if EINSUMDB_AVX2
  if (stream) _mm_sfence();  // the streamed lines ordered before what follows
#endif
}

template <typename T>
void copy_axes(const T* src, T* dst, std::vector<Axis> axes, std::size_t whole_bytes) {
  if (axes.empty()) {
    *dst = *src;
    return;
  }
  // A transposition where src and dst are contiguous along different axes: the run of axes
  // contiguous in dst from its unit stride on are the columns, the run contiguous in src the
  // rows; they are transposed in micro-blocks for every point of the other axes.
  if constexpr (sizeof(T) == 4 || sizeof(T) == 8 || sizeof(T) == 16) {
    std::vector<Axis> outer = axes;
    std::vector<Axis> cols = take_run(outer, &Axis::d), rows = take_run(outer, &Axis::s);
    if (!cols.empty() && !rows.empty() && elements(cols) >= kLine<T> && elements(rows) >= kLine<T>)
      return transpose_runs(src, dst, std::move(cols), std::move(rows), outer, whole_bytes);
  }
  const Axis w = axes.back();  // dst's smallest stride
  axes.pop_back();
  for_each_point(axes, [&](std::int64_t s, std::int64_t d) {
    if (w.s == 1 && w.d == 1)
      copy_run(src + s, w.len, dst + d);
    else
      for (std::int64_t j = 0; j < w.len; ++j) dst[d + j * w.d] = src[s + j * w.s];
  });
}

}  // namespace

void copy_layout(const void* src, const std::vector<std::int64_t>& src_strides, void* dst,
                 const std::vector<std::int64_t>& dst_strides,
                 const std::vector<std::int64_t>& shape, std::size_t element_bytes,
                 std::size_t whole_bytes) {
  for (auto len : shape)
    if (len == 0) return;
  std::vector<Axis> axes = normalized(shape, src_strides, dst_strides);
  auto as = [&](auto type) {
    using T = decltype(type);
    copy_axes(static_cast<const T*>(src), static_cast<T*>(dst), std::move(axes), whole_bytes);
  };
  switch (element_bytes) {
    case 1:
      return as(std::uint8_t{});
    case 2:
      return as(std::uint16_t{});
    case 4:
      return as(std::uint32_t{});
    case 8:
      return as(std::uint64_t{});
    case 16:  // complex128
      return as(Bytes16{});
    default:
      break;
  }
  const auto* s = static_cast<const char*>(src);
  auto* d = static_cast<char*>(dst);
  const auto b = static_cast<std::int64_t>(element_bytes);
  for_each_point(axes, [&](std::int64_t i, std::int64_t o) {
    std::memcpy(d + o * b, s + i * b, element_bytes);
  });
}

}  // namespace einsumdb::kernels::EINSUMDB_ISA_NS
EINSUMDB_TARGET_END
