#include "runtime/backoff.hpp"

#include <algorithm>
#include <cmath>

namespace ratchet::runtime {

Duration backoff_delay(const config::BackoffSpec& spec, int attempt, double u) {
  using Micros = std::chrono::microseconds;
  const double initial = static_cast<double>(spec.initial.count());
  const double cap = static_cast<double>(spec.max.count());
  const int n = std::max(attempt, 1);
  double d = initial;
  double exp = initial * std::pow(std::max(spec.multiplier, 1.0), n - 1);
  switch (spec.kind) {
    case config::Backoff::kConstant: d = initial; break;
    case config::Backoff::kLinear: d = initial * n; break;
    case config::Backoff::kExponential: d = exp; break;
    case config::Backoff::kDecorrelated: d = initial + u * std::max(0.0, 3.0 * exp - initial); break;
  }
  d = std::min(d, cap);
  if (spec.kind != config::Backoff::kDecorrelated) {
    switch (spec.jitter) {
      case config::Jitter::kNone: break;
      case config::Jitter::kFull: d = u * d; break;
      case config::Jitter::kEqual: d = d / 2 + u * d / 2; break;
    }
  }
  return std::chrono::duration_cast<Duration>(Micros(static_cast<std::int64_t>(std::max(0.0, d))));
}

Jitter::Jitter(std::uint64_t seed) : rng_(seed) {}

double Jitter::next() {
  std::lock_guard lock(mu_);
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
}

}  // namespace ratchet::runtime
