// URL helpers for the engine and for plugins that build request URLs.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace ratchet::http {

// Percent-encodes every byte except the unreserved characters of RFC 3986
// (A-Z a-z 0-9 - . _ ~), so the result is one path segment whatever the
// input holds: "The Dark Knight/2" -> "The%20Dark%20Knight%2F2". Also right
// for a query parameter's name or value.
std::string encode_path_segment(std::string_view text);

// The URL as it may appear in logs and messages: scheme, host, port and
// path, without user info, query string or fragment, where API keys and
// tokens tend to travel. "https://u:p@api.x/v1/m?key=s#f" -> "https://api.x/v1/m".
// Text that is not an absolute URL keeps everything before '?' or '#'.
std::string redact_url(std::string_view url);

}  // namespace ratchet::http
