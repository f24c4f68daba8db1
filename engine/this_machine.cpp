#include "einsumdb/engine/this_machine.hpp"

#include <sys/utsname.h>

#include <cstdlib>
#include <string>

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
                                    {"openblas_num_threads", threads ? threads : ""}};
    return detect_machine(blas ? blas : "unknown BLAS", extra);
  }();
  return machine;
}

}  // namespace einsumdb
