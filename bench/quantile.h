// The q-quantile (nearest rank) of timings, shared by the C++ benchmarks.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace baton::bench {

inline double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

}  // namespace baton::bench
