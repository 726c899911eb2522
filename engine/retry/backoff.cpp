#include "retry/backoff.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace ratchet::retry {

Duration backoff_delay(const config::BackoffSpec& spec, int retry, Duration previous, double u01) {
  using Sec = std::chrono::duration<double>;
  const double initial = std::max(0.0, Sec(spec.initial).count());
  const double cap = std::max(0.0, Sec(spec.max).count());
  const double u = std::clamp(u01, 0.0, 1.0);
  const int n = std::max(retry, 1);
  double d = 0;
  switch (spec.kind) {
    case config::Backoff::kConstant: d = initial; break;
    case config::Backoff::kLinear: d = initial * n; break;
    case config::Backoff::kExponential:
      // pow overflows to inf for huge n, which the cap below absorbs.
      d = initial * std::pow(std::max(spec.multiplier, 1.0), n - 1);
      break;
    case config::Backoff::kDecorrelated: {
      const double hi = std::max(initial, 3 * Sec(previous).count());
      d = std::min(cap, initial + u * (hi - initial));
      return std::chrono::round<std::chrono::microseconds>(Sec(d));
    }
  }
  if (!std::isfinite(d) || d > cap) d = cap;
  switch (spec.jitter) {
    case config::Jitter::kNone: break;
    case config::Jitter::kFull: d = u * d; break;
    case config::Jitter::kEqual: d = d / 2 + u * d / 2; break;
  }
  return std::chrono::round<std::chrono::microseconds>(Sec(std::clamp(d, 0.0, cap)));
}

Duration backoff_sequence_delay(const config::BackoffSpec& spec, int retry, std::span<const double> draws) {
  const int n = std::max(retry, 1);
  auto draw = [&](int k) { return static_cast<std::size_t>(k - 1) < draws.size() ? draws[k - 1] : 0.0; };
  if (spec.kind != config::Backoff::kDecorrelated) return backoff_delay(spec, n, Duration::zero(), draw(n));
  Duration previous = Duration::zero();
  for (int k = 1; k <= n; ++k) previous = backoff_delay(spec, k, previous, draw(k));
  return previous;
}

}  // namespace ratchet::retry
