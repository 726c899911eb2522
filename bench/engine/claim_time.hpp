// The median time of claiming (and releasing) a batch of jobs through a
// store, for the memory-and-claim-time runs with many jobs queued.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "store/store.hpp"

namespace ratchet::bench {

struct ClaimTimes {
  double median_ms = 0;
  double max_ms = 0;
  int over_10x = 0;  // claims that took more than ten times the median
};

inline ClaimTimes claim_ms(store::Store& s, int batch, int rounds) {
  std::vector<double> times;
  for (int r = 0; r < rounds; ++r) {
    auto now = store::to_micros(std::chrono::system_clock::now());
    auto start = std::chrono::steady_clock::now();
    auto c = s.write([&](store::JobStore& js) {
      return js.claim({"bench", now, now + 30'000'000, batch, {"noop"}, {}, 3});
    });
    times.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    if (!c || c->jobs.size() != static_cast<std::size_t>(batch)) {
      std::fprintf(stderr, "bench: claim returned %zu jobs\n", c ? c->jobs.size() : 0);
      std::exit(1);
    }
    auto rel = s.write([&](store::JobStore& js) {
      for (const auto& j : c->jobs) js.release(j.id, store::Fence{"bench", j.token}, "bench", now);
    });
    if (!rel) std::exit(1);
  }
  std::sort(times.begin(), times.end());
  ClaimTimes t{times[times.size() / 2], times.back(), 0};
  for (double ms : times) t.over_10x += ms > 10 * t.median_ms ? 1 : 0;
  return t;
}

}  // namespace ratchet::bench
