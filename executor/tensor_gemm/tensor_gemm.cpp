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
//                 streamed in place through libxsmm kernels, unpacked, or through our own, in
//                 rows (rows_kernel), in lines transposed in registers (lines_kernel) or in
//                 lines in place (place_kernel);
//   row.cpp       the driver: which algorithm, which operand takes the rows, the threads; it and
//                 the stages it instantiates are compiled once per instruction set (isa.hpp);
//   this file     the strategy: where it applies, its parameters, the tuner's space.
//
// The templates of the stages that only the driver instantiates (packing, write-out, macro-kernel,
// streamed) are in unnamed namespaces and the write-out and packing routines declared inline: with
// internal linkage, called from one place, and inline, GCC inlines them into the loops that call
// them (pack(), copy_run() and transpose_out() into Gemm::run), as it did when they were one file
// and the routines members of Gemm; with external linkage it keeps them out of line (the
// object's symbols show it). docs/performance/tccg-stages.md compares this build with the single
// file. Internal linkage also keeps the driver's three compilations (one per instruction set)
// from sharing a copy. The types the stages share (Table, Contraction, MicroKernel) and the
// planning functions compiled on their own have external linkage and are compiled once, for the
// baseline.
//
// Batch indices are a loop around the GEMM. The micro-kernel writes contiguously along the columns
// (or the rows, as it prefers): the output's unit-stride index goes there, the operands swapping
// roles when needed, unless that leaves fewer rows than a few micro-panels and many more columns;
// the large operand then goes on the rows' side, packed in blocks and streamed through once.
// Memory beyond the output: the packed blocks, at most (MC + 1.25 NC)·KC elements per thread with
// BLIS's block sizes, and the offset tables, two per row and per column.
//
// Parameters: "threads" (over batch points when there are enough, otherwise over the wider of
// the row and column ranges, each thread packing its own blocks, or over the summed range where
// the result is small and the sum long, each thread into a buffer of its own added to the result:
// sums_split, which "split_sum", true or false, overrides; streamed rows, over the rows),
// "stream_even" (true or false: whether the tiles of a large output summed over few elements go
// out in streaming stores, written around the cache or through the buffer, rather than in place
// by BLIS's micro-kernel; kStreamAllDepth; by default where this machine's ordinary stores read
// a line before writing it, as measured once per process: scattered_stores_read_lines; with AVX2,
// whole tiles of BLIS's Haswell shape go out from our own kernel's registers, stream_tile.hpp),
// "fetch_ahead"
// (true or false, NextBlock), "stream_rows" (true or false: whether an operand streams, in rows
// or in lines, where it can; true by default, and the tuner measures both), "stream_line_tiles"
// (true or false: whether the tiles our own kernel writes from its registers over a large output
// summed in one pass, Gemm::write_lines_around, go out in streaming stores or in ordinary ones;
// by default streaming where this machine's ordinary stores read a line before writing it, as for
// "stream_even", line_tiles_stream_by_default, and the tuner measures the other way; where they
// are stored, our kernel takes the even tiles whose rows are contiguous in the output too, which
// BLIS's would write in place), "tiles_across" (true or false: whether a block's tiles go along
// its columns rather than down its rows; by default where our kernel writes them from its
// registers and the columns continue the tiles' runs of rows in the output,
// tiles_across_by_default, and the tuner measures them down the rows wherever our kernel writes
// them), "rows_fetch" ("l1" or "l2": whether our streamed-rows tiles, rows_tile in
// rows_kernel.hpp, fetch X's lines ahead into L1 as well or into L2 alone; L2 by default, and the
// tuner measures L1 where they run) and "kernel" ("own",
// "blis" or "wide": whose micro-kernel computes whole tiles, ours (line_kernel.hpp, AVX-512, where
// BLIS's tile is one it computes), BLIS's, or our wide one (wide_kernel.hpp, AVX-512, where the
// sum takes several passes: by default in doubles over an output beyond the cache on Intel's
// processors, wide_kernel_by_default,
// and the tuner measures it against BLIS's wherever it applies); by default ours in floats over a
// large output read back in several summed passes (own_kernel_by_default), otherwise BLIS's, and in
// floats the tuner measures both; a tile whose rows are two runs apart in the output, written
// around the cache, is ours either way; streamed rows go through ours (rows_kernel.hpp) by default,
// and in floats streamed lines where own_lines says (lines_kernel.hpp) and in place where own_place
// says and the processor runs 512-bit operations in halves (place_kernel.hpp), with AVX2 alone in
// place in floats and doubles where own_place_chunks says (place_kernel.hpp), libxsmm's with
// "blis", and the tuner measures both). A functional operand is evaluated into a buffer in its
// array's layout first. A complex row runs as a real one (real_form.hpp): the same stages, on real
// numbers, with an index of two parts added.
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "einsumdb/executor/kernels.hpp"
#include "einsumdb/executor/real_form.hpp"
#include "einsumdb/executor/tensor_gemm/blocking.hpp"
#include "einsumdb/executor/tensor_gemm/complex_lines.hpp"
#include "einsumdb/executor/tensor_gemm/micro_kernel.hpp"
#include "einsumdb/executor/tensor_gemm/rows_kernel.hpp"
#include "einsumdb/executor/tensor_gemm/scatter.hpp"
#include "einsumdb/executor/tensor_gemm/streamed.hpp"
#include "einsumdb/executor/variants.hpp"

namespace einsumdb::tensor_gemm {
namespace {

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

// Whether row `row` streams its operand through our own kernel by default: its rows
// (rows_kernel.hpp) where W's row fits it, its lines (lines_kernel.hpp) where own_lines says, or
// its lines in place (place_kernel.hpp) where own_place says and the processor runs 512-bit
// operations in halves, or own_place_wide where it runs them whole, all where the kernels run
// AVX-512; or with AVX2, its rows where
// own_rows_avx2 says, its lines where own_lines_avx2 says and its lines in place where
// own_place_chunks says; in complex numbers, its lines where own_lines_avx2 says (and
// complex rows do not apply, which run_tensor_gemm tries first). On contiguous operands.
bool own_streams(const BatchedEinsum& e, std::size_t row, const Lengths& len) {
  const Dtype dtype = result_dtype(e, row);
  const auto xs = kernels::row_major_strides(e.inputs[0], len);
  const auto ys = kernels::row_major_strides(e.inputs[1], len);
  const auto zs = kernels::row_major_strides(e.output, len);
  const std::string &x = e.inputs[0], &y = e.inputs[1], &z = e.output;
  if (is_complex(dtype)) {
    const auto ours = [&](auto part) {
      using R = decltype(part);
      if (complex_rows<R>(x, xs, y, ys, z, zs, len)) return false;
      const auto s = complex_lines<R>(x, xs, y, ys, z, zs, len);
      return s && own_lines_avx2<std::complex<R>>(*s);
    };
    return dtype == Dtype::c128 ? ours(0.0) : ours(0.0f);
  }
  const auto ours = [&](auto zero) {
    using T = decltype(zero);
    if (const auto s = streamed<T>(x, xs, y, ys, z, zs, len))
      return (streams() && s->wn.size() * static_cast<std::int64_t>(sizeof(T)) <= kOwnRowBytes) ||
             own_rows_avx2<T>(*s);
    const auto s = streamed_lines<T>(x, xs, y, ys, z, zs, len);
    return s && (own_lines<T>(*s, !runs_in_halves()) || (own_place<T>(*s) && runs_in_halves()) ||
                 (own_place_wide<T>(*s) && !runs_in_halves()) || own_lines_avx2<T>(*s) ||
                 own_place_chunks<T>(*s));
  };
  return dtype == Dtype::f32 ? ours(0.0f) : ours(0.0);
}

// Whether row `row` streams its rows through rows_tile (rows_kernel.hpp), whose fetches
// "rows_fetch" places: a real row where the kernels run AVX-512, W's row at most kOwnRowBytes,
// save the rows of floats that rows_across_tile takes. On contiguous operands.
bool rows_tiles(const BatchedEinsum& e, std::size_t row, const Lengths& len) {
  const Dtype dtype = result_dtype(e, row);
  if (is_complex(dtype) || !streams()) return false;
  const auto xs = kernels::row_major_strides(e.inputs[0], len);
  const auto ys = kernels::row_major_strides(e.inputs[1], len);
  const auto zs = kernels::row_major_strides(e.output, len);
  const auto tiles = [&](auto zero) {
    using T = decltype(zero);
    const auto s = streamed<T>(e.inputs[0], xs, e.inputs[1], ys, e.output, zs, len);
    if (!s) return false;
    const auto n = static_cast<std::int64_t>(s->wn.size());
    if (n * static_cast<std::int64_t>(sizeof(T)) > kOwnRowBytes) return false;
    return !(std::is_same_v<T, float> && s->x_rs == 1 && rows_across_floats(n, !runs_in_halves()));
  };
  return dtype == Dtype::f32 ? tiles(0.0f) : tiles(0.0);
}

// How a complex row with both operands complex and contiguous streams: "rows" or "lines" where
// it reads its large operand as it lies (complex_lines.hpp), empty where it runs in real form.
std::string complex_streamed_path(const BatchedEinsum& e, std::size_t row, const Lengths& len) {
  const auto xs = kernels::row_major_strides(e.inputs[0], len);
  const auto ys = kernels::row_major_strides(e.inputs[1], len);
  const auto zs = kernels::row_major_strides(e.output, len);
  const auto path = [&](auto part) -> std::string {
    using R = decltype(part);
    const std::string &x = e.inputs[0], &y = e.inputs[1], &z = e.output;
    if (complex_rows<R>(x, xs, y, ys, z, zs, len)) return "rows";
    if (complex_lines<R>(x, xs, y, ys, z, zs, len)) return "lines";
    return "";
  };
  return result_dtype(e, row) == Dtype::c128 ? path(0.0) : path(0.0f);
}

// Whether row `row`'s real factor (real_form.hpp) is read as it lies, in the real form x, y·p →
// z·p: unless the row, its operands complex, would stream as complex rows or lines and y's parts
// would lie beside another index than the output's (TCCG cases 2-8 with B real: dca,bd->abc is
// dca·p, bd → abc·p, p beside a in one and c in the other). There the streamed product, which
// reads the large operand as it lies, is faster; converting the real operand costs a pass over
// it (small in those cases: bd).
bool reads_real_factor(const BatchedEinsum& e, std::size_t row, const Lengths& len) {
  if (!parts_run_with_output(e, row)) return false;
  const std::string& complex = e.inputs[1 - real_factor(e, row)];
  return e.output.empty() || complex.back() == e.output.back() ||
         complex_streamed_path(e, row, len).empty();
}

// The einsum whose row `row` tensor_gemm runs: `e`, with the real operand converted to complex
// (its dtype the row's) where its real factor is not read as it lies.
BatchedEinsum as_run(const BatchedEinsum& e, std::size_t row, const Lengths& len) {
  BatchedEinsum run = e;
  const int real = real_factor(e, row);
  if (real >= 0 && !reads_real_factor(e, row, len))
    run.arrays.at(run.batch[row][real]).dtype = result_dtype(e, row);
  return run;
}

// Whether row `row` writes even tiles in non-temporal stores by default, where the choice applies
// (streams_even_tiles_by_default), judged on its labels, a complex row's on its real form's, as
// tensor_gemm_row judges them.
bool streams_even_by_default(const BatchedEinsum& e, std::size_t row, const Lengths& len) {
  if (is_complex(result_dtype(e, row))) {
    const RealForm f = real_form_layout(as_run(e, row, len), row, len);
    return streams_even_tiles_by_default(f.e.inputs[0], f.e.inputs[1], f.e.output);
  }
  return streams_even_tiles_by_default(e.inputs[0], e.inputs[1], e.output);
}

// streamed_path on contiguous operands: for row `row`, or for its real form where it is complex
// (as run_tensor_gemm runs it: complex rows and lines where both operands are complex).
std::string contiguous_path(const BatchedEinsum& e, std::size_t row, const Lengths& len) {
  const Dtype dtype = result_dtype(e, row);
  if (is_complex(dtype)) {
    if (!reads_real_factor(e, row, len))
      if (const std::string p = complex_streamed_path(e, row, len); !p.empty()) return p;
    const RealForm f = real_form_layout(as_run(e, row, len), row, len);
    return contiguous_path(f.e, 0, f.lengths);
  }
  return streamed_path(e, kernels::row_major_strides(e.inputs[0], len),
                       kernels::row_major_strides(e.inputs[1], len), len, result_dtype(e, row));
}

// Whether the wide micro-kernel (wide_kernel.hpp) can take a real row: on the packed path (on
// contiguous operands), where "kernel": "wide" would run it (wide_kernel_runs).
bool wide_kernel_applies(const BatchedEinsum& e, std::size_t row, const Lengths& len) {
  const Dtype dtype = result_dtype(e, row);
  if (is_complex(dtype) || contiguous_path(e, row, len) != "packed") return false;
  const std::int64_t summed = kernels::product(gemm_groups(e).k, len);
  return dtype == Dtype::f32 ? wide_kernel_runs<float>(summed, 0, true)
                             : wide_kernel_runs<double>(summed, 0, true);
}

}  // namespace
}  // namespace einsumdb::tensor_gemm

namespace einsumdb {

bool tensor_gemm_reads_real_factor(const BatchedEinsum& e, std::size_t row, const Lengths& len) {
  return tensor_gemm::reads_real_factor(e, row, len);
}

bool tensor_gemm_streams() {
  return tensor_gemm::streams();
}

std::string tensor_gemm_kernel() {
  const auto& k = tensor_gemm::MicroKernel<double>::get();
  const tensor_gemm::BlisLibrary& blis = tensor_gemm::BlisLibrary::get();
  return std::string(blis.arch_string(blis.query_arch())) + " " + std::to_string(k.mr) + "x" +
         std::to_string(k.nr);
}

std::optional<std::string> tensor_gemm_rejects(const BatchedEinsum& e) {
  if (auto why = kernels::binary_product_rejects(e, "tensor_gemm")) return why;
  if (has_complex_row(e))
    if (auto why = real_form_rejects(e))
      return "tensor_gemm computes complex rows in real form: " + *why;
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
  if (is_complex(result_dtype(e, row))) {  // its real form, as run_tensor_gemm runs it
    return tensor_gemm::contiguous_path(e, row, len);
  }
  const auto strides = [&](std::size_t k) {  // a functional operand is evaluated contiguously
    const auto x = bound.operand(row, k);
    return x.function ? kernels::row_major_strides(e.inputs[k], len) : x.tensor->strides();
  };
  return tensor_gemm::streamed_path(e, strides(0), strides(1), len, result_dtype(e, row));
}

// The default, and where the choice applies (an output beyond the cache, few summed elements),
// the other way of writing even tiles: which is faster depends on the processor (kStreamAllDepth);
// where the rows would stream, BLIS's packed path too; in floats, the micro-kernel the default
// does not run.
std::vector<nlohmann::json> tensor_gemm_space(const BatchedEinsum& e, const Lengths& len) {
  std::vector<nlohmann::json> space = {nlohmann::json::object()};
  if (tensor_gemm_rejects(e)) return space;
  std::string sum;
  for (char c : e.inputs[0])
    if (kernels::contains(e.inputs[1], c) && !kernels::contains(e.output, c)) sum += c;
  double bytes = 4;  // per element of the output: the largest of the rows' results
  std::int64_t summed = kernels::product(sum, len);
  for (std::size_t r = 0; r < e.batch.size(); ++r) {
    bytes = std::max(bytes, static_cast<double>(dtype_bytes(result_dtype(e, r))));
    if (is_complex(result_dtype(e, r))) summed = 2 * kernels::product(sum, len);  // real form
  }
  for (char c : e.output) bytes *= static_cast<double>(len.at(c));
  if (tensor_gemm::even_tiles_may_stream(summed, bytes)) {
    // The other way than each row's default: one candidate, or both where the rows' differ.
    bool some_stream = false, some_in_place = false;
    for (std::size_t r = 0; r < e.batch.size(); ++r)
      (tensor_gemm::streams_even_by_default(e, r, len) ? some_stream : some_in_place) = true;
    if (some_in_place) space.push_back({{"stream_even", true}});
    if (some_stream) space.push_back({{"stream_even", false}});
  }
  bool line_tiles = false;
  for (std::size_t r = 0; r < e.batch.size(); ++r)
    line_tiles |= tensor_gemm::line_tiles_may_write(result_dtype(e, r), summed, bytes);
  if (line_tiles) {  // the other way than the default
    space.push_back({{"stream_line_tiles", !tensor_gemm::line_tiles_stream_by_default()}});
    space.push_back({{"tiles_across", false}});  // (the default where the layout suits it)
  }
  // (Judged on contiguous operands; a complex row on its real form.)
  bool streams = false;
  for (std::size_t r = 0; r < e.batch.size(); ++r)
    streams |= tensor_gemm::contiguous_path(e, r, len) != "packed";
  if (streams) space.push_back({{"stream_rows", false}});
  // Streamed rows or lines through our own kernel by default: libxsmm's beside it. Otherwise, in
  // floats, whichever of our own micro-kernel and BLIS's the default does not run. Which is faster
  // depends on the processor and the shape.
  bool floats = false, own_streams = false;
  for (std::size_t r = 0; r < e.batch.size(); ++r) {
    floats |= result_dtype(e, r) == Dtype::f32 || result_dtype(e, r) == Dtype::c64;
    own_streams |= tensor_gemm::own_streams(e, r, len);
  }
  // Where our kernel streams rows through rows_tile: its fetches into L1 as well. Whether they
  // go faster there or left in L2 depends on the processor (docs/performance/tccg-rows-fetch.md).
  bool rows_tiles = false;
  for (std::size_t r = 0; r < e.batch.size(); ++r) rows_tiles |= tensor_gemm::rows_tiles(e, r, len);
  if (rows_tiles) space.push_back({{"rows_fetch", "l1"}});
  if (own_streams)
    space.push_back({{"kernel", "blis"}});
  else if (floats && tensor_gemm::own_kernel_runs())
    space.push_back(
        {{"kernel", tensor_gemm::own_kernel_by_default(summed, bytes) ? "blis" : "own"}});
  // A packed product of several passes: the wide micro-kernel, or where it runs by default, BLIS's.
  for (std::size_t r = 0; r < e.batch.size(); ++r)
    if (tensor_gemm::wide_kernel_applies(e, r, len)) {
      const nlohmann::json other = {
          {"kernel", tensor_gemm::wide_kernel_by_default(result_dtype(e, r) == Dtype::f64, bytes)
                         ? "blis"
                         : "wide"}};
      if (std::find(space.begin(), space.end(), other) == space.end()) space.push_back(other);
    }
  return space;
}

Results run_tensor_gemm(const Bound& bound, const nlohmann::json& params) {
  const BatchedEinsum& e = bound.einsum();
  if (const auto why = tensor_gemm_rejects(e))
    throw SpecError("tensor_gemm does not apply: " + *why);
  check_param_keys(params, "tensor_gemm",
                   {"threads", "stream_even", "fetch_ahead", "stream_rows", "stream_line_tiles",
                    "kernel", "split_sum", "tiles_across", "rows_fetch"});
  tensor_gemm::RowOptions options;
  options.threads = read_threads(params, "tensor_gemm");
  const auto flag = [&](const char* name, bool otherwise) {
    return read_flag(params, name, "tensor_gemm", otherwise);
  };
  // Without the parameter, the row decides where the choice applies (the default is measured).
  if (params.contains("stream_even")) options.stream_even = flag("stream_even", false);
  if (params.contains("split_sum")) options.split_sum = flag("split_sum", false);
  if (params.contains("tiles_across")) options.tiles_across = flag("tiles_across", false);
  options.fetch_ahead = flag("fetch_ahead", options.fetch_ahead);
  options.stream_rows = flag("stream_rows", options.stream_rows);
  if (params.contains("stream_line_tiles"))
    options.stream_line_tiles = flag("stream_line_tiles", false);
  if (params.contains("rows_fetch")) {
    const auto& f = params["rows_fetch"];
    if (!f.is_string() || (f != "l1" && f != "l2"))
      throw SpecError("tensor_gemm: 'rows_fetch' must be \"l1\" or \"l2\", got " + f.dump());
    options.rows_fetch_l1 = f == "l1";
  }
  if (params.contains("kernel")) {
    const auto& k = params["kernel"];
    if (!k.is_string() || (k != "own" && k != "blis" && k != "wide"))
      throw SpecError("tensor_gemm: 'kernel' must be \"own\", \"blis\" or \"wide\", got " +
                      k.dump());
    options.wide_kernel = k == "wide";
    if (k != "wide") options.own_kernel = k == "own";
  }
  Results out;
  for (std::size_t r = 0; r < e.batch.size(); ++r) {
    out.push_back(tensor_gemm::row(bound, r, options));  // (a complex row: complex_row)
  }
  return out;
}

}  // namespace einsumdb
