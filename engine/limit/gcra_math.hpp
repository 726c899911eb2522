// The generic cell rate algorithm (GCRA), the exact form of a token bucket of
// rate `rate` per `per` and size `burst`, as pure arithmetic on the
// theoretical arrival time (TAT). Shared by the in-memory and database-scope limiters.
//
// The emission interval is per / rate rounded UP to a microsecond, so rounding
// can only make the limiter slower than declared, never faster.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "limit/limiter.hpp"

namespace ratchet::limit {

struct Gcra {
  std::int64_t interval_us;   // per / rate, rounded up
  std::int64_t tolerance_us;  // (burst - 1) * interval: how far ahead of the TAT a start may be

  // The longest tolerance kept: a bucket that takes a century to drain is as
  // good as a bottomless one, and the TAT arithmetic stays far from overflow.
  static constexpr std::int64_t kMaxTolerance = 36'500LL * 86'400'000'000;

  // rate >= 1 and per_us >= 1. Any int64 rate, per and burst give a valid Gcra:
  // the interval is rounded up without adding (per_us + rate overflows near
  // INT64_MAX) and the tolerance saturates at kMaxTolerance.
  static Gcra make(std::int64_t rate, std::int64_t per_us, std::int64_t burst) {
    const std::int64_t interval = std::max<std::int64_t>(1, per_us / rate + (per_us % rate != 0 ? 1 : 0));
    const std::int64_t extra = std::max<std::int64_t>(burst, 1) - 1;
    const std::int64_t tolerance = extra > kMaxTolerance / interval ? kMaxTolerance : extra * interval;
    return {interval, std::min(tolerance, kMaxTolerance)};
  }

  // A TAT that allows a full burst at any time after the epoch.
  static constexpr std::int64_t kIdle = std::numeric_limits<std::int64_t>::min() / 4;

  // A call of `units` (>= 1) advances the TAT by that many intervals and
  // fits while the TAT it leaves stays within the tolerance of its start.
  // The wait is checked for at most the bucket's size, so a call costing
  // more than the bucket holds still gets a time (an overdraft).
  std::int64_t charge(std::int64_t units) const { return sat_mul(units, interval_us); }
  std::int64_t ahead(std::int64_t units) const {
    const std::int64_t size = tolerance_us / interval_us + 1;
    return charge(std::min(units, size) - 1);
  }

  std::int64_t earliest(std::int64_t tat, std::int64_t t, std::int64_t units = 1) const {
    return std::max(t, tat + ahead(units) - tolerance_us);
  }

  // Grants the earliest slot at or after t and advances tat.
  Slot grant(std::int64_t& tat, std::int64_t t, std::int64_t units = 1) const {
    Slot s;
    s.units = units;
    s.at_us = earliest(tat, t, units);
    s.tat_before_us = tat;
    s.tat_after_us = std::max(tat, s.at_us) + charge(units);
    tat = s.tat_after_us;
    return s;
  }

  // Uses `slot` at now >= slot.at_us. On time, or late while it is still the
  // latest slot granted (its bucket charge can be recomputed), it starts; late
  // behind later slots it cannot move back without breaking them, so it keeps
  // its charge (a lost token, never an excess call) and a new slot is granted.
  UseResult use(std::int64_t& tat, Slot& slot, std::int64_t now) const {
    if (now == slot.at_us) return UseResult::kStarted;
    if (tat == slot.tat_after_us) {
      tat = std::max(slot.tat_before_us, now) + charge(slot.units);
      slot.at_us = now;
      slot.tat_after_us = tat;
      return UseResult::kStarted;
    }
    slot = grant(tat, now, slot.units);
    return slot.at_us == now ? UseResult::kStarted : UseResult::kMoved;
  }

  // Corrects the TAT `tat` that a started call's charge ended at (`after`,
  // begun at `before`, for a start at `at_us`) from `from` units to `to`.
  // More: exact or later (the difference added to the TAT now is never less
  // than recomputing the chain). Fewer: exact while the call is the latest
  // charge; otherwise kept.
  void correct(std::int64_t& tat, std::int64_t before, std::int64_t after, std::int64_t at_us,
               std::int64_t from, std::int64_t to) const {
    if (to > from) {
      tat = sat_add(tat, charge(to - from));
    } else if (to < from && tat == after) {
      tat = std::max(before, at_us) + charge(to);
    }
  }

  static std::int64_t sat_mul(std::int64_t a, std::int64_t b) {
    if (a <= 0 || b <= 0) return 0;
    return a > kMaxTolerance / b ? kMaxTolerance : a * b;
  }
  static std::int64_t sat_add(std::int64_t a, std::int64_t b) {
    return a > std::numeric_limits<std::int64_t>::max() / 2 ? a : a + b;
  }

  // Gives a slot back when it is the latest granted; otherwise keeps its charge.
  void give_back(std::int64_t& tat, const Slot& slot) const {
    if (tat == slot.tat_after_us) tat = slot.tat_before_us;
  }
};

}  // namespace ratchet::limit
