// `ratchet run --metrics 127.0.0.1:PORT`: serves GET /metrics in the
// Prometheus text format: jobs by state (from the database, so every process
// sharing it counts) and this process's calls, 429s, retries and parks per
// plugin.
//
// Ownership: start() returns the sole owner; destroying it stops serving.
// Thread-safety: requests are served on the server's own threads and read
// the engine through its thread-safe API; the engine must outlive it.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ratchet/engine.hpp"

namespace ratchet::cli {

// The text of one scrape; `plugins` are listed even before their first call.
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
