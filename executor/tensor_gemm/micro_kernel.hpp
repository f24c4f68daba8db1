// tensor_gemm's micro-kernel stage: BLIS's micro-kernel for this machine (through BLIS's public
// micro-kernel API, for the micro-architecture BLIS detects), its MR × NR register tile and its
// MC, KC and NC cache blocks. Internal to executor/.
#pragma once

#include <cstdint>

// Before blis.h, which brings a CBLAS header of its own: the kernels' BLAS is OpenBLAS.
#include "einsumdb/executor/kernels.hpp"

#include <blis.h>

namespace einsumdb::tensor_gemm {

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

// BLIS is loaded with RTLD_LOCAL rather than linked: libblis exports a BLAS and a CBLAS of its
// own, and linked into a process beside OpenBLAS it can take the place of OpenBLAS's cblas_dgemm
// (it did in a test binary whose libraries were loaded in the other order), and with it the
// thread count the other strategies set. Only its context query is needed from the library; the
// context's accessors and the micro-kernel's calling convention come from blis.h.
struct BlisLibrary {
  cntx_t* (*query_cntx)() = nullptr;
  arch_t (*query_arch)() = nullptr;
  char* (*arch_string)(arch_t) = nullptr;

  // Loaded on first use; throws Error where libblis.so.4 is missing or lacks the queries.
  static const BlisLibrary& get();
};

// The elements of the largest micro-tile (BLIS's kernels have at most 16 × 14 for doubles and
// 32 × 12 for floats on x86-64).
inline constexpr std::int64_t kMaxTile = 32 * 32;

// BLIS's micro-kernel for this machine and its block sizes.
template <typename T>
struct MicroKernel {
  typename Blis<T>::Kernel run = nullptr;
  cntx_t* cntx = nullptr;
  std::int64_t mr = 0, nr = 0, packmr = 0, packnr = 0, mc = 0, kc = 0, nc = 0;
  bool prefers_rows = true;  // writes a tile with unit column stride fastest
  // Fetches its tile's lines during the sum where it adds to them (wide_kernel.hpp), so that an
  // output read back in each pass costs it little: no longer passes (block_sizes).
  bool fetches_tile = false;

  static const MicroKernel& get();
};

// The columns of tensor_gemm's own micro-kernel (line_kernel.hpp, AVX-512): BLIS's AVX-512 tiles
// (32 × 12 floats, 16 × 14 doubles on skx and zen4), two registers' rows each.
template <typename T>
inline constexpr std::int64_t kLineTileColumns = sizeof(T) == 4 ? 12 : 14;

// The tile of tensor_gemm's wide micro-kernel (wide_kernel.hpp, AVX-512): four registers' rows by
// six columns.
template <typename T>
inline constexpr std::int64_t kWideRows = 4 * 64 / static_cast<std::int64_t>(sizeof(T));
inline constexpr std::int64_t kWideColumns = 6;

// Whether that kernel computes BLIS's tile for this machine, from its packed panels (unpadded).
template <typename T>
bool line_tile_fits(const MicroKernel<T>& k) {
  return k.mr == 2 * (64 / static_cast<std::int64_t>(sizeof(T))) && k.packmr == k.mr &&
         k.nr == kLineTileColumns<T> && k.packnr == k.nr;
}

extern template struct MicroKernel<double>;
extern template struct MicroKernel<float>;

}  // namespace einsumdb::tensor_gemm
