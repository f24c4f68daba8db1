// Stopping a run that has already taken too long. The tuner gives a candidate's run a deadline
// (a Deadline object alive for the run); the executor's long loops call check_deadline() between
// pieces of work (a GEMM call, a block of a packed GEMM, a slice of a loop nest), which throws
// DeadlineExceeded once the deadline has passed. The threads a run starts (kernels::parallel_for)
// inherit the deadline of the thread that starts them.
//
// A check costs a thread-local load and, under a deadline, a relaxed atomic load: one watch
// thread per process sets the flag when the time comes, so that loops of short calls never read
// the clock. A run without a Deadline is never stopped. What is stopped is the run: its partial
// result is discarded, its scratch returned (the strategies hold memory in RAII objects).
#pragma once

#include <atomic>
#include <chrono>

#include "einsumdb/core/error.hpp"

namespace einsumdb {

class DeadlineExceeded : public Error {
 public:
  using Error::Error;
};

// The calling thread's runs stop at `seconds` from now, while this object lives. Nested, the
// inner one applies until it ends, then the outer again. Not copyable; one thread's.
class Deadline {
 public:
  explicit Deadline(double seconds);
  ~Deadline();
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;

  // Whether the deadline passed (and so whether a run that returned DeadlineExceeded ran into
  // this one).
  bool passed() const { return passed_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> passed_{false};
  const std::atomic<bool>* outer_;
  std::chrono::steady_clock::time_point at_;
};

namespace detail {
// The calling thread's deadline flag (null: none), and the scope that sets it in a thread a run
// starts (kernels::parallel_for).
const std::atomic<bool>* deadline_flag();
class InheritDeadline {
 public:
  explicit InheritDeadline(const std::atomic<bool>* flag);
  ~InheritDeadline();
  InheritDeadline(const InheritDeadline&) = delete;
  InheritDeadline& operator=(const InheritDeadline&) = delete;

 private:
  const std::atomic<bool>* outer_;
};
[[noreturn]] void deadline_exceeded();
}  // namespace detail

// Throws DeadlineExceeded when the calling thread's deadline has passed.
inline void check_deadline() {
  if (const auto* flag = detail::deadline_flag(); flag && flag->load(std::memory_order_relaxed))
    detail::deadline_exceeded();
}

}  // namespace einsumdb
