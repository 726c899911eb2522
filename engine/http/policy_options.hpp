// The HTTP client options a plugin's call policy declares ([plugin.X] in
// TOML: connect_timeout, timeout, max_response_bytes, max_redirects), so the
// engine builds each plugin's Client the same way.
//
// Thread-safety: pure function.
#pragma once

#include <string>

#include "config/spec.hpp"
#include "http/client.hpp"

namespace ratchet::http {

// Timeouts are rounded up to whole milliseconds (never to zero); TLS
// verification stays on. `user_agent` is sent as User-Agent, e.g.
// "ratchet/0.1.0 imdb/1.2".
ClientOptions options_from_policy(const config::CallPolicy& policy, std::string user_agent);

}  // namespace ratchet::http
