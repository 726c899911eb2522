// IMF-fixdate, the one date format HTTP servers send ("Sun, 06 Nov 1994
// 08:49:37 GMT"), for the Date and Retry-After headers.
//
// Thread-safety: pure function.
#pragma once

#include <string>

#include "ratchet/clock.hpp"

namespace ratchet::mock_portal {

std::string format_http_date(TimePoint t);

}  // namespace ratchet::mock_portal
