// Moving facts between two stores (a SQLite file and a server, two servers, two files):
// machines, rooflines, measurements with their workloads and runs, and partitionings.
//
// Idempotent and resumable: measurements are copied in batches, each one transaction in the
// destination, and a measurement already there (the same content, however it arrived) is
// skipped; so a sync that was interrupted keeps the batches it committed, and running it again
// moves only what is missing.
#pragma once

#include <cstddef>
#include <functional>

#include <nlohmann/json.hpp>

#include "einsumdb/db/store.hpp"

namespace einsumdb {

struct SyncOptions {
  std::size_t batch = 5000;  // measurements per destination transaction
  ListFilter filter;         // which measurements (machine prefix, strategy, since)
};

struct SyncResult {
  std::size_t machines = 0;      // new in the destination
  std::size_t rooflines = 0;     // written (absent there, or measured later here)
  std::size_t networks = 0;      // a machine's latest network, when measured later here
  std::size_t measurements = 0;  // read from the source
  std::size_t inserted = 0, duplicates = 0, runs = 0;
  std::size_t partitionings = 0, partitionings_present = 0;
  std::size_t batches = 0;
};
nlohmann::ordered_json to_json(const SyncResult& r);

// Copies `from` into `to`. `progress(done, total)` is called after each batch of measurements.
// Throws SpecError when both are the same store, DatabaseError when either fails (the batches
// committed before stay; run it again to finish).
SyncResult sync_stores(Store& from, Store& to, const SyncOptions& options = {},
                       const std::function<void(std::size_t, std::size_t)>& progress = {});

}  // namespace einsumdb
