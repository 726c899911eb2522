// What one attempt of a plugin call came to, as the retry decorator and the
// circuit breaker see it: the plugin's status or the HTTP reply, classified.
// Thread-safety: plain values.
#pragma once

#include <optional>
#include <string>

#include "config/spec.hpp"
#include "ratchet/clock.hpp"

namespace ratchet::retry {

enum class OutcomeKind {
  kOk,
  kThrottled,  // HTTP 429 or the plugin's "throttled" status
  kHttp,       // another non-success HTTP status (see http_status)
  kTimeout,    // per-try or transport timeout
  kConnect,    // connection refused or reset, DNS failure
  kRetryable,  // the plugin said "retryable"
  kFatal,      // the plugin said "fatal": retrying cannot help
};

struct Outcome {
  OutcomeKind kind = OutcomeKind::kOk;
  int http_status = 0;                  // for kHttp and kThrottled from HTTP
  std::optional<Duration> retry_after;  // the plugin's own retry-after, if it gave one
  std::string message;                  // for errors; never holds secrets
  // Throttled here, not by the server: the engine's own limits held the
  // request back and nothing was sent. Neither the learned pace nor the
  // circuit breaker hears of it (it says nothing about the server).
  bool held_back = false;

  static Outcome ok() { return {}; }
  static Outcome throttled(std::optional<Duration> retry_after = std::nullopt, std::string m = {}) {
    return {OutcomeKind::kThrottled, 429, retry_after, std::move(m)};
  }
  // Any HTTP status: 2xx is ok, 429 throttled, others kHttp.
  static Outcome http(int status, std::string m = {});
  static Outcome timeout(std::string m) { return {OutcomeKind::kTimeout, 0, std::nullopt, std::move(m)}; }
  static Outcome connect(std::string m) { return {OutcomeKind::kConnect, 0, std::nullopt, std::move(m)}; }
  static Outcome retryable(std::string m) { return {OutcomeKind::kRetryable, 0, std::nullopt, std::move(m)}; }
  static Outcome fatal(std::string m) { return {OutcomeKind::kFatal, 0, std::nullopt, std::move(m)}; }

  bool is_ok() const { return kind == OutcomeKind::kOk; }
  // A failure of the server or the path to it (5xx, timeout, connect,
  // retryable): what the circuit breaker counts. Throttling and fatal errors
  // (a bad request) say nothing about the server's health.
  bool is_failure() const;
  // "HTTP 503: upstream down", for error messages.
  std::string describe() const;
};

inline Outcome Outcome::http(int status, std::string m) {
  if (status >= 200 && status < 300) return ok();
  if (status == 429) return {OutcomeKind::kThrottled, 429, std::nullopt, std::move(m)};
  return {OutcomeKind::kHttp, status, std::nullopt, std::move(m)};
}

inline bool Outcome::is_failure() const {
  switch (kind) {
    case OutcomeKind::kHttp: return http_status >= 500;
    case OutcomeKind::kTimeout:
    case OutcomeKind::kConnect:
    case OutcomeKind::kRetryable: return true;
    default: return false;
  }
}

inline std::string Outcome::describe() const {
  std::string what;
  switch (kind) {
    case OutcomeKind::kOk: what = "ok"; break;
    case OutcomeKind::kThrottled: what = "throttled"; break;
    case OutcomeKind::kHttp: what = "HTTP " + std::to_string(http_status); break;
    case OutcomeKind::kTimeout: what = "timed out"; break;
    case OutcomeKind::kConnect: what = "connection failed"; break;
    case OutcomeKind::kRetryable: what = "retryable error"; break;
    case OutcomeKind::kFatal: what = "fatal error"; break;
  }
  if (!message.empty()) what += ": " + message;
  return what;
}

}  // namespace ratchet::retry
