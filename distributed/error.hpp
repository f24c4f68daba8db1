// The distributed runtime's error: a failure of MPI or of a rank.
#pragma once

#include "einsumdb/core/error.hpp"

namespace einsumdb {

class MpiError : public Error {
 public:
  using Error::Error;
};

}  // namespace einsumdb
