// Compiling a kernel source once per instruction set (isa.hpp). The build compiles each such
// source three times, with EINSUMDB_ISA_LEVEL 0, 1 and 2; the source includes this header after
// every other header, then puts its code between EINSUMDB_TARGET_BEGIN and EINSUMDB_TARGET_END in
// namespace EINSUMDB_ISA_NS (baseline, avx2, avx512). variants.cpp calls the one kernel_isa()
// names.
//
// Why a target region and not -mavx512f on the file: functions defined in the region are
// compiled for its instruction set, and only they. Inline functions and templates of the
// headers included before it (the standard library's, nlohmann::json's, the executor's) stay
// baseline code even where the region instantiates them; compiled with -mavx512f, each such
// instantiation would be an AVX-512 copy of a function that other files define too, and the
// linker keeps one copy of each for the whole program, perhaps that one. The region's own
// functions are in a namespace of their own or have internal linkage, so no copy is shared.
// tests/isa_symbols_test.py checks the built library for wide instructions outside them.
//
// GCC inlines a function into one compiled for a superset of its instructions, so the headers'
// small functions are still inlined into the kernels (and vectorized there with the region's
// instructions); the region names instruction sets only, not a processor ("arch="), which
// would stop that.
#pragma once

// A file compiled once (the drivers, a test) takes the set its compiler flags allow: the kernel
// headers' code then compiles for those, in the file's own unnamed namespaces.
#if !defined(EINSUMDB_ISA_LEVEL)
#if defined(__AVX512F__) && defined(__AVX512CD__) && defined(__AVX512BW__) && \
    defined(__AVX512DQ__) && defined(__AVX512VL__) && defined(__AVX2__) && defined(__FMA__)
#define EINSUMDB_ISA_LEVEL 2
#elif defined(__AVX2__) && defined(__FMA__)
#define EINSUMDB_ISA_LEVEL 1
#else
#define EINSUMDB_ISA_LEVEL 0
#endif
#endif

#if EINSUMDB_ISA_LEVEL == 2
#define EINSUMDB_ISA_NS avx512
#define EINSUMDB_AVX2 1
#define EINSUMDB_AVX512 1
#define EINSUMDB_TARGET_SET "avx,avx2,fma,bmi,bmi2,avx512f,avx512cd,avx512bw,avx512dq,avx512vl"
#elif EINSUMDB_ISA_LEVEL == 1
#define EINSUMDB_ISA_NS avx2
#define EINSUMDB_AVX2 1
#define EINSUMDB_AVX512 0
#define EINSUMDB_TARGET_SET "avx,avx2,fma,bmi,bmi2"
#else
#define EINSUMDB_ISA_NS baseline
#define EINSUMDB_AVX2 0
#define EINSUMDB_AVX512 0
#endif

#if EINSUMDB_ISA_LEVEL == 0
#define EINSUMDB_TARGET_BEGIN
#define EINSUMDB_TARGET_END
#else
// (Two steps, so that EINSUMDB_TARGET_SET is expanded before it is quoted.)
#define EINSUMDB_PRAGMA_TEXT(x) _Pragma(#x)
#define EINSUMDB_PRAGMA(x) EINSUMDB_PRAGMA_TEXT(x)
#if defined(__clang__)
#define EINSUMDB_TARGET_BEGIN \
  EINSUMDB_PRAGMA(            \
      clang attribute push(__attribute__((target(EINSUMDB_TARGET_SET))), apply_to = function))
#define EINSUMDB_TARGET_END _Pragma("clang attribute pop")
#else
#define EINSUMDB_TARGET_BEGIN \
  _Pragma("GCC push_options") EINSUMDB_PRAGMA(GCC target(EINSUMDB_TARGET_SET))
#define EINSUMDB_TARGET_END _Pragma("GCC pop_options")
#endif
#endif
