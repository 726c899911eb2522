#include "mock_portal/server.hpp"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <time.h>

#include <httplib.h>
#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "mock_portal/http_date.hpp"
#include "mock_portal/portal.hpp"

namespace ratchet::mock_portal {
namespace {

constexpr std::int64_t kMaxBytes = 64 * 1024 * 1024;

bool is_loopback(const std::string& host) {
  if (host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

std::int64_t to_int(const std::string& digits) {
  // The routes' patterns admit only up to 9 digits, so this cannot overflow.
  return std::stoll(digits);
}

// Clients connecting at once, held by the kernel until accepted.
constexpr int kListenBacklog = 1024;

}  // namespace

struct MockPortalServer::Impl {
  ServerOptions options;
  std::string host;
  std::map<std::string, std::unique_ptr<Portal>, std::less<>> portals;
  httplib::Server http;
  std::thread listener;
  int port = -1;
  socket_t listening = -1;  // the bound socket (set_socket_options)

  std::mutex mu;  // guards the fields below
  std::condition_variable wake;
  bool stopping = false;
  std::set<std::pair<std::string, int>> connections;
  std::vector<RequestRecord> log;
  std::map<std::string, std::int64_t, std::less<>> sequence;  // movie requests per portal, for faults
  int in_flight = 0;
  // Per-account limits, made on an account's first request: "<portal>@<account>".
  std::map<std::string, std::unique_ptr<Portal>, std::less<>> accounts;

  // The limit of `account` at a portal with options `o`: the portal's dialect
  // and window, account_limit requests, nothing injected.
  Portal& account_of(const std::string& portal, const std::string& account, const PortalOptions& o) {
    std::lock_guard lock(mu);
    auto& slot = accounts[portal + "@" + account];
    if (!slot) {
      PortalOptions a;
      a.dialect = o.dialect;
      a.limit = o.account_limit;
      a.window = o.window;
      a.reset_style = o.reset_style;
      a.retry_after_style = o.retry_after_style;
      a.date_skew = o.date_skew;
      slot = std::make_unique<Portal>(portal + "@" + account, a, options.seed);
    }
    return *slot;
  }
  void add_account_stats(Stats& s) {
    std::lock_guard lock(mu);
    for (const auto& [name, p] : accounts) s.portals.emplace(name, p->stats());
  }

  static std::int64_t wall_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  static std::int64_t boot_us() {
    timespec ts{};
    ::clock_gettime(CLOCK_BOOTTIME, &ts);
    return std::int64_t{ts.tv_sec} * 1'000'000 + ts.tv_nsec / 1000;
  }

  // Logs the arrival; returns its index in the log and the portal's request number.
  std::pair<std::size_t, std::int64_t> arrive(const std::string& portal, const std::string& movie) {
    std::lock_guard lock(mu);
    ++in_flight;
    log.push_back({portal, movie, wall_us(), 0, 0, boot_us()});
    return {log.size() - 1, ++sequence[portal]};
  }
  void answered(std::size_t index, int status) {
    std::lock_guard lock(mu);
    --in_flight;
    if (index < log.size()) {
      log[index].answered_us = wall_us();
      log[index].status = status;
    }
  }

  void note_connection(const httplib::Request& req) {
    std::lock_guard lock(mu);
    connections.emplace(req.remote_addr, req.remote_port);
  }

  // Real-time pause that ends early when the server stops, so stop() never
  // waits for an added latency.
  void pause(std::chrono::milliseconds d) {
    if (d.count() <= 0) return;
    std::unique_lock lock(mu);
    wake.wait_for(lock, d, [this] { return stopping; });
  }

  void set_date(httplib::Response& res, std::chrono::seconds skew) const {
    res.headers.erase("Date");
    res.set_header("Date", format_http_date(options.clock->now() + skew));
  }

  void install_routes();
};

void MockPortalServer::Impl::install_routes() {
  // Every handler converts exceptions to a 500 here, at the edge, so a bug in
  // the mock shows up as an answer, not as a dropped connection.
  auto guarded = [this](auto fn) {
    return [this, fn](const httplib::Request& req, httplib::Response& res) {
      note_connection(req);
      try {
        fn(req, res);
      } catch (const std::exception& e) {
        res.status = 500;
        res.set_content(nlohmann::json{{"error", std::string("mock portal bug: ") + e.what()}}.dump(),
                        "application/json");
      }
    };
  };
  // Every answer carries a Date, including 404s for unknown paths; a portal
  // replaces it with its own skewed one.
  http.set_pre_routing_handler([this](const httplib::Request&, httplib::Response& res) {
    set_date(res, std::chrono::seconds(0));
    return httplib::Server::HandlerResponse::Unhandled;
  });

  http.Get(
      R"(/([a-z_]+)/movies/(.+))", guarded([this](const httplib::Request& req, httplib::Response& res) {
        const auto it = portals.find(req.matches[1].str());
        if (it == portals.end()) {
          res.status = 404;
          res.set_content(R"({"error":"no such portal"})", "application/json");
          return;
        }
        Portal& portal = *it->second;
        const PortalOptions o = portal.options();
        const auto [index, number] = arrive(it->first, req.matches[2].str());
        struct Answered {
          Impl* impl;
          std::size_t index;
          const httplib::Response& res;
          ~Answered() { impl->answered(index, res.status); }
        } on_exit{this, index, res};
        const bool faulty = o.fault != Fault::kNone && number % o.fault_every == 0;
        pause(faulty && o.fault == Fault::kHang ? std::chrono::milliseconds(60000) : o.latency);
        // An account over its own limit is refused before the portal counts it.
        Answer a;
        // What the request costs at the portal (a query's points): 1 to 1000 units.
        std::int64_t cost = 1;
        if (req.has_param("cost")) {
          const std::string text = req.get_param_value("cost");
          const bool valid =
              !text.empty() && text.size() <= 4 &&
              std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
              std::stoi(text) >= 1 && std::stoi(text) <= 1000;
          if (!valid) {
            res.status = 400;
            res.set_content(R"({"error":"cost: a whole number from 1 to 1000"})", "application/json");
            return;
          }
          cost = std::stoi(text);
        }
        const std::string account = req.has_param("account") ? req.get_param_value("account") : "";
        if (o.account_limit > 0 && !account.empty()) {
          const bool valid = account.size() <= 64 && std::all_of(account.begin(), account.end(), [](char c) {
                               return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
                             });
          if (!valid) {
            res.status = 400;
            res.set_content(R"({"error":"account: 1-64 letters, digits, '_' or '-'"})", "application/json");
            return;
          }
          a = account_of(it->first, account, o).handle(req.matches[2].str(), *options.clock, cost);
        }
        if (a.status != 429) a = portal.handle(req.matches[2].str(), *options.clock, cost);
        res.status = a.status;
        for (auto& [k, v] : a.headers) res.set_header(k, v);
        set_date(res, o.date_skew);
        if (faulty && o.fault == Fault::kReset) {
          // Half the promised body, then the connection is dropped. The
          // length is taken before the body moves into the provider
          // (argument order is unspecified).
          const std::size_t promised = a.body.size() * 2 + 16;
          res.set_content_provider(
              promised, "application/json",
              [body = std::move(a.body)](std::size_t offset, std::size_t, httplib::DataSink& sink) {
                if (offset == 0) sink.write(body.data(), body.size());
                return offset == 0;
              });
          return;
        }
        if (faulty && o.fault == Fault::kGarbage) {
          res.status = 200;
          res.set_content(std::string("\x01\xff\xfe{{rating:: <<garbage>>"), "application/json");
          return;
        }
        if (faulty && o.fault == Fault::kHuge) {
          res.status = 200;
          res.set_content(R"({"rating": 7.0, "padding": ")" + std::string(32 << 20, 'x') + "\"}",
                          "application/json");
          return;
        }
        res.set_content(std::move(a.body), a.content_type.c_str());
      }));

  http.Get("/_stats", guarded([this](const httplib::Request&, httplib::Response& res) {
             Stats s;
             for (const auto& [name, p] : portals) s.portals.emplace(name, p->stats());
             add_account_stats(s);
             {
               std::lock_guard lock(mu);
               s.connections = static_cast<std::int64_t>(connections.size());
             }
             res.set_content(to_json(s).dump(), "application/json");
           }));

  http.Post("/_reset", guarded([this](const httplib::Request&, httplib::Response& res) {
              for (auto& [_, p] : portals) p->reset();
              {
                std::lock_guard lock(mu);
                connections.clear();
                accounts.clear();
              }
              res.set_content(R"({"reset":true})", "application/json");
            }));

  http.Get(R"(/_redirect/(\d{1,9}))", guarded([](const httplib::Request& req, httplib::Response& res) {
             const auto n = to_int(req.matches[1].str());
             if (n <= 0) {
               res.set_content("arrived", "text/plain");
               return;
             }
             res.status = 302;
             res.set_header("Location", "/_redirect/" + std::to_string(n - 1));
           }));

  http.Get(R"(/_bytes/(\d{1,9}))", guarded([](const httplib::Request& req, httplib::Response& res) {
             const auto n = std::min(kMaxBytes, to_int(req.matches[1].str()));
             res.set_content(std::string(static_cast<std::size_t>(n), 'x'), "application/octet-stream");
           }));

  http.Get(R"(/_delay/(\d{1,9}))", guarded([this](const httplib::Request& req, httplib::Response& res) {
             pause(std::chrono::milliseconds(to_int(req.matches[1].str())));
             res.set_content("waited", "text/plain");
           }));

  auto echo = guarded([](const httplib::Request& req, httplib::Response& res) {
    nlohmann::json headers = nlohmann::json::object();
    for (const auto& [k, v] : req.headers) headers[k].push_back(v);
    res.set_content(nlohmann::json{{"method", req.method}, {"headers", headers}, {"body", req.body}}.dump(),
                    "application/json");
  });
  http.Get("/_echo", echo);
  http.Post("/_echo", echo);
  http.Put("/_echo", echo);
  http.Patch("/_echo", echo);
  http.Delete("/_echo", echo);
}

MockPortalServer::MockPortalServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MockPortalServer::~MockPortalServer() { stop(); }

Result<std::unique_ptr<MockPortalServer>> MockPortalServer::start(ServerOptions options) {
  if (!is_loopback(options.host)) {
    return fail(Error::invalid_argument("mock portal: host '" + options.host +
                                        "' is not a loopback address; it only ever listens on 127.0.0.1, "
                                        "::1 or localhost"));
  }
  if (options.port < 0 || options.port > 65535) {
    return fail(
        Error::invalid_argument("mock portal: port " + std::to_string(options.port) + " is out of range"));
  }
  if (options.threads < 1) return fail(Error::invalid_argument("mock portal: threads must be >= 1"));
  if (!options.clock) options.clock = SystemClock::instance();
  for (const auto& [name, _] : options.portals) {
    const auto& names = portal_names();
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      return fail(Error::invalid_argument("mock portal: unknown portal '" + name + "'"));
    }
  }

  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->host = impl->options.host == "localhost" ? "127.0.0.1" : impl->options.host;
  for (const auto& name : portal_names()) {
    const auto it = impl->options.portals.find(name);
    impl->portals.emplace(
        name, std::make_unique<Portal>(name, it == impl->options.portals.end() ? PortalOptions{} : it->second,
                                       impl->options.seed));
  }
  const auto threads = static_cast<std::size_t>(impl->options.threads);
  impl->http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  // Clients keep connections open for many requests; an idle one is let go
  // after a second so stop() is never held up long by a client's idle socket.
  impl->http.set_keep_alive_max_count(100000);
  impl->http.set_keep_alive_timeout(1);
  // Headers and body go out in separate writes; without this, Nagle and the
  // client's delayed ACK add 40 ms to every answer on a reused connection.
  impl->http.set_tcp_nodelay(true);
  // cpp-httplib sets SO_REUSEPORT by default, which would let a second
  // server bind the same port and split the traffic (and the counts).
  // The listening socket is kept to raise its backlog once bound.
  impl->http.set_socket_options([raw = impl.get()](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    raw->listening = sock;
  });
  impl->install_routes();

  if (impl->options.port == 0) {
    impl->port = impl->http.bind_to_any_port(impl->host);
  } else if (impl->http.bind_to_port(impl->host, impl->options.port)) {
    impl->port = impl->options.port;
  }
  if (impl->port <= 0) {
    return fail(Error::io("mock portal: cannot listen on " + impl->host + ":" +
                          std::to_string(impl->options.port) +
                          " (in use?); choose another --port or 0 for any free port"));
  }
  // cpp-httplib's library listens with a backlog of 5 (the header's
  // CPPHTTPLIB_LISTEN_BACKLOG does not reach the compiled library): a
  // client opening more connections at once has the rest dropped and
  // retried by TCP a second later, which a rate-limit test would read as
  // the server's doing. Listening again sets the backlog anew.
  if (impl->listening < 0 || ::listen(impl->listening, kListenBacklog) != 0) {
    impl->http.stop();
    return fail(Error::io("mock portal: cannot raise the listen backlog on " + impl->host + ":" +
                          std::to_string(impl->port)));
  }
  Impl* raw = impl.get();
  impl->listener = std::thread([raw] { raw->http.listen_after_bind(); });
  // stop() is only effective once the accept loop runs; wait for it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!impl->http.is_running()) {
    if (std::chrono::steady_clock::now() > deadline) {
      impl->http.stop();
      impl->listener.join();
      return fail(Error::internal("mock portal: the server thread did not start within 10 s"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return std::unique_ptr<MockPortalServer>(new MockPortalServer(std::move(impl)));
}

int MockPortalServer::port() const noexcept { return impl_->port; }

std::string MockPortalServer::base_url() const {
  const bool v6 = impl_->host.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + impl_->host + "]" : impl_->host) + ":" + std::to_string(impl_->port);
}

std::string MockPortalServer::portal_url(std::string_view portal) const {
  return base_url() + "/" + std::string(portal);
}

Stats MockPortalServer::stats() const {
  Stats s;
  for (const auto& [name, p] : impl_->portals) s.portals.emplace(name, p->stats());
  impl_->add_account_stats(s);
  std::lock_guard lock(impl_->mu);
  s.connections = static_cast<std::int64_t>(impl_->connections.size());
  return s;
}

void MockPortalServer::reset() {
  for (auto& [_, p] : impl_->portals) p->reset();
  std::lock_guard lock(impl_->mu);
  impl_->accounts.clear();
  impl_->connections.clear();
  impl_->log.clear();
  impl_->sequence.clear();
}

std::vector<RequestRecord> MockPortalServer::requests() const {
  std::lock_guard lock(impl_->mu);
  return impl_->log;
}

int MockPortalServer::in_flight() const {
  std::lock_guard lock(impl_->mu);
  return impl_->in_flight;
}

Status MockPortalServer::configure(std::string_view portal, PortalOptions options) {
  const auto it = impl_->portals.find(portal);
  if (it == impl_->portals.end()) {
    return fail(Error::not_found("mock portal: unknown portal '" + std::string(portal) + "'"));
  }
  it->second->configure(std::move(options));
  return {};
}

void MockPortalServer::stop() {
  if (!impl_ || !impl_->listener.joinable()) return;
  {
    std::lock_guard lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  impl_->http.stop();
  impl_->listener.join();
}

}  // namespace ratchet::mock_portal

// ThreadSanitizer builds only (kept in this file because every user of the
// server links it): the Debian cpp-httplib is a prebuilt shared library
// without TSan instrumentation. Its function-local statics are initialised
// once under a guard whose fast-path check TSan cannot see, so every later
// reader in another pool thread is reported as a race on memory "written" by
// the thread that ran the initialiser. Those reports are about httplib's
// internals, never our code; suppressing them here means test binaries need
// no TSAN_OPTIONS of their own. The definition is weak so that a binary with
// its own suppressions still links.
#if defined(__SANITIZE_THREAD__)
extern "C" __attribute__((weak, visibility("default"))) const char* __tsan_default_suppressions() {
  return "race:libcpp-httplib.so\n";
}
#endif
