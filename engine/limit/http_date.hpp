// Parses the HTTP-date of Retry-After and Date (RFC 9110 section 5.6.7): the
// preferred IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT" and the two obsolete
// forms a server may still send, RFC 850 "Sunday, 06-Nov-94 08:49:37 GMT" and
// asctime "Sun Nov  6 08:49:37 1994". Anything else, including out-of-range
// fields, is refused (nullopt); it never throws.
// Thread-safety: a pure function.
#pragma once

#include <optional>
#include <string_view>

#include "ratchet/clock.hpp"

namespace ratchet::limit {

std::optional<TimePoint> parse_http_date(std::string_view text);

}  // namespace ratchet::limit
