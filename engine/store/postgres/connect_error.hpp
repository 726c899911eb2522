// What a failed connection attempt tells a person: which server, database
// and user, what went wrong (unreachable, password refused or missing, no
// such database, server starting up) and how to fix it; never a password.
//
// libpq reports no SQLSTATE for a failed attempt, only text, so the cause
// is read from libpq's own flags (a password was needed, was used) and the
// server's English messages; the libpq text is always kept in the message,
// so a translated server still gives a clear, if generic, error.
#pragma once

#include <string>
#include <string_view>

#include "store/postgres/error.hpp"

struct pg_conn;

namespace ratchet::store::pg {

// "user@host:port/database" of a connection (or of its failed attempt).
std::string describe_target(const pg_conn* conn);

// libpq's multi-line message on one line, without trailing space.
std::string one_line(std::string_view text);

// The error for `conn`, whose attempt (`doing`: "connecting",
// "reconnecting") failed; `explicit_password`: the password came from the
// caller's options rather than libpq's own sources.
PgError connect_error(const pg_conn* conn, std::string_view doing, bool explicit_password);

}  // namespace ratchet::store::pg
