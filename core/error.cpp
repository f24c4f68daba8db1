#include "einsumdb/core/error.hpp"

#include <cstdio>
#include <cstdlib>

namespace einsumdb {

void assertion_failed(const char* expr, const char* file, int line, const std::string& message) {
  std::fprintf(stderr, "einsumdb: internal error: %s:%d: assertion '%s' failed: %s\n", file, line,
               expr, message.c_str());
  std::abort();
}

}  // namespace einsumdb
