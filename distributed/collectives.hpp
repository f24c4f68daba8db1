// Communication of an MPI job that never waits without a deadline, and the job's agreement on
// whether every rank can go on.
//
// A rank of a job across hosts can fail on its own: an input missing on its disk, a plan file its
// host lacks, a link that drops. Two rules keep such a failure from hanging the job or passing
// unnoticed. Every wait polls non-blocking operations against a deadline (Waiter), so a rank
// that stops answering ends the job with a TimeoutError. And every phase that can be refused on
// one rank alone (reading the graph, the plan, the inputs) ends in agree(): each rank says
// whether it can go on, rank 0 hears every rank (or notes which did not answer in time) and
// tells every rank the verdict, so all ranks leave together, with every refusal named by rank
// and host.
//
// Not thread-safe: one thread of each rank calls these, as MPI_THREAD_FUNNELED allows.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <mpi.h>

#include "einsumdb/core/error.hpp"
#include "einsumdb/distributed/error.hpp"

namespace einsumdb {

// A wait that exceeded its deadline (another rank failed, stopped, or lost its link).
struct TimeoutError : MpiError {
  using MpiError::MpiError;
};

// The name of the host this rank runs on (MPI_Get_processor_name).
std::string host_name();

// Waits for MPI requests, polling until they complete or `timeout_s` passes. A rank polls without
// pause when it has a core of its own; with `share_cores` it sleeps between polls, so that the
// core goes to a rank that computes (polling is what moves messages along, so it never blocks).
class Waiter {
 public:
  Waiter(MPI_Comm comm, double timeout_s, bool share_cores = false);
  // Completes every request or throws TimeoutError naming `what`.
  // `requests` is empty afterwards.
  void wait(std::vector<MPI_Request>& requests, const std::string& what) const;
  // Receives one message of `tag` from `source` (MPI_ANY_SOURCE allowed) as text; throws
  // TimeoutError when none arrives in time. `from` receives the sender's rank.
  std::string receive_text(int source, int tag, const std::string& what, int* from = nullptr) const;
  double timeout_s() const { return timeout_s_; }
  MPI_Comm comm() const { return comm_; }

 private:
  using Clock = std::chrono::steady_clock;
  // One round of polling: sleeps or yields as `spin` grows.
  void pause(int spin) const;
  [[noreturn]] void timed_out(const std::string& what) const;

  MPI_Comm comm_;
  double timeout_s_;
  bool share_cores_;
};

// Why one rank cannot go on.
struct Refusal {
  int rank = 0;
  std::string host;
  int code = 1;  // the exit code it asks for: 2 for bad input or usage, 1 for a runtime failure
  std::string message;
};

// Thrown by agree() on every rank that heard the verdict when some rank refused. what() names
// every refusal: "rank 1 of 2 on host-b: no input file ...".
class JobRefused : public MpiError {
 public:
  JobRefused(std::vector<Refusal> refusals, int procs, bool everyone_knows);
  const std::vector<Refusal>& refusals() const { return refusals_; }
  // 2 when a refusal was about bad input or usage, else 1.
  int code() const;
  // Every rank received the verdict, so each may leave normally (MPI_Finalize); when false, some
  // rank never answered and the job must be aborted.
  bool everyone_knows() const { return everyone_knows_; }

 private:
  std::vector<Refusal> refusals_;
  bool everyone_knows_;
};

// Collective: every rank of `comm` passes nullopt when it can go on, or why it cannot. Returns on
// every rank when all can; otherwise throws JobRefused on every rank that hears the verdict. A
// rank that does not answer within the waiter's time-out is a refusal of its own; a rank that
// does not hear rank 0's verdict in time throws TimeoutError.
void agree(const Waiter& waiter, const std::optional<Refusal>& mine);

// The refusal of this rank for an exception caught on it: code 2 for a SpecError, else 1.
Refusal refusal_of(MPI_Comm comm, const std::exception& e);

// Rank 0's `text` on every rank (each rank passes its own; only rank 0's is sent).
std::string broadcast_text(const Waiter& waiter, const std::string& text, const std::string& what);

// Every rank's `text` on rank 0, in rank order; the other ranks get an empty vector.
std::vector<std::string> gather_text(const Waiter& waiter, const std::string& text,
                                     const std::string& what);

// Message tags this module uses on `comm`; other code keeps below first_reserved_tag().
int first_reserved_tag(MPI_Comm comm);

}  // namespace einsumdb
