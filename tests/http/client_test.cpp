// http::Client against the mock portal server on a loopback port.
#include "http/client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <httplib.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <thread>

#include "mock_portal/bodies.hpp"
#include "mock_portal/http_date.hpp"
#include "mock_portal/server.hpp"

namespace ratchet::http {
namespace {

using namespace std::chrono_literals;
using mock_portal::Dialect;
using mock_portal::MockPortalServer;
using mock_portal::PortalOptions;
using mock_portal::ServerOptions;

// A loopback port that is bound but not listening: connecting to it is
// refused, and no other process can take it while the socket is open.
class ClosedPort {
 public:
  ClosedPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof addr;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ADD_FAILURE() << "cannot reserve a loopback port";
    }
    port_ = ntohs(addr.sin_port);
  }
  ~ClosedPort() {
    if (fd_ >= 0) ::close(fd_);
  }
  ClosedPort(const ClosedPort&) = delete;
  ClosedPort& operator=(const ClosedPort&) = delete;
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

class ClientTest : public ::testing::Test {
 protected:
  void start(ServerOptions options = {}) {
    auto s = MockPortalServer::start(std::move(options));
    ASSERT_TRUE(s) << s.error().to_string();
    server_ = std::move(*s);
  }
  // Server options whose clock stands still at a whole second.
  ServerOptions on_fake_clock(std::string portal, PortalOptions p) {
    ServerOptions o;
    o.clock = clock_;
    o.portals[std::move(portal)] = p;
    return o;
  }
  static std::unique_ptr<Client> make_client(ClientOptions options = {}) {
    auto c = Client::create(std::move(options));
    EXPECT_TRUE(c) << c.error().to_string();
    return c ? std::move(*c) : nullptr;
  }
  std::expected<Response, TransportError> get(Client& c, const std::string& path, std::stop_token stop = {}) {
    return c.perform(Request{.url = server_->base_url() + path}, stop);
  }

  std::shared_ptr<FakeClock> clock_ = std::make_shared<FakeClock>();
  std::unique_ptr<MockPortalServer> server_;  // declared before clients so it outlives them
};

TEST_F(ClientTest, Perform_Movie_ReturnsStatusHeadersAndBody) {
  start();
  auto client = make_client();
  auto r = get(*client, "/imdb/movies/" + std::string("The%20Dark%20Knight"));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->headers.get("content-type"), "application/json");
  EXPECT_TRUE(r->headers.get("DATE").has_value());
  const auto body = nlohmann::json::parse(r->body);
  EXPECT_EQ(body["title"], "The Dark Knight");
  EXPECT_DOUBLE_EQ(body["rating"].get<double>(), mock_portal::expected_rating("imdb", "The Dark Knight"));
}

TEST_F(ClientTest, Perform_FixedWindowDialect_HeadersArriveIntact) {
  start(on_fake_clock("imdb", {.dialect = Dialect::kFixedWindow, .limit = 2, .window = 1s}));
  auto client = make_client();
  const auto reset = std::to_string(
      std::chrono::duration_cast<std::chrono::seconds>(clock_->now().time_since_epoch()).count() + 1);
  auto first = get(*client, "/imdb/movies/Up");
  auto second = get(*client, "/imdb/movies/Up");
  auto third = get(*client, "/imdb/movies/Up");
  ASSERT_TRUE(first && second && third);
  EXPECT_EQ(first->status, 200);
  EXPECT_EQ(first->headers.get("X-RateLimit-Limit"), "2");
  EXPECT_EQ(first->headers.get("X-RateLimit-Remaining"), "1");
  EXPECT_EQ(first->headers.get("X-RateLimit-Reset"), reset);
  EXPECT_EQ(second->headers.get("x-ratelimit-remaining"), "0");
  EXPECT_EQ(third->status, 429);
  EXPECT_EQ(third->headers.get("X-RateLimit-Remaining"), "0");
  EXPECT_EQ(third->headers.get("X-RateLimit-Reset"), reset);
  EXPECT_EQ(third->headers.get("Date"), mock_portal::format_http_date(clock_->now()));
}

TEST_F(ClientTest, Perform_FixedWindowDeltaReset_ResetIsSecondsFromNow) {
  start(on_fake_clock("sify", {.dialect = Dialect::kFixedWindow,
                               .limit = 5,
                               .window = 60s,
                               .reset_style = mock_portal::ResetStyle::kDeltaSeconds}));
  clock_->set(TimePoint(std::chrono::hours(24 * 365 * 50)) + 15s);
  auto client = make_client();
  auto r = get(*client, "/sify/movies/Up");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->headers.get("X-RateLimit-Reset"), "45");
}

TEST_F(ClientTest, Perform_TokenBucketSeconds_429CarriesRetryAfter) {
  start(on_fake_clock("netflix", {.dialect = Dialect::kTokenBucket, .limit = 1, .window = 10s}));
  auto client = make_client();
  auto ok = get(*client, "/netflix/movies/Up");
  auto throttled = get(*client, "/netflix/movies/Up");
  ASSERT_TRUE(ok && throttled);
  EXPECT_EQ(ok->status, 200);
  EXPECT_FALSE(ok->headers.contains("Retry-After"));
  EXPECT_EQ(throttled->status, 429);
  EXPECT_EQ(throttled->headers.get("retry-after"), "10");
}

TEST_F(ClientTest, Perform_TokenBucketHttpDate_RetryAfterIsADate) {
  start(on_fake_clock("amazon_prime", {.dialect = Dialect::kTokenBucket,
                                       .limit = 1,
                                       .window = 10s,
                                       .retry_after_style = mock_portal::RetryAfterStyle::kHttpDate}));
  auto client = make_client();
  ASSERT_TRUE(get(*client, "/amazon_prime/movies/Up"));
  auto throttled = get(*client, "/amazon_prime/movies/Up");
  ASSERT_TRUE(throttled);
  EXPECT_EQ(throttled->status, 429);
  EXPECT_EQ(throttled->headers.get("Retry-After"), mock_portal::format_http_date(clock_->now() + 10s));
}

TEST_F(ClientTest, Perform_IetfDialect_RateLimitHeadersArriveIntact) {
  start(on_fake_clock("rotten_tomatoes", {.dialect = Dialect::kIetf, .limit = 10, .window = 1s}));
  auto client = make_client();
  auto r = get(*client, "/rotten_tomatoes/movies/Up");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->headers.get("RateLimit"), "limit=10, remaining=9, reset=1");
  EXPECT_EQ(r->headers.get("RateLimit-Policy"), "10;w=1");
}

TEST_F(ClientTest, Perform_Bare429_NoRateLimitHeaders) {
  start(on_fake_clock("imdb", {.dialect = Dialect::kBare429, .limit = 1, .window = 1s}));
  auto client = make_client();
  ASSERT_TRUE(get(*client, "/imdb/movies/Up"));
  auto r = get(*client, "/imdb/movies/Up");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  for (const auto& [name, value] : r->headers) {
    EXPECT_EQ(name.find("RateLimit"), std::string::npos) << name;
    EXPECT_EQ(name.find("Retry-After"), std::string::npos) << name;
  }
}

TEST_F(ClientTest, Perform_ServerError_ReturnedAsResponseNotTransportError) {
  start(on_fake_clock("imdb", {.error_rate = 1.0}));
  auto client = make_client();
  auto r = get(*client, "/imdb/movies/Up");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->status == 500 || r->status == 503) << r->status;
}

TEST_F(ClientTest, Perform_RequestHeadersAndBody_ReachServer) {
  start();
  auto client = make_client({.user_agent = "ratchet-test/1"});
  auto r = client->perform({.method = "POST",
                            .url = server_->base_url() + "/_echo",
                            .headers = {{"X-Api-Key", "k1"}, {"Content-Type", "application/json"}},
                            .body = R"({"a":1})"});
  ASSERT_TRUE(r) << r.error().message;
  const auto echo = nlohmann::json::parse(r->body);
  EXPECT_EQ(echo["method"], "POST");
  EXPECT_EQ(echo["body"], R"({"a":1})");
  EXPECT_EQ(echo.at("headers").at("X-Api-Key").at(0), "k1");
  EXPECT_EQ(echo.at("headers").at("User-Agent").at(0), "ratchet-test/1");
  EXPECT_FALSE(echo["headers"].contains("Expect"));
}

TEST_F(ClientTest, Perform_PutWithoutBody_SendsMethod) {
  start();
  auto client = make_client();
  auto r = client->perform({.method = "DELETE", .url = server_->base_url() + "/_echo"});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(nlohmann::json::parse(r->body)["method"], "DELETE");
}

TEST_F(ClientTest, Perform_LatencyBeyondTimeout_FailsWithTimeoutPromptly) {
  start();
  auto client = make_client({.timeout = 200ms});
  const auto t0 = std::chrono::steady_clock::now();
  auto r = get(*client, "/_delay/5000");
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, TransportError::kTimeout) << r.error().message;
  EXPECT_LT(elapsed, 3s);
}

TEST_F(ClientTest, Perform_PortalLatencyBeyondTimeout_FailsWithTimeout) {
  ServerOptions o;
  o.portals["netflix"] = {.latency = 5s};
  start(o);
  auto client = make_client({.timeout = 200ms});
  auto r = get(*client, "/netflix/movies/Up");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, TransportError::kTimeout) << r.error().message;
  EXPECT_NE(r.error().message.find("total 200 ms"), std::string::npos) << r.error().message;
}

TEST_F(ClientTest, Perform_PerRequestTimeout_OverridesClientTimeout) {
  start();
  auto client = make_client({.timeout = 30s});
  auto r = client->perform({.url = server_->base_url() + "/_delay/5000", .timeout = 200ms});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, TransportError::kTimeout);
}

TEST_F(ClientTest, Perform_TimeoutUnderAMillisecond_FailsAsTimedOutWithoutSending) {
  // libcurl reads a timeout of 0 ms as none: a server that never answers
  // would hold the worker for good.
  ServerOptions o;
  o.portals["netflix"] = {.latency = 3s};
  start(o);
  auto client = make_client({.timeout = 30s});
  for (auto budget : {0ms, -5ms}) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = client->perform({.url = server_->base_url() + "/netflix/movies/Up", .timeout = budget});
    const auto elapsed = std::chrono::steady_clock::now() - t0;
    ASSERT_FALSE(r) << budget.count();
    EXPECT_EQ(r.error().kind, TransportError::kTimeout) << r.error().message;
    EXPECT_NE(r.error().message.find("1 ms"), std::string::npos) << r.error().message;
    EXPECT_LT(elapsed, 1s);
  }
  EXPECT_EQ(server_->stats().portals.at("netflix").requests, 0);
}

TEST_F(ClientTest, Perform_ClosedPort_FailsWithConnect) {
  ClosedPort closed;
  auto client = make_client();
  auto r = client->perform({.url = "http://127.0.0.1:" + std::to_string(closed.port()) + "/imdb/movies/Up"});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, TransportError::kConnect) << r.error().message;
  EXPECT_NE(
      r.error().message.find("GET http://127.0.0.1:" + std::to_string(closed.port()) + "/imdb/movies/Up"),
      std::string::npos)
      << r.error().message;
}

// A server that takes the request and closes the connection without a
// reply may have acted on it: the error says the connection was lost, not
// that it could not connect.
TEST_F(ClientTest, Perform_ConnectionClosedWithoutAReply_SaysItWasLostNotThatItCouldNotConnect) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 1), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  std::thread hang_up([listener] {
    const int conn = ::accept(listener, nullptr, nullptr);
    if (conn < 0) return;
    char buf[4096];
    (void)::recv(conn, buf, sizeof buf, 0);  // the request arrived
    ::close(conn);
  });
  auto client = make_client();
  auto r =
      client->perform({.url = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/movies/Up"});
  hang_up.join();
  ::close(listener);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, TransportError::kConnect) << r.error().message;
  EXPECT_NE(r.error().message.find("connection was lost"), std::string::npos) << r.error().message;
  EXPECT_EQ(r.error().message.find("could not connect"), std::string::npos) << r.error().message;

  ClosedPort closed;
  auto refused = client->perform({.url = "http://127.0.0.1:" + std::to_string(closed.port()) + "/movies/Up"});
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("could not connect"), std::string::npos) << refused.error().message;
}

TEST_F(ClientTest, Perform_Failure_MessageHasNoQueryOrHeaderValues) {
  ClosedPort closed;
  auto client = make_client();
  auto r =
      client->perform({.url = "http://127.0.0.1:" + std::to_string(closed.port()) + "/x?api_key=QUERYSECRET",
                       .headers = {{"Authorization", "Bearer HEADERSECRET"}}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message.find("QUERYSECRET"), std::string::npos) << r.error().message;
  EXPECT_EQ(r.error().message.find("HEADERSECRET"), std::string::npos) << r.error().message;

  auto bad = client->perform({.url = "http://127.0.0.1:1/", .headers = {{"X-Key", "LINESECRET\r\nEvil: 1"}}});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, TransportError::kInvalidUrl);
  EXPECT_NE(bad.error().message.find("X-Key"), std::string::npos) << bad.error().message;
  EXPECT_EQ(bad.error().message.find("LINESECRET"), std::string::npos) << bad.error().message;
}

TEST_F(ClientTest, Perform_AcceptCompression_BodyDecoded) {
  start();
  auto client = make_client({.accept_compression = true});
  auto r = get(*client, "/imdb/movies/Up");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->headers.contains("Content-Encoding"));  // the mock compresses when asked
  EXPECT_EQ(nlohmann::json::parse(r->body), mock_portal::movie_json("imdb", "Up"));
}

TEST_F(ClientTest, Perform_ResponseOverLimit_FailsWithTooLarge) {
  start();
  auto client = make_client({.max_response_bytes = 4096});
  auto small = get(*client, "/_bytes/1000");
  ASSERT_TRUE(small) << small.error().message;
  EXPECT_EQ(small->body.size(), 1000u);
  auto large = get(*client, "/_bytes/100000");
  ASSERT_FALSE(large);
  EXPECT_EQ(large.error().kind, TransportError::kTooLarge) << large.error().message;
  EXPECT_NE(large.error().message.find("4096"), std::string::npos);
}

TEST_F(ClientTest, Perform_RedirectsWithinLimit_FollowedToFinalResponse) {
  start();
  auto client = make_client({.max_redirects = 3});
  auto r = get(*client, "/_redirect/3");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "arrived");
  EXPECT_FALSE(r->headers.contains("Location"));  // only the final response's fields
}

TEST_F(ClientTest, Perform_RedirectsBeyondLimit_FailsWithTooManyRedirects) {
  start();
  auto client = make_client({.max_redirects = 3});
  auto r = get(*client, "/_redirect/4");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, TransportError::kTooManyRedirects) << r.error().message;
}

TEST_F(ClientTest, Perform_ZeroRedirectsAllowed_ReturnsTheRedirect) {
  start();
  auto client = make_client({.max_redirects = 0});
  auto r = get(*client, "/_redirect/1");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->status, 302);
  EXPECT_EQ(r->headers.get("Location"), "/_redirect/0");
}

TEST_F(ClientTest, Perform_StopRequestedInFlight_FailsWithCancelledPromptly) {
  start();
  auto client = make_client();
  std::stop_source stop;
  std::jthread canceller([&stop] {
    std::this_thread::sleep_for(100ms);
    stop.request_stop();
  });
  const auto t0 = std::chrono::steady_clock::now();
  auto r = get(*client, "/_delay/10000", stop.get_token());
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, TransportError::kCancelled) << r.error().message;
  EXPECT_LT(elapsed, 3s);
  // The client stays usable after a cancelled transfer.
  auto again = get(*client, "/imdb/movies/Up");
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->status, 200);
}

TEST_F(ClientTest, Perform_StopAlreadyRequested_NothingSent) {
  start();
  auto client = make_client();
  std::stop_source stop;
  stop.request_stop();
  auto r = get(*client, "/imdb/movies/Up", stop.get_token());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, TransportError::kCancelled);
  EXPECT_EQ(server_->stats().portals.at("imdb").requests, 0);
}

TEST_F(ClientTest, Perform_BeforeSendHoldsItBack_ConnectedButNothingReachesTheServer) {
  start();
  auto client = make_client();
  Request req{.url = server_->base_url() + "/imdb/movies/Up"};
  int asked = 0;
  req.before_send = [&]() -> std::optional<std::string> {
    ++asked;
    return "the run's lease has ended";
  };
  auto r = client->perform(req);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, TransportError::kHeldBack);
  EXPECT_NE(r.error().message.find("the run's lease has ended"), std::string::npos) << r.error().message;
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(server_->stats().portals.at("imdb").requests, 0);
  // Asked after connecting: on a reused connection too, and a yes sends it.
  req.before_send = [&]() -> std::optional<std::string> {
    ++asked;
    return std::nullopt;
  };
  for (int i = 0; i < 2; ++i) {
    auto ok = client->perform(req);
    ASSERT_TRUE(ok) << ok.error().message;
    EXPECT_EQ(ok->status, 200);
  }
  EXPECT_EQ(asked, 3);
  EXPECT_EQ(server_->stats().portals.at("imdb").requests, 2);
}

TEST_F(ClientTest, Perform_BeforeSendThrows_HeldBackNotSent) {
  start();
  auto client = make_client();
  Request req{.url = server_->base_url() + "/imdb/movies/Up"};
  req.before_send = []() -> std::optional<std::string> { throw std::runtime_error("boom"); };
  auto r = client->perform(req);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, TransportError::kHeldBack);
  EXPECT_EQ(server_->stats().portals.at("imdb").requests, 0);
}

TEST_F(ClientTest, Perform_SequentialRequests_ReuseOneConnection) {
  start();
  auto client = make_client();
  for (int i = 0; i < 10; ++i) {
    auto r = get(*client, "/imdb/movies/Up");
    ASSERT_TRUE(r) << r.error().message;
  }
  EXPECT_EQ(server_->stats().connections, 1);
}

TEST_F(ClientTest, Perform_ManyThreads_AllSucceedOnFewConnections) {
  start();
  auto client = make_client();
  constexpr int kThreads = 4;
  constexpr int kPerThread = 25;
  std::atomic<int> ok{0};
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kPerThread; ++i) {
          auto r = get(*client, "/sify/movies/m" + std::to_string(t));
          if (r && r->status == 200 &&
              nlohmann::json::parse(r->body)["result"]["name"] == "m" + std::to_string(t)) {
            ++ok;
          }
        }
      });
    }
  }
  EXPECT_EQ(ok.load(), kThreads * kPerThread);
  const auto stats = server_->stats();
  EXPECT_EQ(stats.portals.at("sify").requests, kThreads * kPerThread);
  EXPECT_LE(stats.connections, kThreads);
}

TEST_F(ClientTest, Perform_HttpsToPlainHttpServer_FailsWithTls) {
  start();
  auto client = make_client({.timeout = 5s});
  auto r =
      client->perform({.url = "https://127.0.0.1:" + std::to_string(server_->port()) + "/imdb/movies/Up"});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, TransportError::kTls) << r.error().message;
}

TEST(ClientInvalid, Perform_BadUrlOrScheme_FailsWithInvalidUrl) {
  auto client = Client::create({});
  ASSERT_TRUE(client);
  for (const std::string url : {"", "not a url", "ftp://127.0.0.1/file", "file:///etc/passwd"}) {
    auto r = (*client)->perform({.url = url});
    ASSERT_FALSE(r) << url;
    EXPECT_EQ(r.error().kind, TransportError::kInvalidUrl) << url << ": " << r.error().message;
  }
  auto r = (*client)->perform({.method = "GE T", .url = "http://127.0.0.1:1/"});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, TransportError::kInvalidUrl);
}

TEST(ClientInvalid, Create_OptionsOutOfRange_InvalidArgument) {
  EXPECT_EQ(Client::create({.timeout = 0ms}).error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(Client::create({.max_response_bytes = 0}).error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(Client::create({.max_redirects = -1}).error().code(), ErrorCode::kInvalidArgument);
  auto missing = Client::create({.ca_file = "/nonexistent/ca.pem"});
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message().find("/nonexistent/ca.pem"), std::string::npos);
}

TEST(ClientInvalid, Create_Defaults_VerifyTls) {
  auto client = Client::create({});
  ASSERT_TRUE(client);
  EXPECT_TRUE((*client)->options().verify_tls);
}

// ------------------------------------------------------------ redirects
//
// Origins are scheme, host and port: 127.0.0.1 and localhost are two
// origins, and so are two ports of one host.

// A cpp-httplib server on a loopback port, serving in a thread of its own.
class LocalServer {
 public:
  using Setup = std::function<void(httplib::Server&, LocalServer&)>;

  explicit LocalServer(const Setup& setup, std::unique_ptr<httplib::Server> server = nullptr)
      : server_(server ? std::move(server) : std::make_unique<httplib::Server>()) {
    setup(*server_, *this);
    port_ = server_->bind_to_any_port("127.0.0.1");
    if (port_ <= 0) {
      ADD_FAILURE() << "cannot bind a loopback port";
      return;
    }
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!server_->is_running() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(1ms);
  }
  ~LocalServer() {
    server_->stop();
    if (thread_.joinable()) thread_.join();
  }
  LocalServer(const LocalServer&) = delete;
  LocalServer& operator=(const LocalServer&) = delete;

  int port() const { return port_; }
  // "http://HOST:PORT", HOST as given (127.0.0.1 or localhost).
  std::string url(const std::string& host = "127.0.0.1", const std::string& scheme = "http") const {
    return scheme + "://" + host + ":" + std::to_string(port_);
  }
  int requests() const { return requests_.load(); }
  void count() { ++requests_; }

 private:
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<int> requests_{0};
};

// Answers every request with the method, headers and body it received.
LocalServer::Setup echo_everything() {
  return [](httplib::Server& s, LocalServer& self) {
    s.set_pre_routing_handler([&self](const httplib::Request&, httplib::Response&) {
      self.count();  // before the answer is sent, so the client sees it counted
      return httplib::Server::HandlerResponse::Unhandled;
    });
    auto echo = [](const httplib::Request& req, httplib::Response& res) {
      nlohmann::json headers = nlohmann::json::object();
      for (const auto& [name, value] : req.headers) headers[name] = value;
      res.set_content(nlohmann::json{{"method", req.method}, {"headers", headers}, {"body", req.body}}.dump(),
                      "application/json");
    };
    s.Get(".*", echo);
    s.Post(".*", echo);
  };
}

// Redirects every request to `target` with `status`.
LocalServer::Setup redirect_to(std::function<std::string()> target, int status = 302) {
  return [target = std::move(target), status](httplib::Server& s, LocalServer& self) {
    s.set_pre_routing_handler([&self](const httplib::Request&, httplib::Response&) {
      self.count();  // before the answer is sent, so the client sees it counted
      return httplib::Server::HandlerResponse::Unhandled;
    });
    auto redirect = [target, status](const httplib::Request&, httplib::Response& res) {
      res.status = status;
      res.set_header("Location", target());
    };
    s.Get(".*", redirect);
    s.Post(".*", redirect);
  };
}

// Answers 429 with Retry-After: 30 and a 100 KB page, sent with its length
// or chunked.
LocalServer::Setup refusal_with_a_large_page(bool chunked) {
  return [chunked](httplib::Server& s, LocalServer&) {
    s.Get(".*", [chunked](const httplib::Request&, httplib::Response& res) {
      res.status = 429;
      res.set_header("Retry-After", "30");
      const std::string page(100'000, 'x');
      if (!chunked) {
        res.set_content(page, "text/html");
        return;
      }
      res.set_chunked_content_provider("text/html", [page](std::size_t offset, httplib::DataSink& sink) {
        if (offset >= page.size()) {
          sink.done();
          return true;
        }
        return sink.write(page.data() + offset, std::min<std::size_t>(4096, page.size() - offset));
      });
    });
  };
}

// A 429 (or any error) whose page is larger than max_response_bytes is
// still the server's answer: its status and headers say to wait. Failed as
// too large, a throttled call was a fatal error.
TEST(ClientErrorReply, LargerThanTheLimit_ReturnedWithItsStatusAndHeadersAndItsBodyCut) {
  for (const bool chunked : {false, true}) {
    SCOPED_TRACE(chunked ? "chunked" : "with Content-Length");
    LocalServer server(refusal_with_a_large_page(chunked));
    auto client = Client::create({.max_response_bytes = 4096});
    ASSERT_TRUE(client);
    auto r = (*client)->perform({.url = server.url() + "/movies/Up"});
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->status, 429);
    EXPECT_EQ(r->headers.get("Retry-After").value_or(""), "30");
    EXPECT_LE(r->body.size(), 4096u);
  }
}

const std::vector<std::pair<std::string, std::string>> kCredentialHeaders = {
    {"Authorization", "Bearer tok-123456"},
    {"Proxy-Authorization", "Basic cHJveHk6cHc="},
    {"Cookie", "session=abcdef"},
    {"X-Api-Key", "key-123456"},
    {"X-Plain", "plain"},
};

nlohmann::json echoed_headers(const std::expected<Response, TransportError>& r) {
  EXPECT_TRUE(r) << r.error().message;
  if (!r) return {};
  EXPECT_EQ(r->status, 200) << r->body;
  return nlohmann::json::parse(r->body, nullptr, false)["headers"];
}

TEST(ClientRedirect, ToAnotherHost_DropsCredentialsAndSecretHeaders) {
  LocalServer landing(echo_everything());
  LocalServer first(redirect_to([&] { return landing.url("localhost") + "/landing"; }));
  auto client = Client::create({});
  ASSERT_TRUE(client);
  auto r = (*client)->perform(
      {.url = first.url() + "/start", .headers = kCredentialHeaders, .secret_headers = {"x-api-key"}});
  auto headers = echoed_headers(r);
  EXPECT_EQ(headers.value("X-Plain", ""), "plain") << headers.dump();
  for (const auto* name : {"Authorization", "Proxy-Authorization", "Cookie", "X-Api-Key"})
    EXPECT_FALSE(headers.contains(name)) << name << " reached another host: " << headers.dump();
  EXPECT_EQ(landing.requests(), 1);
}

TEST(ClientRedirect, ToAnotherPortOfTheSameHost_DropsCredentialsAndSecretHeaders) {
  LocalServer landing(echo_everything());
  LocalServer first(redirect_to([&] { return landing.url() + "/landing"; }, 307));
  auto client = Client::create({});
  ASSERT_TRUE(client);
  auto r = (*client)->perform(
      {.url = first.url() + "/start", .headers = kCredentialHeaders, .secret_headers = {"X-Api-Key"}});
  auto headers = echoed_headers(r);
  EXPECT_EQ(headers.value("X-Plain", ""), "plain") << headers.dump();
  for (const auto* name : {"Authorization", "Proxy-Authorization", "Cookie", "X-Api-Key"})
    EXPECT_FALSE(headers.contains(name)) << name << " reached another port: " << headers.dump();
}

TEST(ClientRedirect, AfterLeavingTheOrigin_CredentialsStayDroppedOnTheWayBack) {
  std::unique_ptr<LocalServer> first;
  LocalServer away(redirect_to([&] { return first->url() + "/back"; }));
  first = std::make_unique<LocalServer>([&](httplib::Server& s, LocalServer& self) {
    s.Get("/start", [&](const httplib::Request&, httplib::Response& res) {
      res.status = 302;
      res.set_header("Location", away.url() + "/away");
    });
    echo_everything()(s, self);
  });
  auto client = Client::create({});
  ASSERT_TRUE(client);
  auto r = (*client)->perform(
      {.url = first->url() + "/start", .headers = kCredentialHeaders, .secret_headers = {"X-Api-Key"}});
  auto headers = echoed_headers(r);
  EXPECT_FALSE(headers.contains("X-Api-Key")) << headers.dump();
  EXPECT_FALSE(headers.contains("Authorization")) << headers.dump();
}

TEST(ClientRedirect, SameOrigin_KeepsEveryHeader) {
  LocalServer server([](httplib::Server& s, LocalServer& self) {
    s.Get("/start", [](const httplib::Request&, httplib::Response& res) {
      res.status = 302;
      res.set_header("Location", "/landing");
    });
    echo_everything()(s, self);
  });
  auto client = Client::create({});
  ASSERT_TRUE(client);
  auto r = (*client)->perform(
      {.url = server.url() + "/start", .headers = kCredentialHeaders, .secret_headers = {"X-Api-Key"}});
  auto headers = echoed_headers(r);
  for (const auto& [name, value] : kCredentialHeaders) EXPECT_EQ(headers.value(name, ""), value) << name;
}

TEST(ClientRedirect, MethodAndBody_FollowTheStatusRules) {
  LocalServer landing(echo_everything());
  struct Case {
    int status;
    std::string method;  // what the landing page is asked with
    std::string body;
  };
  for (const Case& c : {Case{301, "GET", ""}, Case{302, "GET", ""}, Case{303, "GET", ""},
                        Case{307, "POST", "{\"a\":1}"}, Case{308, "POST", "{\"a\":1}"}}) {
    LocalServer first(redirect_to([&] { return landing.url() + "/landing"; }, c.status));
    auto client = Client::create({});
    ASSERT_TRUE(client);
    auto r = (*client)->perform({.method = "POST",
                                 .url = first.url() + "/start",
                                 .headers = {{"Content-Type", "application/json"}},
                                 .body = "{\"a\":1}"});
    ASSERT_TRUE(r) << r.error().message;
    auto echoed = nlohmann::json::parse(r->body, nullptr, false);
    EXPECT_EQ(echoed["method"], c.method) << c.status;
    EXPECT_EQ(echoed["body"], c.body) << c.status;
  }
}

TEST(ClientRedirect, BeforeSend_AskedForTheFirstHopOnly) {
  LocalServer target(echo_everything());
  LocalServer first(redirect_to([&] { return target.url() + "/final"; }));
  auto client = Client::create({});
  ASSERT_TRUE(client);
  int asked = 0;
  Request req{.url = first.url() + "/start"};
  req.before_send = [&]() -> std::optional<std::string> {
    ++asked;
    return std::nullopt;
  };
  auto r = (*client)->perform(req);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(first.requests(), 1);
  EXPECT_EQ(target.requests(), 1);
}

TEST(ClientRedirect, BeyondTheLimitAcrossHosts_FailsWithTooManyRedirects) {
  LocalServer b(redirect_to([] { return std::string("/again"); }));
  LocalServer a(redirect_to([&] { return b.url("localhost") + "/again"; }));
  auto client = Client::create({.max_redirects = 3});
  ASSERT_TRUE(client);
  auto r = (*client)->perform({.url = a.url() + "/start"});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, TransportError::kTooManyRedirects) << r.error().message;
  EXPECT_EQ(a.requests() + b.requests(), 4);
}

// A self-signed certificate for 127.0.0.1, made in memory.
struct TestCertificate {
  struct KeyFree {
    void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
  };
  struct CertFree {
    void operator()(X509* x) const { X509_free(x); }
  };
  std::unique_ptr<EVP_PKEY, KeyFree> key{EVP_EC_gen("P-256")};
  std::unique_ptr<X509, CertFree> cert{X509_new()};

  TestCertificate() {
    if (!key || !cert) return;
    X509_set_version(cert.get(), 2);
    ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 1);
    X509_gmtime_adj(X509_getm_notBefore(cert.get()), -60);
    X509_gmtime_adj(X509_getm_notAfter(cert.get()), 3600);
    X509_set_pubkey(cert.get(), key.get());
    X509_NAME* name = X509_get_subject_name(cert.get());
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("127.0.0.1"),
                               -1, -1, 0);
    X509_set_issuer_name(cert.get(), name);
    X509_sign(cert.get(), key.get(), EVP_sha256());
  }
};

TEST(ClientRedirect, HttpsToHttp_RefusedAndNothingSentInTheClear) {
  LocalServer plain(echo_everything());
  TestCertificate tls;
  ASSERT_TRUE(tls.key && tls.cert);
  LocalServer secure(redirect_to([&] { return plain.url() + "/landing?api_key=key-123456"; }),
                     std::make_unique<httplib::SSLServer>(tls.cert.get(), tls.key.get()));
  auto client = Client::create({.verify_tls = false});
  ASSERT_TRUE(client);
  auto r = (*client)->perform({.url = secure.url("127.0.0.1", "https") + "/start",
                               .headers = {{"X-Api-Key", "key-123456"}},
                               .secret_headers = {"X-Api-Key"}});
  ASSERT_FALSE(r) << "followed to " << r->body;
  EXPECT_EQ(r.error().kind, TransportError::kTls) << r.error().message;
  EXPECT_NE(r.error().message.find("https to http://127.0.0.1"), std::string::npos) << r.error().message;
  EXPECT_EQ(r.error().message.find("key-123456"), std::string::npos) << r.error().message;
  EXPECT_EQ(secure.requests(), 1);
  EXPECT_EQ(plain.requests(), 0);
}

TEST(ClientRedirect, HttpsToHttps_Followed) {
  TestCertificate tls;
  ASSERT_TRUE(tls.key && tls.cert);
  auto echo_tls = std::make_unique<httplib::SSLServer>(tls.cert.get(), tls.key.get());
  LocalServer landing(echo_everything(), std::move(echo_tls));
  LocalServer secure(redirect_to([&] { return landing.url("127.0.0.1", "https") + "/landing"; }),
                     std::make_unique<httplib::SSLServer>(tls.cert.get(), tls.key.get()));
  auto client = Client::create({.verify_tls = false});
  ASSERT_TRUE(client);
  auto r = (*client)->perform({.url = secure.url("127.0.0.1", "https") + "/start"});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(landing.requests(), 1);
}

}  // namespace
}  // namespace ratchet::http
