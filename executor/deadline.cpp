#include "einsumdb/executor/deadline.hpp"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

namespace einsumdb {
namespace {

using Clock = std::chrono::steady_clock;

thread_local const std::atomic<bool>* current = nullptr;

// The process's watch thread: sleeps until the earliest pending deadline and raises its flag.
// Made on first use and never destroyed (a detached thread blocked on the condition variable
// when the process exits), so that no static destructor waits for it.
class Watch {
 public:
  Watch() {
    std::thread([this] { loop(); }).detach();
  }

  void add(Clock::time_point at, std::atomic<bool>* flag) {
    {
      std::lock_guard lock(mutex_);
      pending_.emplace(at, flag);
    }
    wake_.notify_one();
  }
  // After this returns, the watch thread no longer touches `flag`.
  void remove(Clock::time_point at, std::atomic<bool>* flag) {
    std::lock_guard lock(mutex_);
    for (auto [it, end] = pending_.equal_range(at); it != end; ++it)
      if (it->second == flag) {
        pending_.erase(it);
        return;
      }
  }

 private:
  void loop() {
    std::unique_lock lock(mutex_);
    for (;;) {
      if (pending_.empty()) {
        wake_.wait(lock);
        continue;
      }
      const auto first = pending_.begin();
      // A copy: while this thread waits, the entry may be removed.
      const Clock::time_point at = first->first;
      if (Clock::now() >= at) {
        first->second->store(true, std::memory_order_relaxed);
        pending_.erase(first);
      } else {
        wake_.wait_until(lock, at);
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::multimap<Clock::time_point, std::atomic<bool>*> pending_;
};

Watch& watch() {
  static Watch& w = *new Watch;
  return w;
}

}  // namespace

Deadline::Deadline(double seconds)
    : outer_(current),
      at_(Clock::now() + std::chrono::duration_cast<Clock::duration>(
                             std::chrono::duration<double>(std::max(0.0, seconds)))) {
  watch().add(at_, &passed_);
  current = &passed_;
}

Deadline::~Deadline() {
  watch().remove(at_, &passed_);
  current = outer_;
}

namespace detail {

const std::atomic<bool>* deadline_flag() {
  return current;
}

InheritDeadline::InheritDeadline(const std::atomic<bool>* flag) : outer_(current) {
  current = flag;
}

InheritDeadline::~InheritDeadline() {
  current = outer_;
}

void deadline_exceeded() {
  throw DeadlineExceeded("the run passed its deadline");
}

}  // namespace detail
}  // namespace einsumdb
