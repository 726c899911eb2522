// How a keyed limit names a key: the key's own text when it comes from a
// job's arguments (stored with the job anyway, and readable in `ratchet
// limits`), a keyed hash when it comes from the plugin's settings (an API
// key is a secret: never printed, logged or stored, in any form).
//
// The hash is HMAC-SHA256 under a random salt kept once per database, so
// processes sharing the database name one API key alike (their
// database-scope budgets meet), while the name reveals nothing of the key
// and cannot be checked against a guessed key without the salt.
//
// Thread-safety: free functions.
#pragma once

#include <string>
#include <string_view>

#include "limit/database_limiter.hpp"
#include "ratchet/status.hpp"

namespace ratchet::limit {

// Keys of arguments longer than this are hashed too: the name stays short.
inline constexpr std::size_t kMaxPlainKey = 64;

// "#" and 32 hex digits of HMAC-SHA256(salt, text) when `hashed` or the
// text is long (or holds a control character); otherwise the text itself.
std::string key_identity(std::string_view text, bool hashed, std::string_view salt);

// The database's salt, made (32 random bytes, hex) by the first process that
// asks; without a database (`connect` empty), a new salt of this process's own.
[[nodiscard]] Result<std::string> key_salt(const ConnectionFactory& connect);

}  // namespace ratchet::limit
