// The vector instructions the executor's own kernels use, chosen when the process first runs one.
//
// The library is compiled for the x86-64 baseline (SSE2), which every x86-64 processor runs. The
// kernels that profit from wider vectors (copy_layout's transposes, tensor_gemm's packing and
// write-out, loop_nest's innermost loops) are compiled three times, for the baseline, for AVX2
// with FMA, and for AVX-512 (F, CD, BW, DQ, VL), and the executor runs the widest that the
// processor and the operating system support. OpenBLAS, BLIS and libxsmm choose their own
// kernels the same way.
//
// EINSUMDB_ISA=baseline|avx2|avx512 caps the set: the kernels use the narrower of it and the
// processor's (to compare them, or to test each on one machine), and so do BLIS's micro-kernels
// (tensor_gemm/micro_kernel.cpp); OpenBLAS and libxsmm keep their own choice (OPENBLAS_CORETYPE
// and LIBXSMM_TARGET choose for them). Kernels narrower than the
// processor's widest are part of the machine's fingerprint (this_machine()), so that what was
// measured with them is never filed as the machine's own.
#pragma once

#include <string_view>

namespace einsumdb {

enum class Isa { baseline = 0, avx2 = 1, avx512 = 2 };

// The widest set this processor and operating system run.
Isa supported_isa();
// The set the kernels run: supported_isa(), or EINSUMDB_ISA where that is narrower. Read once per
// process; throws SpecError (naming the variable, its value and the choices) when EINSUMDB_ISA is
// not one of them.
Isa kernel_isa();
// "baseline", "avx2", "avx512".
std::string_view isa_name(Isa isa);

}  // namespace einsumdb
