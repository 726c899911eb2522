// `ratchet run --metrics 127.0.0.1:PORT`: serves GET /metrics in the
// Prometheus text format: jobs by state (from the database, so every process
// sharing it counts) and, for this process's step calls per plugin, calls,
// 429s, retries, parks, steps parked now, time waited for limiter slots and
// a histogram of step durations per operation.
//
// A request body over 64 KiB is refused with 413 before it is read, and a
// client that is idle or slow for longer than the timeout (5s) is
// disconnected, so no client holds the server.
//
// Ownership: start() returns the sole owner; destroying it stops serving.
// Thread-safety: requests are served on the server's own threads and read
// the engine through its thread-safe API; the engine must outlive it.
#pragma once

#include <chrono>
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

struct MetricsServerOptions {
  // A connection idle this long is closed, and so is one whose request
  // takes longer to arrive, or its answer to be read (see bounded_server.hpp).
  std::chrono::milliseconds timeout{5000};
};

class MetricsServer {
 public:
  // `address` is HOST:PORT (port 0: any free port).
  static Result<std::unique_ptr<MetricsServer>> start(std::string_view address, Engine& engine,
                                                      MetricsServerOptions options = {});
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
