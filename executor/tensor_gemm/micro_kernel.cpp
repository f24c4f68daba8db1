#include "einsumdb/executor/tensor_gemm/micro_kernel.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include "einsumdb/executor/isa.hpp"

namespace einsumdb::tensor_gemm {
namespace {

// BLIS 0.9 picks its Skylake-X kernels only on Intel processors whose brand string names a model it
// knows to have two AVX-512 FMA units; it does not know AMD's AVX-512 processors (Zen 4, Zen 5) at
// all, and runs its generic C kernels there, and on an Intel processor that a virtual machine
// reports as a plain "Intel(R) Xeon(R) Processor" it falls back to its AVX2 (Haswell) kernels. Its
// Skylake-X kernels run at the full rate on all of them (with one FMA unit, at the rate of the AVX2
// kernels). BLIS reads the choice from BLIS_ARCH_TYPE when it initializes, so it is set here,
// before the first call to BLIS, unless the user set it. Under a cap on einsumdb's kernels
// (EINSUMDB_ISA, isa.hpp), BLIS's are capped with them: its Haswell kernels for AVX2, its generic
// ones for the baseline.
void choose_blis_kernels() {
  if (std::getenv("BLIS_ARCH_TYPE")) return;
  const auto choose = [](arch_t arch) {
    setenv("BLIS_ARCH_TYPE", std::to_string(static_cast<int>(arch)).c_str(), 0);
  };
  const Isa isa = kernel_isa();
  if (isa == Isa::avx512)
    choose(BLIS_ARCH_SKX);
  else if (isa < supported_isa())
    choose(isa == Isa::avx2 ? BLIS_ARCH_HASWELL : BLIS_ARCH_GENERIC);
}

}  // namespace

const BlisLibrary& BlisLibrary::get() {
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

template <typename T>
const MicroKernel<T>& MicroKernel<T>::get() {
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

template struct MicroKernel<double>;
template struct MicroKernel<float>;

}  // namespace einsumdb::tensor_gemm
