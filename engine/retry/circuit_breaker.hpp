// A plugin's circuit breaker. Closed, it lets calls through and counts their
// outcomes; it opens after `consecutive_failures` failures in a row, or when
// failures / calls within the last `window` reach `failure_ratio` (with at
// least `min_calls` calls). Open, it fails fast and says when it half-opens
// (`open_for` later) so jobs can park until then. Half-open, it lets
// `half_open_probes` calls through; when that many succeed it closes, and any
// failure opens it again.
//
// Only failures of the server or the path to it count (Outcome::is_failure):
// throttling and fatal errors (a bad request) say nothing about its health.
// A disabled breaker (spec.enabled = false) always admits.
//
// Thread-safety: all members are safe to call concurrently (one mutex). One
// breaker is shared by every operation of a plugin.
#pragma once

#include <deque>
#include <mutex>
#include <optional>
#include <utility>

#include "config/spec.hpp"
#include "ratchet/clock.hpp"

namespace ratchet::retry {

enum class BreakerState { kClosed, kOpen, kHalfOpen };

class CircuitBreaker {
 public:
  explicit CircuitBreaker(config::BreakerSpec spec);

  struct Admission {
    bool allowed = false;
    bool probe = false;                 // a half-open probe: report it with record() or release_probe()
    std::optional<TimePoint> retry_at;  // when refused: when to ask again (half-open time,
                                        // or nullopt while probes are in flight)
  };

  Admission admit(TimePoint now);

  // The outcome of an admitted call: `failure` per Outcome::is_failure.
  void record(bool failure, bool probe, TimePoint now);

  // An admitted probe that made no call after all (e.g. it had to wait for a
  // limiter): frees its place for another probe.
  void release_probe();

  BreakerState state(TimePoint now) const;

 private:
  void open(TimePoint now);   // needs mu_
  void prune(TimePoint now);  // needs mu_

  const config::BreakerSpec spec_;
  mutable std::mutex mu_;
  BreakerState state_ = BreakerState::kClosed;
  TimePoint half_open_at_{};
  int consecutive_ = 0;
  int probes_in_flight_ = 0;
  int probe_successes_ = 0;
  std::deque<std::pair<TimePoint, bool>> recent_;  // (time, failed) within the window
  int recent_failures_ = 0;
};

}  // namespace ratchet::retry
