#include "einsumdb/engine/this_machine.hpp"

#include <sys/utsname.h>

#include <cstdlib>
#include <string>

#include "einsumdb/executor/isa.hpp"
#include "einsumdb/version.hpp"

extern "C" char* openblas_get_config(void);

namespace einsumdb {

const Machine& this_machine() {
  static const Machine machine = [] {
    const char* blas = openblas_get_config();
    utsname u{};
    uname(&u);
    const char* threads = std::getenv("OPENBLAS_NUM_THREADS");
    nlohmann::ordered_json extra = {{"compiler", __VERSION__},
                                    {"einsumdb", kVersion},
                                    {"os", std::string(u.sysname) + " " + u.release},
                                    {"openblas_num_threads", threads ? threads : ""},
                                    {"kernels", std::string(isa_name(kernel_isa()))}};
    Machine m = detect_machine(blas ? blas : "unknown BLAS", extra);
    // Kernels narrower than the processor's (EINSUMDB_ISA) are another machine as far as the
    // store is concerned: what they measure is not what this one runs by default.
    if (kernel_isa() != supported_isa())
      m.isa +=
          std::string(m.isa.empty() ? "" : " ") + "kernels=" + std::string(isa_name(kernel_isa()));
    return m;
  }();
  return machine;
}

}  // namespace einsumdb
