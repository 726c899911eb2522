// One call of one portal for one movie, as every hand-made strategy makes it:
// GET {portal url}/movies/{movie} through ratchet's http::Client, and the
// rating read out of that portal's JSON shape.
//
// Also the small pieces the strategies share: an interruptible sleep and a
// seeded random source per worker.
//
// Thread-safety: call_portal may run on many threads at once (the Client
// allows it); a WorkerRandom belongs to one thread.
#pragma once

#include <chrono>
#include <optional>
#include <random>
#include <stop_token>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "http/client.hpp"
#include "setup.hpp"

namespace ratchet::bench {

struct CallResult {
  int status = 0;                // the HTTP status; 0 when no answer came (see error)
  http::Headers headers;         // the answer's header fields
  std::optional<double> rating;  // set on a 200 whose body holds the rating
  std::string error;             // transport failure or unreadable body

  bool ok() const { return rating.has_value(); }
  // Worth another try: throttled, a server error, or no answer at all.
  bool transient() const { return status == 429 || status >= 500 || status == 0; }
};

CallResult call_portal(http::Client& client, const PortalSetup& portal, std::string_view movie,
                       std::stop_token stop = {});

// The rating in `body` as `portal` shapes it (see mock_portal/bodies.hpp).
std::optional<double> read_rating(std::string_view portal, const nlohmann::json& body);

// A client for one strategy: connections for every worker kept warm.
Result<std::unique_ptr<http::Client>> make_client(const BenchSetup& setup);

// How a hand-made strategy begins: its client, and its result with a slot
// per job; without a client the result says why the row is unavailable.
struct StrategyStart {
  RunResult result;
  std::unique_ptr<http::Client> client;  // null: return result as it is
};
StrategyStart start_strategy(const BenchSetup& setup);

// Sleeps until `until` or until `stop` is requested; false if stopped.
bool sleep_until(std::chrono::system_clock::time_point until, std::stop_token stop);

// A per-worker random source, seeded from the run's seed and the worker's
// index so runs repeat.
class WorkerRandom {
 public:
  WorkerRandom(std::uint64_t seed, int worker) : engine_(seed * 1000003ULL + static_cast<unsigned>(worker)) {}
  // Uniform in [lo, hi).
  double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(engine_); }

 private:
  std::mt19937_64 engine_;
};

}  // namespace ratchet::bench
