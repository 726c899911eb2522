// An HTTP server (cpp-httplib) that a slow or greedy client cannot hold:
//
// - A connection that sends no request within `timeout` (a new one, or one
//   kept alive after an answer) is closed.
// - A request must arrive whole (request line, headers and body) within
//   `timeout` of its first byte, and its answer must be written within
//   `timeout`: a client that drips its request byte by byte, or reads the
//   answer that way, is disconnected when the time is up. (cpp-httplib's own
//   timeouts bound each read and write, not the request, so a drip of one
//   byte every few seconds would hold a worker thread for ever.)
// - A body larger than `max_body` bytes, a chunked body (whose size is not
//   known before it is read) and a body without a length are refused with
//   413 (411 for the last) before any of it is read, also when the client
//   asks `Expect: 100-continue`; the connection is then closed.
//
// Routes are registered as on any httplib::Server. Stopping (stop()) lets
// each connection finish its current request, which takes at most `timeout`.
//
// Thread-safety: as httplib::Server; connections are served on its thread
// pool.
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstddef>

namespace ratchet::cli {

struct BoundedServerOptions {
  std::chrono::milliseconds timeout{5000};
  std::size_t max_body = 64 * 1024;
};

class BoundedServer final : public httplib::Server {
 public:
  explicit BoundedServer(BoundedServerOptions options);

 private:
  // Replaces httplib's connection loop (a virtual of httplib::Server).
  bool process_and_close_socket(socket_t sock) override;
  // Whether a request starts on `sock` within the timeout, while the server runs.
  bool request_arrives(socket_t sock) const;

  BoundedServerOptions options_;
};

}  // namespace ratchet::cli
