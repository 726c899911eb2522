// An HTTP server (cpp-httplib) that a slow or greedy client cannot hold:
//
// - A connection that sends no request within `timeout` (a new one, or one
//   kept alive after an answer) is closed. While it waits it holds no
//   thread (connection_pool.hpp): `workers` threads serve the requests that
//   have come, and past `max_connections` the connection that has waited
//   longest is closed.
// - A request (its head, and a body of at most `max_body` bytes with a
//   Content-Length) must arrive whole within `timeout` of its first byte,
//   and is gathered without a thread; its answer must then be written
//   within `timeout` (and a body sent after "100 Continue" read within
//   it): a client that drips its request byte by byte, or reads the answer
//   that way, is disconnected when the time is up. (cpp-httplib's own timeouts bound each
//   read and write, not the request, so a drip of one byte every few
//   seconds would hold a worker thread for ever.)
// - A body larger than `max_body` bytes, a chunked body (whose size is not
//   known before it is read) and a body without a length are refused with
//   413 (411 for the last) before any of it is read, also when the client
//   asks `Expect: 100-continue`; the connection is then closed.
// - Requests a client sends before the answers to those before them
//   (HTTP/1.1 pipelining) are each answered, in order: the bytes read with
//   one request are kept for the next.
// - Served on a loopback address, a request whose Host names another host
//   is refused with 403: a page of another site whose name was made to
//   resolve to 127.0.0.1 (DNS rebinding) is same-origin with this server in
//   the browser, and could read what it serves without a credential.
//
// Routes are registered as on any httplib::Server, but a check that runs
// before routing goes in with admit(): the server's own pre-routing handler
// refuses bodies, and calls it for every request it did not refuse. Stopping
// (stop()) lets each connection finish its current request, which takes at
// most `timeout`.
//
// Thread-safety: as httplib::Server; requests are served on the pool's
// workers.
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "connection_pool.hpp"
#include "ratchet/status.hpp"

namespace ratchet::cli {

// Whether `host` (of HOST:PORT, an IPv6 address with or without its
// brackets) names a loopback address: localhost, 127.0.0.0/8 or ::1.
bool is_loopback(std::string_view host);

// Whether a request's Host header names a loopback address, whatever its
// port (or is absent, as from an HTTP/1.0 client).
bool addressed_to_loopback(const httplib::Request& req);

struct BoundedServerOptions {
  std::chrono::milliseconds timeout{5000};
  std::size_t max_body = 64 * 1024;
  std::size_t workers = 8;            // requests served at once
  std::size_t max_connections = 256;  // open at once
};

class BoundedServer final : public httplib::Server {
 public:
  explicit BoundedServer(BoundedServerOptions options);

  ~BoundedServer() override { halt(); }

  // Runs `check` before routing every request whose body is not refused.
  // Set it before listening.
  void admit(HandlerWithResponse check) { admit_ = std::move(check); }

  struct Address {
    std::string host;  // an IPv6 address without its brackets
    int port = 0;
  };
  // HOST:PORT (port 0: any free one); the error names `flag` and shows
  // `example`.
  static Result<Address> parse_address(std::string_view address, std::string_view flag,
                                       std::string_view example);
  // Binds `at` and serves on a thread of its own until halt(). Returns the
  // port bound; the error names `flag`.
  Result<int> serve(const Address& at, std::string_view flag);
  // Stops serving and waits for the thread. Idempotent.
  void halt();

 private:
  // Replaces httplib's connection loop (a virtual of httplib::Server): the
  // new connection waits for its first request in the pool.
  bool process_and_close_socket(socket_t sock) override;
  // On a pool worker: the requests that have come on `c`.
  void serve_connection(std::unique_ptr<ServerConnection> c);

  BoundedServerOptions options_;
  HandlerWithResponse admit_;
  bool loopback_ = false;  // served on a loopback address (set before serving)
  std::unique_ptr<ConnectionPool> pool_;
  std::thread thread_;
};

}  // namespace ratchet::cli
