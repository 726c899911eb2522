// Why a LimitSpec cannot be built into a limiter, if it cannot: its rate, per
// and burst must be positive and within the config's bounds
// (config/bounds.hpp), so that a spec made in code rather than read from a
// file cannot overflow the limiters' arithmetic either.
// Thread-safety: a pure function.
#pragma once

#include <optional>
#include <string>

#include "common/duration.hpp"
#include "config/bounds.hpp"
#include "config/spec.hpp"

namespace ratchet::limit {

inline std::optional<std::string> limit_out_of_bounds(const config::LimitSpec& spec) {
  if (spec.rate < 1 || spec.per.count() < 1 || (spec.burst && *spec.burst < 1)) {
    return "rate, per and burst must be positive (rate=" + std::to_string(spec.rate) + ")";
  }
  if (spec.rate > config::kMaxRate) {
    return "rate must be at most " + std::to_string(config::kMaxRate) + ", got " + std::to_string(spec.rate);
  }
  if (spec.burst && *spec.burst > config::kMaxBurst) {
    return "burst must be at most " + std::to_string(config::kMaxBurst) + ", got " +
           std::to_string(*spec.burst);
  }
  if (spec.per < config::kMinLimitPeriod) {
    return "per must be at least 1ms (a request takes longer than that to reach a server), got " +
           common::format_duration(spec.per);
  }
  if (spec.per > config::kMaxDuration) {
    return std::string("per must be at most ") + config::kMaxDurationText + ", got " +
           common::format_duration(spec.per);
  }
  return std::nullopt;
}

}  // namespace ratchet::limit
