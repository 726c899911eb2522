// Backoff delays as pure functions of the declared BackoffSpec, the retry
// number and one uniform random number, so callers inject randomness (a
// seeded generator in tests) and the shapes can be checked exactly.
//
//   constant      initial
//   linear        initial * retry
//   exponential   initial * multiplier^(retry - 1)
//   decorrelated  uniform in [initial, max(initial, 3 * previous)]  (its own jitter)
// every shape capped at `max`, then jittered:
//   none  the delay;  full  uniform in [0, delay];  equal  delay/2 + uniform in [0, delay/2]
// ("decorrelated" ignores `jitter`: its randomness is part of its shape.)
//
// The one backoff of ratchet: a step call's retries (retry/retry_decision)
// and a job's attempts (runtime/backoff) both use it.
//
// Thread-safety: pure functions.
#pragma once

#include <span>

#include "config/spec.hpp"
#include "ratchet/clock.hpp"

namespace ratchet::retry {

// The delay before retry number `retry` (1 for the first retry). `previous`
// is the delay used before the previous retry (decorrelated only; zero at
// first). `u01` is a uniform random number in [0, 1). Never negative, never
// above spec.max.
Duration backoff_delay(const config::BackoffSpec& spec, int retry, Duration previous, double u01);

// The delay before retry `retry` of a sequence in which retry k drew
// draws[k - 1], for a caller that keeps no `previous`: a decorrelated delay
// is replayed from the first retry, each from the one before. Needs at least
// `retry` draws (missing ones count as 0).
Duration backoff_sequence_delay(const config::BackoffSpec& spec, int retry, std::span<const double> draws);

}  // namespace ratchet::retry
