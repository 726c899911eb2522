// How long a job waits after a failed attempt before the next one: a pure
// function of the job type's BackoffSpec, the attempt that failed and a
// uniform random draw, so it can be tested exactly.
#pragma once

#include <mutex>
#include <random>

#include "config/spec.hpp"
#include "ratchet/clock.hpp"

namespace ratchet::runtime {

// `attempt` is the 1-based attempt that just failed; `u` is uniform in [0, 1).
// exponential: initial * multiplier^(attempt-1); linear: initial * attempt;
// constant: initial; decorrelated: a draw between initial and three times the
// exponential value. Capped at max, then jittered (full: u * d; equal:
// d/2 + u * d/2).
Duration backoff_delay(const config::BackoffSpec& spec, int attempt, double u);

// Thread-safe source of the uniform draws.
class Jitter {
 public:
  explicit Jitter(std::uint64_t seed);
  double next();

 private:
  std::mutex mu_;
  std::mt19937_64 rng_;
};

}  // namespace ratchet::runtime
