// Failures of PostgreSQL calls as values that keep the server's SQLSTATE,
// so a caller can tell "retry the transaction" (serialization failure,
// deadlock) and "reconnect, then retry" (connection lost, server shutting
// down or starting up, as in a failover) from a bug or a constraint.
//
// Thread-safety: plain values; safe to copy between threads.
#pragma once

#include <expected>
#include <string>
#include <string_view>
#include <utility>

#include "ratchet/status.hpp"

namespace ratchet::store::pg {

// The few SQLSTATEs ratchet acts on; everything else is kOther.
enum class Condition {
  kOther,
  kSerializationFailure,  // 40001
  kDeadlock,              // 40P01
  kUniqueViolation,       // 23505
  kUndefinedTable,        // 42P01
  kConnectionLost,        // class 08: no connection, or it broke
  kAdminShutdown,         // 57P01, 57P02: the server is stopping (restart, failover, crash)
  kCannotConnectNow,      // 57P03: the server is starting up or shutting down
  kAuthFailed,            // class 28: a missing or wrong password
  kNoSuchDatabase,        // 3D000
};

// The condition of a five-character SQLSTATE ("" is kOther).
Condition condition_of(std::string_view sqlstate) noexcept;

// SQLSTATEs ratchet reports for failures libpq gives no code for (it has
// none for a failed connection attempt or a socket that closed).
inline constexpr std::string_view kSqlstateCannotConnect = "08001";
inline constexpr std::string_view kSqlstateConnectionFailure = "08006";

class PgError {
 public:
  PgError(Error error, std::string sqlstate) : error_(std::move(error)), sqlstate_(std::move(sqlstate)) {}

  // A kDatabase Error (kInvalidArgument for misuse such as an unknown
  // prepared statement) whose message names the server and what failed;
  // never a password.
  const Error& error() const noexcept { return error_; }
  // Five characters, e.g. "23505", or empty when there is none.
  const std::string& sqlstate() const noexcept { return sqlstate_; }
  Condition condition() const noexcept { return condition_of(sqlstate_); }

  // The connection is gone or the server refuses sessions for now: reset()
  // (or open a new connection) and run the work again.
  bool needs_reconnect() const noexcept;
  // The server rolled the transaction back to keep it consistent; running
  // the whole transaction again may succeed.
  bool transaction_retryable() const noexcept;

  std::string to_string() const { return error_.to_string(); }

 private:
  Error error_;
  std::string sqlstate_;
};

template <typename T>
using PgResult = std::expected<T, PgError>;
using PgStatus = std::expected<void, PgError>;

}  // namespace ratchet::store::pg
