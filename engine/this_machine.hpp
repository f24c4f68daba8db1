// This machine as the store files facts under it: CPU model, cores, vector ISA flags and the
// BLAS library einsumdb is linked with (OpenBLAS's own configuration string), plus provenance
// (compiler, OS, einsumdb version, OPENBLAS_NUM_THREADS, the executor's kernels) that does not
// affect matching, except kernels narrower than the processor's (EINSUMDB_ISA, isa.hpp), which
// join the ISA flags.
#pragma once

#include "einsumdb/db/machine.hpp"

namespace einsumdb {

// Detected once per process; thread-safe.
const Machine& this_machine();

}  // namespace einsumdb
