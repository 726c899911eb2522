// Test helper: checks a list of call start times against what one declared
// limit promises (docs/semantics.md point 5), independently of the limiter code.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/spec.hpp"
#include "limit/micros.hpp"

namespace ratchet::limit::testing {

struct DeclaredLimit {
  config::LimitAlgorithm algo;
  std::int64_t rate;
  std::int64_t per_us;
  std::int64_t burst = 1;
};

// A message naming the first breach, or nothing. `starts` must be sorted.
inline std::optional<std::string> breach(const DeclaredLimit& l, const std::vector<std::int64_t>& starts) {
  switch (l.algo) {
    case config::LimitAlgorithm::kSlidingWindow: {
      // Any interval of length per, any alignment: any rate + 1 consecutive starts span >= per.
      const auto n = static_cast<std::size_t>(l.rate);
      for (std::size_t i = n; i < starts.size(); ++i) {
        if (starts[i] - starts[i - n] < l.per_us) {
          return "sliding " + std::to_string(l.rate) + "/" + std::to_string(l.per_us) + "us: starts at " +
                 std::to_string(starts[i - n]) + " and " + std::to_string(starts[i]);
        }
      }
      return std::nullopt;
    }
    case config::LimitAlgorithm::kTokenBucket: {
      // A token bucket of rate/per and size burst, refilled continuously.
      double tokens = static_cast<double>(l.burst);
      std::int64_t last = starts.empty() ? 0 : starts.front();
      for (auto s : starts) {
        tokens = std::min<double>(static_cast<double>(l.burst), tokens + static_cast<double>(s - last) *
                                                                             static_cast<double>(l.rate) /
                                                                             static_cast<double>(l.per_us));
        last = s;
        if (tokens < 1 - 1e-9) return "token bucket empty at " + std::to_string(s);
        tokens -= 1;
      }
      return std::nullopt;
    }
    case config::LimitAlgorithm::kFixedWindow: {
      std::map<std::int64_t, std::int64_t> per_window;
      for (auto s : starts) {
        if (++per_window[floor_div(s, l.per_us)] > l.rate) return "fixed window over at " + std::to_string(s);
      }
      return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace ratchet::limit::testing
