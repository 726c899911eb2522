// Test helper: holders of limiter slots that come back at the time they were
// last given, as a parked step does, until each has started.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "limit/limiter.hpp"

namespace ratchet::limit::testing {

// Plays the holders of `slots` in time order: each comes first at its slot's
// time (or at `late[i]` when that is later: a worker that was busy), asks
// ready_at and starts when it is ready then, else comes back at the time it
// was given. Returns the sorted starts in `starts` and how often each holder
// was sent away.
inline std::vector<int> come_back_until_started(Limiter& l, std::vector<Slot>& slots,
                                                std::vector<std::int64_t>* starts,
                                                const std::vector<std::int64_t>& late = {}) {
  std::vector<int> moves(slots.size(), 0);
  std::vector<std::pair<std::int64_t, std::size_t>> due;  // (time, holder), a min-heap
  for (std::size_t i = 0; i < slots.size(); ++i)
    due.emplace_back(std::max(slots[i].at_us, i < late.size() ? late[i] : 0), i);
  auto later = [](const auto& a, const auto& b) { return a > b; };
  std::make_heap(due.begin(), due.end(), later);
  while (!due.empty()) {
    std::pop_heap(due.begin(), due.end(), later);
    auto [now, i] = due.back();
    due.pop_back();
    Slot& s = slots[i];
    const std::int64_t ready = l.ready_at(s, now).value_or(now);
    if (ready == now && l.start(s, now).value_or(UseResult::kMoved) == UseResult::kStarted) {
      starts->push_back(now);
      continue;
    }
    ++moves[i];
    due.emplace_back(std::max(ready, s.at_us), i);
    std::push_heap(due.begin(), due.end(), later);
  }
  std::sort(starts->begin(), starts->end());
  return moves;
}

}  // namespace ratchet::limit::testing
