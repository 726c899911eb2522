// `ratchet web`: the dashboard's pages, its JSON API (api.hpp) and
// /metrics, served over HTTP from one BoundedServer (a body over 64 KiB gets
// 413, a connection idle or slow for `timeout` is closed).
//
// Access (access.hpp): every request but GET /login needs the bearer token
// or a session cookie; /metrics needs neither when the server listens on a
// loopback address. POSTs made with the cookie need the session's CSRF
// token in `X-Ratchet-CSRF` and, when they name an Origin, this server's
// own. A read-only server refuses every POST with 403.
//
// Ownership: start() returns the sole owner; destroying it stops serving.
// Thread-safety: requests are served on the server's threads and call the
// engine through its thread-safe API; the engine must outlive the server.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "bounded_server.hpp"
#include "ratchet/engine.hpp"
#include "ratchet/status.hpp"

namespace ratchet::cli::web {

struct WebOptions {
  std::string token;  // the bearer token; empty: log in with a code only
  bool read_only = false;
  std::chrono::milliseconds timeout{5000};
  std::chrono::seconds session_life{std::chrono::hours(12)};
};

class WebServer {
 public:
  // `address` is HOST:PORT (port 0: any free port).
  [[nodiscard]] static Result<std::unique_ptr<WebServer>> start(std::string_view address, Engine& engine,
                                                                WebOptions options);
  ~WebServer();
  WebServer(const WebServer&) = delete;
  WebServer& operator=(const WebServer&) = delete;

  int port() const noexcept;
  // "http://HOST:PORT"
  std::string origin() const;
  // A new one-time login link: origin() + "/login?code=...".
  std::string login_link();

  struct Impl;

 private:
  explicit WebServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

using cli::is_loopback;

}  // namespace ratchet::cli::web
