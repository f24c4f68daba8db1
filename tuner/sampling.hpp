// Timing repeated calls: the one loop that `einsumdb run` and the tuner's measuring protocol both
// take their samples with.
#pragma once

#include <chrono>
#include <cstddef>
#include <vector>

namespace einsumdb {

struct SamplingRule {
  int min_samples = 1;     // at least this many samples,
  double min_seconds = 0;  // and more until they add up to this many seconds
  int group = 1;           // calls per sample: a sample is their mean (a short call timed in bulk)
  std::size_t max_samples = 100000;
};

// Calls `once()` in samples of rule.group calls, appending each sample's time per call to
// `seconds`, until `seconds` holds rule.min_samples samples and those taken here add up to
// rule.min_seconds (or rule.max_samples are held), or until `stop()`, asked after each sample, is
// true. Exceptions from `once` propagate; the samples taken before stay in `seconds`.
template <typename Once, typename Stop>
void sample_calls(std::vector<double>& seconds, const SamplingRule& rule, Once&& once,
                  Stop&& stop) {
  using Clock = std::chrono::steady_clock;
  double taken = 0;
  while ((static_cast<int>(seconds.size()) < rule.min_samples || taken < rule.min_seconds) &&
         seconds.size() < rule.max_samples) {
    const auto t0 = Clock::now();
    for (int g = 0; g < rule.group; ++g) once();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    seconds.push_back(s / rule.group);
    taken += s;
    if (stop()) break;
  }
}

}  // namespace einsumdb
