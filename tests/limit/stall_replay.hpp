// Test helper: replays a backlog in which some steps come back late for
// their slots (their process stalled), as parked steps come back, and
// reports how late each step started against its slot. Used to check that a
// late start does not delay every slot granted after it.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "config/spec.hpp"
#include "limit/limiter_stack.hpp"
#include "limit/make_limiter.hpp"
#include "limit/micros.hpp"

namespace ratchet::limit::testing {

// `slots` slots granted at `t0` for the limit `spec` (database scope through
// `connect`); the steps of `stalled` of them from `first` on come back `late`
// after their slot's time, the others on time. A step turned back waits in
// place for the time it was given. Returns each step's start minus its slot.
inline std::vector<std::int64_t> delays_after_a_stall(const config::LimitSpec& spec, const std::string& key,
                                                      const ConnectionFactory& connect, int slots, int first,
                                                      int stalled, std::int64_t late,
                                                      std::int64_t t0 = 1'700'000'000'000'000) {
  auto limiter = make_limiter(spec, key, connect);
  EXPECT_TRUE(limiter.has_value()) << (limiter ? "" : limiter.error().to_string());
  if (!limiter) return {};
  LimiterStack stack({*limiter});
  std::vector<Reservation> held;
  std::vector<std::int64_t> slot_at;
  for (int i = 0; i < slots; ++i) {
    auto r = stack.reserve(from_micros(t0));
    EXPECT_TRUE(r.has_value());
    if (!r) return {};
    slot_at.push_back(to_micros(r->at()));
    held.push_back(std::move(*r));
  }
  std::multimap<std::int64_t, int> comes;  // when each step comes back
  for (int i = 0; i < slots; ++i)
    comes.emplace(slot_at[static_cast<std::size_t>(i)] + (i >= first && i < first + stalled ? late : 0), i);
  std::vector<std::int64_t> delay(static_cast<std::size_t>(slots), 0);
  while (!comes.empty()) {
    auto [at, i] = *comes.begin();
    comes.erase(comes.begin());
    auto& r = held[static_cast<std::size_t>(i)];
    auto go = stack.start(r, from_micros(at));
    EXPECT_TRUE(go.has_value());
    if (!go) return {};
    if (*go) {
      delay[static_cast<std::size_t>(i)] = at - slot_at[static_cast<std::size_t>(i)];
    } else {
      comes.emplace(std::max(at + 1, to_micros(r.at())), i);
    }
  }
  return delay;
}

}  // namespace ratchet::limit::testing
