// Runs the benchmark's rows against one in-process mock portal server and
// measures each the same way: reset the server's counts (POST /_reset), run
// the strategy, read what the server counted (GET /_stats), and check the
// ratings the strategy got against the ones the server is known to give.
//
// Ownership: a Harness owns the server; destroying it stops the server.
// Thread-safety: one thread drives a Harness; rows run one after another.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "http/client.hpp"
#include "mock_portal/server.hpp"
#include "setup.hpp"

namespace ratchet::bench {

// What the server saw of one portal during one row.
struct PortalCount {
  std::string name;
  std::int64_t requests = 0;
  std::int64_t throttled = 0;      // 429 answers
  std::int64_t errors = 0;         // 5xx answers
  std::int64_t max_in_window = 0;  // most requests in any one window
  std::int64_t allowed = 0;        // what a client keeping the limit stays within
};

struct Row {
  std::string strategy;
  bool available = true;
  std::string note;
  int jobs = 0;
  int jobs_completed = 0;
  double makespan_s = 0;
  double bound_s = 0;
  std::int64_t requests = 0;
  std::int64_t throttled = 0;
  std::int64_t errors = 0;
  std::int64_t ratings_checked = 0;
  std::int64_t ratings_wrong = 0;  // differ from the server's deterministic rating
  std::vector<PortalCount> portals;
  long peak_rss_kib = 0;    // of the whole process, when the row ended
  std::int64_t parks = -1;  // jobs parked, in all (the engine rows); -1: not a parking strategy
  // Parks per portal call made for a completed job (a step that waits for its slot parks once).
  double parks_per_call() const;

  double ratio() const { return bound_s > 0 ? makespan_s / bound_s : 0; }
  // Requests per rating obtained: requests / (jobs completed * 5).
  double requests_per_rating() const;
  // "sify 61 > 40" for each portal whose max_in_window exceeded `allowed`.
  std::vector<std::string> over_limit() const;
};

class Harness {
 public:
  // Starts the server on 127.0.0.1, port 0, with setup.portals' options,
  // and fills in setup.server_url and each portal's url.
  static Result<std::unique_ptr<Harness>> start(BenchSetup& setup);

  // Runs one row. A strategy that reports itself unavailable gets a row
  // with its note and no measurements.
  Row run(const std::string& name, const BenchSetup& setup,
          const std::function<RunResult(const BenchSetup&)>& strategy);

 private:
  Harness(std::unique_ptr<mock_portal::MockPortalServer> server, std::unique_ptr<http::Client> client)
      : server_(std::move(server)), client_(std::move(client)) {}

  Status reset_server(const BenchSetup& setup);
  Result<mock_portal::Stats> server_stats(const BenchSetup& setup);

  std::unique_ptr<mock_portal::MockPortalServer> server_;
  std::unique_ptr<http::Client> client_;  // for /_reset and /_stats only
};

// The process's peak resident set size so far, in KiB.
long peak_rss_kib();

}  // namespace ratchet::bench
