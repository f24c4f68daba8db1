// The planner and the performance database: pairwise steps and partitionings are looked up and
// recorded under the canonical key of the einsum they compute, so what was measured for one
// spelling serves every isomorphic one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "einsumdb/canon/canonicalize.hpp"
#include "einsumdb/db/machine.hpp"
#include "einsumdb/db/store.hpp"
#include "einsumdb/planner/eindecomp.hpp"

namespace einsumdb {

// A step as a one-row batched einsum whose operands are the tensors it reads.
BatchedEinsum step_einsum(const PlanStep& s);

// d renamed into the canonical index names of c ({"a": 2, "b": 1, ...}).
Store::PartitionVector canonical_vector(const Canonical& c, const PartitionVector& d);

// Measured partitionings on one machine at one P, as the objective of a (step, vector) in
// floats moved: the median measured time of the vector converted at the machine's memory
// bandwidth (set_bandwidth; until it is set, the rate the measurements achieved, predicted bytes
// per measured second over every measured partitioning of this machine and P). A measured time
// holds the step's computation as well as its movement of data, and the cost model counts only the
// latter, so a vector never run on a step that has measured ones is estimated from them: the best
// measured vector's time plus what the model says this one moves more, never less than that
// time — a vector the model prefers must be run before it displaces one known to be fast. nullopt
// when the step has no measured vector.
class MeasuredPartitionings {
 public:
  MeasuredPartitionings(Store& store, std::string machine, std::int64_t procs);
  std::optional<double> operator()(const PlanStep& s, const PartitionVector& d);
  std::size_t measured_entries() const { return entries_; }
  std::size_t hits() const { return hits_; }            // lookups of a measured vector
  std::size_t estimated() const { return estimated_; }  // lookups estimated from others
  double bytes_per_second() const { return bytes_per_second_; }
  void set_bandwidth(double bytes_per_second) { bytes_per_second_ = bytes_per_second; }

 private:
  Store& store_;
  std::string machine_;
  std::int64_t procs_;
  double bytes_per_second_ = 0;
  std::size_t entries_ = 0, hits_ = 0, estimated_ = 0;
  struct Known {
    Canonical canonical;
    std::vector<std::pair<PartitionVector, double>> measured;  // (vector in the step's names,
                                                               // median seconds), this machine
  };
  std::map<std::string, Known> known_;  // by step: read once, the DP asks per vector
};

// Measured pairwise steps for contraction trees: the median time of the best verified transform
// of a step's canonical form on `machine`, converted to FLOP-equivalents at the median of the
// best FLOP rates of every workload measured on that machine (so a step that runs faster than
// is typical there costs less than its FLOP count, and a slower one more).
class MeasuredSteps {
 public:
  MeasuredSteps(Store& store, std::string machine, Dtype dtype, JoinOp join, AggOp agg,
                std::map<char, std::int64_t> lengths);
  std::optional<double> operator()(const std::string& a, const std::string& b,
                                   const std::string& result);
  std::size_t hits() const { return hits_; }

 private:
  Store& store_;
  std::string machine_;
  Dtype dtype_;
  JoinOp join_;
  AggOp agg_;
  std::map<char, std::int64_t> lengths_;
  double flops_per_second_ = 0;  // 0: nothing measured on this machine
  std::size_t hits_ = 0;
};

// What the distributed executor measured for one step.
struct MeasuredStep {
  double seconds = 0;     // the slowest rank's time (median over the runs)
  double bytes = 0;       // bytes sent between ranks, all ranks
  nlohmann::json detail;  // per rank: seconds, sent, received; the kernel's transform
};

// One partitioning row per step: its canonical key, P, its vector in canonical names, and the
// predicted bytes moved (floats × the step's dtype size); with `measured` (one per step), also
// the measured seconds and bytes, and the detail under "measured". Returns the rows written.
std::size_t record_plan(Store& store, const Plan& plan, const Machine& machine, const RunInfo& run,
                        const std::vector<MeasuredStep>* measured = nullptr);

}  // namespace einsumdb
