// Parses the HTTP-date of Retry-After and Date (RFC 9110 section 5.6.7): the
// preferred IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT" and the two obsolete
// forms a server may still send, RFC 850 "Sunday, 06-Nov-94 08:49:37 GMT" and
// asctime "Sun Nov  6 08:49:37 1994". Anything else, including out-of-range
// fields, is refused (nullopt); it never throws.
//
// parse_http_date_seconds reads any 4-digit year; parse_http_date also refuses
// a date a TimePoint cannot hold (before 1677 or after 2262 for nanoseconds),
// so callers that must bound a far date (a Retry-After in 9999) use seconds.
// Thread-safety: a pure function.
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

#include "ratchet/clock.hpp"

namespace ratchet::limit {

std::optional<std::chrono::sys_seconds> parse_http_date_seconds(std::string_view text);
std::optional<TimePoint> parse_http_date(std::string_view text);

}  // namespace ratchet::limit
