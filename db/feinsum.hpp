// Feinsum's fact database, imported as verified measurements.
//
// Feinsum (github.com/kaushikcfd/feinsum) keeps one table, FEINSUM_TIMING_FACTS: per row an
// einsum in its canonical spelling ("lk,ilj,lkj -> ki"), the lengths of its concrete indices (an
// index absent there has a symbolic length, named by the upper-case index: K), the batch rows of
// array names, their dtypes, the device and its driver, a transform family (a file such as
// "cogent.py") with JSON parameters, the mean run time, the op count at the length it was timed
// (giga_op_info) and a timestamp in America/Chicago. Feinsum checked every fact against numpy
// (rtol = atol = 1e-10 in f64) before timing it.
//
// Each row becomes one verified measurement:
//   workload   the batched einsum (symbols exactly where lengths are absent; one symbol per
//              absent index, so symbols are shared only where the data shares an index);
//   machine    the device, with the driver as its software stack: cpu_model = device, cores = 1
//              (one device), isa = "", blas = the driver ("NVIDIA Corporation-550.163.01"). One
//              device under several drivers is several machines; "model=DEVICE" selects them all;
//   transform  the family and its parameters verbatim. Parameters that are positions in
//              Feinsum's axis order (lists per axis, permutation and index numbers) are not
//              renamed; the origin keeps the subscripts they refer to and says so;
//   time       seconds = [runtime], max_rel_err = 1e-10 (the tolerance it passed), flops = the
//              op count (so the rate is known for symbolic workloads, whose binding Feinsum does
//              not record), recorded_at = the timestamp in UTC.
// Importing is idempotent: a row already imported adds nothing (and no run).
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "einsumdb/canon/model.hpp"
#include "einsumdb/db/machine.hpp"
#include "einsumdb/db/store.hpp"

namespace einsumdb {

// The batched einsum of a Feinsum row. Throws SpecError naming the field that is wrong.
BatchedEinsum feinsum_einsum(const std::string& subscripts, const nlohmann::json& index_to_length,
                             const nlohmann::json& args, const nlohmann::json& arg_to_dtype);

// The machine of a Feinsum row's device and driver (compiler_version).
Machine feinsum_machine(const std::string& device, const std::string& driver);

// "2023_02_06_115445" in America/Chicago -> "2023-02-06T17:54:45.000000Z". Throws SpecError.
std::string feinsum_time_utc(const std::string& timestamp);

struct FeinsumImport {
  std::size_t rows = 0, workloads = 0, machines = 0;
  std::size_t inserted = 0, duplicates = 0, runs = 0;
};

// Reads FEINSUM_TIMING_FACTS of the SQLite file at `path` (opened read-only, never changed) and
// records every row in `store`, one run per machine (device and driver), each atomically. Every
// row is read and checked before anything is written: a bad row (named by its ID) imports
// nothing. `progress` (rows read, rows in all) is called while reading.
FeinsumImport import_feinsum(Store& store, const std::string& path,
                             const std::function<void(std::size_t, std::size_t)>& progress = {});

}  // namespace einsumdb
