#include "runtime/backoff.hpp"

#include <algorithm>

#include "retry/backoff.hpp"

namespace ratchet::runtime {

std::vector<double> job_backoff_draws(std::uint64_t seed, std::int64_t id, int count) {
  // Distinct, well-spread streams for neighbouring ids.
  std::seed_seq seq{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32),
                    static_cast<std::uint32_t>(id),
                    static_cast<std::uint32_t>(static_cast<std::uint64_t>(id) >> 32)};
  std::mt19937_64 rng(seq);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> out(static_cast<std::size_t>(std::max(count, 0)));
  for (auto& d : out) d = u(rng);
  return out;
}

Duration job_backoff_delay(const config::BackoffSpec& spec, std::uint64_t seed, std::int64_t id,
                           int attempt) {
  const int n = std::max(attempt, 1);
  const auto draws = job_backoff_draws(seed, id, n);
  return retry::backoff_sequence_delay(spec, n, draws);
}

Jitter::Jitter(std::uint64_t seed) : seed_(seed), rng_(seed) {}

double Jitter::next() {
  std::lock_guard lock(mu_);
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
}

}  // namespace ratchet::runtime
