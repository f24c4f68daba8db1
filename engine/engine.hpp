// The application developer's entry point: einsumdb::Engine runs an einsum on the caller's own
// memory with the best verified transform this machine's store knows for it (the nearest
// measured size when this one was never measured), or the default, and says which and why.
//
//   einsumdb::Engine engine;                    // $EINSUMDB_DB, else the XDG default store
//   engine.einsum("ik,kj->ij", {A, B}, C);      // A, B, C: TensorRef over the caller's arrays
//
// The first call for a spelling and shapes canonicalizes it and asks the store; the answer is
// kept as a Prepared execution, so a repeated call costs a cache lookup on top of the kernel
// (prepare() hands the Prepared to the caller, for no lookup at all). A store that does not
// exist yet means "nothing known": the default runs. The store is read when a workload is first
// prepared; facts recorded later are seen by workloads prepared after forget().
//
// Ownership: the engine owns its store connection and its cache; TensorRefs point into memory
// the caller owns and keeps alive for the duration of the call. Inputs that are row-major
// (C-contiguous) are read in place; other strides are copied into a row-major buffer first.
// Results are either returned as owned Tensors or copied into the caller's output buffers (any
// strides).
//
// Thread-safety: an Engine may be called from any number of threads at once (einsum, prepare,
// forget); a Prepared is immutable and may be run from several threads at once.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "einsumdb/canon/model.hpp"
#include "einsumdb/db/machine.hpp"
#include "einsumdb/engine/choose.hpp"
#include "einsumdb/executor/direct.hpp"
#include "einsumdb/executor/execute.hpp"
#include "einsumdb/executor/tensor.hpp"

namespace einsumdb {

// A view of the caller's array: element type, shape and strides (in elements; empty means
// row-major contiguous; negative strides are allowed). The engine never frees or keeps it.
struct TensorRef {
  Dtype dtype = Dtype::f64;
  void* data = nullptr;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;

  // Whether the elements are row-major and contiguous (so they are read in place).
  bool row_major() const;
};

struct EngineOptions {
  std::string db;                   // store path; empty: $EINSUMDB_DB, else the XDG default
  bool nearest = true;              // answer from the nearest measured size when never measured
  int threads = 0;                  // > 0: run every transform with this many threads
  std::size_t max_prepared = 4096;  // cached executions; the cache is emptied when full
};

// Axes of the caller's arrays that numpy's broadcasting drops (drop_broadcast_axes): per array,
// its original axes of length 1 that the einsum does not index.
using DroppedAxes = std::map<std::string, std::vector<std::size_t>>;

// One workload, its transform chosen: immutable, cheap to run again.
class Prepared {
 public:
  // `dropped`: the size-1 axes of the caller's arrays that `e` broadcasts and so no longer has;
  // run() takes arrays with them and drops them (a view, no copy).
  Prepared(BatchedEinsum e, Choice choice, DroppedAxes dropped = {});

  const BatchedEinsum& einsum() const { return einsum_; }
  const Choice& choice() const { return choice_; }

  // Runs on `inputs` (one per array name of the einsum, with the shapes the caller described)
  // and returns one result per batch row.
  // Throws SpecError naming the array and axis for a missing array, a shape or dtype that
  // differs from the einsum's, or a null pointer. `instead`, when given, is run in place of the
  // chosen transform (parameters in the einsum's names; SpecError when it does not apply).
  Results run(const std::map<std::string, TensorRef>& inputs,
              const Candidate* instead = nullptr) const;
  // The same, writing row r's result into outputs[r] (its shape must be the row's output
  // shape and its dtype the result dtype).
  void run(const std::map<std::string, TensorRef>& inputs, const std::vector<TensorRef>& outputs,
           const Candidate* instead = nullptr) const;

  // A numpy-style call's operands, in the einsum's operand order (a prepare(subscripts, ...)
  // execution): its result, or written into `out` (nullptr: returned).
  Tensor run_call(const std::vector<TensorRef>& operands) const;
  void run_call(const std::vector<TensorRef>& operands, const TensorRef& out) const;

  // Whether the transform is the direct loops (a small one-row workload), which run_direct runs
  // on the operands as they lie with nothing built per call.
  bool direct() const { return direct_.has_value(); }
  // The result's shape and dtype (row 0).
  const std::vector<std::int64_t>& shape() const { return shape_; }
  Dtype dtype() const { return dtype_; }
  // The direct loops on the operands in the einsum's operand order (with the shapes the caller
  // described, broadcast axes included), into `out` (shape() and dtype(); any strides). Requires
  // direct(); throws SpecError for an operand of another dtype or shape.
  void run_direct(const std::vector<TensorRef>& operands, const TensorRef& out) const;

 private:
  BatchedEinsum einsum_;
  Choice choice_;
  DroppedAxes dropped_;
  std::optional<DirectLoops> direct_;
  std::vector<std::int64_t> shape_;
  Dtype dtype_ = Dtype::f64;
  // Per operand: its axes as the caller gives them, and which of them broadcasting dropped.
  std::vector<std::vector<bool>> dropped_axes_;
  std::vector<std::vector<std::int64_t>> operand_shapes_;
};

class Engine {
 public:
  // Opens nothing yet: the store is opened read-only when first needed. Throws Error only when
  // no store path can be determined (no $HOME); a corrupt store is reported by the first call.
  explicit Engine(EngineOptions options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // The prepared execution of `e` (concrete or symbolic lengths), from the cache when `e` was
  // prepared before. Throws SpecError for an unsound einsum, DatabaseError for an unreadable
  // store.
  std::shared_ptr<const Prepared> prepare(const BatchedEinsum& e);
  // The same for a numpy-style call: "ik,kj->ij" over operands in order (one batch row; arrays
  // named T0, T1, ...; operands over the same memory with the same shape and strides are one
  // array), with numpy's "..." and broadcasting of size-1 axes, and axes of length 0. Only the
  // operands' dtypes, shapes and aliasing matter; data may be null (no aliasing then), which
  // describes shapes for a later Prepared::run.
  std::shared_ptr<const Prepared> prepare(std::string_view subscripts,
                                          const std::vector<TensorRef>& operands);

  // numpy.einsum on the caller's memory: the result as a new tensor, or written into `out`.
  Tensor einsum(std::string_view subscripts, const std::vector<TensorRef>& operands);
  void einsum(std::string_view subscripts, const std::vector<TensorRef>& operands,
              const TensorRef& out);
  // A batched einsum with named arrays: one result per row, returned or written to `outputs`.
  Results einsum(const BatchedEinsum& e, const std::map<std::string, TensorRef>& inputs);
  void einsum(const BatchedEinsum& e, const std::map<std::string, TensorRef>& inputs,
              const std::vector<TensorRef>& outputs);

  // Drops every prepared execution (after tuning: the next call asks the store again).
  void forget();
  std::size_t prepared_count() const;
  const std::string& store_path() const;
  const Machine& machine() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace einsumdb
