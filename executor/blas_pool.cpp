// Stopping OpenBLAS's idle worker threads before einsumdb's own start (execute.hpp,
// set_blas_calls_exclusive).
#include <dlfcn.h>

#include <atomic>

#include "einsumdb/executor/execute.hpp"
#include "einsumdb/executor/kernels.hpp"

namespace einsumdb {
namespace {

std::atomic<bool> exclusive{false};

// OpenBLAS's pool shutdown, blas_thread_shutdown_ (what its fork handler calls), looked up by name:
// a build of OpenBLAS without a pool of its own (OpenMP's) has none, and then there is nothing to
// stop.
using Shutdown = int (*)();
Shutdown find_shutdown() {
  static const Shutdown f =
      reinterpret_cast<Shutdown>(dlsym(RTLD_DEFAULT, "blas_thread_shutdown_"));
  return f;
}

}  // namespace

void set_blas_calls_exclusive(bool on) {
  exclusive.store(on, std::memory_order_relaxed);
}

void kernels::quiet_blas_pool() {
  if (!exclusive.load(std::memory_order_relaxed)) return;
  if (const Shutdown shutdown = find_shutdown()) shutdown();  // (returns at once when stopped)
}

}  // namespace einsumdb
