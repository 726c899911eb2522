// What `ratchet run` says about its progress: done of total, jobs per second,
// ETA, steps parked now per plugin and 429s, from the engine's counts and
// call stats. "Done" counts jobs that reached a terminal state since the run
// started.
//
// Not thread-safe: one Progress per run loop; parked_summary is pure.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ratchet/engine.hpp"

namespace ratchet::cli {

struct ProgressSample {
  std::int64_t done = 0;     // terminal since the start
  std::int64_t pending = 0;  // scheduled, available, running or retryable now
  std::int64_t running = 0;
  std::int64_t dead = 0;  // dead since the start
  double jobs_per_second = 0;
  std::string line;  // the status text
};

// "imdb 2, sify 1": the plugins with steps parked now, by name; "none"
// when no step is parked.
std::string parked_summary(const std::vector<PluginCallStats>& stats);

class Progress {
 public:
  // Reads the counts the run starts from.
  explicit Progress(Engine& engine);
  // Reads the engine again; nullopt when the database could not be read.
  std::optional<ProgressSample> sample();

 private:
  Engine& engine_;
  std::chrono::steady_clock::time_point start_;
  std::int64_t terminal_at_start_ = 0;
  std::int64_t dead_at_start_ = 0;
};

}  // namespace ratchet::cli
