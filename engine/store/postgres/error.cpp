#include "store/postgres/error.hpp"

namespace ratchet::store::pg {

Condition condition_of(std::string_view sqlstate) noexcept {
  if (sqlstate == "40001") return Condition::kSerializationFailure;
  if (sqlstate == "40P01") return Condition::kDeadlock;
  if (sqlstate == "23505") return Condition::kUniqueViolation;
  if (sqlstate == "42P01") return Condition::kUndefinedTable;
  if (sqlstate == "57P01" || sqlstate == "57P02") return Condition::kAdminShutdown;
  if (sqlstate == "57P03") return Condition::kCannotConnectNow;
  if (sqlstate == "3D000") return Condition::kNoSuchDatabase;
  if (sqlstate.starts_with("08")) return Condition::kConnectionLost;
  if (sqlstate.starts_with("28")) return Condition::kAuthFailed;
  return Condition::kOther;
}

bool PgError::needs_reconnect() const noexcept {
  switch (condition()) {
    case Condition::kConnectionLost:
    case Condition::kAdminShutdown:
    case Condition::kCannotConnectNow: return true;
    default: return false;
  }
}

bool PgError::transaction_retryable() const noexcept {
  const Condition c = condition();
  return c == Condition::kSerializationFailure || c == Condition::kDeadlock;
}

}  // namespace ratchet::store::pg
