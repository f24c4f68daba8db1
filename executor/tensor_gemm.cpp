// tensor_gemm: a binary mul/sum contraction as one GEMM over the tensors as they lie, with no
// transposition pass (transposition-free contraction, as in TBLIS: D. Matthews, "High-Performance
// Tensor Contraction without Transposition", SISC 2018).
//
// The GEMM is BLIS's algorithm: blocks of NC columns, KC summed indices and MC rows, packed
// into the micro-panels BLIS's micro-kernel reads; the micro-kernel (BLIS's, through its public
// micro-kernel API, for the micro-architecture BLIS detects) computes each MR×NR tile, and a
// libxsmm kernel of its exact size each edge tile with fewer rows or columns, for which BLIS's
// would compute a whole tile (the 24 columns of TCCG cases 1-8 cost 28 with 16 × 14 tiles). The
// matrices are never formed: the packing routines gather each operand's block straight from the
// tensor through per-index offset tables (the row, column and summed indices may be any of the
// tensor's axes, in any order). A tile whose rows and columns are each evenly spaced in the
// output is written in place by the micro-kernel; any other is computed into a small buffer and
// copied out, along whichever of its directions is evenly spaced (streamed past the cache where
// the output is large and written once). There, where the contraction sums only a few elements,
// a tile whose rows are contiguous in whole cache lines is computed by libxsmm kernels that write
// it straight to the output in non-temporal stores, one per run of evenly spaced columns
// (write_around; on Zen 5, BLIS's micro-kernel writing in place is faster, kStreamAllDepth). Where
// a tile's rows are each in a different line of the output and the next tiles' rows continue those
// lines, a group of them is computed and each line written whole (line_groups; a block of rows
// never cuts a group); a tile whose contiguous direction in the output is not the one the
// micro-kernel writes contiguously is transposed through registers on its way out (AVX-512), and
// one whose rows are runs of whole lines is written a line per run. The blocks take all the summed
// elements where they exceed KC by a quarter at most, up to twice KC per pass where the output is
// too large for the cache (each pass reads and writes it), and MC grows as KC shrinks
// (block_sizes). The output's unit-stride index is kept on the side the micro-kernel prefers to
// write contiguously (the operands swap roles when needed). Where an operand and the output are
// both too large for the cache and contiguous along different indices, the rows (or columns) go in
// tiles of the two indices, so that both are moved in whole cache lines (group_rows), and so do the
// summed indices of two such operands (tiles). Batch indices are a loop around the GEMM. Where the
// output's unit-stride index belongs to an operand with only a few free elements, that operand
// takes the columns' side all the same, and the large one is streamed through the rows'. Memory
// beyond the output: the packed blocks, at most (MC + 1.25 NC)·KC elements per thread with BLIS's
// block sizes, and the offset tables, two per row and per column.
//
// Where one operand has only a few free elements (the columns) and the other runs at unit stride
// along its rows or its summed indices, that other operand is not packed at all: libxsmm kernels
// stream it in place, a few lines at a time, against the packed columns. Where the output's
// unit-stride index is among the columns, each kernel call writes its rows in place (streamed
// rows: a tall, skinny product such as TCCG case 1); where it is among the streamed operand's
// rows and that operand runs along another of them, the calls go a line's worth of its values at
// a time into a buffer, transposed on the way out (streamed lines: TCCG cases 2-4 and 6-8), and
// where it runs along that index itself, the calls write in place (TCCG cases 5, 9, 10, 11, 19).
// An output larger than the cache is written by the kernels in non-temporal stores, around it.
//
// Parameters: "threads" (over batch points when there are enough, otherwise over the wider of
// the row and column ranges, each thread packing its own blocks; streamed rows, over the rows),
// "stream_even" (true or false: whether the tiles of a large output summed over few elements go
// out in streaming stores, written around the cache or through the buffer, rather than in place
// by BLIS's micro-kernel; the default depends on the processor,
// kStreamAllDepth), "fetch_ahead" (true or false, Gemm::NextBlock) and "stream_rows" (true or
// false: whether an operand streams, in rows or in lines, where it can; true by default, and the
// tuner measures both). A functional operand is evaluated into a buffer in its array's layout
// first.
#include <cpuid.h>
#include <dlfcn.h>
#include <immintrin.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <tuple>
#include <type_traits>

// Before blis.h, which brings a CBLAS header of its own: the kernels' BLAS is OpenBLAS.
#include "einsumdb/executor/kernels.hpp"
#include "einsumdb/executor/small_gemm.hpp"

#include <blis.h>

namespace einsumdb {
namespace {

using kernels::contains;

template <typename T>
struct Blis;
template <>
struct Blis<double> {
  static constexpr num_t dt = BLIS_DOUBLE;
  using Kernel = dgemm_ukr_ft;
};
template <>
struct Blis<float> {
  static constexpr num_t dt = BLIS_FLOAT;
  using Kernel = sgemm_ukr_ft;
};

// BLIS 0.9 picks its Skylake-X kernels only on Intel processors whose brand string names a model it
// knows to have two AVX-512 FMA units; it does not know AMD's AVX-512 processors (Zen 4, Zen 5) at
// all, and runs its generic C kernels there, and on an Intel processor that a virtual machine
// reports as a plain "Intel(R) Xeon(R) Processor" it falls back to its AVX2 (Haswell) kernels. Its
// Skylake-X kernels run at the full rate on all of them (with one FMA unit, at the rate of the AVX2
// kernels). BLIS reads the choice from BLIS_ARCH_TYPE when it initializes, so it is set here,
// before the first call to BLIS, unless the user set it.
void choose_blis_kernels() {
  if (std::getenv("BLIS_ARCH_TYPE")) return;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512cd"))
    setenv("BLIS_ARCH_TYPE", std::to_string(static_cast<int>(BLIS_ARCH_SKX)).c_str(), 0);
}

// BLIS is loaded with RTLD_LOCAL rather than linked: libblis exports a BLAS and a CBLAS of its
// own, and linked into a process beside OpenBLAS it can take the place of OpenBLAS's cblas_dgemm
// (it did in a test binary whose libraries were loaded in the other order), and with it the
// thread count the other strategies set. Only its context query is needed from the library; the
// context's accessors and the micro-kernel's calling convention come from blis.h.
struct BlisLibrary {
  cntx_t* (*query_cntx)() = nullptr;
  arch_t (*query_arch)() = nullptr;
  char* (*arch_string)(arch_t) = nullptr;

  static const BlisLibrary& get() {
    static const BlisLibrary lib = [] {
      choose_blis_kernels();
      void* h = dlopen("libblis.so.4", RTLD_NOW | RTLD_LOCAL);
      if (!h)
        throw Error(std::string("tensor_gemm needs BLIS 0.9 (libblis.so.4, Debian's "
                                "libblis4-serial): ") +
                    dlerror());
      BlisLibrary l;
      l.query_cntx = reinterpret_cast<cntx_t* (*)()>(dlsym(h, "bli_gks_query_cntx"));
      l.query_arch = reinterpret_cast<arch_t (*)()>(dlsym(h, "bli_arch_query_id"));
      l.arch_string = reinterpret_cast<char* (*)(arch_t)>(dlsym(h, "bli_arch_string"));
      if (!l.query_cntx || !l.query_arch || !l.arch_string)
        throw Error("libblis.so.4 lacks the context queries tensor_gemm calls");
      return l;
    }();
    return lib;
  }
};

// The elements of the largest micro-tile (BLIS's kernels have at most 16 × 14 for doubles and
// 32 × 12 for floats on x86-64).
constexpr std::int64_t kMaxTile = 32 * 32;

// BLIS's micro-kernel for this machine and its block sizes.
template <typename T>
struct MicroKernel {
  typename Blis<T>::Kernel run = nullptr;
  cntx_t* cntx = nullptr;
  std::int64_t mr = 0, nr = 0, packmr = 0, packnr = 0, mc = 0, kc = 0, nc = 0;
  bool prefers_rows = true;  // writes a tile with unit column stride fastest

  static const MicroKernel& get() {
    static const MicroKernel k = [] {
      constexpr num_t dt = Blis<T>::dt;
      MicroKernel k;
      k.cntx = BlisLibrary::get().query_cntx();
      k.run = reinterpret_cast<typename Blis<T>::Kernel>(
          bli_cntx_get_l3_nat_ukr_dt(dt, BLIS_GEMM_UKR, k.cntx));
      k.mr = bli_cntx_get_blksz_def_dt(dt, BLIS_MR, k.cntx);
      k.nr = bli_cntx_get_blksz_def_dt(dt, BLIS_NR, k.cntx);
      k.packmr = bli_cntx_get_blksz_max_dt(dt, BLIS_MR, k.cntx);
      k.packnr = bli_cntx_get_blksz_max_dt(dt, BLIS_NR, k.cntx);
      k.mc = bli_cntx_get_blksz_def_dt(dt, BLIS_MC, k.cntx);
      k.kc = bli_cntx_get_blksz_def_dt(dt, BLIS_KC, k.cntx);
      k.nc = bli_cntx_get_blksz_def_dt(dt, BLIS_NC, k.cntx);
      k.prefers_rows = bli_cntx_l3_nat_ukr_prefers_rows_dt(dt, BLIS_GEMM_UKR, k.cntx);
      if (k.mr * k.nr > kMaxTile)
        throw Error("BLIS's micro-tile of " + std::to_string(k.mr) + "x" + std::to_string(k.nr) +
                    " is larger than tensor_gemm's tile buffer");
      return k;
    }();
    return k;
  }
};

// A table of offsets. Those of a large GEMM's rows run to millions of entries; they are held in a
// Tensor's memory, which a previous run has already written (tensor.hpp), rather than in pages
// glibc maps afresh for each call and the call faults in (on a virtual machine, that cost more than
// the GEMM's kernel).
class Table {
 public:
  explicit Table(std::int64_t n = 0)
      : t_(Dtype::f64, {n}, Tensor::Uninitialized{}), n_(n) {}  // (8-byte elements)
  std::int64_t* data() { return static_cast<std::int64_t*>(t_.raw()); }
  const std::int64_t* data() const { return static_cast<const std::int64_t*>(t_.raw()); }
  std::int64_t size() const { return n_; }
  std::int64_t& operator[](std::int64_t i) { return data()[i]; }
  std::int64_t operator[](std::int64_t i) const { return data()[i]; }

 private:
  Tensor t_;
  std::int64_t n_;
};

// Offsets of every element of the group `labels` (row-major over them, last fastest) in a
// tensor indexed by `layout` with these strides (0 for a label it does not have).
Table offsets(const std::string& labels, const std::map<char, std::int64_t>& len,
              const std::string& layout, const std::vector<std::int64_t>& strides) {
  const auto stride = kernels::label_strides(labels, layout, strides);
  std::int64_t total = 1;
  for (char c : labels) total *= len.at(c);
  Table out(total);
  if (total == 0) return out;
  out[0] = 0;
  // Each label multiplies the entries so far by its length, expanded in place from the back.
  std::int64_t filled = 1;
  for (std::size_t a = 0; a < labels.size(); ++a) {
    const std::int64_t n = len.at(labels[a]);
    for (std::int64_t o = filled - 1; o >= 0; --o) {
      const std::int64_t base = out[o];
      for (std::int64_t i = n - 1; i >= 0; --i) out[o * n + i] = base + i * stride[a];
    }
    filled *= n;
  }
  return out;
}

constexpr std::int64_t kUneven = std::numeric_limits<std::int64_t>::min();

// Per block of `width` consecutive entries of `off`: their common spacing, or kUneven. A block of
// one entry has any spacing (a micro-kernel addresses no second row or column): 1 is given.
std::vector<std::int64_t> spacing(const Table& off, std::int64_t width) {
  const std::int64_t n = off.size();
  std::vector<std::int64_t> out;
  for (std::int64_t b = 0; b < n; b += width) {
    const std::int64_t e = std::min(n, b + width);
    std::int64_t step = e - b > 1 ? off[b + 1] - off[b] : 1;
    for (std::int64_t i = b + 1; i < e && step != kUneven; ++i)
      if (off[i] - off[i - 1] != step) step = kUneven;
    out.push_back(step);
  }
  return out;
}

// Per block of `width` consecutive entries of `off` whose `step` (spacing) is uneven: whether they
// go in runs of `run` consecutive offsets (`run` dividing the block). A micro-panel of the output's
// rows that does so (where the output's unit-stride index is among the rows with a length that is a
// multiple of a cache line but not of MR, a panel holds the end of one line's run and the start of
// the next) is written a line per run and column, where it was scattered element by element along
// the columns.
std::vector<char> unit_runs(const Table& off, std::int64_t width, std::int64_t run,
                            const std::vector<std::int64_t>& step) {
  const std::int64_t n = off.size();
  std::vector<char> out;
  for (std::int64_t b = 0; b < n; b += width) {
    const std::int64_t e = std::min(n, b + width);
    bool runs = step[static_cast<std::size_t>(b / width)] == kUneven && (e - b) % run == 0;
    for (std::int64_t i = b + 1; i < e && runs; ++i)
      if ((i - b) % run != 0) runs = off[i] == off[i - 1] + 1;
    out.push_back(runs);
  }
  return out;
}

// Per MR rows of the output's offsets `cm` (a micro-panel): whether `line` panels start there in
// which row i of panel j lies at cm[i] + j, the first of them at a whole line's start or not: row i
// and a column of all of them then make one whole line of the output (a line group, written with
// Gemm::write_lines). Such panels come from the tiles of group_rows where the output's unit-stride
// index is among the rows and the operand's another one: the micro-kernel would write each row of a
// tile to a different line, through its general-stride path, and each line of the output, not
// written whole, would be read from memory first. Empty where there is none.
std::vector<char> line_groups(const Table& cm, std::int64_t mr, std::int64_t line) {
  const std::int64_t panels = cm.size() / mr;  // the whole ones
  std::vector<char> out(static_cast<std::size_t>((cm.size() + mr - 1) / mr), 0);
  bool any = false;
  for (std::int64_t q = 0; q + line <= panels;) {
    bool group = true;
    for (std::int64_t j = 1; j < line && group; ++j)
      for (std::int64_t i = 0; i < mr && group; ++i)
        group = cm[(q + j) * mr + i] == cm[q * mr + i] + j;
    out[static_cast<std::size_t>(q)] = group;
    any |= group;
    q += group ? line : 1;
  }
  if (!any) out.clear();
  return out;
}

// One contraction C[m, n] = Σ_k A[m, k] B[k, n] per batch point, every index through its table.
struct Contraction {
  Table am, cm;                                  // per row: offset in A, in C
  Table bn, cn;                                  // per column: offset in B, in C
  Table ak, bk;                                  // per summed element: offset in A, in B
  Table ab, bb, cb;                              // per batch point
  std::vector<std::int64_t> row_step, col_step;  // per MR rows / NR columns: spacing in C
  std::vector<char> row_runs;   // per MR rows: whether they go in runs of a cache line (unit_runs)
  std::vector<char> row_lines;  // per MR rows: whether a line group starts there (line_groups)
  std::int64_t M = 0, N = 0, K = 0;
  std::int64_t mc = 0, kc = 0;  // rows and summed elements per packed block (block_sizes)
  std::int64_t span = 0;        // rows packed at once, over several blocks (packing_span)
  bool stream = false;      // tiles written through the buffer bypass the cache (Gemm::copy_run)
  bool stream_all = false;  // and so do even tiles, through the buffer too (kStreamAllDepth)
  bool fetch_ahead = true;  // the next block's lines fetched during this one's (Gemm::NextBlock)
  std::int64_t around_ldc = 0;  // tiles' runs of columns this far apart written around the cache
};

#if defined(__AVX512F__)
// One AVX-512 register of T, its lanes under a mask.
template <typename T>
struct Lanes;
template <>
struct Lanes<double> {
  static constexpr std::int64_t width = 8;
  static __mmask8 first(std::int64_t n) { return static_cast<__mmask8>((1u << n) - 1); }
  static __m512d load(__mmask8 m, const double* p) { return _mm512_maskz_loadu_pd(m, p); }
  static __m512d loadu(const double* p) { return _mm512_loadu_pd(p); }
  static __m512d add(__m512d x, __m512d y) { return _mm512_add_pd(x, y); }
  static void store(double* p, __mmask8 m, __m512d v) { _mm512_mask_storeu_pd(p, m, v); }
  static void stream(double* p, __m512d v) { _mm512_stream_pd(p, v); }
};
template <>
struct Lanes<float> {
  static constexpr std::int64_t width = 16;
  static __mmask16 first(std::int64_t n) { return static_cast<__mmask16>((1u << n) - 1); }
  static __m512 load(__mmask16 m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
  static __m512 loadu(const float* p) { return _mm512_loadu_ps(p); }
  static __m512 add(__m512 x, __m512 y) { return _mm512_add_ps(x, y); }
  static void store(float* p, __mmask16 m, __m512 v) { _mm512_mask_storeu_ps(p, m, v); }
  static void stream(float* p, __m512 v) { _mm512_stream_ps(p, v); }
};

// Columns p and p + 1 of rows h to h + 3 of the 8 × 8 block of doubles whose row u is at q + u·ld:
// from two 128-bit loads per register and one in-lane unpack each, no lane-crossing shuffle.
inline void transposed_quarter(const double* q, std::int64_t ld, int p, int h, __m256d& column_p,
                               __m256d& column_next) {
  const double* a = q + h * ld + p;
  const __m256d x0 = _mm256_insertf128_pd(_mm256_castpd128_pd256(_mm_loadu_pd(a)),
                                          _mm_loadu_pd(a + 2 * ld), 1);  // rows h, h + 2
  const __m256d x1 = _mm256_insertf128_pd(_mm256_castpd128_pd256(_mm_loadu_pd(a + ld)),
                                          _mm_loadu_pd(a + 3 * ld), 1);  // rows h + 1, h + 3
  column_p = _mm256_unpacklo_pd(x0, x1);
  column_next = _mm256_unpackhi_pd(x0, x1);
}

// d[i·ldd + u] <- q[u·ld + i] for an 8 × 8 block of doubles, each row of d written in two halves.
// The block goes in 4 × 4 quarters from 128-bit loads: Zen 4 runs AVX-512's lane-crossing shuffles
// at a fraction of the in-lane rate, so loading whole rows and transposing them in registers
// (transpose8) is slower there.
inline void transpose8_to(const double* q, std::int64_t ld, double* d, std::int64_t ldd) {
  for (int p = 0; p < 8; p += 2)
    for (int h = 0; h < 8; h += 4) {
      __m256d a, b;
      transposed_quarter(q, ld, p, h, a, b);
      _mm256_storeu_pd(d + p * ldd + h, a);
      _mm256_storeu_pd(d + (p + 1) * ldd + h, b);
    }
}

// r[i] <- column i of the 8 × 8 block of doubles whose row u is at q + u·ld, in quarters
// (transposed_quarter), each pair of halves joined once (the zero-masking form with every lane
// selected, as in transpose8).
inline void load_transposed8(const double* q, std::int64_t ld, __m512d* r) {
  for (int p = 0; p < 8; p += 2) {
    __m256d a0, b0, a1, b1;
    transposed_quarter(q, ld, p, 0, a0, b0);
    transposed_quarter(q, ld, p, 4, a1, b1);
    r[p] = _mm512_maskz_insertf64x4(0xFF, _mm512_castpd256_pd512(a0), a1, 1);
    r[p + 1] = _mm512_maskz_insertf64x4(0xFF, _mm512_castpd256_pd512(b0), b1, 1);
  }
}

// r[i][j] <- r[j][i] for an 8 × 8 block of doubles, one row per register. (The zero-masking forms
// with every lane selected: GCC 12 warns of the plain forms' undefined source register.)
void transpose8(__m512d* r) {
  constexpr __mmask8 all = 0xFF;
  __m512d t[8];
  for (int k = 0; k < 8; k += 2) {
    t[k] = _mm512_maskz_unpacklo_pd(all, r[k],
                                    r[k + 1]);  // r[k][0], r[k+1][0], r[k][2], r[k+1][2], ...
    t[k + 1] = _mm512_maskz_unpackhi_pd(all, r[k], r[k + 1]);
  }
  const __m512i even = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
  const __m512i odd = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
  // u[0]: the columns 0 and 4 of rows 0-3, u[1]: 2 and 6, u[2]: 1 and 5, u[3]: 3 and 7; v: rows
  // 4-7.
  const __m512d u[4] = {
      _mm512_permutex2var_pd(t[0], even, t[2]), _mm512_permutex2var_pd(t[0], odd, t[2]),
      _mm512_permutex2var_pd(t[1], even, t[3]), _mm512_permutex2var_pd(t[1], odd, t[3])};
  const __m512d v[4] = {
      _mm512_permutex2var_pd(t[4], even, t[6]), _mm512_permutex2var_pd(t[4], odd, t[6]),
      _mm512_permutex2var_pd(t[5], even, t[7]), _mm512_permutex2var_pd(t[5], odd, t[7])};
  constexpr int column[4] = {0, 2, 1, 3};
  for (int k = 0; k < 4; ++k) {
    r[column[k]] = _mm512_maskz_shuffle_f64x2(all, u[k], v[k], 0x44);      // the low halves of both
    r[column[k] + 4] = _mm512_maskz_shuffle_f64x2(all, u[k], v[k], 0xEE);  // the high halves
  }
}
#endif

// The bytes of this core's L2 cache (512 KB where the system does not say).
std::int64_t l2_bytes() {
  static const std::int64_t bytes = [] {
    const long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return v > 0 ? static_cast<std::int64_t>(v) : std::int64_t{512} << 10;
  }();
  return bytes;
}

template <typename T>
class Gemm {
 public:
  Gemm(const Contraction& p, const T* a, const T* b, T* c)
      : p_(p), k_(MicroKernel<T>::get()), a_(a), b_(b), c_(c) {
    if (p_.around_ldc > 0)
      for (std::int64_t n = 1; n <= k_.nr; ++n)
        around_.emplace_back(k_.mr, n, p_.K, k_.packmr, k_.packnr, p_.around_ldc, true,
                             kernels::StreamKernel<T>::Ahead::none,
                             kernels::StreamKernel<T>::Write::around);
    if (std::any_of(around_.begin(), around_.end(), [](const auto& f) { return !f; }))
      around_.clear();  // libxsmm has no kernel for one of the shapes
  }

  // Rows [m0, m1) × columns [n0, n1) of batch point `q`; m0 a multiple of MR, n0 of NR.
  void run(std::int64_t q, std::int64_t m0, std::int64_t m1, std::int64_t n0, std::int64_t n1,
           T* apack, T* bpack) const {
    const T* a = a_ + p_.ab[q];
    const T* b = b_ + p_.bb[q];
    T* c = c_ + p_.cb[q];
    T one = 1, zero = 0;
    alignas(64) T tile[kMaxTile];
    alignas(64) T group[kLine * kMaxTile];  // a line group's tiles (write_lines)
    const std::int64_t tile_rs = k_.prefers_rows ? k_.nr : 1;
    const std::int64_t tile_cs = k_.prefers_rows ? 1 : k_.mr;
    auxinfo_t aux{};
    bli_auxinfo_set_schema_a(BLIS_PACKED_ROW_PANELS, &aux);
    bli_auxinfo_set_schema_b(BLIS_PACKED_COL_PANELS, &aux);
    bli_auxinfo_set_is_a(1, &aux);
    bli_auxinfo_set_is_b(1, &aux);
    for (std::int64_t jc = n0; jc < n1; jc += k_.nc) {
      const std::int64_t ncb = std::min(k_.nc, n1 - jc);
      for (std::int64_t pc = 0; pc < p_.K; pc += p_.kc) {
        const std::int64_t kcb = std::min(p_.kc, p_.K - pc);
        const bool accumulate = pc != 0;
        check_deadline();
        pack(b, p_.bn.data() + jc, ncb, p_.bk.data() + pc, kcb, k_.nr, k_.packnr, bpack);
        T* beta = accumulate ? &one : &zero;
        std::int64_t packed_from = m0, packed_to = m0;  // the rows in apack
        for (std::int64_t ic = m0, next; ic < m1; ic = next) {
          next = block_end(ic, m1);
          if (ic >= packed_to) {  // this block's rows, or the span of rows it starts
            packed_from = ic;
            packed_to = p_.span ? std::min(m1, (ic / p_.span + 1) * p_.span) : next;
            pack(a, p_.am.data() + ic, packed_to - ic, p_.ak.data() + pc, kcb, k_.mr, k_.packmr,
                 apack, p_.span > 0);
          }
          next = std::min(next, packed_to);
          const std::int64_t mcb = next - ic;
          T* const ablock = apack + (ic - packed_from) / k_.mr * k_.packmr * kcb;
          const std::int64_t after =
              next < m1 && next >= packed_to && p_.fetch_ahead ? block_end(next, m1) : next;
          // What L2 holds meanwhile: this packed block of A and the B micro-panel in use.
          const std::int64_t packed =
              (mcb + k_.packnr) * kcb * static_cast<std::int64_t>(sizeof(T));
          NextBlock ahead(a, p_.am.data() + next, after - next, p_.ak.data() + pc, kcb, k_.mr,
                          (mcb + k_.mr - 1) / k_.mr * ((ncb + k_.nr - 1) / k_.nr),
                          std::max<std::int64_t>(0, l2_bytes() - packed) / 64);
          bli_auxinfo_set_ps_a(k_.packmr * kcb, &aux);
          bli_auxinfo_set_ps_b(k_.packnr * kcb, &aux);
          for (std::int64_t jr = 0; jr < ncb; jr += k_.nr) {
            const std::int64_t nrb = std::min(k_.nr, ncb - jr);
            T* bp = bpack + jr / k_.nr * k_.packnr * kcb;
            const std::int64_t cs = p_.col_step[static_cast<std::size_t>((jc + jr) / k_.nr)];
            const std::int64_t* cn = p_.cn.data() + jc + jr;
            // The micro-kernel on the MR rows from `ir` into `to` (rs, cs), with the next panels'
            // addresses for its prefetches.
            const auto kernel = [&](std::int64_t ir, std::int64_t mrb, T* to_beta, T* to,
                                    std::int64_t to_rs, std::int64_t to_cs) {
              T* ap = ablock + ir / k_.mr * k_.packmr * kcb;
              const bool last = ir + k_.mr >= mcb;
              bli_auxinfo_set_next_a(last ? ablock : ap + k_.packmr * kcb, &aux);
              bli_auxinfo_set_next_b(last ? bp + k_.packnr * kcb : bp, &aux);
              ahead.fetch();
              // An edge tile through libxsmm: BLIS's micro-kernel computes a whole tile for it.
              if ((mrb < k_.mr || nrb < k_.nr) &&
                  kernels::packed_tile(mrb, nrb, kcb, ap, k_.packmr, bp, k_.packnr, to, to_rs,
                                       to_cs, *to_beta != 0))
                return;
              k_.run(mrb, nrb, kcb, &one, ap, bp, to_beta, to, to_rs, to_cs, &aux, k_.cntx);
            };
            for (std::int64_t ir = 0; ir < mcb;) {
              const std::int64_t mrb = std::min(k_.mr, mcb - ir);
              const std::size_t panel = static_cast<std::size_t>((ic + ir) / k_.mr);
              const std::int64_t* cm = p_.cm.data() + ic + ir;
              if (!p_.row_lines.empty() && p_.row_lines[panel] && ir + kLine * k_.mr <= mcb) {
                for (std::int64_t j = 0; j < kLine; ++j) {
                  if (transposes())  // tile j column-major at group + j·MR·NR
                    kernel(ir + j * k_.mr, k_.mr, &zero, group + j * k_.mr * k_.nr, 1, k_.mr);
                  else  // element (i, n) of tile j at group[(i + n·MR)·kLine + j]
                    kernel(ir + j * k_.mr, k_.mr, &zero, group + j, kLine, kLine * k_.mr);
                }
                write_lines(group, nrb, c, cm, cn, accumulate);
                ir += kLine * k_.mr;
                continue;
              }
              const std::int64_t rs = p_.row_step[panel];
              const bool even = rs != kUneven && cs != kUneven;
              const bool whole_lines = rs == 1 ? tile_rs == 1 : cs == 1 && tile_cs == 1;
              if (even && cs == 1 && transposes()) {  // rows of the output across the tile
                kernel(ir, mrb, &zero, tile, 1, k_.mr);
                transpose_out(tile, mrb, nrb, c + cm[0] + cn[0], rs, accumulate);
              } else if (even && !(p_.stream_all && whole_lines)) {
                kernel(ir, mrb, beta, c + cm[0] + cn[0], rs, cs);
              } else if (rs == 1 && mrb == k_.mr && !accumulate &&
                         write_around(ir, jr, nrb, kcb, ablock, bpack, c + cm[0], cn)) {
                ahead.fetch();
              } else {
                kernel(ir, mrb, &zero, tile, tile_rs, tile_cs);
                if (rs == kUneven && tile_rs == 1 && p_.row_runs[panel]) {  // a line per run
                  for (std::int64_t n = 0; n < nrb; ++n)
                    for (std::int64_t i = 0; i < mrb; i += kLine)
                      copy_run(tile + n * tile_cs + i, kLine, c + cm[i] + cn[n], accumulate,
                               p_.stream);
                } else if (rs != kUneven && (cs == kUneven || rs == 1))  // along evenly spaced rows
                  scatter(tile, tile_rs, tile_cs, mrb, nrb, c + cm[0], rs, cn, accumulate,
                          p_.stream);
                else if (cs != kUneven)  // evenly spaced columns: row by row
                  scatter(tile, tile_cs, tile_rs, nrb, mrb, c + cn[0], cs, cm, accumulate,
                          p_.stream);
                else
                  for (std::int64_t i = 0; i < mrb; ++i) {
                    T* row = c + cm[i];
                    const T* t = tile + i * tile_rs;
                    if (accumulate)
                      for (std::int64_t j = 0; j < nrb; ++j) row[cn[j]] += t[j * tile_cs];
                    else
                      for (std::int64_t j = 0; j < nrb; ++j) row[cn[j]] = t[j * tile_cs];
                  }
              }
              ir += k_.mr;
            }
          }
        }
      }
    }
    if (p_.stream) _mm_sfence();  // the streamed stores, visible before the threads join
  }

 private:
  // Computes the tile of the MR rows from `ir` (contiguous in the output from `base`) and the `nrb`
  // columns from `jr` (at `cn` from it) straight into the output, around the cache: one libxsmm
  // kernel per run of columns p_.around_ldc apart, whose non-temporal stores write each column's
  // whole lines (kernels::StreamKernel). False, having computed nothing, where there are no such
  // kernels or a column starts off a cache line. A whole tile written once, summed over few
  // elements: BLIS's micro-kernel writes it in place with ordinary stores, which read each line
  // from memory first, and through the buffer (copy_run), the copy costs as much again as the
  // kernel's stores.
  bool write_around(std::int64_t ir, std::int64_t jr, std::int64_t nrb, std::int64_t kcb,
                    const T* apack, const T* bpack, T* base, const std::int64_t* cn) const {
    if (around_.empty() || kcb != p_.K) return false;
    for (std::int64_t j = 0; j < nrb; ++j)
      if (reinterpret_cast<std::uintptr_t>(base + cn[j]) % 64 != 0) return false;
    const T* ap = apack + ir / k_.mr * k_.packmr * kcb;
    const T* bp = bpack + jr / k_.nr * k_.packnr * kcb;
    for (std::int64_t j0 = 0, j1; j0 < nrb; j0 = j1) {
      for (j1 = j0 + 1; j1 < nrb && cn[j1] - cn[j1 - 1] == p_.around_ldc;) ++j1;
      T* to = base + cn[j0];
      around_[static_cast<std::size_t>(j1 - j0 - 1)](ap, bp + j0, to, ap, bp + j0, to);
    }
    return true;
  }

  // Fetches the lines of the next block of rows into L2 a few at a time, before each micro-kernel
  // call of this one: where packing a block is bound by memory misses (panels of MR consecutive
  // elements far apart in a large operand), memory then works while the FMA units do, instead of in
  // turn. Panels that are gathered element by element are left to the packing routine's own
  // prefetches; and at most what L2 holds beside the packed block is fetched.
  class NextBlock {
   public:
    NextBlock(const T* src, const std::int64_t* row, std::int64_t rows, const std::int64_t* col,
              std::int64_t depth, std::int64_t width, std::int64_t calls, std::int64_t lines)
        : src_(src),
          row_(row),
          rows_(rows),
          col_(col),
          depth_(depth),
          width_(width),
          panels_((rows + width - 1) / width),
          lines_(lines) {
      per_call_ = calls > 0 ? (panels_ * depth + calls - 1) / calls : 0;
    }

    // The next share of the block's panels, depth by depth as the packing reads them.
    void fetch() {
      for (std::int64_t n = 0; n < per_call_ && p_ < depth_ && lines_ > 0; ++n) {
        const std::int64_t r0 = q_ * width_, w = std::min(width_, rows_ - r0);
        if (row_[r0 + w - 1] - row_[r0] == w - 1) {  // consecutive rows: their lines
          constexpr std::uintptr_t line = 63;
          const T* from = src_ + row_[r0] + col_[p_];
          const std::uintptr_t last = reinterpret_cast<std::uintptr_t>(from + w - 1) & ~line;
          for (std::uintptr_t at = reinterpret_cast<std::uintptr_t>(from) & ~line; at <= last;
               at += 64, --lines_)
            _mm_prefetch(reinterpret_cast<const char*>(at), _MM_HINT_T1);
        }
        if (++q_ == panels_) q_ = 0, ++p_;
      }
    }

   private:
    const T* src_;
    const std::int64_t* row_;
    std::int64_t rows_;
    const std::int64_t* col_;
    std::int64_t depth_, width_, panels_, lines_;
    std::int64_t per_call_ = 0, p_ = 0, q_ = 0;
  };

  // The end of the block of rows that starts at `ic`: MC rows on (or m1), or, where that would cut
  // a line group in two, the start of that group, so that each group is computed whole (cut, its
  // panels were written element by element: with 15 panels to a block, 7 in 15 of TCCG case 20's).
  std::int64_t block_end(std::int64_t ic, std::int64_t m1) const {
    const std::int64_t end = std::min(m1, ic + p_.mc);
    if (p_.row_lines.empty() || end == m1) return end;
    const std::int64_t last = end / k_.mr;  // the first panel of the next block
    for (std::int64_t g = last - 1; g > ic / k_.mr && g > last - kLine; --g)
      if (p_.row_lines[static_cast<std::size_t>(g)]) return g * k_.mr;
    return end;
  }

  // Whether tiles go out through registers, transposed 8 × 8 (AVX-512, doubles, a micro-kernel that
  // writes columns fastest, MR a multiple of 8), rather than along strides by the micro-kernel,
  // whose general-stride path stores element by element: line groups, and even tiles whose columns
  // are contiguous in the output.
  bool transposes() const {
#if defined(__AVX512F__)
    return std::is_same_v<T, double> && !k_.prefers_rows && k_.mr % 8 == 0;
#else
    return false;
#endif
  }

#if defined(__AVX512F__)
  // d[0, 8) under `mask` = v, or += with `accumulate`; a whole aligned line streamed with `stream`.
  static void put(double* d, __m512d v, __mmask8 mask, bool accumulate, bool stream) {
    if (accumulate) v = _mm512_add_pd(v, _mm512_maskz_loadu_pd(mask, d));
    if (stream && mask == 0xFF && reinterpret_cast<std::uintptr_t>(d) % 64 == 0)
      _mm512_stream_pd(d, v);
    else
      _mm512_mask_storeu_pd(d, mask, v);
  }
#endif

  // Writes a column-major tile (transposes()) whose columns are contiguous in the output (its rows
  // `rs` apart from `base`): 8 × 8 blocks through registers, each row's run of 8 at once.
  void transpose_out(const T* tile, std::int64_t mrb, std::int64_t nrb, T* base, std::int64_t rs,
                     bool accumulate) const {
#if defined(__AVX512F__)
    if constexpr (std::is_same_v<T, double>) {
      for (std::int64_t n0 = 0; n0 < nrb; n0 += 8) {
        const std::int64_t w = std::min<std::int64_t>(8, nrb - n0);
        const auto mask = static_cast<__mmask8>((1u << w) - 1);
        for (std::int64_t h = 0; h < mrb; h += 8) {
          __m512d r[8];  // past the tile's rows, the buffer's stale elements, never written out
          if (w == 8) {
            load_transposed8(tile + n0 * k_.mr + h, k_.mr, r);
          } else {
            for (std::int64_t j = 0; j < 8; ++j)
              r[j] = j < w ? _mm512_load_pd(tile + (n0 + j) * k_.mr + h) : _mm512_setzero_pd();
            transpose8(r);
          }
          for (std::int64_t i = 0; i < std::min<std::int64_t>(8, mrb - h); ++i)
            put(base + (h + i) * rs + n0, r[i], mask, accumulate, p_.stream);
        }
      }
      return;
    }
#endif
    for (std::int64_t i = 0; i < mrb; ++i)
      for (std::int64_t n = 0; n < nrb; ++n)
        base[i * rs + n] = tile[n * k_.mr + i] + (accumulate ? base[i * rs + n] : T{0});
  }

  // Writes a line group (line_groups): kLine tiles of MR rows, row i of tile j at cm[i] + j in the
  // output, so that row i and column n of all of them make one whole line at cm[i] + cn[n], and
  // the line is written at once (streamed where the output is). Each tile went column-major into
  // `group`, one after the other (transposes()), or interleaved, each line contiguous.
  void write_lines(const T* group, std::int64_t nrb, T* c, const std::int64_t* cm,
                   const std::int64_t* cn, bool accumulate) const {
#if defined(__AVX512F__)
    if constexpr (std::is_same_v<T, double>) {
      if (transposes()) {
        const std::int64_t tile = k_.mr * k_.nr;
        for (std::int64_t n = 0; n < nrb; ++n)
          for (std::int64_t h = 0; h < k_.mr; h += 8) {
            __m512d r[8];
            load_transposed8(group + n * k_.mr + h, tile, r);
            for (std::int64_t i = 0; i < 8; ++i)
              put(c + cm[h + i] + cn[n], r[i], 0xFF, accumulate, p_.stream);
          }
        return;
      }
    }
#endif
    for (std::int64_t n = 0; n < nrb; ++n)
      for (std::int64_t i = 0; i < k_.mr; ++i)
        copy_run(group + (i + n * k_.mr) * kLine, kLine, c + cm[i] + cn[n], accumulate, p_.stream);
  }

  // Depths ahead whose rows a packing routine prefetches.
  static constexpr std::int64_t kAhead = 4;
  static constexpr std::int64_t kLine = 64 / sizeof(T);  // elements per cache line
  // Rows ahead whose elements a packing routine that gathers row by row prefetches: a row's
  // elements lie on as many cache lines as it has runs along the tensor's memory, and without it
  // each of those lines was fetched only when the row came to be read.
  static constexpr std::int64_t kRowsAhead = 4;

  // d[0, n) = t[0, n), or += with `accumulate`; with `stream`, whole aligned cache lines go around
  // the cache (non-temporal stores, AVX-512 only): their tile will not be read again, and a line
  // written there needs no read of its old contents first. The micro-kernel prefetches the lines of
  // the tile it writes, here the buffer's; the output's lines would miss one by one.
  static void copy_run(const T* t, std::int64_t n, T* d, bool accumulate, bool stream) {
#if defined(__AVX512F__)
    using V = Lanes<T>;
    if (stream && !accumulate && n % V::width == 0 &&  // whole lines: no masks
        reinterpret_cast<std::uintptr_t>(d) % 64 == 0) {
      for (std::int64_t i = 0; i < n; i += V::width) V::stream(d + i, V::loadu(t + i));
      return;
    }
    for (std::int64_t i = 0; i < n; i += V::width) {
      const auto mask = V::first(std::min(V::width, n - i));
      auto v = V::load(mask, t + i);
      if (accumulate) v = V::add(v, V::load(mask, d + i));
      if (stream && n - i >= V::width && reinterpret_cast<std::uintptr_t>(d + i) % 64 == 0)
        V::stream(d + i, v);
      else
        V::store(d + i, mask, v);
    }
#else
    (void)stream;
    if (accumulate)
      for (std::int64_t i = 0; i < n; ++i) d[i] += t[i];
    else
      for (std::int64_t i = 0; i < n; ++i) d[i] = t[i];
#endif
  }

  // Writes (or adds, `accumulate`) a tile computed into `tile` to the output, where one of its two
  // directions, the `run` direction (`length` elements `run_step` apart in the tile), is evenly
  // spaced in the output (`step` apart) and the other is not (`lines` of them, `line_step` apart in
  // the tile, at offsets `at` from `base`), line by line. It used to go element by element along
  // the uneven direction, scattered; on TCCG case 34 (dfga,gebc->abcdef: e = 16 is the columns'
  // fastest index, and three column panels of 14 in four straddle two values of c) that took longer
  // than the micro-kernel.
  static void scatter(const T* tile, std::int64_t run_step, std::int64_t line_step,
                      std::int64_t length, std::int64_t lines, T* base, std::int64_t step,
                      const std::int64_t* at, bool accumulate, bool stream) {
    for (std::int64_t j = 0; j < lines; ++j) {
      T* d = base + at[j];
      const T* t = tile + j * line_step;
      if (step == 1 && run_step == 1) {
        copy_run(t, length, d, accumulate, stream);
      } else if (accumulate) {
        for (std::int64_t i = 0; i < length; ++i) d[i * step] += t[i * run_step];
      } else {
        for (std::int64_t i = 0; i < length; ++i) d[i * step] = t[i * run_step];
      }
    }
  }

  // Packs together the runs of eight rows (half a panel of 16, in panels not packed `along` their
  // rows) that lie on the same cache lines of the tensor: run j's row i is element j of the line
  // that holds the row i of each of the others (up to eight runs, one for each element of the
  // line). At each depth, the eight lines of rows 0-7 are loaded whole, transposed in registers,
  // and stored as the runs' eight rows each. Gathered element by element instead, each line was
  // read once for each run it serves, eight loads for a line's worth, and at the lengths where it
  // matters, read again from memory each time (packing_span). Returns which rows it packed: none
  // but for doubles with AVX-512 and a panel width of whole runs, and only runs that share their
  // lines with at least one other.
  static std::vector<char> pack_across(
      [[maybe_unused]] const T* src, [[maybe_unused]] const std::int64_t* row,
      [[maybe_unused]] std::int64_t rows, [[maybe_unused]] const std::int64_t* col,
      [[maybe_unused]] std::int64_t depth, [[maybe_unused]] std::int64_t width,
      [[maybe_unused]] std::int64_t pack_width, [[maybe_unused]] T* dst,
      [[maybe_unused]] const std::vector<char>& along) {
#if defined(__AVX512F__)
    if constexpr (std::is_same_v<T, double>) {
      constexpr std::int64_t run = 8;
      if (width % run || pack_width % run || depth < 1) return {};
      // Each whole run's line: the element offset where the line of its first row starts, and
      // its place on that line.
      struct Run {
        std::int64_t r0, base, slot;
      };
      std::vector<Run> runs;
      for (std::int64_t r0 = 0; r0 + run <= rows; r0 += run) {
        if (along[static_cast<std::size_t>(r0 / width)]) continue;
        const auto address = reinterpret_cast<std::uintptr_t>(src + row[r0] + col[0]);
        const auto slot = static_cast<std::int64_t>(address / sizeof(T) % run);
        runs.push_back({r0, row[r0] - slot, slot});
      }
      std::stable_sort(runs.begin(), runs.end(),
                       [](const Run& x, const Run& y) { return x.base < y.base; });
      // Runs on the same lines: the same base, their rows the same distance from it.
      const auto same_lines = [&](const Run& x, const Run& y) {
        if (x.base != y.base || x.slot == y.slot) return false;
        for (std::int64_t i = 1; i < run; ++i)
          if (row[x.r0 + i] - x.slot != row[y.r0 + i] - y.slot) return false;
        return true;
      };
      std::vector<char> done;
      for (std::size_t g = 0, next; g < runs.size(); g = next) {
        __mmask8 present = static_cast<__mmask8>(1u << runs[g].slot);
        const Run* at[run] = {};
        at[runs[g].slot] = &runs[g];
        for (next = g + 1; next < runs.size() && same_lines(runs[g], runs[next]) &&
                           !(present >> runs[next].slot & 1u);
             ++next) {
          present = static_cast<__mmask8>(present | 1u << runs[next].slot);
          at[runs[next].slot] = &runs[next];
        }
        if (next - g < 2) continue;
        if (done.empty()) done.assign(static_cast<std::size_t>(rows), 0);
        std::int64_t line[run];  // row i's line, from `base`
        for (std::int64_t i = 0; i < run; ++i) line[i] = row[runs[g].r0 + i] - runs[g].slot;
        T* to[run] = {};  // where each run's eight rows go at depth 0
        for (std::int64_t j = 0; j < run; ++j) {
          if (!at[j]) continue;
          const std::int64_t r0 = at[j]->r0;
          to[j] = dst + r0 / width * pack_width * depth + r0 % width;
          std::fill_n(done.begin() + r0, run, 1);
        }
        for (std::int64_t p = 0; p < depth; ++p) {
          const T* s = src + col[p];
          const T* ahead = src + col[std::min(depth - 1, p + kAhead)];
          __m512d v[run];
          for (std::int64_t i = 0; i < run; ++i) {
            __builtin_prefetch(ahead + line[i]);
            v[i] = Lanes<double>::load(present, s + line[i]);
          }
          transpose8(v);
          for (std::int64_t j = 0; j < run; ++j)
            if (to[j]) _mm512_storeu_pd(to[j] + p * pack_width, v[j]);
        }
      }
      return done;
    }
#endif
    return {};
  }

  // Packs `rows` × `depth` elements into micro-panels of `width` rows (`pack_width` apart, zero
  // past the last row): panel[p * pack_width + i] = src[row[i] + col[p]].
  static void pack(const T* src, const std::int64_t* row, std::int64_t rows,
                   const std::int64_t* col, std::int64_t depth, std::int64_t width,
                   std::int64_t pack_width, T* dst, bool across = false) {
    const std::int64_t panels = (rows + width - 1) / width;
    // A panel whose rows are consecutive in the tensor is copied along them, the loop over the
    // depth outside the loop over the panels: the block's rows are read in order at each depth,
    // and the rows kAhead depths on (elsewhere in the tensor, where the hardware's prefetchers
    // do not look) are fetched meanwhile. Other panels are gathered element by element.
    std::vector<char> along(static_cast<std::size_t>(panels));
    bool any_along = false;
    for (std::int64_t q = 0; q < panels; ++q) {
      const std::int64_t r0 = q * width, w = std::min(width, rows - r0);
      bool a = w > 1;
      for (std::int64_t i = r0 + 1; i < r0 + w && a; ++i) a = row[i] - row[i - 1] == 1;
      along[static_cast<std::size_t>(q)] = a;
      any_along |= a;
    }
    if (any_along)
      for (std::int64_t p = 0; p < depth; ++p) {
        const T* s = src + col[p];
        const T* ahead = src + col[std::min(depth - 1, p + kAhead)];
        for (std::int64_t q = 0; q < panels; ++q) {
          if (!along[static_cast<std::size_t>(q)]) continue;
          const std::int64_t r0 = q * width, w = std::min(width, rows - r0);
          const T* from = s + row[r0];
          for (std::int64_t i = 0; i < w; i += kLine) __builtin_prefetch(ahead + row[r0] + i);
          __builtin_prefetch(ahead + row[r0] + w - 1);
          T* d = dst + q * pack_width * depth + p * pack_width;
          for (std::int64_t i = 0; i < w; ++i) d[i] = from[i];
          for (std::int64_t i = w; i < pack_width; ++i) d[i] = 0;
        }
      }
    const std::vector<char> done =
        across ? pack_across(src, row, rows, col, depth, width, pack_width, dst, along)
               : std::vector<char>{};
    for (std::int64_t q = 0; q < panels; ++q) {
      if (along[static_cast<std::size_t>(q)]) continue;
      const std::int64_t r0 = q * width, w = std::min(width, rows - r0);
      T* panel = dst + q * pack_width * depth;
      for (std::int64_t i = 0; i < w; ++i) {
        if (!done.empty() && done[static_cast<std::size_t>(r0 + i)]) continue;
        const T* s = src + row[r0 + i];
        const T* next = src + row[std::min(rows - 1, r0 + i + kRowsAhead)];
        for (std::int64_t p = 0; p < depth; ++p) {
          __builtin_prefetch(next + col[p]);
          panel[p * pack_width + i] = s[col[p]];
        }
      }
      for (std::int64_t p = 0; p < depth; ++p)
        for (std::int64_t i = w; i < pack_width; ++i) panel[p * pack_width + i] = 0;
    }
  }

  const Contraction& p_;
  const MicroKernel<T>& k_;
  const T* a_;
  const T* b_;
  T* c_;
  // libxsmm's kernels of MR rows by 1, 2, ..., NR columns that write around the cache
  // (write_around).
  std::vector<kernels::StreamKernel<T>> around_;
};

// `labels` ordered by their strides in the tensor indexed by `layout`, the smallest last: runs
// of consecutive elements of the group are then evenly spaced there as often as possible (a
// packing routine reads them contiguously, or a tile is written in place).
std::string by_stride(std::string labels, const std::string& layout,
                      const std::vector<std::int64_t>& strides) {
  std::stable_sort(labels.begin(), labels.end(), [&](char x, char y) {
    return strides[layout.find(x)] > strides[layout.find(y)];
  });
  return labels;
}

// Whether the tensor indexed by `layout` runs at unit stride along one of `labels`.
bool unit_along(const std::string& labels, const std::string& layout,
                const std::vector<std::int64_t>& strides) {
  for (std::size_t a = 0; a < layout.size(); ++a)
    if (strides[a] == 1 && contains(labels, layout[a])) return true;
  return false;
}

// `labels` in the order of X's strides or of Z's: of the one that runs at unit stride along one
// of them where only one does (its lines are then read or written whole), otherwise of X where
// `x_first`.
std::string order(const std::string& labels, const std::string& xl,
                  const std::vector<std::int64_t>& xs, const std::string& zl,
                  const std::vector<std::int64_t>& zs, bool x_first) {
  const bool xu = unit_along(labels, xl, xs), zu = unit_along(labels, zl, zs);
  return (xu != zu ? xu : x_first) ? by_stride(labels, xl, xs) : by_stride(labels, zl, zs);
}

// The rows of a group of indices (the row or the column indices of the GEMM), as offsets in its
// operand X and in the output Z. Where X runs at unit stride along an index of the group (ux), Z's
// fastest index of the group is another one (uz), and both tensors are too large to be re-read from
// the cache, the rows go in tiles: `panel` consecutive values of ux (a micro-panel, packed from X
// along contiguous memory) for each of `line` consecutive values of uz (a cache line of Z, where uz
// is Z's unit-stride index), so that the lines of both tensors are used whole while they are in
// cache. Otherwise the rows go in the order of the tensor that runs at unit stride along the group
// where only one does, else of the larger tensor's strides (the smaller one is re-read from the
// cache where it is strided); with `follow_z`, in Z's order. The tiles go kInner values of the
// fastest of the other indices at a time inside each line of uz: where that index is the next one
// out from ux in X, a tile then reads each of its places in X (one per value of the summed and the
// slower indices) in a run of kInner times ux's length rather than one. Where X runs at unit stride
// along a summed index instead, its packing reads whole lines in any order of the rows, and tiles
// would only break Z's tiles into line groups.
constexpr std::int64_t kCachedBytes = std::int64_t{8} << 20;
constexpr std::int64_t kInner = 4;
constexpr std::int64_t kSumTile = 256;
// Summed elements up to which every tile of a streamed output whose lines it writes whole goes
// through the buffer, not only the uneven ones: the micro-kernel then spends less time on a tile
// than writing it takes, and written in place, each of its lines is read from memory before it is
// written.
constexpr std::int64_t kStreamAllDepth = 24;
// On AMD's Zen 5, an ordinary store that writes a whole line does not read it from memory first, so
// there the micro-kernel writes even tiles faster in place, prefetching their lines as it starts;
// Intel's processors and Zen 4 read the line first. The parameter "stream_even" chooses; by default
// even tiles go through the buffer on Intel's processors and on AMD's before Zen 5 (family 26), and
// the tuner tries both (tensor_gemm_space).
bool streams_even_tiles_by_default() {
  static const bool stream = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_is("intel")) return true;
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__builtin_cpu_is("amd") || !__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
    const unsigned base = (eax >> 8) & 0xF;
    return base + (base == 0xF ? (eax >> 20) & 0xFF : 0) < 0x1A;
  }();
  return stream;
}
// Whether Gemm::copy_run can stream (AVX-512): without, a buffered even tile is only a detour.
#if defined(__AVX512F__)
constexpr bool kStreams = true;
#else
constexpr bool kStreams = false;
#endif
// Whether "stream_even" decides anything: an output too large for the cache, written once and
// summed over kStreamAllDepth elements or fewer (the run and the tuner's space both ask).
bool even_tiles_may_stream(std::int64_t summed, double output_bytes) {
  return kStreams && summed <= kStreamAllDepth && output_bytes > static_cast<double>(kCachedBytes);
}
struct Rows {
  Table x, z;
};

// The tiled order of a group of indices, X's and Z's offsets for each, or nothing where X does not
// run at unit stride along the group (nor Z, with `z_unit`), where X and Z's fastest indices of the
// group are the same or one of the tensors fits in the cache. The summed indices of two operands
// that both run at unit stride along them, along different ones, go in these tiles too, X's
// unit-stride index kSumTile bytes at a time for each cache line of Y's: a packed block of KC
// summed elements then reads both operands in whole cache lines, where in X's order it read one
// element of each line of Y. Where only one of them does, they go in its order.
std::optional<Rows> tiles(const std::string& labels, const std::map<char, std::int64_t>& len,
                          const std::string& xl, const std::vector<std::int64_t>& xs,
                          const std::string& zl, const std::vector<std::int64_t>& zs,
                          std::int64_t x_bytes, std::int64_t z_bytes, std::int64_t panel,
                          std::int64_t line, bool z_unit) {
  if (labels.empty() || !unit_along(labels, xl, xs) || (z_unit && !unit_along(labels, zl, zs)))
    return std::nullopt;
  const std::string ordered = order(labels, xl, xs, zl, zs, x_bytes > z_bytes);
  const char ux = by_stride(labels, xl, xs).back();
  const char uz = by_stride(labels, zl, zs).back();
  if (ux == uz || len.at(ux) <= 1 || len.at(uz) <= 1 || std::min(x_bytes, z_bytes) <= kCachedBytes)
    return std::nullopt;
  std::string others;
  for (char c : ordered)
    if (c != ux && c != uz) others += c;
  const auto ox = offsets(others, len, xl, xs), oz = offsets(others, len, zl, zs);
  const std::string pair{ux, uz};
  const auto sx = kernels::label_strides(pair, xl, xs), sz = kernels::label_strides(pair, zl, zs);
  const std::int64_t nx = len.at(ux), nz = len.at(uz);
  Rows r{Table(ox.size() * nx * nz), Table(ox.size() * nx * nz)};
  // The other indices' combinations: `fast` values of the fastest of them in each of `slow`.
  const std::int64_t fast = others.empty() ? 1 : len.at(others.back());
  const std::int64_t slow = ox.size() / fast;
  std::int64_t at = 0;
  for (std::int64_t s = 0; s < slow; ++s)
    for (std::int64_t f0 = 0; f0 < fast; f0 += kInner)
      for (std::int64_t z0 = 0; z0 < nz; z0 += line)
        for (std::int64_t o = s * fast + f0; o < s * fast + std::min(fast, f0 + kInner); ++o)
          for (std::int64_t x0 = 0; x0 < nx; x0 += panel)
            for (std::int64_t j = z0; j < std::min(nz, z0 + line); ++j)
              for (std::int64_t i = x0; i < std::min(nx, x0 + panel); ++i, ++at) {
                r.x[at] = ox[o] + i * sx[0] + j * sx[1];
                r.z[at] = oz[o] + i * sz[0] + j * sz[1];
              }
  return r;
}

// Where X fits in the cache and Z does not, the group follows Z, unless X's order leaves fewer
// micro-panels unevenly spaced in Z: X's packing re-reads it from the cache in any order, and what
// goes to memory is Z's tiles, each written whole in place where it is even. (That was with uneven
// tiles copied out through the buffer; where tiles are written around the cache, which splits them
// at no copy, the caller follows Z: tensor_gemm_row.)
Rows group_rows(const std::string& labels, const std::map<char, std::int64_t>& len,
                const std::string& xl, const std::vector<std::int64_t>& xs, const std::string& zl,
                const std::vector<std::int64_t>& zs, std::int64_t x_bytes, std::int64_t z_bytes,
                std::int64_t panel, std::int64_t line, bool follow_z) {
  if (!follow_z)
    if (auto r = tiles(labels, len, xl, xs, zl, zs, x_bytes, z_bytes, panel, line, false))
      return std::move(*r);
  if (!follow_z && x_bytes <= kCachedBytes && z_bytes > kCachedBytes) {
    // X is packed from the cache in any order; the output's tiles go to memory. They follow the
    // output unless X's order gives fewer uneven tiles (written through the buffer).
    const std::string out = by_stride(labels, zl, zs);
    const std::string own = order(labels, xl, xs, zl, zs, false);
    Rows r{offsets(out, len, xl, xs), offsets(out, len, zl, zs)};
    if (own == out) return r;
    Table oz = offsets(own, len, zl, zs);
    const auto uneven = [panel](const Table& t) {
      const auto steps = spacing(t, panel);
      return std::count(steps.begin(), steps.end(), kUneven);
    };
    if (uneven(oz) < uneven(r.z)) return {offsets(own, len, xl, xs), std::move(oz)};
    return r;
  }
  const std::string ordered =
      follow_z ? by_stride(labels, zl, zs) : order(labels, xl, xs, zl, zs, x_bytes > z_bytes);
  return {offsets(ordered, len, xl, xs), offsets(ordered, len, zl, zs)};
}

// The packed blocks' sizes: BLIS's KC summed elements, or all of them in one pass where there are
// at most a quarter more (the output is then written once, not read back and added to), and MC rows
// scaled by KC over the block's depth, so that a block of A takes the cache BLIS sized it for
// however few summed elements it has: where there are few, each of A's runs along its memory is
// then read in more of one block. A block holds at least `group` rows (one line group, where there
// are any: Gemm::block_end). Where the output is too large for the cache and the contraction takes
// several summed passes, each pass reads the whole output and writes it back: the passes then take
// up to kLongPass times BLIS's KC summed elements, in equal shares.
constexpr std::int64_t kLongPass = 2;
template <typename T>
bool one_pass(const MicroKernel<T>& k, std::int64_t summed) {
  return summed <= k.kc + k.kc / 4;
}

template <typename T>
void block_sizes(const MicroKernel<T>& k, Contraction& p, bool large_output, std::int64_t group) {
  if (one_pass(k, p.K)) {
    p.kc = p.K;
  } else if (large_output) {
    const std::int64_t passes = (p.K + kLongPass * k.kc - 1) / (kLongPass * k.kc);
    p.kc = (p.K + passes - 1) / passes;
  } else {
    p.kc = k.kc;
  }
  p.mc = std::max(group, k.mc * k.kc / p.kc / k.mr * k.mr);
}

// The rows packed at once (Contraction::span). Where the rows follow the output and their operand
// runs at unit stride along another of their indices, a line of the operand holds the same row of
// up to eight panels, `apart` rows from each other: in TCCG case 21 (aebf,fdec->abcd, rows c and d,
// d fastest), the 8 values of c on a line lie 72 rows apart. A block of MC rows (128 there) holds
// fewer than two of them, so each line came from memory once for each block it served, one element
// at a time. The rows of a line's worth of them (576 there) are packed at once instead, each line
// read whole (Gemm::pack_across), into a buffer of up to kSpanBytes (2.2 MB there) that the blocks
// then take their turns from. No other TCCG contraction has such rows.
constexpr std::int64_t kSpanBytes = std::int64_t{4} << 20;
template <typename T>
std::int64_t packing_span(const MicroKernel<T>& k, const Contraction& p, std::int64_t a_bytes) {
  constexpr std::int64_t line = 64 / sizeof(T);
  if (!kStreams || !std::is_same_v<T, double> || k.mr % line || a_bytes <= kCachedBytes ||
      p.M < 2 || std::any_of(p.row_lines.begin(), p.row_lines.end(), [](char g) { return g; }))
    return 0;
  const std::int64_t* am = p.am.data();
  const std::int64_t apart = std::find(am, am + p.M, am[0] + 1) - am;
  if (apart == p.M) return 0;
  const std::int64_t span = line * apart;
  if (apart < k.mr || span % k.mr || span <= p.mc ||
      span * p.kc * static_cast<std::int64_t>(sizeof(T)) > kSpanBytes)
    return 0;
  return span;
}

// ---- Streamed rows
// Where the output's unit-stride index belongs to an operand W with few free elements (the columns,
// contiguous in each row of the output) and the other operand X runs at unit stride along its rows
// or along its summed indices, each evenly spaced, X is not packed at all: W is packed once (a few
// KB to a few hundred), and a libxsmm kernel computes each piece of a few lines of X's rows, all
// columns and all summed elements at once, reading X's lines as they lie, once each, while
// prefetching the next piece's (kernels::StreamKernel). Packing a large X in blocks, as BLIS does,
// reads it from memory and writes it to the cache before the FMA units see it, and a few columns do
// not give the micro-kernel time enough to hide that. A plain product of a tall, skinny matrix
// (ik,kj->ij with few j) streams the same way.
constexpr std::int64_t kStreamedRowBytes = 1024;  // at most a row of the output's columns this wide
constexpr std::int64_t kPieceLines = 3;           // rows per piece: three cache lines' worth

// What both streamed plans (rows and lines) address W and the batch points by.
struct StreamedOperands {
  bool swap = false;  // W (the columns' operand) is the einsum's left operand
  Table wn, wk;       // W's offset per column, per summed element
  Table xb, wb, cb;   // per batch point: in X, W and the output

  // The tables of these groups of indices (the columns in the output's order, the summed in X's).
  void address(const std::string& cols, const std::string& sum, const std::string& batch,
               const std::map<char, std::int64_t>& len, const std::string& Xl,
               const std::vector<std::int64_t>& Xs, const std::string& Wl,
               const std::vector<std::int64_t>& Ws, const std::string& zl,
               const std::vector<std::int64_t>& zs) {
    wn = offsets(cols, len, Wl, Ws);
    wk = offsets(sum, len, Wl, Ws);
    xb = offsets(batch, len, Xl, Xs);
    wb = offsets(batch, len, Wl, Ws);
    cb = offsets(batch, len, zl, zs);
  }
};

// A piece of a streamed plan: `rows` rows from offset x in X and c in the output, for `lines`
// values of the output's unit-stride index (streamed lines; 1 otherwise).
struct Piece {
  std::int64_t x, c, rows, lines;
};

struct Streamed : StreamedOperands {
  std::int64_t x_rs = 0, x_ds = 0, c_rs = 0;
  std::vector<Piece> pieces;
  bool around = false;  // the output written around the cache (writes_around)
};

// Runs body(q, packed, piece, next piece) on every piece of each batch point q, with W packed
// for q by pack(q, packed), checking the deadline every kPiecesPerCheck pieces: over the batch
// points where there are as many as threads, each thread packing its own W, otherwise over the
// pieces of each point.
constexpr std::int64_t kPiecesPerCheck = 256;
template <typename T, typename Pack, typename Body>
void over_pieces(std::int64_t nb, const std::vector<Piece>& pieces, int threads, const Pack& pack,
                 const Body& body) {
  const auto count = static_cast<std::int64_t>(pieces.size());
  const auto run = [&](std::int64_t q, const T* packed, std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) {
      if ((i - lo) % kPiecesPerCheck == 0) check_deadline();
      body(q, packed, pieces[static_cast<std::size_t>(i)],
           pieces[static_cast<std::size_t>(std::min(count - 1, i + 1))]);
    }
    _mm_sfence();  // any streamed stores, visible before this thread is joined
  };
  const std::int64_t t = std::max(1, threads);
  if (nb >= t) {
    kernels::parallel_for(nb, static_cast<int>(t), [&](std::int64_t lo, std::int64_t hi) {
      std::vector<T> packed;
      for (std::int64_t q = lo; q < hi; ++q) {
        pack(q, packed);
        run(q, packed.data(), 0, count);
      }
    });
    return;
  }
  std::vector<T> packed;
  for (std::int64_t q = 0; q < nb; ++q) {
    pack(q, packed);
    kernels::parallel_for(count, static_cast<int>(t),
                          [&](std::int64_t lo, std::int64_t hi) { run(q, packed.data(), lo, hi); });
  }
}

// Whether a streamed plan's kernels write the output around the cache, in non-temporal stores:
// where it is too large for the cache and each kernel call's columns start on a cache line
// (`column` and `step` elements of T apart, each of its columns whole lines, at the pieces' offsets
// from each batch point's). An ordinary store reads its line from memory before writing it, and the
// output is written once.
template <typename T>
bool writes_around(const std::string& zl, const std::map<char, std::int64_t>& len,
                   std::int64_t column, std::int64_t step, const std::vector<Piece>& pieces,
                   const Table& cb) {
  constexpr std::int64_t line = 64 / sizeof(T);
  double bytes = sizeof(T);
  for (char c : zl) bytes *= static_cast<double>(len.at(c));
  if (!kStreams || bytes <= static_cast<double>(kCachedBytes) || column % line || step % line)
    return false;
  for (const Piece& p : pieces)
    if (p.c % line) return false;
  for (std::int64_t q = 0; q < cb.size(); ++q)
    if (cb[q] % line) return false;
  return true;
}

// The streamed plan of a contraction, or nothing where it does not apply.
template <typename T>
std::optional<Streamed> streamed(const std::string& xl, const std::vector<std::int64_t>& xs,
                                 const std::string& yl, const std::vector<std::int64_t>& ys,
                                 const std::string& zl, const std::vector<std::int64_t>& zs,
                                 const std::map<char, std::int64_t>& len) {
  if (zl.empty()) return std::nullopt;
  const char unit = zl.back();
  Streamed s;
  if (contains(xl, unit) == contains(yl, unit)) return std::nullopt;
  s.swap = contains(xl, unit);
  const std::string& Xl = s.swap ? yl : xl;
  const std::string& Wl = s.swap ? xl : yl;
  const auto& Xs = s.swap ? ys : xs;
  const auto& Ws = s.swap ? xs : ys;
  auto [batch, rows, cols, sum] = gemm_groups(Xl, Wl, zl);
  // The columns: contiguous in the output, a few vectors' worth, filling them well.
  constexpr std::int64_t lanes = 64 / sizeof(T);
  cols = by_stride(cols, zl, zs);
  const Table cn = offsets(cols, len, zl, zs);
  const std::int64_t N = cn.size();
  if (N < 1 || N * static_cast<std::int64_t>(sizeof(T)) > kStreamedRowBytes ||
      4 * N < 3 * ((N + lanes - 1) / lanes * lanes))
    return std::nullopt;
  for (std::int64_t j = 0; j < N; ++j)
    if (cn[j] != j) return std::nullopt;
  // The summed elements, evenly spaced in X; W packed from the cache (half of L2 at most).
  sum = by_stride(sum, Xl, Xs);
  const Table ak = offsets(sum, len, Xl, Xs);
  const std::int64_t K = ak.size();
  if (K < 1 || N * K * static_cast<std::int64_t>(sizeof(T)) > l2_bytes() / 2) return std::nullopt;
  const std::int64_t sa = K > 1 ? ak[1] : 1;
  for (std::int64_t l = 0; l < K; ++l)
    if (ak[l] != l * sa) return std::nullopt;
  // The rows in X's order, cut into pieces evenly spaced in X and in the output.
  rows = by_stride(rows, Xl, Xs);
  const Table am = offsets(rows, len, Xl, Xs), cm = offsets(rows, len, zl, zs);
  const std::int64_t M = am.size();
  if (M < 1) return std::nullopt;
  const std::int64_t ra = M > 1 ? am[1] - am[0] : std::max<std::int64_t>(K, 1);
  const std::int64_t rs = M > 1 ? cm[1] - cm[0] : N;
  std::int64_t longest = kPieceLines * lanes;
  if (K == 1 || sa == 1) {  // each row's summed elements contiguous: X' read as it lies
    if (ra < K) return std::nullopt;
    s.x_rs = ra, s.x_ds = 1;
  } else if (ra == 1) {  // the rows contiguous at each summed element: X' read transposed
    s.x_rs = 1, s.x_ds = sa;
    longest = std::min(longest, sa);
  } else {
    return std::nullopt;
  }
  if (rs < N) return std::nullopt;
  s.c_rs = rs;
  for (std::int64_t i = 0; i < M;) {
    const std::int64_t start = i++;
    while (i < M && i - start < longest && am[i] - am[i - 1] == ra && cm[i] - cm[i - 1] == rs) ++i;
    s.pieces.push_back({am[start], cm[start], i - start, 1});
  }
  // Pieces of a line's worth of rows or more on average (or all of them, where there are fewer).
  if (static_cast<std::int64_t>(s.pieces.size()) * std::min(M, lanes) > M) return std::nullopt;
  s.address(cols, sum, batch, len, Xl, Xs, Wl, Ws, zl, zs);
  s.around = writes_around<T>(zl, len, N, s.c_rs, s.pieces, s.cb);
  return s;
}

// Runs a streamed plan into z; false, having computed nothing, where libxsmm has no kernel for
// it.
template <typename T>
bool run_streamed(const Streamed& s, const T* x, const T* w, T* z, int threads) {
  using Kernel = kernels::StreamKernel<T>;
  const std::int64_t N = s.wn.size(), K = s.wk.size();
  // libxsmm's C'[N × rows] = W'[N × K] · X'[K × rows]: X' as it lies where its summed elements
  // are contiguous, otherwise transposed. One kernel per length of piece (whole runs and their
  // ends), all made first.
  const bool transposed = s.x_ds != 1;
  std::map<std::int64_t, Kernel> by_rows;
  for (const Piece& p : s.pieces)
    if (!by_rows.count(p.rows)) {
      const Kernel k(N, p.rows, K, N, transposed ? s.x_ds : s.x_rs, s.c_rs, transposed,
                     Kernel::Ahead::b_into_l1,
                     s.around ? Kernel::Write::around : Kernel::Write::cached);
      if (!k) return false;
      by_rows.emplace(p.rows, k);
    }
  const auto pack = [&](std::int64_t q, std::vector<T>& to) {  // W of batch point q, N × K
    to.resize(static_cast<std::size_t>(N * K));
    const T* from = w + s.wb[q];
    for (std::int64_t l = 0; l < K; ++l)
      for (std::int64_t j = 0; j < N; ++j) to[j + l * N] = from[s.wn[j] + s.wk[l]];
  };
  over_pieces<T>(s.xb.size(), s.pieces, threads, pack,
                 [&](std::int64_t q, const T* packed, const Piece& p, const Piece& next) {
                   const T* xq = x + s.xb[q];
                   T* zq = z + s.cb[q];
                   by_rows.at(p.rows)(packed, xq + p.x, zq + p.c, packed, xq + next.x, zq + next.c);
                 });
  return true;
}

// ---- Streamed lines
// Where the output's unit-stride index uz belongs to the large operand X but X runs at unit stride
// along another of its rows, ux, X need not be packed either: for kLine values of uz at a time, a
// libxsmm kernel computes a tile per value from X as it lies (rows along ux, each summed element a
// column of X' at its even spacing), against the few columns of W packed once, into a buffer; the
// tiles, transposed, then give each row and column a whole line of the output along uz. Each call
// fetches the next call's part of X into L2.

struct StreamedLines : StreamedOperands {
  Table cn;               // the output's offset per column
  std::int64_t x_ds = 0;  // X: the spacing of the summed elements
  std::int64_t x_us = 0;  // X: the spacing of uz's values (the lines' elements)
  std::int64_t c_rs = 0;  // the output: the spacing of ux's values (the rows)
  std::int64_t span = 0;  // a piece's rows: ux's values of `span` at a time, then vx's
  std::int64_t c_vs = 0;  // the output: the spacing of vx's values (a piece's rows past span)
  std::int64_t c_cs = 0;  // in place: the output's spacing of the columns
  bool in_place = false;  // ux is uz: each tile is written where it belongs, one line per piece
  bool around = false;    // in place, around the cache (writes_around)
  std::int64_t kc = 0;    // summed elements per pass (in place, several passes may add up)
  std::int64_t longest = 0;
  std::vector<Piece> pieces;
};

template <typename T>
std::optional<StreamedLines> streamed_lines(
    const std::string& xl, const std::vector<std::int64_t>& xs, const std::string& yl,
    const std::vector<std::int64_t>& ys, const std::string& zl, const std::vector<std::int64_t>& zs,
    const std::map<char, std::int64_t>& len) {
  if (zl.empty()) return std::nullopt;
  const char uz = zl.back();
  if (contains(xl, uz) == contains(yl, uz)) return std::nullopt;
  StreamedLines s;
  s.swap = contains(yl, uz);  // X holds uz
  const std::string& Xl = s.swap ? yl : xl;
  const std::string& Wl = s.swap ? xl : yl;
  const auto& Xs = s.swap ? ys : xs;
  const auto& Ws = s.swap ? xs : ys;
  constexpr std::int64_t lanes = 64 / sizeof(T), line = 64 / sizeof(T);
  char ux = '\0';
  for (std::size_t a = 0; a < Xl.size(); ++a)
    if (Xs[a] == 1 && len.at(Xl[a]) > 1) ux = Xl[a];
  if (ux == '\0' || contains(Wl, ux) || !contains(zl, ux) || len.at(ux) < lanes || len.at(uz) < 2)
    return std::nullopt;
  s.in_place = ux == uz;
  auto [batch, others, cols, sum] = gemm_groups(Xl, Wl, zl);
  others.erase(
      std::remove_if(others.begin(), others.end(), [&](char c) { return c == ux || c == uz; }),
      others.end());
  s.cn = offsets(cols, len, zl, zs);
  const std::int64_t N = s.cn.size();
  if (N < 1 || N * static_cast<std::int64_t>(sizeof(T)) > kStreamedRowBytes) return std::nullopt;
  if (s.in_place) {  // the columns evenly spaced in the output, the tiles' rows between them
    s.c_cs = N > 1 ? s.cn[1] : len.at(ux);
    for (std::int64_t j = 0; j < N; ++j)
      if (s.cn[j] != j * s.c_cs) return std::nullopt;
    if (s.c_cs < len.at(ux)) return std::nullopt;
  }
  sum = by_stride(sum, Xl, Xs);
  const Table ak = offsets(sum, len, Xl, Xs);
  const std::int64_t K = ak.size();
  // W is packed once per pass and read from the cache: at most half of L2 of it. In place, the
  // summed elements go in as many passes as that takes, each adding to the tiles the first wrote.
  const std::int64_t fit = l2_bytes() / 2 / (N * static_cast<std::int64_t>(sizeof(T)));
  if (K < 1 || fit < 1 || (K > fit && !s.in_place)) return std::nullopt;
  const std::int64_t passes = (K + fit - 1) / fit;
  s.kc = (K + passes - 1) / passes;
  // Pieces of at most four lines' worth of ux, in equal shares of whole vectors: TCCG case 6's 32
  // values of d (efbad,cf->abcde) in one piece rather than 24 + 8, cases 3 and 4's 72 in 24s.
  const std::int64_t nx = len.at(ux), shares = (nx + 4 * lanes - 1) / (4 * lanes);
  s.longest = std::min(nx, ((nx + shares - 1) / shares + lanes - 1) / lanes * lanes);
  const std::int64_t sa = K > 1 ? ak[1] : s.longest;
  for (std::int64_t l = 0; l < K; ++l)
    if (ak[l] != l * sa) return std::nullopt;
  if (sa < s.longest) return std::nullopt;
  s.x_ds = sa;
  s.span = s.longest;
  // Where ux's values are whole vectors in one piece and the next index of the tiles' rows, vx,
  // follows them in X, a piece takes up to eight lines of rows over several of vx's values: each
  // kernel call then reads runs of X twice as long or more, which the hardware fetches ahead. (A
  // standalone loop of case 6's kernel calls, not writing the tiles out, ran at the DGEMM peak with
  // two values of a per call and at 0.8 of it with one.)
  char vx = '\0';
  std::int64_t per = 1;  // vx's values per piece
  const auto next = std::find_if(others.begin(), others.end(),
                                 [&](char c) { return Xs[Xl.find(c)] == nx && len.at(c) > 1; });
  if (!s.in_place && s.longest == nx && nx % lanes == 0 && next != others.end())
    for (std::int64_t r = std::min(8 * lanes, sa) / nx; r > 1; --r)  // (lda ≥ rows: r·nx ≤ sa)
      if (len.at(*next) % r == 0) {
        vx = *next, per = r;
        break;
      }
  const auto stride_in = [](char c, const std::string& layout,
                            const std::vector<std::int64_t>& st) { return st[layout.find(c)]; };
  s.x_us = stride_in(uz, Xl, Xs);
  s.c_rs = stride_in(ux, zl, zs);
  if (stride_in(uz, zl, zs) != 1) return std::nullopt;
  std::int64_t nv = 1;  // vx's values, `per` to a piece
  if (vx != '\0') {
    others.erase(std::find(others.begin(), others.end(), vx));
    nv = len.at(vx);
    s.c_vs = stride_in(vx, zl, zs);
    s.longest = per * nx;
  }
  others = by_stride(others, Xl, Xs);
  const Table ox = offsets(others, len, Xl, Xs), oz = offsets(others, len, zl, zs);
  const std::int64_t nu = len.at(uz);
  for (std::int64_t o = 0; o < ox.size(); ++o)
    for (std::int64_t v0 = 0; v0 < nv; v0 += per)
      for (std::int64_t u0 = 0; u0 < (s.in_place ? 1 : nu); u0 += line)
        for (std::int64_t i0 = 0; i0 < nx; i0 += s.span)
          s.pieces.push_back({ox[o] + v0 * nx + u0 * s.x_us + i0,
                              oz[o] + v0 * s.c_vs + u0 + i0 * s.c_rs,
                              vx != '\0' ? s.longest : std::min(s.span, nx - i0),
                              s.in_place ? 1 : std::min(line, nu - u0)});
  s.address(cols, sum, batch, len, Xl, Xs, Wl, Ws, zl, zs);
  if (s.in_place) {
    // Written in place with ordinary stores, a tile's columns must not lie a multiple of 4 KB apart
    // in the output, where they would share their sets of L1. Written around the cache, they share
    // no sets.
    s.around = s.kc == K && writes_around<T>(zl, len, s.longest, s.c_cs, s.pieces, s.cb);
    if (!s.around && s.c_cs * static_cast<std::int64_t>(sizeof(T)) % 4096 == 0) return std::nullopt;
  }
  return s;
}

// Writes a piece's tiles out (streamed lines): tile u at buf + u·tile, its element (i, j) at
// i + j·P; row i and column j of the piece's `lines` tiles are one run of the output, at
// z + p.c + row(i) + cn[j], row(i) = (i mod span)·c_rs + (i div span)·c_vs (streamed past the
// cache with `stream` where a whole aligned line).
template <typename T>
void write_lines_out(const T* buf, std::int64_t tile, std::int64_t P, const Piece& p,
                     std::int64_t N, T* z, const std::int64_t* cn, const StreamedLines& s,
                     bool stream) {
  const auto row = [&](std::int64_t i) { return i % s.span * s.c_rs + i / s.span * s.c_vs; };
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, double>) {
    if (p.lines == 8) {
      // Rows outside, columns inside: the lines of consecutive blocks lie side by side in the
      // output where its columns do (TCCG case 7, ecbfa,fd->abcde: a block's 8 rows 9 MB apart
      // there, its columns 384 bytes).
      for (std::int64_t i0 = 0; i0 < p.rows; i0 += 8) {
        double* const zi = z + p.c + row(i0);  // (span a multiple of 8 where over 8)
        const std::int64_t h = std::min<std::int64_t>(8, p.rows - i0);
        for (std::int64_t j = 0; j < N; ++j) {
          if (h == 8) {
            double* const d = zi + cn[j];
            if (stream && s.c_rs % 8 == 0 && reinterpret_cast<std::uintptr_t>(d) % 64 == 0) {
              __m512d r[8];  // whole lines, each streamed in one store
              load_transposed8(buf + i0 + j * P, tile, r);
              for (std::int64_t i = 0; i < 8; ++i) _mm512_stream_pd(d + i * s.c_rs, r[i]);
            } else {
              transpose8_to(buf + i0 + j * P, tile, d, s.c_rs);
            }
            continue;
          }
          const auto mask = static_cast<__mmask8>((1u << h) - 1);
          __m512d r[8];
          for (std::int64_t u = 0; u < 8; ++u)
            r[u] = _mm512_maskz_loadu_pd(mask, buf + u * tile + i0 + j * P);
          transpose8(r);
          for (std::int64_t i = 0; i < h; ++i) {
            double* d = zi + cn[j] + i * s.c_rs;
            if (stream && reinterpret_cast<std::uintptr_t>(d) % 64 == 0)
              _mm512_stream_pd(d, r[i]);
            else
              _mm512_storeu_pd(d, r[i]);
          }
        }
      }
      return;
    }
  }
#endif
  (void)stream;
  for (std::int64_t v0 = 0; v0 < p.rows; v0 += s.span) {  // the rows of one value of vx
    T* const zv = z + p.c + row(v0);
    for (std::int64_t j = 0; j < N; ++j)
      for (std::int64_t i = v0; i < std::min(p.rows, v0 + s.span); ++i) {
        T* d = zv + (i - v0) * s.c_rs + cn[j];
        for (std::int64_t u = 0; u < p.lines; ++u) d[u] = buf[u * tile + i + j * P];
      }
  }
}

// Runs a streamed-lines plan into z; false, where libxsmm has no kernel for it, having computed
// nothing.
template <typename T>
bool run_streamed_lines(const StreamedLines& s, const T* x, const T* w, T* z, int threads,
                        bool stream) {
  using Kernel = kernels::StreamKernel<T>;
  const std::int64_t N = s.wn.size(), K = s.wk.size(), P = s.longest, kc = s.kc;
  constexpr std::int64_t line = 64 / sizeof(T);
  const std::int64_t tail = s.pieces.empty() ? P : s.pieces.back().rows;
  const std::int64_t ldc = s.in_place ? s.c_cs : P;
  // The kernels of both lengths of piece, for each pass's summed elements (the last pass's may be
  // fewer), writing in the first pass and adding in the others; all made first.
  std::map<std::tuple<std::int64_t, std::int64_t, bool>, Kernel> kernels;
  for (const std::int64_t rows : {P, tail})
    for (std::int64_t l0 = 0; l0 < K; l0 += kc) {
      const auto key = std::make_tuple(rows, std::min(kc, K - l0), l0 > 0);
      if (kernels.count(key)) continue;
      const auto write = l0 > 0                         ? Kernel::Write::add
                         : s.around && rows % line == 0 ? Kernel::Write::around
                                                        : Kernel::Write::cached;
      const Kernel k(rows, N, std::get<1>(key), s.x_ds, kc, ldc, false, Kernel::Ahead::a_into_l2,
                     write);
      if (!k) return false;
      kernels.emplace(key, k);
    }
  const std::int64_t tile = P * N;  // a tile in the buffer: (i, j) at i + j·P
  for (std::int64_t l0 = 0; l0 < K; l0 += kc) {
    const std::int64_t depth = std::min(kc, K - l0);
    const Kernel& full = kernels.at({P, depth, l0 > 0});
    const Kernel& last = kernels.at({tail, depth, l0 > 0});
    // W of batch point q, this pass's summed elements by N (at most kc × N).
    const auto pack = [&](std::int64_t q, std::vector<T>& to) {
      to.resize(static_cast<std::size_t>(N * kc));
      const T* from = w + s.wb[q];
      for (std::int64_t j = 0; j < N; ++j)
        for (std::int64_t l = 0; l < depth; ++l) to[l + j * kc] = from[s.wn[j] + s.wk[l0 + l]];
    };
    const auto piece = [&](std::int64_t q, const T* packed, const Piece& p, const Piece& next) {
      const T* xq = x + s.xb[q] + l0 * s.x_ds;
      T* zq = z + s.cb[q];
      const Kernel& k = p.rows == P ? full : last;
      if (s.in_place) {
        k(xq + p.x, packed, zq + p.c, xq + next.x, packed, zq + next.c);
        return;
      }
      thread_local std::vector<T> buffer;  // the piece's tiles, aligned to a line
      buffer.resize(static_cast<std::size_t>(line * tile + line));
      T* buf =
          reinterpret_cast<T*>((reinterpret_cast<std::uintptr_t>(buffer.data()) + 63) / 64 * 64);
      for (std::int64_t u = 0; u < p.lines; ++u) {
        const T* a = xq + p.x + u * s.x_us;
        const T* next_a = u + 1 < p.lines ? a + s.x_us : xq + next.x;
        k(a, packed, buf + u * tile, next_a, packed, buf);
      }
      write_lines_out(buf, tile, P, p, N, zq, s.cn.data(), s, stream);  // (fenced: over_pieces)
    };
    over_pieces<T>(s.xb.size(), s.pieces, threads, pack, piece);
  }
  return true;
}

template <typename T>
Tensor tensor_gemm_row(const Bound& bound, std::size_t row, int threads, bool stream_even,
                       bool fetch_ahead, bool stream_rows) {
  const BatchedEinsum& e = bound.einsum();
  const auto& len = bound.lengths();
  auto x = bound.operand(row, 0), y = bound.operand(row, 1);
  std::string xl = e.inputs[0], yl = e.inputs[1];
  const std::string& zl = e.output;
  Tensor xf, yf;  // functional operands, evaluated in their arrays' layouts
  kernels::evaluate_in_place<T>(x, xf, xl, len);
  kernels::evaluate_in_place<T>(y, yf, yl, len);
  Tensor z(x.tensor->dtype(), kernels::shape_of(zl, len), Tensor::Uninitialized{});
  if (z.size() == 0) return z;
  if (stream_rows) {
    const T* xd = x.tensor->data<T>();
    const T* yd = y.tensor->data<T>();
    const auto xs = x.tensor->strides(), ys = y.tensor->strides(), zs = z.strides();
    if (const auto s = streamed<T>(xl, xs, yl, ys, zl, zs, len))
      if (run_streamed<T>(*s, s->swap ? yd : xd, s->swap ? xd : yd, z.data<T>(), threads)) return z;
    if (const auto s = streamed_lines<T>(xl, xs, yl, ys, zl, zs, len))
      if (run_streamed_lines<T>(*s, s->swap ? yd : xd, s->swap ? xd : yd, z.data<T>(), threads,
                                static_cast<std::int64_t>(z.bytes()) > kCachedBytes))
        return z;
  }

  const MicroKernel<T>& k = MicroKernel<T>::get();
  const auto zs = z.strides();
  // The micro-kernel writes contiguously along columns (rows when it prefers columns): the
  // output's unit-stride index goes there, swapping the operands when it belongs to the left.
  const char unit = zl.empty() ? '\0' : zl.back();  // none for a scalar result
  const bool unit_in_x = contains(xl, unit) && !contains(yl, unit);
  const bool unit_in_y = contains(yl, unit) && !contains(xl, unit);
  bool swap = (k.prefers_rows && unit_in_x) || (!k.prefers_rows && unit_in_y);
  // Unless that leaves fewer rows than a few micro-panels and many more columns: the large operand
  // then goes on the rows' side, packed in blocks of MC rows and streamed through once, and the
  // small one is packed once for all of them (padding a few rows up to MR wastes more).
  const auto free_size = [&](const std::string& own, const std::string& other) {
    std::int64_t n = 1;
    for (char c : zl)
      if (contains(own, c) && !contains(other, c)) n *= len.at(c);
    return n;
  };
  const std::int64_t rows_if = swap ? free_size(yl, xl) : free_size(xl, yl);
  const std::int64_t cols_if = swap ? free_size(xl, yl) : free_size(yl, xl);
  if (rows_if < 4 * k.mr && cols_if > rows_if) swap = !swap;
  if (swap) {
    std::swap(x, y);
    std::swap(xl, yl);
  }
  const auto [batch, m, n, sum] = gemm_groups(xl, yl, zl);
  // The row and column orders (group_rows): tiled where operand and output disagree on the
  // unit-stride index, otherwise by the strides of the larger of the two.
  const auto xs = x.tensor->strides(), ys = y.tensor->strides();
  constexpr std::int64_t line = 64 / sizeof(T);
  const auto bytes = [](const Tensor& t) { return static_cast<std::int64_t>(t.bytes()); };
  // Where the output is too large for the cache and the summed elements take several passes, each
  // pass reads it back from memory: the rows and the columns then follow the output, whose tiles
  // the micro-kernel adds to in place (prefetching them as it starts), rather than going in tiles
  // whose line groups are read back one line at a time on their way out.
  std::int64_t summed = 1;
  for (char c : sum) summed *= len.at(c);
  const bool reread = bytes(z) > kCachedBytes && !one_pass(k, summed);
  // Where tiles are written around the cache (Gemm::write_around), they follow the output too: a
  // tile whose columns straddle two runs costs one more kernel call there, no copy, and in the
  // output's order its columns lie next to each other (TCCG case 34, dfga,gebc->abcdef: 16 × 14
  // elements in one run of 1,792 bytes, where in gebc's order each of the 14 columns was 48 KB from
  // the next).
  const bool stream_all = stream_even && one_pass(k, summed) &&
                          even_tiles_may_stream(summed, static_cast<double>(bytes(z)));
  Rows rows = group_rows(m, len, xl, xs, zl, zs, bytes(*x.tensor), bytes(z), k.mr, line,
                         reread || stream_all);
  Rows cols = group_rows(n, len, yl, ys, zl, zs, bytes(*y.tensor), bytes(z), k.nr, line,
                         reread || stream_all);

  Contraction p;
  p.am = std::move(rows.x);
  p.cm = std::move(rows.z);
  p.bn = std::move(cols.x);
  p.cn = std::move(cols.z);
  // The summed indices: tiled where both operands are too large for the cache and run at unit
  // stride along different ones (kSumTile), otherwise in the order of the operand that runs along
  // one of them, else of the left operand (its packing reads along them).
  if (auto ks = tiles(sum, len, xl, xs, yl, ys, bytes(*x.tensor), bytes(*y.tensor),
                      kSumTile / sizeof(T), line, true)) {
    p.ak = std::move(ks->x);
    p.bk = std::move(ks->z);
  } else {
    const std::string ordered = order(sum, xl, xs, yl, ys, true);
    p.ak = offsets(ordered, len, xl, xs);
    p.bk = offsets(ordered, len, yl, ys);
  }
  p.ab = offsets(batch, len, xl, xs);
  p.bb = offsets(batch, len, yl, ys);
  p.cb = offsets(batch, len, zl, zs);
  p.M = p.am.size();
  p.N = p.bn.size();
  p.K = p.ak.size();
  const std::int64_t nb = p.ab.size();
  if (p.K == 0) {  // a summed index of length 0: every sum is empty
    std::fill(z.data<T>(), z.data<T>() + z.size(), T{0});
    return z;
  }
  const bool large = bytes(z) > kCachedBytes;  // the output is too large for the cache
  if (large) p.row_lines = line_groups(p.cm, k.mr, line);
  // A block of rows holds at least one line group (Gemm::block_end).
  block_sizes(k, p, large, p.row_lines.empty() ? k.mr : line * k.mr);
  p.span = packing_span(k, p, bytes(*x.tensor));
  p.stream = large && p.K <= p.kc;
  p.stream_all = stream_all;  // (one pass, an output beyond the cache: p.stream)
  p.fetch_ahead = fetch_ahead;
  p.row_step = spacing(p.cm, k.mr);
  p.row_runs = unit_runs(p.cm, k.mr, line, p.row_step);
  p.col_step = spacing(p.cn, k.nr);
  // Tiles written around the cache (Gemm::write_around): where even ones would go through the
  // buffer, rows contiguous in the output in whole lines, at the spacing of the first columns.
  const std::int64_t col_spacing = p.N > 1 ? p.cn[1] - p.cn[0] : 0;
  if (p.stream_all && (k.mr * sizeof(T)) % 64 == 0 && col_spacing > 0 &&
      (col_spacing * sizeof(T)) % 64 == 0)
    p.around_ldc = col_spacing;

  const Gemm<T> gemm(p, x.tensor->data<T>(), y.tensor->data<T>(), z.data<T>());
  // Packing space per thread: MC × KC of A and NC × KC of B at most, in micro-panels.
  const std::int64_t kc = std::min(p.kc, p.K);
  const std::int64_t a_elems =
      (std::min(std::max(p.mc, p.span), p.M) + k.mr) / k.mr * k.packmr * kc;
  const std::int64_t b_elems = (std::min(k.nc, p.N) + k.nr) / k.nr * k.packnr * kc;
  const bool over_batch = nb >= threads;
  const std::int64_t t =
      std::max<std::int64_t>(1, over_batch ? std::min<std::int64_t>(threads, nb) : threads);
  Tensor space(z.dtype(), {t * (a_elems + b_elems + 64)}, Tensor::Uninitialized{});
  auto buffers = [&](std::int64_t slot) {
    T* base = space.data<T>() + slot * (a_elems + b_elems + 64);
    auto align = [](T* at) {
      const auto u = reinterpret_cast<std::uintptr_t>(at);
      return reinterpret_cast<T*>((u + 63) / 64 * 64);
    };
    T* ap = align(base);
    return std::pair<T*, T*>{ap, align(ap + a_elems)};
  };
  if (over_batch) {
    kernels::parallel_for(nb, static_cast<int>(t), [&](std::int64_t lo, std::int64_t hi) {
      const auto [ap, bp] = buffers((lo * t + nb - 1) / nb);  // the slice's number
      for (std::int64_t q = lo; q < hi; ++q) gemm.run(q, 0, p.M, 0, p.N, ap, bp);
    });
    return z;
  }
  // Split the wider of the two ranges, in whole micro-tiles.
  const bool split_rows = p.M / k.mr >= p.N / k.nr;
  const std::int64_t unit_len = split_rows ? k.mr : k.nr;
  const std::int64_t tiles = ((split_rows ? p.M : p.N) + unit_len - 1) / unit_len;
  kernels::parallel_for(tiles, static_cast<int>(t), [&](std::int64_t lo, std::int64_t hi) {
    const auto [ap, bp] = buffers((lo * t + tiles - 1) / tiles);
    const std::int64_t from = lo * unit_len;
    const std::int64_t to = std::min(hi * unit_len, split_rows ? p.M : p.N);
    for (std::int64_t q = 0; q < nb; ++q) {
      if (split_rows)
        gemm.run(q, from, to, 0, p.N, ap, bp);
      else
        gemm.run(q, 0, p.M, from, to, ap, bp);
    }
  });
  return z;
}

// "rows" or "lines" where tensor_gemm streams the large operand (streamed rows, streamed
// lines), "packed" otherwise.
std::string streamed_path(const BatchedEinsum& e, const std::vector<std::int64_t>& xs,
                          const std::vector<std::int64_t>& ys,
                          const std::map<char, std::int64_t>& len, Dtype dtype) {
  const auto zs = kernels::row_major_strides(e.output, len);
  const std::string &x = e.inputs[0], &y = e.inputs[1], &z = e.output;
  const auto path = [&](auto zero) -> std::string {
    using T = decltype(zero);
    if (streamed<T>(x, xs, y, ys, z, zs, len)) return "rows";
    if (streamed_lines<T>(x, xs, y, ys, z, zs, len)) return "lines";
    return "packed";
  };
  return dtype == Dtype::f32 ? path(0.0f) : path(0.0);
}

}  // namespace

bool tensor_gemm_streams() {
  return kStreams;
}

std::string tensor_gemm_kernel() {
  const auto& k = MicroKernel<double>::get();
  const BlisLibrary& blis = BlisLibrary::get();
  return std::string(blis.arch_string(blis.query_arch())) + " " + std::to_string(k.mr) + "x" +
         std::to_string(k.nr);
}

std::optional<std::string> tensor_gemm_rejects(const BatchedEinsum& e) {
  if (auto why = kernels::binary_product_rejects(e, "tensor_gemm")) return why;
  // Dot products (every output index in both operands): no rows or columns to tile. A dot
  // product reads each element once; here both operands would be packed into panels first and
  // run through tiles of one row and one column, MR·NR times the work the result needs.
  const GemmGroups g = gemm_groups(e);
  if (g.m.empty() && g.n.empty())
    return "tensor_gemm tiles rows and columns; this is a dot product per output element (no "
           "index is in the output and one operand only)";
  return std::nullopt;
}

std::string tensor_gemm_path(const Bound& bound, std::size_t row) {
  const BatchedEinsum& e = bound.einsum();
  if (tensor_gemm_rejects(e)) return "";
  const auto& len = bound.lengths();
  const auto strides = [&](std::size_t k) {  // a functional operand is evaluated contiguously
    const auto x = bound.operand(row, k);
    return x.function ? kernels::row_major_strides(e.inputs[k], len) : x.tensor->strides();
  };
  return streamed_path(e, strides(0), strides(1), len, result_dtype(e, row));
}

// The default, and where the choice applies (an output beyond the cache, few summed elements),
// the other way of writing even tiles: which is faster depends on the processor (kStreamAllDepth);
// where the rows would stream, BLIS's packed path too.
std::vector<nlohmann::json> tensor_gemm_space(const BatchedEinsum& e, const Lengths& len) {
  std::vector<nlohmann::json> space = {nlohmann::json::object()};
  if (tensor_gemm_rejects(e)) return space;
  std::string sum;
  for (char c : e.inputs[0])
    if (contains(e.inputs[1], c) && !contains(e.output, c)) sum += c;
  double bytes = 4;  // per element of the output: 8 where a row's result is f64
  for (std::size_t r = 0; r < e.batch.size(); ++r)
    if (result_dtype(e, r) == Dtype::f64) bytes = 8;
  for (char c : e.output) bytes *= static_cast<double>(len.at(c));
  if (even_tiles_may_stream(kernels::product(sum, len), bytes))
    space.push_back({{"stream_even", !streams_even_tiles_by_default()}});
  // (Judged on contiguous operands.)
  const auto xs = kernels::row_major_strides(e.inputs[0], len),
             ys = kernels::row_major_strides(e.inputs[1], len);
  bool streams = false;
  for (std::size_t r = 0; r < e.batch.size(); ++r)
    streams |= streamed_path(e, xs, ys, len, result_dtype(e, r)) != "packed";
  if (streams) space.push_back({{"stream_rows", false}});
  return space;
}

Results run_tensor_gemm(const Bound& bound, const nlohmann::json& params) {
  const BatchedEinsum& e = bound.einsum();
  if (const auto why = tensor_gemm_rejects(e))
    throw SpecError("tensor_gemm does not apply: " + *why);
  check_param_keys(params, "tensor_gemm", {"threads", "stream_even", "fetch_ahead", "stream_rows"});
  const int threads = read_threads(params, "tensor_gemm");
  const auto flag = [&](const char* name, bool otherwise) {
    if (!params.contains(name)) return otherwise;
    if (!params[name].is_boolean())
      throw SpecError(std::string("tensor_gemm: '") + name + "' must be true or false, got " +
                      params[name].dump());
    return params[name].get<bool>();
  };
  const bool stream_even = flag("stream_even", streams_even_tiles_by_default());
  const bool fetch_ahead = flag("fetch_ahead", true);
  const bool stream_rows = flag("stream_rows", true);
  Results out;
  for (std::size_t r = 0; r < e.batch.size(); ++r) {
    out.push_back(
        result_dtype(e, r) == Dtype::f32
            ? tensor_gemm_row<float>(bound, r, threads, stream_even, fetch_ahead, stream_rows)
            : tensor_gemm_row<double>(bound, r, threads, stream_even, fetch_ahead, stream_rows));
  }
  return out;
}

}  // namespace einsumdb
