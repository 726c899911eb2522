// Why an HTTP request produced no response: the connection failed, a limit
// was hit, or the caller cancelled. An HTTP error status (429, 503, ...) is
// not a TransportError; it is a Response with that status.
//
// Messages name the method and the URL without its query string, fragment or
// user info, and never any header value, so they are safe to log.
//
// Thread-safety: a plain value.
#pragma once

#include <string>
#include <string_view>

#include "ratchet/status.hpp"

namespace ratchet::http {

struct TransportError {
  enum Kind {
    kConnect,           // refused, reset, DNS failure, nothing received
    kTimeout,           // connect or total timeout passed
    kTls,               // handshake failed or the peer's certificate was not trusted
    kTooLarge,          // the response exceeded max_response_bytes; the transfer was aborted
    kTooManyRedirects,  // more than max_redirects redirects
    kCancelled,         // the caller's stop_token was triggered
    kInvalidUrl,        // malformed URL, a scheme other than http/https, or a malformed request
    kHeldBack,          // Request::before_send held it back: connected, nothing sent
    kOther,             // anything else libcurl reports
  };

  Kind kind = kOther;
  std::string message;

  friend bool operator==(const TransportError&, const TransportError&) = default;
};

// A short lowercase name, e.g. "timeout" or "too_many_redirects".
std::string_view to_string(TransportError::Kind kind) noexcept;

// The same failure as a ratchet Error (timeout -> kTimeout, cancelled ->
// kCancelled, connect -> kUnavailable, invalid URL -> kInvalidArgument, the
// rest -> kIo), for callers that report it upwards.
Error to_error(const TransportError& e);

}  // namespace ratchet::http
