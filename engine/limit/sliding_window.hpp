// In-memory (process scope) exact sliding-window limiter: at most `rate` call
// starts in any interval of length `per`. The default algorithm when a limit
// declares no burst (docs/semantics.md, rule 7).
//
// State: a sorted log of the slots granted, and one of the starts newer
// than now - per (and a little older: kLateReadingUs).
//
// Slots may be granted in a longer window than the starts are checked in
// (grant_per_us): the slack between them lets a call that starts late, after
// its slot, go without pushing back the holder of the slot one window on
// (who would start late in turn, the delay growing while a backlog lasts).
// Thread-safety: all members are safe to call concurrently (one mutex).
#pragma once

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <vector>

#include "limit/limiter.hpp"
#include "limit/small_mutex.hpp"
#include "limit/sorted_log.hpp"

namespace ratchet::limit {

class SlidingWindowLimiter final : public Limiter {
 public:
  // rate >= 1, per_us >= 1 (the config loader has checked them). Slots are
  // granted in windows of grant_per_us (0: per_us; at least per_us).
  SlidingWindowLimiter(std::int64_t rate, std::int64_t per_us, std::int64_t grant_per_us = 0);

  [[nodiscard]] Result<std::int64_t> ready_at(Slot& slot, std::int64_t now_us) override;
  [[nodiscard]] Result<UseResult> start(Slot& slot, std::int64_t now_us) override;
  [[nodiscard]] Result<UseResult> restart(Slot& slot, std::int64_t now_us) override;
  [[nodiscard]] Status defer(Slot& slot, std::int64_t now_us, std::int64_t to_us) override;
  [[nodiscard]] Status cancel(const Slot& slot) override;
  [[nodiscard]] Status adjust(Slot& slot, std::int64_t units, std::int64_t now_us) override;
  void count_started(std::span<const Start> starts) override;
  bool forgettable(std::int64_t now_us) override;
  std::string describe() const override;

 protected:
  [[nodiscard]] Result<std::int64_t> earliest_units(std::int64_t now_us, std::int64_t t_us,
                                                    std::int64_t units) override;
  [[nodiscard]] Result<Slot> reserve_units(std::int64_t now_us, std::int64_t t_us,
                                           std::int64_t units) override;

 private:
  // The units a call is checked for: at most the whole budget (limiter.hpp).
  std::int64_t fit(std::int64_t units) const { return std::min(units, rate_); }
  std::int64_t advance(std::int64_t now_us);  // raises the high-water mark and prunes; needs mu_
  // A start is checked at its caller's own clock reading while that is at
  // most this much older than the latest reading seen (the high-water
  // mark): a thread that read the clock just before another and took the
  // lock just after it is not told to wait for the other's reading. The
  // starts are kept that much longer than a window for it.
  static constexpr std::int64_t kLateReadingUs = 100'000;
  std::int64_t started_floor() const { return high_water_ - per_ - kLateReadingUs; }
  UseResult start_locked(Slot& slot, std::int64_t now_us);

  const std::int64_t rate_;
  const std::int64_t per_;        // starts are checked in windows this long
  const std::int64_t grant_per_;  // slots are granted in windows this long
  SmallMutex mu_;                 // one a key, of up to a hundred thousand
  std::int64_t high_water_ = 0;
  SortedLog log_;      // every slot granted, started or not: when to come
  SortedLog started_;  // the calls started: who may go
};

}  // namespace ratchet::limit
