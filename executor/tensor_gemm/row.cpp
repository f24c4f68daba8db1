// tensor_gemm's driver for one row of the batch: which algorithm (streamed or packed), which
// operand takes the rows, the order of the rows, columns and summed elements, the block sizes, and
// the threads. Compiled once per instruction set (isa_target.hpp), with the stages' templates it
// instantiates; tensor_gemm.cpp calls the one kernel_isa() names (variants.cpp).
#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "einsumdb/executor/kernels.hpp"
#include "einsumdb/executor/real_form.hpp"
#include "einsumdb/executor/tensor_gemm/blocking.hpp"
#include "einsumdb/executor/tensor_gemm/micro_kernel.hpp"
#include "einsumdb/executor/tensor_gemm/scatter.hpp"
#include "einsumdb/executor/variants.hpp"

// The stages this file alone instantiates, each in a target region of its own.
#include "einsumdb/executor/isa_target.hpp"  // this file: once per instruction set
#include "einsumdb/executor/tensor_gemm/complex_lines.hpp"
#include "einsumdb/executor/tensor_gemm/macro_kernel.hpp"
#include "einsumdb/executor/tensor_gemm/streamed.hpp"
#include "einsumdb/executor/tensor_gemm/wide_kernel.hpp"

EINSUMDB_TARGET_BEGIN
namespace einsumdb::tensor_gemm::EINSUMDB_ISA_NS {
namespace {

#if EINSUMDB_AVX512
// The wide micro-kernel (wide_kernel.hpp) with its blocks: KC = 256 summed elements, so that a B
// micro-panel (6 columns) takes 12 KB of L1 in doubles, in every pass (it fetches its tile's lines
// during the sum: fetches_tile, no longer passes); MC rows whose block of A takes five eighths of
// L2 (384 doubles with 1.25 MB); BLIS's NC, in whole panels of 6. BLIS's context (unused by the
// kernel) rides along.
template <typename T>
const MicroKernel<T>& wide_kernel() {
  static const MicroKernel<T> k = [] {
    MicroKernel<T> w = MicroKernel<T>::get();
    w.run = &wide_tile<T>;
    w.mr = w.packmr = kWideRows<T>;
    w.nr = w.packnr = kWideColumns;
    w.kc = 256;
    w.mc = std::max(
        w.mr, l2_bytes() * 5 / 8 / (w.kc * static_cast<std::int64_t>(sizeof(T))) / w.mr * w.mr);
    w.fetches_tile = true;
    w.nc = w.nc / kWideColumns * kWideColumns;
    w.prefers_rows = false;
    return w;
  }();
  return k;
}
#endif

// The micro-kernel of the packed path for a row summed over `summed` elements into an output of
// `output_bytes`: the wide one where wide_kernel_runs says, BLIS's otherwise.
template <typename T>
const MicroKernel<T>& packed_kernel(std::int64_t summed, double output_bytes,
                                    std::optional<bool> wide) {
#if EINSUMDB_AVX512
  if (wide_kernel_runs<T>(summed, output_bytes, wide)) return wide_kernel<T>();
#else
  (void)summed, (void)output_bytes, (void)wide;
#endif
  return MicroKernel<T>::get();
}

template <typename T>
Tensor tensor_gemm_row(const Bound& bound, std::size_t row, const RowOptions& options) {
  const int threads = options.threads;
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
  if (options.stream_rows) {
    const T* xd = x.tensor->data<T>();
    const T* yd = y.tensor->data<T>();
    const auto xs = x.tensor->strides(), ys = y.tensor->strides(), zs = z.strides();
    if (const auto s = streamed<T>(xl, xs, yl, ys, zl, zs, len))
      if (run_streamed<T>(*s, s->swap ? yd : xd, s->swap ? xd : yd, z.data<T>(), threads,
                          options.own_kernel.value_or(true), options.rows_fetch_l1))
        return z;
    if (const auto s = streamed_lines<T>(xl, xs, yl, ys, zl, zs, len))
      if (run_streamed_lines<T>(*s, s->swap ? yd : xd, s->swap ? xd : yd, z.data<T>(), threads,
                                static_cast<std::int64_t>(z.bytes()) > kCachedBytes,
                                options.own_kernel.value_or(true)))
        return z;
  }

  const std::int64_t summed = kernels::product(gemm_groups(xl, yl, zl).k, len);
  const MicroKernel<T>& k =
      packed_kernel<T>(summed, static_cast<double>(z.bytes()), options.wide_kernel);
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
  const bool reread = bytes(z) > kCachedBytes && !one_pass(k, summed);
  // Where tiles are written around the cache (Gemm::write_around), they follow the output too: a
  // tile whose columns straddle two runs costs one more kernel call there, no copy, and in the
  // output's order its columns lie next to each other (TCCG case 34, dfga,gebc->abcdef: 16 × 14
  // elements in one run of 1,792 bytes, where in gebc's order each of the 14 columns was 48 KB from
  // the next).
  // (The default is measured on its first use, streams_even_tiles_by_default: asked last, in z's
  // memory, which the product then overwrites whole.)
  const bool stream_all =
      one_pass(k, summed) && even_tiles_may_stream(summed, static_cast<double>(bytes(z))) &&
      (options.stream_even ? *options.stream_even
                           : streams_even_tiles_by_default(xl, yl, zl, z.raw(), z.bytes()));
  // Where our own kernel writes tiles straight from its registers (line_tiles_write_out), the rows
  // and columns follow the output too: a tile's columns are then neighbouring lines, where in an
  // operand's order (which leaves fewer uneven tiles) they can lie far apart: in TCCG case 43
  // (geab,dfgc->abcdef) the columns went along b, 384 KB apart in floats. Our kernel takes the
  // uneven tiles as fast as the even ones.
  const bool line_tiles = line_tiles_write_out(k, summed, bytes(z));
  const bool follow = reread || stream_all || line_tiles;
  Rows rows = group_rows(m, len, xl, xs, zl, zs, bytes(*x.tensor), bytes(z), k.mr, line, follow);
  Rows cols = group_rows(n, len, yl, ys, zl, zs, bytes(*y.tensor), bytes(z), k.nr, line, follow);

  Contraction p;
  p.am = std::move(rows.x);
  p.cm = std::move(rows.z);
  p.bn = std::move(cols.x);
  p.cn = std::move(cols.z);
  // The summed indices: tiled where both operands are too large for the cache and run at unit
  // stride along different ones (sum_tile), otherwise in the order of the operand that runs along
  // one of them, else of the left operand (its packing reads along them).
  if (auto ks = tiles(sum, len, xl, xs, yl, ys, bytes(*x.tensor), bytes(*y.tensor), sum_tile<T>(k),
                      line, true)) {
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
  // Our own micro-kernel for whole tiles (own_kernel_by_default: in floats, several passes over a
  // large output), or as the options say.
  p.own_tiles =
      EINSUMDB_AVX512 && line_tile_fits(k) &&
      options.own_kernel.value_or(std::is_same_v<T, float> &&
                                  own_kernel_by_default(p.K, static_cast<double>(bytes(z))));
  // A block of rows holds at least one line group (Gemm::block_end).
  block_sizes(k, p, large, p.row_lines.empty() ? k.mr : line * k.mr);
  p.span = packing_span(k, p, bytes(*x.tensor));
  // With AVX2, the tiles through the buffer stream only where the even tiles do too: streamed
  // beside the lines BLIS's micro-kernel writes in place (through the cache), they went slower
  // than in ordinary stores (TCCG cases 35 and 44 in floats, where a panel of rows in three
  // straddles two values of an index).
  p.stream = large && p.K <= p.kc && (EINSUMDB_AVX512 || stream_all);
  p.stream_all = stream_all;  // (one pass, an output beyond the cache: p.stream)
  p.line_tiles = line_tiles;
  p.stream_lines =
      line_tiles && (options.stream_line_tiles ? *options.stream_line_tiles
                                               : line_tiles_stream_by_default(z.raw(), z.bytes()));
  p.fetch_ahead = options.fetch_ahead;
  p.row_step = spacing(p.cm, k.mr);
  p.row_runs = unit_runs(p.cm, k.mr, line, p.row_step);
  p.col_step = spacing(p.cn, k.nr);
  p.tiles_across = options.tiles_across.value_or(tiles_across_by_default(k, p));
  // Tiles written around the cache (Gemm::write_around): where even ones would go through the
  // buffer, rows contiguous in the output in whole lines, at the spacing of the first columns.
  const std::int64_t col_spacing = p.N > 1 ? p.cn[1] - p.cn[0] : 0;
  if (p.stream_all && (k.mr * sizeof(T)) % 64 == 0 && col_spacing > 0 &&
      (col_spacing * sizeof(T)) % 64 == 0)
    p.around_ldc = col_spacing;

  const Gemm<T> gemm(p, x.tensor->data<T>(), y.tensor->data<T>(), z.data<T>(), k);
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
  // Split the wider of the two ranges, in whole micro-tiles, or the summed range (sums_split).
  const bool split_rows = p.M / k.mr >= p.N / k.nr;
  const std::int64_t passes = (p.K + p.kc - 1) / p.kc;
  if (t > 1 && options.split_sum.value_or(sums_split(p.M, p.N, p.K, nb, split_rows)) &&
      passes >= t) {
    // Thread s sums passes [s·passes / t, (s + 1)·passes / t) of every batch point, the first
    // into z, each other into a buffer laid out as z, which is then added to z.
    const std::int64_t n = z.size();
    kernels::split_sum(static_cast<int>(t), n, 1, z.data<T>(), 1, 1,
                       [&](std::int64_t s, T* to, std::int64_t, std::int64_t) {
                         const auto [ap, bp] = buffers(s);
                         const std::int64_t k0 = std::min(p.K, s * passes / t * p.kc);
                         const std::int64_t k1 = std::min(p.K, (s + 1) * passes / t * p.kc);
                         for (std::int64_t q = 0; q < nb; ++q)
                           gemm.run(q, 0, p.M, 0, p.N, ap, bp, k0, k1, to);
                       });
    return z;
  }
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

// A complex row (R: its parts' type): in complex rows or lines where they apply
// (complex_lines.hpp), otherwise in real form (real_form.hpp).
template <typename R>
Tensor complex_row(const Bound& bound, std::size_t row, const RowOptions& options) {
  const BatchedEinsum& e = bound.einsum();
  const auto& len = bound.lengths();
  const Dtype dtype = result_dtype(e, row);
  const auto x = bound.operand(row, 0), y = bound.operand(row, 1);
  if (options.stream_rows && x.function == nullptr && y.function == nullptr &&
      x.tensor->dtype() == dtype && y.tensor->dtype() == dtype) {
    Tensor z(dtype, kernels::shape_of(e.output, len), Tensor::Uninitialized{});
    if (z.size() == 0) return z;
    const auto xs = x.tensor->strides(), ys = y.tensor->strides(), zs = z.strides();
    const auto* xd = static_cast<const R*>(x.tensor->raw());
    const auto* yd = static_cast<const R*>(y.tensor->raw());
    auto* zd = static_cast<R*>(z.raw());
    const bool stream = static_cast<std::int64_t>(z.bytes()) > kCachedBytes;
    const std::string &xl = e.inputs[0], &yl = e.inputs[1];
    if (const auto s = complex_rows<R>(xl, xs, yl, ys, e.output, zs, len))
      if (run_complex_rows<R>(*s, s->swap ? yd : xd, s->swap ? xd : yd, zd, options.threads,
                              stream))
        return z;
    if (const auto s = complex_lines<R>(xl, xs, yl, ys, e.output, zs, len))
      if (run_complex_lines<R>(*s, s->swap ? yd : xd, s->swap ? xd : yd, zd, options.threads,
                               stream, options.own_kernel.value_or(true)))
        return z;
  }
  const RealForm f = real_form(bound, row, options.threads);
  const Bound real(f.e, f.arrays);
  return f.complex_result(tensor_gemm_row<R>(real, 0, options));
}

}  // namespace

Tensor row(const Bound& bound, std::size_t row, const RowOptions& options) {
  switch (result_dtype(bound.einsum(), row)) {
    case Dtype::f32:
      return tensor_gemm_row<float>(bound, row, options);
    case Dtype::c64:
      return complex_row<float>(bound, row, options);
    case Dtype::c128:
      return complex_row<double>(bound, row, options);
    default:
      return tensor_gemm_row<double>(bound, row, options);
  }
}

bool runs_in_halves() {
#if EINSUMDB_AVX512
  return machine_rows_shape() == RowsShape::narrow;
#else
  return false;
#endif
}

}  // namespace einsumdb::tensor_gemm::EINSUMDB_ISA_NS
EINSUMDB_TARGET_END
