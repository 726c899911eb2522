// How long a job waits after a failed attempt before the next one: the same
// backoff as a step call's retries (retry/backoff.hpp, the one
// implementation), so `decorrelated` means the same for both.
//
// A job keeps no previous delay across attempts (they may run in different
// processes), so its draws come from a generator seeded by the engine's seed
// and the job id: attempt n replays draws 1..n, and a decorrelated delay is
// rebuilt from the ones before it.
#pragma once

#include <cstdint>
#include <mutex>
#include <random>
#include <vector>

#include "config/spec.hpp"
#include "ratchet/clock.hpp"

namespace ratchet::runtime {

// The uniform draws in [0, 1) of job `id`'s first `count` retries.
std::vector<double> job_backoff_draws(std::uint64_t seed, std::int64_t id, int count);

// The delay after failed attempt `attempt` (1-based) of job `id`.
Duration job_backoff_delay(const config::BackoffSpec& spec, std::uint64_t seed, std::int64_t id, int attempt);

// Thread-safe source of uniform draws, and the engine's seed for job draws.
class Jitter {
 public:
  explicit Jitter(std::uint64_t seed);
  double next();
  std::uint64_t seed() const { return seed_; }

 private:
  std::mutex mu_;
  std::uint64_t seed_;
  std::mt19937_64 rng_;
};

}  // namespace ratchet::runtime
