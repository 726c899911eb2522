// What the mock portal server counted, served at GET /_stats:
//   {"portals": {"imdb": {"requests": 12, "ok": 10, "throttled": 2, "errors": 0,
//                "max_in_window": 10, "max_in_aligned_window": 10, "window_ms": 1000,
//                "movies": {"Up": 12}}, ...},
//    "connections": 3}
// `max_in_window` is the most requests the portal received in any interval
// of length `window_ms` (sliding, half-open), which a client that keeps its
// declared limit keeps at or below the limit; `max_in_aligned_window` the
// most in one window aligned to the clock (as a fixed-window server counts).
//
// Thread-safety: plain values.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "ratchet/status.hpp"

namespace ratchet::mock_portal {

struct PortalStats {
  std::int64_t requests = 0;   // every request to the portal's movie route
  std::int64_t ok = 0;         // 2xx answers
  std::int64_t throttled = 0;  // 429 answers
  std::int64_t errors = 0;     // 5xx answers
  // Windows count units: a request costs 1 unless it says `cost=N`.
  std::int64_t max_in_window = 0;          // most units in any window of length `window`
  std::int64_t max_in_aligned_window = 0;  // most units in one clock-aligned window
  std::int64_t units = 0;                  // every request's cost, summed
  std::chrono::milliseconds window{0};
  // The first and the latest request's arrival; the epoch before any.
  std::chrono::system_clock::time_point first_arrival{};
  std::chrono::system_clock::time_point last_arrival{};
  std::map<std::string, std::int64_t> movies;  // requests per movie name

  friend bool operator==(const PortalStats&, const PortalStats&) = default;
};

struct Stats {
  std::map<std::string, PortalStats> portals;
  std::int64_t connections = 0;  // distinct client connections seen since start or reset

  friend bool operator==(const Stats&, const Stats&) = default;
};

nlohmann::json to_json(const Stats& stats);
Result<Stats> stats_from_json(const nlohmann::json& doc);

}  // namespace ratchet::mock_portal
