#include "bounded_server.hpp"

#include <fmt/format.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

namespace ratchet::cli {

namespace {

// Connections held by the kernel until accepted.
constexpr int kListenBacklog = 1024;

using SteadyClock = std::chrono::steady_clock;

// Waits until `fd` is ready for `events` (or failed, so the next call says
// why), at most until `deadline`.
bool wait_until(int fd, short events, SteadyClock::time_point deadline) {
  while (true) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - SteadyClock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 1 << 30)));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return false;
  }
}

void address_of(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  const int r = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                     : ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  if (r != 0) return;
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    port = ntohs(in->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* in = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &in->sin6_addr, text, sizeof text);
    port = ntohs(in->sin6_port);
  }
  ip = text;
}

// Runs each connection's first task where httplib's accept loop hands it
// over: process_and_close_socket only parks the socket (ConnectionPool).
class InlineQueue final : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {}
};

// What a read takes from the socket at most, beyond what it asked for (the
// next request's bytes, sent with this one).
constexpr std::size_t kReadAhead = 4096;

// One request's exchange on a connection: reads must be done by the read
// deadline; writes get `write_budget` from the first of them.
class DeadlineStream final : public httplib::Stream {
 public:
  DeadlineStream(int fd, Unread& unread, SteadyClock::time_point read_deadline,
                 std::chrono::milliseconds write_budget)
      : fd_(fd), read_deadline_(read_deadline), write_budget_(write_budget), in_(unread) {}

  bool is_readable() const override { return !in_.empty() || wait(POLLIN, read_deadline_); }
  bool is_writable() const override { return wait(POLLOUT, write_deadline()); }

  // Whether a read or write ran out of time: the connection is done then.
  bool expired() const { return expired_; }

  ssize_t read(char* ptr, size_t size) override {
    while (in_.empty()) {
      if (!wait(POLLIN, read_deadline_)) return -1;
      const ssize_t n = in_.receive(fd_, kReadAhead);
      if (n == 0) return 0;
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
    }
    const std::size_t n = std::min(size, in_.bytes.size() - in_.off);
    std::memcpy(ptr, in_.bytes.data() + in_.off, n);
    in_.off += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    while (true) {
      if (!wait(POLLOUT, write_deadline())) return -1;
      const ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n >= 0) return n;
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { address_of(fd_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address_of(fd_, false, ip, port); }
  socket_t socket() const override { return fd_; }

 private:
  bool wait(short events, SteadyClock::time_point deadline) const {
    if (wait_until(fd_, events, deadline)) return true;
    expired_ = true;
    return false;
  }
  SteadyClock::time_point write_deadline() const {
    if (!write_deadline_) write_deadline_ = SteadyClock::now() + write_budget_;
    return *write_deadline_;
  }

  int fd_;
  SteadyClock::time_point read_deadline_;
  std::chrono::milliseconds write_budget_;
  mutable std::optional<SteadyClock::time_point> write_deadline_;
  mutable bool expired_ = false;
  Unread& in_;
};

static_assert(kMaxFormBody == CPPHTTPLIB_FORM_URL_ENCODED_PAYLOAD_MAX_LENGTH,
              "the pool hands a form body over this size to a worker unread, as httplib refuses it");

// Why `req` is refused before its body is read; status 0: it is not.
struct Refusal {
  int status = 0;
  std::string message;
};

Refusal body_refusal(const httplib::Request& req, std::size_t max_body) {
  // A chunked body's size is known only once it has been read.
  if (req.has_header("Transfer-Encoding")) {
    return {413, "request body refused: a chunked body is not taken; send it with a Content-Length"};
  }
  if (req.has_header("Content-Length")) {
    const std::string value = req.get_header_value("Content-Length");
    std::uint64_t length = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), length);
    if (ec != std::errc{} || end != value.data() + value.size()) {
      return {400, "bad Content-Length: not a whole number of bytes"};
    }
    if (length > max_body) {
      return {413, "request body refused: " + std::to_string(length) + " bytes, over the " +
                       std::to_string(max_body) + " this server takes"};
    }
    const std::string type = req.get_header_value("Content-Type");
    if (type.starts_with("application/x-www-form-urlencoded") && length > kMaxFormBody) {
      return {413, "request body refused: a form-encoded body of " + std::to_string(length) +
                       " bytes, over the " + std::to_string(kMaxFormBody) +
                       " a form may take; send JSON (up to " + std::to_string(max_body) + " bytes) instead"};
    }
    return {};
  }
  // Without a length, httplib reads the body of these up to the end of the
  // connection.
  const std::string& m = req.method;
  if (m == "POST" || m == "PUT" || m == "PATCH" || m == "DELETE" || m == "PRI") {
    return {411, "request body refused: it has no Content-Length"};
  }
  return {};
}

void refuse(const Refusal& refusal, httplib::Response& res) {
  res.status = refusal.status;
  res.set_content(refusal.message + "\n", "text/plain");
}

}  // namespace

bool is_loopback(std::string_view host) {
  if (host == "localhost") return true;
  std::string h(host);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  in_addr v4{};
  if (inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, h.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

bool addressed_to_loopback(const httplib::Request& req) {
  if (!req.has_header("Host")) return true;
  const std::string value = req.get_header_value("Host");
  std::string_view host = value;
  // "[::1]:8077", "localhost:8077", "127.0.0.1": the port goes, brackets stay.
  const auto colon = host.rfind(':');
  const bool bracketed = !host.empty() && host.front() == '[';
  if (colon != std::string_view::npos && (bracketed ? host.find(']') < colon : host.find(':') == colon))
    host = host.substr(0, colon);
  return is_loopback(host);
}

BoundedServer::BoundedServer(BoundedServerOptions options) : options_(options) {
  // cpp-httplib sets SO_REUSEPORT by default, with which a second server
  // binds a port already served and takes half of its connections, instead
  // of failing as in use.
  set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  set_payload_max_length(options_.max_body);
  new_task_queue = [] { return new InlineQueue; };
  const auto t = options_.timeout;
  set_read_timeout(t);
  set_write_timeout(t);
  set_keep_alive_timeout(std::max<time_t>(1, std::chrono::ceil<std::chrono::seconds>(t).count()));
  const std::size_t max_body = options_.max_body;
  set_expect_100_continue_handler([max_body](const httplib::Request& req, httplib::Response& res) {
    const Refusal refusal = body_refusal(req, max_body);
    if (refusal.status == 0) return 100;
    refuse(refusal, res);
    return refusal.status;
  });
  set_pre_routing_handler([this, max_body](const httplib::Request& req, httplib::Response& res) {
    const Refusal refusal = body_refusal(req, max_body);
    if (refusal.status != 0) {
      refuse(refusal, res);
      return HandlerResponse::Handled;
    }
    if (loopback_ && !addressed_to_loopback(req)) {
      res.status = 403;
      res.set_content(
          "refused: this server listens on a loopback address and answers only requests addressed to it "
          "(Host: localhost, 127.0.0.1 or [::1]); listen on another address to serve other names\n",
          "text/plain");
      return HandlerResponse::Handled;
    }
    return admit_ ? admit_(req, res) : HandlerResponse::Unhandled;
  });
}

bool BoundedServer::process_and_close_socket(socket_t sock) {
  pool_->park(std::make_unique<ServerConnection>(sock, keep_alive_max_count_));
  return true;
}

void BoundedServer::serve_connection(std::unique_ptr<ServerConnection> c) {
  bool refused = false;
  while (c->requests_left > 0) {
    // No whole request here: the connection waits for it in the pool,
    // without a thread.
    if (!c->unread.has_request(options_.max_body)) {
      pool_->park(std::move(c));
      return;
    }
    DeadlineStream stream(c->fd(), c->unread, SteadyClock::now() + options_.timeout, options_.timeout);
    bool closed = false;
    const bool ok = process_request(stream, c->requests_left == 1, closed, [&](httplib::Request& req) {
      if (body_refusal(req, options_.max_body).status == 0) return;
      // The body stays unread: the connection ends with the answer, which
      // says so.
      refused = closed = true;
      req.headers.erase("Connection");
      req.headers.emplace("Connection", "close");
    });
    --c->requests_left;
    // A request that ran out of time may have been answered 400, and what
    // follows it is no request either.
    if (!ok || closed || stream.expired() || pool_->stopping()) break;
  }
  ::shutdown(c->fd(), SHUT_WR);
  if (refused) {
    // Closing with the refused body unread would reset the connection, and
    // the client could lose the answer: read and drop what it still sends
    // until it closes, for at most the timeout.
    const auto deadline = SteadyClock::now() + options_.timeout;
    char sink[4096];
    while (wait_until(c->fd(), POLLIN, deadline) && ::recv(c->fd(), sink, sizeof sink, MSG_DONTWAIT) > 0) {
    }
  }
}

Result<BoundedServer::Address> BoundedServer::parse_address(std::string_view address, std::string_view flag,
                                                            std::string_view example) {
  const auto colon = address.rfind(':');
  int port = -1;
  if (colon != std::string_view::npos) {
    auto [p, ec] = std::from_chars(address.data() + colon + 1, address.data() + address.size(), port);
    if (ec != std::errc{} || p != address.data() + address.size()) port = -1;
  }
  if (colon == std::string_view::npos || colon == 0 || port < 0 || port > 65535) {
    return fail(
        Error::invalid_argument(fmt::format("{} \"{}\" is not HOST:PORT, e.g. {}", flag, address, example)));
  }
  std::string host(address.substr(0, colon));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return Address{std::move(host), port};
}

Result<int> BoundedServer::serve(const Address& at, std::string_view flag) {
  loopback_ = is_loopback(at.host);
  const int port = at.port == 0 ? bind_to_any_port(at.host) : (bind_to_port(at.host, at.port) ? at.port : -1);
  if (port <= 0) {
    return fail(Error::io(
        fmt::format("{}: cannot listen on {}:{} (in use, or not a local address)", flag, at.host, at.port)));
  }
  // cpp-httplib's library listens with a backlog of 5: a browser and a
  // scraper connecting at once would have the rest dropped and retried by
  // TCP a second later. Listening again sets the backlog anew.
  if (::listen(svr_sock_, kListenBacklog) != 0) {
    stop();
    return fail(
        Error::io(fmt::format("{}: cannot listen on {}:{}: {}", flag, at.host, port, std::strerror(errno))));
  }
  pool_ = std::make_unique<ConnectionPool>(
      options_.workers, options_.max_connections, options_.timeout, options_.max_body,
      [this](std::unique_ptr<ServerConnection> c) { serve_connection(std::move(c)); });
  thread_ = std::thread([this] { listen_after_bind(); });
  // Until the thread listens, stop() would not reach it and halt() would
  // wait for ever.
  for (int i = 0; i < 1000 && !is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return port;
}

void BoundedServer::halt() {
  stop();
  if (thread_.joinable()) thread_.join();
  if (pool_) pool_->stop();
}

}  // namespace ratchet::cli
