// The store's error: a database that cannot be opened, read or written.
#pragma once

#include "einsumdb/core/error.hpp"

namespace einsumdb {

class DatabaseError : public Error {
 public:
  using Error::Error;
};

}  // namespace einsumdb
