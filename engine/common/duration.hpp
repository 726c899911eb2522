// Human-readable durations as written in config files and on the command
// line: "250ms", "10s", "5m", "1h", "1d", and sums of them ("1h30m").
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "ratchet/status.hpp"

namespace ratchet::common {

using std::chrono::milliseconds;

// Parses a duration. Units: us, ms, s, m, h, d. A bare number is refused,
// because "10" could mean seconds or milliseconds and guessing wrong is costly.
// Fractions are allowed ("1.5s"); the result is rounded to microseconds.
// At most kLongestDuration (100 years), so it always fits a clock Duration
// and can be added to any time of this century.
[[nodiscard]] Result<std::chrono::microseconds> parse_duration(std::string_view text);

inline constexpr std::chrono::microseconds kLongestDuration = std::chrono::hours(24 * 36500);

// The length of a well-formed duration in microseconds, however long, so a
// caller with a tighter bound can name its own; refused as parse_duration
// refuses malformed text.
[[nodiscard]] Result<long double> duration_micros(std::string_view text);

// The shortest exact spelling of a duration in those units, e.g. "1h30m",
// "250ms", "0s".
std::string format_duration(std::chrono::microseconds d);

}  // namespace ratchet::common
