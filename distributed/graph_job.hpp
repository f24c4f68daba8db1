// One distributed graph job from start to finish, beside the runtime itself (mpi_executor.hpp):
// MPI's lifetime, checking the distributed result against the graph run in one process, and
// recording each step's measured time and bytes beside the plan's prediction in the store (where
// `einsumdb plan --cost measured` finds them). The CLI's `mpirun einsumdb run GRAPH` only parses
// arguments and prints around these.
#pragma once

#include <map>
#include <string>

#include "einsumdb/db/store.hpp"
#include "einsumdb/distributed/graph_data.hpp"
#include "einsumdb/distributed/mpi_executor.hpp"

namespace einsumdb {

// MPI for the lifetime of one object (MPI_Init_thread with MPI_THREAD_FUNNELED; MPI_Finalize).
// One per process, on the main thread; move-only is not needed, so neither copy nor move.
class MpiSession {
 public:
  MpiSession();
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  int rank_ = 0, size_ = 1;
};

// The terms summed into the graph's elements, over all nodes (the verification tolerance).
double graph_reduction_terms(const EinGraph& g);

struct GraphVerification {
  double max_rel_err = 0;
  double tolerance = 0;
  bool ok = true;
  std::map<std::string, double> per_output;  // each graph output's relative error
};

// The gathered outputs of `report` against the graph run in this process with the same kernels,
// on the inputs the report gathered (DistributedOptions::gather_inputs), else on `options.inputs`.
GraphVerification verify_against_one_process(const EinGraph& graph, const DistributedReport& report,
                                             const DistributedOptions& options);

// Records every step of `plan` with what `report` measured (slowest rank's time, bytes sent, the
// kernel and per-rank detail) in `store` under one run; returns the rows written.
std::size_t record_measured_run(Store& store, const Plan& plan, const DistributedReport& report,
                                bool overlap, const Machine& machine, const RunInfo& run);

}  // namespace einsumdb
