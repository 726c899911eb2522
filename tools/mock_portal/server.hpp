// The mock portal server: five portals on one loopback port, for tests and
// the demo, in-process or as the ratchet-mock-portal command.
//
//   GET  /{portal}/movies/{name}   the portal's JSON for the movie (see bodies.hpp),
//                                  or 429 / 500 / 503 as its options say
//   GET  /_stats                   the counts (see stats.hpp) as JSON
//   POST /_reset                   forgets counts and limiter state
//   GET  /_redirect/{n}            302 to /_redirect/{n-1}; 200 at 0
//   GET  /_bytes/{n}               n bytes of body (at most 64 MiB)
//   GET  /_delay/{ms}              200 after ms milliseconds
//   ANY  /_echo                    {"method", "headers": {name: [values]}, "body"} of the request
// Every answer carries a Date header (the portal's clock plus its skew).
//
// Ownership: start() returns the sole owner; destroying it stops the server.
// Thread-safety: requests are served from a thread pool; every method may
// be called from any thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mock_portal/options.hpp"
#include "mock_portal/stats.hpp"
#include "ratchet/status.hpp"

namespace ratchet::mock_portal {

// One request to a portal's movie route, as the server saw it (real time,
// Unix microseconds); answered_us is 0 while it is being answered.
// arrived_boot_us is the arrival on CLOCK_BOOTTIME, which a step of the wall
// clock does not move: ratchet's own timeline is that plus the base its
// database holds (ratchet/clock.hpp), so times compared with the database's
// are taken from it.
struct RequestRecord {
  std::string portal;
  std::string movie;
  std::int64_t arrived_us = 0;
  std::int64_t answered_us = 0;
  int status = 0;  // the answer's HTTP status (0 while being answered)
  std::int64_t arrived_boot_us = 0;
};

class MockPortalServer {
 public:
  // Binds (port 0: any free port) and serves until stop(). Refuses any host
  // that is not a loopback address.
  static Result<std::unique_ptr<MockPortalServer>> start(ServerOptions options);

  ~MockPortalServer();
  MockPortalServer(const MockPortalServer&) = delete;
  MockPortalServer& operator=(const MockPortalServer&) = delete;

  int port() const noexcept;
  // "http://127.0.0.1:PORT"
  std::string base_url() const;
  // "http://127.0.0.1:PORT/imdb", the base_url a portal plugin is configured with.
  std::string portal_url(std::string_view portal) const;

  Stats stats() const;
  // Every movie request since start or reset, in arrival order.
  std::vector<RequestRecord> requests() const;
  // Movie requests being answered now.
  int in_flight() const;
  void reset();
  // Replaces one portal's options and forgets its limiter state.
  Status configure(std::string_view portal, PortalOptions options);

  // Stops accepting, cuts short any added latency, and joins the serving
  // threads. Idempotent.
  void stop();

  struct Impl;

 private:
  explicit MockPortalServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ratchet::mock_portal
