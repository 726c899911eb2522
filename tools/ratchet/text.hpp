// Reading and writing the times and durations the ratchet command accepts
// and prints: "10m", "7d", "1h30m"; "2026-11-30T08:00:00Z"; "@1764489600".
// Pure functions; safe from any thread.
#pragma once

#include <string>
#include <string_view>

#include "ratchet/clock.hpp"
#include "ratchet/status.hpp"

namespace ratchet::cli {

// "250ms", "10s", "5m", "1h", "7d" and sums ("1h30m"); units us ms s m h d.
// A bare number is refused: "10" could mean seconds or minutes.
Result<Duration> parse_duration(std::string_view text);

// "2026-11-30T08:00:00Z", "2026-11-30T09:00:00+01:00", "2026-11-30 08:00:00"
// (UTC), "2026-11-30" (midnight UTC) or "@<unix seconds>".
Result<TimePoint> parse_time(std::string_view text);

// "2026-11-30T08:00:00.123Z"
std::string format_time(TimePoint t);
// "0.052s", "3.4s", "2m05s", "1h02m", "3d04h"
std::string format_duration(Duration d);
// "in 2.1s", "3m ago", "now"
std::string format_relative(TimePoint t, TimePoint now);

}  // namespace ratchet::cli
