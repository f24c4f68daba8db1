#include "einsumdb/executor/tensor_gemm/blocking.hpp"

#include <emmintrin.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <type_traits>

#include "einsumdb/executor/isa.hpp"
#include "einsumdb/executor/tensor.hpp"

namespace einsumdb::tensor_gemm {

bool writes_stream() {
  return kernel_isa() != Isa::baseline;
}

bool streams() {
  return kernel_isa() == Isa::avx512;
}

bool own_kernel_runs() {
  return streams() && line_tile_fits(MicroKernel<float>::get());
}

bool own_kernel_by_default(std::int64_t summed, double output_bytes) {
  return own_kernel_runs() && output_bytes > static_cast<double>(kCachedBytes) &&
         !one_pass(MicroKernel<float>::get(), summed);
}

bool wide_kernel_by_default(bool doubles, double output_bytes) {
  return doubles && output_bytes > static_cast<double>(kCachedBytes) && streams() &&
         __builtin_cpu_is("intel");
}

template <typename T>
bool wide_kernel_runs(std::int64_t summed, double output_bytes, std::optional<bool> wide) {
  return streams() && !one_pass(MicroKernel<T>::get(), summed) &&
         wide.value_or(wide_kernel_by_default(std::is_same_v<T, double>, output_bytes));
}
template bool wide_kernel_runs<double>(std::int64_t, double, std::optional<bool>);
template bool wide_kernel_runs<float>(std::int64_t, double, std::optional<bool>);

std::int64_t l2_bytes() {
  static const std::int64_t bytes = [] {
    const long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return v > 0 ? static_cast<std::int64_t>(v) : std::int64_t{512} << 10;
  }();
  return bytes;
}

namespace {

// Seconds to write the lines of `buffer` (`bytes` long, a multiple of kProbeStride)
// in the order a tile's columns go out: a run of kProbeColumn bytes at each of the columns
// kProbeStride bytes apart, then the next run of every column. `stream` writes them in
// non-temporal stores (whole lines, four 16-byte stores each: the write-combining buffer sends the
// line out whole), otherwise in ordinary ones.
constexpr std::size_t kProbeColumn = 128, kProbeStride = std::size_t{1} << 19;
double time_scattered_lines(char* buffer, std::size_t bytes, bool stream) {
  const __m128i v = _mm_set1_epi32(1);
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t run = 0; run < kProbeStride; run += kProbeColumn)
    for (std::size_t col = run; col < bytes; col += kProbeStride)
      for (std::size_t b = col; b < col + kProbeColumn; b += 16) {
        auto* p = reinterpret_cast<__m128i*>(buffer + b);
        if (stream)
          _mm_stream_si128(p, v);
        else
          _mm_store_si128(p, v);
      }
  _mm_sfence();
  asm volatile("" : : "r"(buffer) : "memory");  // stores the compiler must not drop as unread
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

bool scattered_stores_read_lines(void* scratch, std::size_t scratch_bytes) {
  static const bool reads = [&] {
    // Twice the last-level cache, so that the lines go to memory: twice what one processor's L3
    // holds (sysfs; glibc's sysconf sums a virtual machine's host), 64 MiB to 256 MiB.
    std::size_t l3 = 0;
    if (std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index3/size"); f >> l3)
      if (f.peek() == 'K') l3 <<= 10;
    const std::size_t bytes =
        std::clamp<std::size_t>(2 * l3, std::size_t{64} << 20, std::size_t{256} << 20) /
        kProbeStride * kProbeStride;
    // The caller's scratch where it holds the passes (populated already: a result's block), or a
    // tensor's block: on huge pages, populated in one call before the timing (tensor.hpp).
    // Populated a page at a time by its first writes, the buffer's faults took longer than the
    // probe's passes on a virtual machine, in every process whose first large output asks.
    Tensor block;
    char* buffer = static_cast<char*>(scratch);
    if (!buffer || scratch_bytes < bytes || reinterpret_cast<std::uintptr_t>(buffer) % 64 != 0) {
      try {
        block = Tensor(Dtype::f64, {static_cast<std::int64_t>(bytes / sizeof(double))},
                       Tensor::Uninitialized{});
      } catch (const Error&) {
        return true;  // no memory to measure with: stream, as where stores read first
      }
      buffer = static_cast<char*>(block.raw());
    }
    asm volatile("" : : "r"(buffer) : "memory");
    double ordinary = 1e300, streamed = 1e300;
    for (int round = 0; round < 3; ++round) {  // the fastest of three, alternating
      ordinary = std::min(ordinary, time_scattered_lines(buffer, bytes, false));
      streamed = std::min(streamed, time_scattered_lines(buffer, bytes, true));
    }
    return ordinary > kReadFirstMargin * streamed;
  }();
  return reads;
}

bool line_tiles_may_write(Dtype dtype, std::int64_t summed, double output_bytes) {
  const auto bytes = static_cast<std::int64_t>(std::min(output_bytes, 1e18));
  if (dtype == Dtype::f32 || dtype == Dtype::c64)
    return line_tiles_write_out(MicroKernel<float>::get(), summed, bytes);
  return line_tiles_write_out(MicroKernel<double>::get(), summed, bytes);
}

bool line_tiles_stream_by_default(void* scratch, std::size_t scratch_bytes) {
  return scattered_stores_read_lines(scratch, scratch_bytes);
}

bool tile_columns_apart(const std::string& xl, const std::string& yl, const std::string& zl) {
  if (zl.size() < 2) return false;
  const char unit = zl.back(), next = zl[zl.size() - 2];
  const auto owns = [](const std::string& l, const std::string& other, char c) {
    return contains(l, c) && !contains(other, c);
  };
  return (owns(xl, yl, unit) && owns(xl, yl, next)) || (owns(yl, xl, unit) && owns(yl, xl, next));
}

bool streams_even_tiles_by_default(const std::string& xl, const std::string& yl,
                                   const std::string& zl, void* scratch,
                                   std::size_t scratch_bytes) {
  // (The measurement last: it runs once per process, where the choice depends on it.)
  return writes_stream() && ((streams() && tile_columns_apart(xl, yl, zl)) ||
                             scattered_stores_read_lines(scratch, scratch_bytes));
}

bool even_tiles_may_stream(std::int64_t summed, double output_bytes) {
  return writes_stream() && summed <= kStreamAllDepth &&
         output_bytes > static_cast<double>(kCachedBytes);
}

std::string by_stride(std::string labels, const std::string& layout,
                      const std::vector<std::int64_t>& strides) {
  std::stable_sort(labels.begin(), labels.end(), [&](char x, char y) {
    return strides[layout.find(x)] > strides[layout.find(y)];
  });
  return labels;
}

bool unit_along(const std::string& labels, const std::string& layout,
                const std::vector<std::int64_t>& strides) {
  for (std::size_t a = 0; a < layout.size(); ++a)
    if (strides[a] == 1 && contains(labels, layout[a])) return true;
  return false;
}

bool parts_below(const std::string& labels, const std::string& layout,
                 const std::vector<std::int64_t>& strides, const std::map<char, std::int64_t>& len,
                 std::int64_t line) {
  std::int64_t smallest = 0;
  for (std::size_t a = 0; a < layout.size(); ++a)
    if (contains(labels, layout[a]) && (smallest == 0 || strides[a] < smallest))
      smallest = strides[a];
  if (smallest <= 1 || smallest > line / 4) return false;
  std::int64_t below = 1;
  for (std::size_t a = 0; a < layout.size(); ++a)
    if (strides[a] < smallest) below *= len.at(layout[a]);
  return below == smallest;
}

std::string order(const std::string& labels, const std::string& xl,
                  const std::vector<std::int64_t>& xs, const std::string& zl,
                  const std::vector<std::int64_t>& zs, bool x_first) {
  const bool xu = unit_along(labels, xl, xs), zu = unit_along(labels, zl, zs);
  return (xu != zu ? xu : x_first) ? by_stride(labels, xl, xs) : by_stride(labels, zl, zs);
}

namespace {
// The index of a group that both tensors run along at unit stride, to be kept innermost in tiles of
// the next ones (bx and bz: the group by each tensor's strides): the parts q of a complex product
// in real form (real_form.hpp), summed in both operands, each with another summed index just above
// them (TCCG case 13, acd,dbc->ab: W's d, and y's c). nullopt where the fastest indices differ, or
// the shared one is not two parts that both next ones stride over.
std::optional<char> shared_parts(const std::string& bx, const std::string& bz,
                                 const std::map<char, std::int64_t>& len, const std::string& xl,
                                 const std::vector<std::int64_t>& xs, const std::string& zl,
                                 const std::vector<std::int64_t>& zs) {
  if (bx.size() < 2 || bx.back() != bz.back()) return std::nullopt;
  const char q = bx.back();
  const auto stride = [](char c, const std::string& l, const std::vector<std::int64_t>& st) {
    return st[l.find(c)];
  };
  const std::int64_t n = len.at(q);
  if (n != 2 || stride(q, xl, xs) != 1 || stride(q, zl, zs) != 1 ||
      stride(bx[bx.size() - 2], xl, xs) != n || stride(bz[bz.size() - 2], zl, zs) != n)
    return std::nullopt;
  return q;
}
}  // namespace

std::optional<Rows> tiles(const std::string& labels, const std::map<char, std::int64_t>& len,
                          const std::string& xl, const std::vector<std::int64_t>& xs,
                          const std::string& zl, const std::vector<std::int64_t>& zs,
                          std::int64_t x_bytes, std::int64_t z_bytes, std::int64_t panel,
                          std::int64_t line, bool z_unit) {
  const bool x_along = unit_along(labels, xl, xs) ||
                       (parts_below(labels, xl, xs, len, line) && 2 * z_bytes >= x_bytes);
  if (labels.empty() || !x_along || (z_unit && !unit_along(labels, zl, zs))) return std::nullopt;
  const std::string ordered = order(labels, xl, xs, zl, zs, x_bytes > z_bytes);
  const std::string bx = by_stride(labels, xl, xs), bz = by_stride(labels, zl, zs);
  // Summed parts that both operands run along (shared_parts): the tiles are of the indices above
  // them, each element's two parts at consecutive depths, and a line holds half as many of each.
  // (Gathered in the parts' own order, one operand's packing loaded an element per line.)
  std::string inner;
  if (z_unit)
    if (const auto q = shared_parts(bx, bz, len, xl, xs, zl, zs)) inner = *q;
  const std::int64_t np = inner.empty() ? 1 : len.at(inner[0]);
  const char ux = bx[bx.size() - 1 - inner.size()];
  const char uz = bz[bz.size() - 1 - inner.size()];
  if (ux == uz || len.at(ux) <= 1 || len.at(uz) <= 1 || std::min(x_bytes, z_bytes) <= kCachedBytes)
    return std::nullopt;
  panel = std::max<std::int64_t>(1, panel / np);
  line = std::max<std::int64_t>(1, line / np);
  std::string others;
  for (char c : ordered)
    if (c != ux && c != uz && inner.find(c) == std::string::npos) others += c;
  const auto ox = offsets(others, len, xl, xs), oz = offsets(others, len, zl, zs);
  const std::string pair{ux, uz};
  const auto sx = kernels::label_strides(pair, xl, xs), sz = kernels::label_strides(pair, zl, zs);
  const std::int64_t nx = len.at(ux), nz = len.at(uz);
  Rows r{Table(ox.size() * nx * nz * np), Table(ox.size() * nx * nz * np)};
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
              for (std::int64_t i = x0; i < std::min(nx, x0 + panel); ++i)
                for (std::int64_t h = 0; h < np; ++h, ++at) {  // (the parts' strides are 1)
                  r.x[at] = ox[o] + i * sx[0] + j * sx[1] + h;
                  r.z[at] = oz[o] + i * sz[0] + j * sz[1] + h;
                }
  return r;
}

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

template <typename T>
void block_sizes(const MicroKernel<T>& k, Contraction& p, bool large_output, std::int64_t group) {
  if (one_pass(k, p.K)) {
    p.kc = p.K;
  } else if (large_output && !p.own_tiles && !k.fetches_tile) {
    const std::int64_t passes = (p.K + kLongPass * k.kc - 1) / (kLongPass * k.kc);
    p.kc = (p.K + passes - 1) / passes;
  } else {
    p.kc = k.kc;
  }
  const std::int64_t mc = std::is_same_v<T, double> && p.kc >= k.kc && haswell_tile<T>(k)
                              ? std::max(k.mc, kHaswellRows)
                              : k.mc;
  p.mc = std::max(group, mc * k.kc / p.kc / k.mr * k.mr);
  if (p.own_tiles && p.kc >= k.kc) {
    const std::int64_t third = l2_bytes() / 3 / (p.kc * static_cast<std::int64_t>(sizeof(T)));
    p.mc = std::max({group, k.mr, std::min(p.mc, third / k.mr * k.mr)});
  }
}

template <typename T>
bool tiles_across_by_default(const MicroKernel<T>& k, const Contraction& p) {
  constexpr std::int64_t line = kLineElements<T>;
  if (!p.line_tiles || p.kc != p.K || p.M < k.mr || p.N < 2 || k.mr <= line || !p.row_runs[0])
    return false;
  std::int64_t continued = 0;  // columns that start where the last one's line of rows ends
  for (std::int64_t j = 1; j < p.N; ++j) continued += p.cn[j] - p.cn[j - 1] == line;
  return 2 * continued >= p.N - 1;
}

template <typename T>
std::int64_t packing_span(const MicroKernel<T>& k, const Contraction& p, std::int64_t a_bytes) {
  constexpr std::int64_t line = kLineElements<T>;
  if (!streams() || !std::is_same_v<T, double> || k.mr % line || a_bytes <= kCachedBytes ||
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

template void block_sizes(const MicroKernel<double>&, Contraction&, bool, std::int64_t);
template void block_sizes(const MicroKernel<float>&, Contraction&, bool, std::int64_t);
template bool tiles_across_by_default(const MicroKernel<double>&, const Contraction&);
template bool tiles_across_by_default(const MicroKernel<float>&, const Contraction&);
template std::int64_t packing_span(const MicroKernel<double>&, const Contraction&, std::int64_t);
template std::int64_t packing_span(const MicroKernel<float>&, const Contraction&, std::int64_t);

bool sums_split(std::int64_t M, std::int64_t N, std::int64_t K, std::int64_t nb, bool split_rows) {
  const std::int64_t result = nb * M * N;
  // Each thread's copy of the other operand: (N or M)·K elements per batch point, packed; its
  // buffer: the result, written and read back.
  return result <= kernels::kSplitSumElements && nb * (split_rows ? N : M) * K >= 2 * result;
}

}  // namespace einsumdb::tensor_gemm
