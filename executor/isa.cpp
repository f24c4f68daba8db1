#include "einsumdb/executor/isa.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "einsumdb/core/error.hpp"

namespace einsumdb {
namespace {

Isa detect() {
  // libgcc's cpu model reads CPUID and, for AVX and AVX-512, XGETBV: a feature counts only where
  // the operating system saves its registers.
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2");
  if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl"))
    return Isa::avx512;
  return avx2 ? Isa::avx2 : Isa::baseline;
}

Isa chosen() {
  const Isa cpu = supported_isa();
  const char* env = std::getenv("EINSUMDB_ISA");
  if (!env || !*env) return cpu;
  const std::string want = env;
  for (const Isa isa : {Isa::baseline, Isa::avx2, Isa::avx512})
    if (want == isa_name(isa)) return std::min(isa, cpu);
  throw SpecError("EINSUMDB_ISA=" + want + ": expected baseline, avx2 or avx512");
}

}  // namespace

Isa supported_isa() {
  static const Isa isa = detect();
  return isa;
}

Isa kernel_isa() {
  static const Isa isa = chosen();  // a throw leaves it to the next call
  return isa;
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::avx512:
      return "avx512";
    case Isa::avx2:
      return "avx2";
    case Isa::baseline:
      break;
  }
  return "baseline";
}

}  // namespace einsumdb
