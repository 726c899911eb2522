// The mock portal server over HTTP, using cpp-httplib's own client so these
// tests do not depend on ratchet's HTTP client.
#include "mock_portal/server.hpp"

#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "mock_portal/bodies.hpp"
#include "mock_portal/http_date.hpp"

namespace ratchet::mock_portal {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<MockPortalServer> start_or_die(ServerOptions o) {
  auto s = MockPortalServer::start(std::move(o));
  EXPECT_TRUE(s) << s.error().to_string();
  return s ? std::move(*s) : nullptr;
}

// How many connections the kernel holds for the server's listening socket
// until it accepts them (TCP_INFO of a listening socket), or -1.
int listen_backlog(int port) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    const int fd = std::stoi(entry.path().filename().string());
    int listening = 0;
    socklen_t len = sizeof listening;
    if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || listening == 0) continue;
    sockaddr_in addr{};
    len = sizeof addr;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 || addr.sin_family != AF_INET ||
        ntohs(addr.sin_port) != port)
      continue;
    tcp_info info{};
    len = sizeof info;
    if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return -1;
    return static_cast<int>(info.tcpi_sacked);  // the backlog, for a listening socket
  }
  return -1;
}

// A burst of clients connecting at once (an engine's workers, a test bed's
// jobs) must all be taken: a connection the kernel drops for a full backlog
// is retried by TCP a second later, which a rate-limit test reads as the
// server's doing. cpp-httplib's library listens with a backlog of 5.
TEST(MockServer, Listen_HoldsABurstOfConnections) {
  auto server = start_or_die({});
  ASSERT_NE(server, nullptr);
  EXPECT_GE(listen_backlog(server->port()), 128);
}

TEST(MockServer, Start_NonLoopbackHost_Refused) {
  for (const std::string host : {"0.0.0.0", "10.1.2.3", "::", "example.com"}) {
    auto s = MockPortalServer::start({.host = host});
    ASSERT_FALSE(s) << host;
    EXPECT_EQ(s.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(s.error().message().find("loopback"), std::string::npos);
  }
}

TEST(MockServer, Start_PortInUse_IoErrorNamesPort) {
  auto first = start_or_die({});
  ASSERT_TRUE(first);
  auto second = MockPortalServer::start({.port = first->port()});
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().code(), ErrorCode::kIo);
  EXPECT_NE(second.error().message().find(std::to_string(first->port())), std::string::npos);
}

TEST(MockServer, Movie_EncodedName_DecodedInBodyAndCounts) {
  auto server = start_or_die({});
  httplib::Client http("127.0.0.1", server->port());
  auto r = http.Get("/rotten_tomatoes/movies/AC%2FDC%20Live");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(nlohmann::json::parse(r->body), movie_json("rotten_tomatoes", "AC/DC Live"));
  EXPECT_EQ(server->stats().portals.at("rotten_tomatoes").movies.at("AC/DC Live"), 1);
}

TEST(MockServer, UnknownPortal_404) {
  auto server = start_or_die({});
  httplib::Client http("127.0.0.1", server->port());
  auto r = http.Get("/hulu/movies/Up");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  auto nowhere = http.Get("/nowhere");
  ASSERT_TRUE(nowhere);
  EXPECT_EQ(nowhere->status, 404);
  EXPECT_TRUE(nowhere->has_header("Date"));
  EXPECT_EQ(server->stats().portals.count("hulu"), 0u);
}

TEST(MockServer, DateHeader_PortalSkewApplied) {
  auto clock = std::make_shared<FakeClock>();
  ServerOptions o{.clock = clock};
  o.portals["imdb"] = {.date_skew = 90s};
  auto server = start_or_die(o);
  httplib::Client http("127.0.0.1", server->port());
  auto skewed = http.Get("/imdb/movies/Up");
  auto plain = http.Get("/sify/movies/Up");
  auto stats = http.Get("/_stats");
  ASSERT_TRUE(skewed && plain && stats);
  EXPECT_EQ(skewed->get_header_value("Date"), format_http_date(clock->now() + 90s));
  EXPECT_EQ(skewed->get_header_value_count("Date"), 1u);
  EXPECT_EQ(plain->get_header_value("Date"), format_http_date(clock->now()));
  EXPECT_EQ(stats->get_header_value("Date"), format_http_date(clock->now()));
}

TEST(MockServer, StatsOverHttp_MatchInProcessStats) {
  auto clock = std::make_shared<FakeClock>();
  ServerOptions o{.clock = clock};
  o.portals["netflix"] = {.dialect = Dialect::kFixedWindow, .limit = 2, .window = 200ms};
  auto server = start_or_die(o);
  httplib::Client http("127.0.0.1", server->port());
  http.set_keep_alive(true);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(http.Get("/netflix/movies/Up"));
  ASSERT_TRUE(http.Get("/netflix/movies/Heat"));
  auto r = http.Get("/_stats");
  ASSERT_TRUE(r);
  auto stats = stats_from_json(nlohmann::json::parse(r->body));
  ASSERT_TRUE(stats) << stats.error().message();
  EXPECT_EQ(*stats, server->stats());
  const auto& n = stats->portals.at("netflix");
  EXPECT_EQ(n.requests, 4);
  EXPECT_EQ(n.ok, 2);
  EXPECT_EQ(n.throttled, 2);
  EXPECT_EQ(n.max_in_window, 4);
  EXPECT_EQ(n.window, 200ms);
  EXPECT_EQ(n.movies.at("Up"), 3);
  EXPECT_EQ(stats->portals.size(), 5u);
  EXPECT_EQ(stats->connections, 1);
}

TEST(MockServer, ResetOverHttp_ClearsCountsAndLimits) {
  auto clock = std::make_shared<FakeClock>();
  ServerOptions o{.clock = clock};
  o.portals["imdb"] = {.dialect = Dialect::kBare429, .limit = 1, .window = 1s};
  auto server = start_or_die(o);
  httplib::Client http("127.0.0.1", server->port());
  ASSERT_TRUE(http.Get("/imdb/movies/Up"));
  EXPECT_EQ(http.Get("/imdb/movies/Up")->status, 429);
  auto reset = http.Post("/_reset");
  ASSERT_TRUE(reset);
  EXPECT_EQ(reset->status, 200);
  EXPECT_EQ(server->stats().portals.at("imdb").requests, 0);
  EXPECT_EQ(http.Get("/imdb/movies/Up")->status, 200);
}

// Per-account limits: each account (the `account` query parameter) has its
// own window before the portal's; accounts show in the stats on their own.
TEST(MockServer, AccountLimit_EachAccountHasItsOwnWindowBeforeThePortals) {
  auto clock = std::make_shared<FakeClock>();
  ServerOptions o{.clock = clock};
  o.portals["imdb"] = {.dialect = Dialect::kIetf, .limit = 3, .window = 1s, .account_limit = 2};
  auto server = start_or_die(o);
  httplib::Client http("127.0.0.1", server->port());
  EXPECT_EQ(http.Get("/imdb/movies/Up?account=alice")->status, 200);
  EXPECT_EQ(http.Get("/imdb/movies/Up?account=alice")->status, 200);
  auto refused = http.Get("/imdb/movies/Up?account=alice");
  EXPECT_EQ(refused->status, 429);  // alice's own window is full
  EXPECT_EQ(refused->get_header_value("RateLimit").rfind("limit=2,", 0), 0u)
      << refused->get_header_value("RateLimit");
  EXPECT_EQ(http.Get("/imdb/movies/Up?account=bob")->status, 200);
  EXPECT_EQ(http.Get("/imdb/movies/Up?account=carol")->status, 429);  // the portal's is full
  EXPECT_EQ(http.Get("/imdb/movies/Up?account=a%20b")->status, 400);
  const auto stats = server->stats();
  EXPECT_EQ(stats.portals.at("imdb@alice").requests, 3);
  EXPECT_EQ(stats.portals.at("imdb@alice").throttled, 1);
  EXPECT_EQ(stats.portals.at("imdb").requests, 4);  // alice's refused call never reached it
  EXPECT_EQ(stats.portals.at("imdb").throttled, 1);
  ASSERT_TRUE(http.Post("/_reset"));
  EXPECT_FALSE(server->stats().portals.contains("imdb@alice"));
}

TEST(MockServer, Configure_ChangesDialectAtRuntime) {
  auto server = start_or_die({.clock = std::make_shared<FakeClock>()});
  httplib::Client http("127.0.0.1", server->port());
  EXPECT_FALSE(http.Get("/imdb/movies/Up")->has_header("RateLimit"));
  ASSERT_TRUE(server->configure("imdb", {.dialect = Dialect::kIetf, .limit = 4, .window = 1s}));
  EXPECT_EQ(http.Get("/imdb/movies/Up")->get_header_value("RateLimit"), "limit=4, remaining=3, reset=1");
  EXPECT_FALSE(server->configure("hulu", {}));
}

TEST(MockServer, Stop_WithLatencyInFlight_ReturnsPromptly) {
  auto server = start_or_die({});
  ASSERT_TRUE(server->configure("imdb", {.latency = 30s}));
  std::jthread client([port = server->port()] {
    httplib::Client http("127.0.0.1", port);
    (void)http.Get("/imdb/movies/Up");
  });
  // The request has reached its handler once the server has seen its connection.
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (server->stats().connections == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_EQ(server->stats().connections, 1);
  const auto t0 = std::chrono::steady_clock::now();
  server->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  server->stop();  // idempotent
}

TEST(MockServer, ManyClientThreads_EveryRequestCountedOnce) {
  ServerOptions o;
  o.portals["sify"] = {.dialect = Dialect::kFixedWindow, .limit = 50, .window = 200ms, .error_rate = 0.1};
  auto server = start_or_die(o);
  constexpr int kThreads = 6;
  constexpr int kEach = 40;
  std::atomic<int> ok{0}, throttled{0}, errors{0};
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, port = server->port()] {
        httplib::Client http("127.0.0.1", port);
        for (int i = 0; i < kEach; ++i) {
          auto r = http.Get("/sify/movies/m" + std::to_string(i % 5));
          if (!r) continue;
          if (r->status == 200) ++ok;
          if (r->status == 429) ++throttled;
          if (r->status >= 500) ++errors;
        }
      });
    }
  }
  const auto s = server->stats().portals.at("sify");
  EXPECT_EQ(s.requests, kThreads * kEach);
  EXPECT_EQ(s.ok, ok.load());
  EXPECT_EQ(s.throttled, throttled.load());
  EXPECT_EQ(s.errors, errors.load());
  EXPECT_EQ(s.ok + s.throttled + s.errors, kThreads * kEach);
  std::int64_t per_movie = 0;
  for (const auto& [_, n] : s.movies) per_movie += n;
  EXPECT_EQ(per_movie, kThreads * kEach);
}

}  // namespace
}  // namespace ratchet::mock_portal
