// The HTTP client the engine offers plugins: one Client per plugin, built
// from that plugin's call policy (timeouts, size and redirect bounds, TLS).
//
//   auto client = http::Client::create({.timeout = 5s});
//   auto r = (*client)->perform({.url = "http://127.0.0.1:8080/imdb/movies/Up"}, stop);
//   if (!r) log(r.error().message);            // transport failure
//   else if (r->status == 429) ...              // an HTTP answer, whatever its status
//
// A Client keeps connections open between requests and reuses them (keep-
// alive); TLS certificates are verified unless `verify_tls` is false. Every
// request is bounded: connect and total timeouts, response size (the
// transfer is aborted past the limit), redirects; and a request stops
// promptly when its stop_token is triggered.
//
// Redirects (301, 302, 303, 307, 308) are followed up to max_redirects:
//   - never from https to http: that fails with kTls, nothing is sent;
//   - to another origin (scheme, host or port differ: 127.0.0.1 and
//     localhost are two origins, so are two ports of one host) without
//     Authorization, Proxy-Authorization, Cookie and the request's
//     secret_headers, for that hop and every later one;
//   - 303, and 301/302 after a POST, go on as GET without the body (nor its
//     Content-Type); 307 and 308 repeat the method and body.
//
// Ownership: create() returns the sole owner. Responses are plain values.
// Thread-safety: perform() may be called from many threads at once; each
// call runs on its own connection, taken from a small pool of idle ones.
#pragma once

#include <chrono>
#include <cstdint>
#include <expected>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "http/headers.hpp"
#include "http/transport_error.hpp"
#include "ratchet/status.hpp"

namespace ratchet::http {

struct Request {
  std::string method = "GET";  // any token; GET, HEAD, POST, PUT, PATCH, DELETE are usual
  std::string url{};           // absolute http:// or https:// URL
  std::vector<std::pair<std::string, std::string>> headers{};  // sent as given; no CR or LF allowed
  std::string body{};  // sent when non-empty (and always for POST/PUT/PATCH)
  // Overrides ClientOptions::timeout for this request (e.g. a per-try timeout).
  std::optional<std::chrono::milliseconds> timeout{};
  // Names of the headers whose values hold a secret (an API key header such
  // as X-Api-Key): like Authorization, Proxy-Authorization and Cookie, they
  // are never sent to another origin on a redirect.
  std::vector<std::string> secret_headers{};
  // Asked once the connection for the first hop is made (or reused), right
  // before its request leaves: the last moment to decide that the request
  // goes at all, after whatever connecting and the TLS handshake took. An
  // answer (a reason) holds the request back: nothing is sent, and perform()
  // fails with kHeldBack and that reason. Called on the thread that runs
  // perform(); it must not throw. Later hops of a redirect are not asked.
  std::function<std::optional<std::string>()> before_send{};
};

struct Response {
  int status = 0;     // the final response's status, after redirects
  Headers headers{};  // the final response's header fields
  std::string body{};
};

struct ClientOptions {
  std::chrono::milliseconds connect_timeout{10'000};  // > 0; capped by the total timeout
  std::chrono::milliseconds timeout{30'000};          // whole request, redirects included; > 0
  std::int64_t max_response_bytes = 8 * 1024 * 1024;  // body and headers; > 0
  int max_redirects = 5;  // >= 0; with 0 a 3xx is returned as the response, not followed
  bool verify_tls = true;
  std::string user_agent = "ratchet";
  std::optional<std::filesystem::path> ca_file{};  // PEM bundle instead of the system's
  std::size_t max_idle_connections = 8;            // idle connections kept for reuse; >= 1
  // Sends Accept-Encoding for gzip/brotli/deflate and decodes the answer
  // (max_response_bytes then bounds the decoded size). Off by default: API
  // answers are small, and a server compressing each one can cost more time
  // than it saves (cpp-httplib's brotli takes ~2 ms per answer).
  bool accept_compression = false;
};

class Client {
 public:
  virtual ~Client() = default;

  // The libcurl-backed client. Fails with kInvalidArgument for options out of
  // range or a ca_file that does not exist, kInternal if libcurl cannot start.
  [[nodiscard]] static Result<std::unique_ptr<Client>> create(ClientOptions options);

  // Sends the request and returns the final response of any status, or why
  // there is none. Never throws for a network condition.
  virtual std::expected<Response, TransportError> perform(const Request& request,
                                                          std::stop_token stop = {}) = 0;

  virtual const ClientOptions& options() const noexcept = 0;
};

}  // namespace ratchet::http
