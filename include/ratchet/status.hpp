// Error values for every fallible call in ratchet's public API.
//
// Nothing in the public API throws across its boundary for an expected
// failure (bad config, unknown job, locked database, ...): calls return a
// Result<T>, which holds either the value or an Error. An Error carries a
// category for programs and a message for people; messages name what went
// wrong, where, and how to fix it.
//
// Thread-safety: plain values; safe to copy between threads.
#pragma once

#include <expected>
#include <string>
#include <string_view>
#include <utility>

#include "ratchet/export.hpp"

namespace ratchet {

enum class ErrorCode {
  kInvalidArgument,  // the caller passed something malformed (job arguments, options)
  kNotFound,         // no such job, job type, plugin or operation
  kAlreadyExists,    // a unique key or name is taken
  kConfig,           // the configuration file is invalid
  kDatabase,         // the database file is unreadable, locked, corrupt or too new
  kIo,               // a file or socket operation failed
  kPlugin,           // a plugin file is unusable or a plugin call failed
  kThrottled,        // a rate limit refused the call for now
  kTimeout,          // a deadline passed
  kCancelled,        // the work was cancelled
  kUnavailable,      // the engine is stopping or a circuit is open
  kInternal,         // a bug in ratchet; please report it
};

// A short lowercase name for the code, e.g. "config" or "not_found".
RATCHET_API std::string_view to_string(ErrorCode code) noexcept;

class [[nodiscard]] Error {
 public:
  Error(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Error invalid_argument(std::string m) { return {ErrorCode::kInvalidArgument, std::move(m)}; }
  static Error not_found(std::string m) { return {ErrorCode::kNotFound, std::move(m)}; }
  static Error already_exists(std::string m) { return {ErrorCode::kAlreadyExists, std::move(m)}; }
  static Error config(std::string m) { return {ErrorCode::kConfig, std::move(m)}; }
  static Error database(std::string m) { return {ErrorCode::kDatabase, std::move(m)}; }
  static Error io(std::string m) { return {ErrorCode::kIo, std::move(m)}; }
  static Error plugin(std::string m) { return {ErrorCode::kPlugin, std::move(m)}; }
  static Error throttled(std::string m) { return {ErrorCode::kThrottled, std::move(m)}; }
  static Error timeout(std::string m) { return {ErrorCode::kTimeout, std::move(m)}; }
  static Error cancelled(std::string m) { return {ErrorCode::kCancelled, std::move(m)}; }
  static Error unavailable(std::string m) { return {ErrorCode::kUnavailable, std::move(m)}; }
  static Error internal(std::string m) { return {ErrorCode::kInternal, std::move(m)}; }

  ErrorCode code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }

  // "<code>: <message>", for logs and command-line output.
  std::string to_string() const;

  // Returns a copy whose message is prefixed with `context: `, so callers can
  // say where an error from below happened without losing its category.
  Error with_context(std::string_view context) const;

  friend bool operator==(const Error&, const Error&) = default;

 private:
  ErrorCode code_;
  std::string message_;
};

// Either a T or the Error that prevented it. std::expected is not
// [[nodiscard]] itself (only Error is), so every function returning a
// Result or a Status is marked [[nodiscard]].
template <typename T>
using Result = std::expected<T, Error>;

// Success or an Error, for calls that return nothing.
using Status = std::expected<void, Error>;

// Shorthand for `return ratchet::fail(Error::config("..."));`.
inline std::unexpected<Error> fail(Error e) { return std::unexpected<Error>(std::move(e)); }

inline std::string Error::to_string() const {
  std::string out(ratchet::to_string(code_));
  out += ": ";
  out += message_;
  return out;
}

inline Error Error::with_context(std::string_view context) const {
  std::string m(context);
  m += ": ";
  m += message_;
  return {code_, std::move(m)};
}

}  // namespace ratchet
