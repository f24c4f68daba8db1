// The root of einsumdb's error family and the internal assert macro: the base every module builds
// on (a module's own errors derive from Error in its own header: DatabaseError in db/error.hpp,
// MpiError in distributed/error.hpp).
//
// Expected failures that a user can cause (a malformed spec, a shape that does not agree, a
// database that cannot be opened) throw a subclass of einsumdb::Error whose message says what
// was wrong, where, and what was expected. The CLI prints it as `einsumdb: error: <message>` and
// maps the subclass to an exit code. Programmer errors (a broken invariant) use EINSUMDB_ASSERT,
// which aborts with the message: they are never the user's fault and never caught.
#pragma once

#include <stdexcept>
#include <string>

namespace einsumdb {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A spec (einsum string, flags, JSON) that is malformed or unsound.
class SpecError : public Error {
 public:
  using Error::Error;
};

[[noreturn]] void assertion_failed(const char* expr, const char* file, int line,
                                   const std::string& message);

}  // namespace einsumdb

#define EINSUMDB_ASSERT(cond, message)                                               \
  do {                                                                               \
    if (!(cond)) ::einsumdb::assertion_failed(#cond, __FILE__, __LINE__, (message)); \
  } while (false)
