// tensor_gemm: a binary mul/sum contraction as one GEMM over the tensors as they lie, with no
// transposition pass (transposition-free contraction, as in TBLIS: D. Matthews, "High-Performance
// Tensor Contraction without Transposition", SISC 2018). The job is BLIS's algorithm in stages,
// each in its own header under tensor_gemm/:
//
//   micro_kernel  BLIS's micro-kernel for this machine, its register tile and cache blocks;
//   scatter       the offset of every row, column and summed element in each tensor (the
//                 matrices are never formed), and where blocks of them are evenly spaced;
//   blocking      the order of the rows, columns and summed elements, the packed blocks' sizes
//                 (a Contraction);
//   packing       a block of an operand gathered from the tensor into micro-panels;
//   write_out     a tile computed into a buffer, written where the micro-kernel could not;
//   macro_kernel  the loops over blocks and tiles (Gemm);
//   streamed      the second algorithm, for an operand with few free elements: the other one
//                 streamed in place through libxsmm kernels, unpacked;
//   this file     the driver: which algorithm, which operand takes the rows, the threads.
//
// The templates of the stages that only this file instantiates (packing, write-out, macro-kernel,
// streamed) are in unnamed namespaces and the write-out and packing routines declared inline: with
// internal linkage, called from one place, and inline, GCC inlines them into the loops that call
// them (pack(), copy_run() and transpose_out() into Gemm::run), as it did when they were one file
// and the routines members of Gemm; with external linkage it keeps them out of line (the
// object's symbols show it). docs/performance/tccg-stages.md compares this build with the single
// file. The types the stages share (Table, Contraction, MicroKernel) and the planning functions
// compiled on their own have external linkage.
//
// Batch indices are a loop around the GEMM. The micro-kernel writes contiguously along the columns
// (or the rows, as it prefers): the output's unit-stride index goes there, the operands swapping
// roles when needed, unless that leaves fewer rows than a few micro-panels and many more columns;
// the large operand then goes on the rows' side, packed in blocks and streamed through once.
// Memory beyond the output: the packed blocks, at most (MC + 1.25 NC)·KC elements per thread with
// BLIS's block sizes, and the offset tables, two per row and per column.
//
// Parameters: "threads" (over batch points when there are enough, otherwise over the wider of
// the row and column ranges, each thread packing its own blocks; streamed rows, over the rows),
// "stream_even" (true or false: whether the tiles of a large output summed over few elements go
// out in streaming stores, written around the cache or through the buffer, rather than in place
// by BLIS's micro-kernel; the default depends on the processor, kStreamAllDepth), "fetch_ahead"
// (true or false, NextBlock) and "stream_rows" (true or false: whether an operand streams, in rows
// or in lines, where it can; true by default, and the tuner measures both). A functional operand
// is evaluated into a buffer in its array's layout first.
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "einsumdb/executor/kernels.hpp"
#include "einsumdb/executor/tensor_gemm/blocking.hpp"
#include "einsumdb/executor/tensor_gemm/macro_kernel.hpp"
#include "einsumdb/executor/tensor_gemm/micro_kernel.hpp"
#include "einsumdb/executor/tensor_gemm/scatter.hpp"
#include "einsumdb/executor/tensor_gemm/streamed.hpp"

namespace einsumdb::tensor_gemm {
namespace {

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
}  // namespace einsumdb::tensor_gemm

namespace einsumdb {

bool tensor_gemm_streams() {
  return tensor_gemm::kStreams;
}

std::string tensor_gemm_kernel() {
  const auto& k = tensor_gemm::MicroKernel<double>::get();
  const tensor_gemm::BlisLibrary& blis = tensor_gemm::BlisLibrary::get();
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
  return tensor_gemm::streamed_path(e, strides(0), strides(1), len, result_dtype(e, row));
}

// The default, and where the choice applies (an output beyond the cache, few summed elements),
// the other way of writing even tiles: which is faster depends on the processor (kStreamAllDepth);
// where the rows would stream, BLIS's packed path too.
std::vector<nlohmann::json> tensor_gemm_space(const BatchedEinsum& e, const Lengths& len) {
  std::vector<nlohmann::json> space = {nlohmann::json::object()};
  if (tensor_gemm_rejects(e)) return space;
  std::string sum;
  for (char c : e.inputs[0])
    if (kernels::contains(e.inputs[1], c) && !kernels::contains(e.output, c)) sum += c;
  double bytes = 4;  // per element of the output: 8 where a row's result is f64
  for (std::size_t r = 0; r < e.batch.size(); ++r)
    if (result_dtype(e, r) == Dtype::f64) bytes = 8;
  for (char c : e.output) bytes *= static_cast<double>(len.at(c));
  if (tensor_gemm::even_tiles_may_stream(kernels::product(sum, len), bytes))
    space.push_back({{"stream_even", !tensor_gemm::streams_even_tiles_by_default()}});
  // (Judged on contiguous operands.)
  const auto xs = kernels::row_major_strides(e.inputs[0], len),
             ys = kernels::row_major_strides(e.inputs[1], len);
  bool streams = false;
  for (std::size_t r = 0; r < e.batch.size(); ++r)
    streams |= tensor_gemm::streamed_path(e, xs, ys, len, result_dtype(e, r)) != "packed";
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
  const bool stream_even = flag("stream_even", tensor_gemm::streams_even_tiles_by_default());
  const bool fetch_ahead = flag("fetch_ahead", true);
  const bool stream_rows = flag("stream_rows", true);
  Results out;
  for (std::size_t r = 0; r < e.batch.size(); ++r) {
    out.push_back(result_dtype(e, r) == Dtype::f32
                      ? tensor_gemm::tensor_gemm_row<float>(bound, r, threads, stream_even,
                                                            fetch_ahead, stream_rows)
                      : tensor_gemm::tensor_gemm_row<double>(bound, r, threads, stream_even,
                                                             fetch_ahead, stream_rows));
  }
  return out;
}

}  // namespace einsumdb
