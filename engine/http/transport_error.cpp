#include "http/transport_error.hpp"

namespace ratchet::http {

std::string_view to_string(TransportError::Kind kind) noexcept {
  switch (kind) {
    case TransportError::kConnect: return "connect";
    case TransportError::kTimeout: return "timeout";
    case TransportError::kTls: return "tls";
    case TransportError::kTooLarge: return "too_large";
    case TransportError::kTooManyRedirects: return "too_many_redirects";
    case TransportError::kCancelled: return "cancelled";
    case TransportError::kInvalidUrl: return "invalid_url";
    case TransportError::kHeldBack: return "held_back";
    case TransportError::kOther: return "other";
  }
  return "unknown";
}

Error to_error(const TransportError& e) {
  switch (e.kind) {
    case TransportError::kTimeout: return Error::timeout(e.message);
    case TransportError::kCancelled: return Error::cancelled(e.message);
    case TransportError::kConnect: return Error::unavailable(e.message);
    case TransportError::kInvalidUrl: return Error::invalid_argument(e.message);
    case TransportError::kHeldBack: return Error::unavailable(e.message);
    case TransportError::kTls:
    case TransportError::kTooLarge:
    case TransportError::kTooManyRedirects:
    case TransportError::kOther: break;
  }
  return Error::io(e.message);
}

}  // namespace ratchet::http
