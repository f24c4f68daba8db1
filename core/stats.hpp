// Statistics of timing samples, the one definition everywhere (tuner, run, store, benches).
#pragma once

#include <vector>

namespace einsumdb {

// The median of `v` (the mean of the two middle values for an even count); 0 when empty.
double median(std::vector<double> v);

}  // namespace einsumdb
