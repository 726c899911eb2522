// Database URLs for display: the text a log line or an error message may
// show of a PostgreSQL connection string, with any password masked.
#pragma once

#include <string>
#include <string_view>

namespace ratchet::store::pg {

// `postgresql://user:secret@host/db?password=x` becomes
// `postgresql://user:***@host/db?password=***`; key=value strings
// (`host=h password='x y'`) get `password=***`. Everything else is kept,
// so the result still says which server and database are meant.
std::string mask_url(std::string_view url);

// `text` with every occurrence of `secret` replaced by ***; for messages
// from libpq or the server that might echo a password back.
std::string scrub(std::string text, std::string_view secret);

// `text` scrubbed of the password a URL carries, as written in it and
// percent-decoded: libpq quotes a URL it cannot parse (an unclosed `[`, a
// bad `%` escape) back in its message, and then knows no password to hide.
std::string scrub_url_password(std::string text, std::string_view url);

}  // namespace ratchet::store::pg
