// The distributed executor: a plan run on the ranks of an MPI communicator as tensor relations
// (Sec. 4 of the tensor-relational paper: shuffle/broadcast, local join, local aggregation).
//
// Each step runs in three phases on every rank:
//   1. shuffle — the blocks each piece's join reads are sent to the piece's rank: every owner
//      of a block of the operand's relation sends the part of it the piece's region covers
//      (non-blocking point-to-point, MPI subarray types, so nothing is packed by hand). A block
//      read by several pieces goes to each of them (a broadcast); a producer's blocks cut
//      differently from the consumer's are re-partitioned by the same transfers.
//   2. local join — the piece's kernel: the step's einsum on its blocks, run by the executor with
//      the transform the caller chooses (the store's best for the block's canonical form);
//   3. local aggregation — the pieces of one result block reduce their partial results with ⊕
//      along a binomial tree onto the block's owner.
// With overlap every receive is posted at the start and each block is sent as soon as it exists,
// so transfers proceed while earlier kernels run; without it each step exchanges its data in a
// phase of its own. By default a run overlaps unless the node's ranks share cores: the receiving
// rank's CPU moves the data, and on a shared core that time is taken from a kernel (measured in
// bench/distributed.py: no overlap is then up to 5% faster, and never slower).
//
// Nothing waits without a deadline (collectives.hpp): a rank that stops answering ends the job
// with a TimeoutError instead of a hang. Before any data moves, every rank sets up what it can
// alone (its input blocks, rank 0 the kernels of every rank) and the ranks agree that each could;
// a rank that could not is named, with its host, on every rank. The kernels are chosen once, on
// rank 0 from its store, for every rank's blocks, so ranks never differ because their hosts'
// stores do. A rank polls without pause when every rank on its node has cores of its own, and
// sleeps between polls when they share cores (a polling rank slows the kernels it waits for).
// Blocks, received operands and partial results come from the executor's recycled mappings
// (executor/tensor.hpp), so a run after the first writes no memory it has not written before.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <mpi.h>

#include "einsumdb/core/error.hpp"
#include "einsumdb/distributed/collectives.hpp"
#include "einsumdb/distributed/graph_data.hpp"
#include "einsumdb/planner/eindecomp.hpp"
#include "einsumdb/planner/placement.hpp"

namespace einsumdb {

enum class Overlap {
  automatic,  // overlap unless the node's ranks share cores
  on,
  off,
};

struct DistributedOptions {
  int repeat = 1;
  double timeout_s = 300;  // on every wait
  Overlap overlap = Overlap::automatic;
  bool gather = false;         // gather the graph's outputs to rank 0
  bool gather_inputs = false;  // gather every input whole to rank 0 (to verify against)
  int threads = 1;             // per rank, for the kernels
  InputSource inputs;
  ChooseKernel choose;  // the transform of each step's kernel; called on rank 0 only
  bool trace = false;   // record a timeline of every rank (DistributedReport::trace)
};

struct RankStep {
  double seconds = 0;         // median over the repeats
  std::int64_t sent = 0;      // bytes this rank sent for the step (to other ranks), per run
  std::int64_t received = 0;  // bytes it received
};

struct StepReport {
  std::vector<RankStep> ranks;        // per rank
  double seconds = 0;                 // median over the repeats of the slowest rank's time
  std::int64_t sent = 0;              // bytes, all ranks, per run
  double predicted_bytes = 0;         // the cost model's join + aggregation + repartition, in bytes
  KernelChoice kernel;                // what rank 0 ran
  std::vector<KernelChoice> kernels;  // what each rank ran (a stored transform may be refused)
  // Whether every rank ran the same transform from the same source.
  bool kernels_agree() const;
};

struct DistributedReport {
  std::vector<StepReport> steps;          // on rank 0
  std::vector<double> seconds;            // per run: the slowest rank's time
  std::map<std::string, Tensor> outputs;  // rank 0, with gather
  std::map<std::string, Tensor> inputs;   // rank 0, with gather_inputs
  std::vector<std::string> generated;     // inputs generated from the seed
  double setup_seconds = 0;               // building or reading the input blocks
  // This node's ranks × threads exceed its cores, so waiting ranks sleep between polls.
  bool ranks_share_cores = false;
  bool overlap = true;  // the mode the run used (options.overlap resolved)
  // With options.trace, on rank 0: every rank's timeline as Chrome trace-event JSON
  // ({"traceEvents": [...]}, which Perfetto and chrome://tracing open): one track per rank, a
  // complete event ("ph": "X") per phase of each step and run (send, wait, kernel, reduce),
  // microseconds since the first run's start barrier on that rank.
  nlohmann::json trace;
};

// Runs `plan` on `comm` (its size must be plan.procs; the caller checks that first). Collective:
// every rank calls it. Throws JobRefused on every rank when some rank could not set up (an input
// missing or malformed on its host, say): then every rank knows and may leave normally. Throws
// TimeoutError when a wait exceeds the time-out, and any other Error on the rank where it arose;
// the caller should then abort the job.
DistributedReport run_distributed(const Plan& plan, const Placement& placement, MPI_Comm comm,
                                  const DistributedOptions& options);

}  // namespace einsumdb
