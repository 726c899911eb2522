// The retry decorator's decision for one attempt's outcome, against the
// declared RetrySpec: done, retry at a time, or fail with a clear error.
//
// Throttling is not failure. A throttled attempt (429, or the plugin's
// "throttled") does not use up one of `attempts` and does not grow the
// failure backoff; its waits are added up in RetryState::throttled_wait and
// bounded by the step's `max_wait` instead. Other retryable outcomes (as
// listed in `on` and `statuses`) count against `attempts`.
//
// The delay: the backoff for the retry number (retry/backoff.hpp); a later
// resume time from the server (Retry-After, a reset) wins over it, within
// backoff.max for failures (throttled waits are bounded by max_wait). A retry
// that would start after the step's `deadline` fails with kTimeout instead.
//
// Thread-safety: a pure function over the caller's RetryState.
#pragma once

#include <optional>

#include "config/spec.hpp"
#include "ratchet/clock.hpp"
#include "ratchet/status.hpp"
#include "retry/outcome.hpp"

namespace ratchet::retry {

// One step call's history across its attempts. Owned by the step.
struct RetryState {
  TimePoint began{};                           // the first admission; `deadline` counts from here
  int attempts = 0;                            // attempts made (calls that reached the plugin)
  int failures = 0;                            // failed attempts that count against `attempts`
  int throttled = 0;                           // throttled attempts (do not count)
  Duration throttled_wait = Duration::zero();  // all waits for throttling so far
  Duration last_delay = Duration::zero();      // the previous failure backoff (decorrelated)
};

struct RetryVerdict {
  enum class Kind { kDone, kRetry, kFail };
  Kind kind = Kind::kDone;
  TimePoint at{};              // kRetry: not before this
  bool throttled = false;      // kRetry: the wait is for throttling, not a failure
  std::optional<Error> error;  // kFail
};

// Whether the outcome is one `spec` retries (throttled, 5xx, timeout,
// connect, retryable, or a listed status).
bool retries(const config::RetrySpec& spec, const Outcome& outcome);

// Decides what follows `outcome` at `now` and updates `state`. `server_resume`
// is the server's earliest resume time if it gave one; `u01` a uniform random
// number in [0, 1) for the jitter.
RetryVerdict decide_retry(const config::RetrySpec& spec, Duration max_wait, RetryState& state,
                          const Outcome& outcome, std::optional<TimePoint> server_resume, TimePoint now,
                          double u01);

}  // namespace ratchet::retry
