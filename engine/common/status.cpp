#include "ratchet/status.hpp"

namespace ratchet {

std::string_view to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kAlreadyExists: return "already_exists";
    case ErrorCode::kConfig: return "config";
    case ErrorCode::kDatabase: return "database";
    case ErrorCode::kIo: return "io";
    case ErrorCode::kPlugin: return "plugin";
    case ErrorCode::kThrottled: return "throttled";
    case ErrorCode::kTimeout: return "timeout";
    case ErrorCode::kCancelled: return "cancelled";
    case ErrorCode::kUnavailable: return "unavailable";
    case ErrorCode::kInternal: return "internal";
  }
  return "unknown";
}

}  // namespace ratchet
