// The machine's roofline, measured: peak FLOP/s of one core from an OpenBLAS GEMM on one
// thread (best of six), and memory bandwidth from the better of a STREAM triad and a read-only
// stream over arrays far larger than the caches. A workload's attainable rate on t threads is
// Store::Roofline::attainable_gflops: min(t × peak, FLOPs / footprint × bandwidth).
#pragma once

#include <optional>
#include <string>

#include "einsumdb/canon/model.hpp"
#include "einsumdb/db/store.hpp"

namespace einsumdb {

// Measures the roofline for a dtype (f32, f64, c64, c128; a complex one at its real type's GEMM
// peak, in real FLOPs); takes about a second.
Store::Roofline measure_roofline(Dtype dtype);

// The stored roofline of this machine for the dtype, measured and stored first if absent.
Store::Roofline machine_roofline(Store& store, const Machine& machine, Dtype dtype);

}  // namespace einsumdb
