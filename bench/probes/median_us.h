// What the probes in this directory share: the median time of a call, in microseconds, over `n`
// calls after `warmup` untimed ones.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

template <class F>
double median_us(F f, int n, int warmup = 20) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> t;
  for (int i = 0; i < warmup; ++i) f();
  for (int i = 0; i < n; ++i) {
    auto a = Clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}
