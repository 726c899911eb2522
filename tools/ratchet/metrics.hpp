// `ratchet run --metrics 127.0.0.1:PORT`: serves GET /metrics in the
// Prometheus text format: jobs by state (from the database, so every process
// sharing it counts) and, for this process's step calls per plugin, calls,
// 429s, retries, parks, steps parked now, time waited for limiter slots and
// a histogram of step durations per operation.
//
// Ownership: start() returns the sole owner; destroying it stops serving.
// Thread-safety: requests are served on the server's own threads and read
// the engine through its thread-safe API; the engine must outlive it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ratchet/engine.hpp"

namespace ratchet::cli {

// What one scrape shows.
struct MetricsInput {
  // Jobs per state; nullopt when the database could not be read.
  std::optional<std::vector<std::pair<JobState, std::int64_t>>> jobs;
  std::vector<PluginCallStats> calls;
  // Plugins listed (with zeros) even before their first call.
  std::vector<std::string> plugins;
};

// The text of one scrape. Series are sorted by plugin, then operation.
std::string render_metrics(const MetricsInput& input);
// Reads the input from the engine, then renders it.
std::string render_metrics(Engine& engine, const std::vector<std::string>& plugins);

class MetricsServer {
 public:
  // `address` is HOST:PORT (port 0: any free port).
  static Result<std::unique_ptr<MetricsServer>> start(std::string_view address, Engine& engine);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  int port() const noexcept;

  struct Impl;

 private:
  explicit MetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ratchet::cli
