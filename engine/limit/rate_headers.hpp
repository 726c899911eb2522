// Reads what a server says about its rate limit from one HTTP reply, as a
// PaceHint the adaptive pacer (limit/adaptive_pacer.hpp) and the retry
// decision (retry/) act on. Understood dialects:
//
//   Retry-After: 120                        delta seconds
//   Retry-After: Sun, 06 Nov 1994 08:49:37 GMT   HTTP-date (also RFC 850, asctime)
//   X-RateLimit-Limit: 100 / X-RateLimit-Remaining: 0 / X-RateLimit-Reset: 30
//       Reset as delta seconds, as a Unix time in seconds (> 1e9) or in
//       milliseconds (> 1e12); which one is detected from the magnitude
//       (also the RateLimit-Limit/-Remaining/-Reset spelling of early IETF drafts)
//   RateLimit: limit=10, remaining=3, reset=5        IETF draft, dictionary form
//   RateLimit: "default";r=3;t=5                     IETF draft -08 and later
//   RateLimit-Policy: 10;w=1  or  "default";q=10;w=1 the quota and its window
//   a bare 429 (or 503) without any of these
//
// Precedence when headers disagree about when to resume:
//   1. Retry-After (the server's explicit instruction),
//   2. the IETF RateLimit header (remaining/reset),
//   3. X-RateLimit-Remaining/Reset,
//   4. nothing: a bare 429 is left to the pacer's multiplicative decrease.
// The pace (spacing between starts) is the quota's: RateLimit-Policy's window
// over its quota (the most restrictive when it lists several). Without a
// policy, the limit of the IETF pair or X-RateLimit-* comes with reset_in,
// from which the pacer learns the window; with no limit at all, what remains
// is spread over the time to the reset.
//
// Clock skew: absolute times (an HTTP-date, a Unix-time Reset) are read
// against the reply's Date header when it has one, so a server whose clock is
// off by minutes still yields the right wait on our clock.
//
// Bad values never throw and never stop a call: a value that cannot be read
// is ignored and named in `ignored`; a wait longer than `max_wait` (a Reset
// years ahead, a Retry-After of 1e10 seconds, an HTTP-date in 9999) is cut to
// max_wait and reported in `clamped` so it can be logged; a reset already past
// means no wait. Values are bounded before they become Durations, so no number
// a header can hold overflows the clock. A RateLimit-Policy window over 365
// days is read as 365 days (also reported in `clamped`).
//
// Thread-safety: pure functions.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ratchet/clock.hpp"

namespace ratchet::limit {

// One header as received: name (any case) and value.
using HttpHeader = std::pair<std::string, std::string>;

struct RateHeaderOptions {
  // The longest wait a header may impose (Retry-After, or a reset with
  // nothing remaining): the plugin's max_wait.
  Duration max_wait = std::chrono::hours(1);
  // The longest span a reset with calls remaining spreads them over. A
  // reset years ahead (a server's bug) would otherwise pace the calls left
  // across the whole of max_wait, a day by default, though they may all go
  // now; spread over an hour at most, they only come sooner.
  Duration max_pace_window = std::chrono::hours(1);
};

// Which header decided the resume time.
enum class HintSource { kNone, kRetryAfter, kIetfRateLimit, kXRateLimit, kBareThrottle };

struct PaceHint {
  bool throttled = false;              // status 429, or 503 with Retry-After
  std::optional<TimePoint> resume_at;  // no call should start before this
  std::optional<Duration> interval;    // learned spacing between call starts
  std::optional<std::int64_t> limit;   // the server's quota, when it said
  std::optional<std::int64_t> remaining;
  std::optional<Duration> window;  // the quota's window, when it said
  // Time until the quota resets, when some is left (with none left it is
  // resume_at instead).
  std::optional<Duration> reset_in;
  // The reset as the server's own Unix time in milliseconds, when it sent
  // one (X-RateLimit-Reset in Unix seconds or milliseconds): the resets of
  // two of its windows differ by exactly their length, which times read
  // against a Date in whole seconds do not.
  std::optional<std::int64_t> reset_epoch_ms;
  HintSource source = HintSource::kNone;
  std::optional<std::string> clamped;  // "X-RateLimit-Reset: 4102444800 is 75y ahead; waiting 1h"
  std::vector<std::string> ignored;    // "Retry-After: soon (not seconds or an HTTP-date)"

  bool empty() const { return !throttled && !resume_at && !interval; }
};

// Reads the rate-limit headers of one reply received at `now`.
PaceHint read_rate_headers(std::span<const HttpHeader> headers, int status, TimePoint now,
                           const RateHeaderOptions& options = {});

}  // namespace ratchet::limit
