// Whether a database setting names a server (a URL such as
// postgresql://user@host/db) rather than a file: a scheme of letters,
// digits, '+', '-' or '.' before "://". A file path that merely contains
// "://" later on is still a path.
#pragma once

#include <string_view>

namespace ratchet::common {

bool is_server_url(std::string_view database) noexcept;

}  // namespace ratchet::common
