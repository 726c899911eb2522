// Conversions between ratchet::TimePoint and the whole microseconds since the
// Unix epoch in which limiters keep their state (in memory and in the database).
//
// A time is rounded up to the next microsecond so a limiter never grants a
// start earlier than the caller asked for.
#pragma once

#include <chrono>
#include <cstdint>

#include "ratchet/clock.hpp"

namespace ratchet::limit {

inline std::int64_t to_micros(TimePoint t) {
  return std::chrono::ceil<std::chrono::microseconds>(t.time_since_epoch()).count();
}

inline std::int64_t to_micros(Duration d) { return std::chrono::ceil<std::chrono::microseconds>(d).count(); }

inline TimePoint from_micros(std::int64_t us) {
  return TimePoint(std::chrono::duration_cast<Duration>(std::chrono::microseconds(us)));
}

// Floor division that rounds towards minus infinity (window indices of times
// before the epoch stay correct).
inline std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace ratchet::limit
