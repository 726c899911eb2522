// What the mock portal server does: per portal, which rate-limit dialect it
// speaks and enforces, which faults it injects; for the server, where it
// listens and which clock it reads.
//
// Options come from code (tests, the demo) or from a JSON document (the
// command's --config file and --portal NAME.KEY=VALUE flags), e.g.
//   {"seed": 7, "portals": {"imdb": {"dialect": "fixed_window", "limit": 10,
//    "window": "1s", "error_rate": 0.1, "latency": "20ms"}}}
//
// Thread-safety: plain values.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ratchet/clock.hpp"
#include "ratchet/status.hpp"

namespace ratchet::mock_portal {

// The five portals, in the order their stats are listed.
const std::vector<std::string>& portal_names();

enum class Dialect {
  kNone,         // no limit, no rate-limit headers
  kFixedWindow,  // `limit` per epoch-aligned `window`; X-RateLimit-Limit/Remaining/Reset on every answer
  kTokenBucket,  // bucket of `burst` (default `limit`) refilled at limit/window; 429 with Retry-After
  kIetf,         // fixed window; RateLimit and RateLimit-Policy on every answer
  kBare429,      // fixed window; 429 with no rate-limit header at all
  kRetryAfter,   // fixed window; 429 with Retry-After (until the window ends) and no other header
};

enum class ResetStyle { kUnixTime, kDeltaSeconds };  // X-RateLimit-Reset: absolute or seconds from now
enum class RetryAfterStyle { kSeconds, kHttpDate };

// Deliberately broken rate-limit headers, for clients that must survive them.
enum class MalformedHeaders {
  kNone,
  kGarbage,    // Retry-After: soon-ish, X-RateLimit-Reset: tomorrow, RateLimit: limit=ten, ...
  kPast,       // resets and Retry-After an hour in the past
  kFarFuture,  // resets and Retry-After ten years ahead
};

// Deliberately broken bodies on 200 answers.
enum class MalformedBody {
  kNone,
  kTruncated,  // the first half of the JSON
  kHtml,       // an HTML error page
  kNoRating,   // the right shape without the "rating" key
};

// A transport fault injected on some requests, for clients that must survive
// it. The request still counts at the portal.
enum class Fault {
  kNone,
  kHang,     // no answer until the server stops (or a minute passes)
  kReset,    // the connection is cut in the middle of the answer
  kGarbage,  // 200 with bytes that are not JSON
  kHuge,     // 200 with a 32 MiB JSON body
};

struct PortalOptions {
  Dialect dialect = Dialect::kNone;
  std::int64_t limit = 10;                 // requests per window; >= 1
  std::chrono::milliseconds window{1000};  // > 0
  // Fixed windows begin this long after the clock's whole windows, in
  // [0, window) (a longer one is taken modulo the window): a server's
  // windows need not start on the second.
  std::chrono::milliseconds window_offset{0};
  std::optional<std::int64_t> burst{};  // token bucket size; default `limit`
  ResetStyle reset_style = ResetStyle::kUnixTime;
  RetryAfterStyle retry_after_style = RetryAfterStyle::kSeconds;
  double error_rate = 0.0;               // share of admitted requests answered 500/503, [0, 1]
  std::chrono::milliseconds latency{0};  // added before every answer (real time)
  MalformedHeaders malformed_headers = MalformedHeaders::kNone;
  MalformedBody malformed_body = MalformedBody::kNone;
  std::chrono::seconds date_skew{0};  // added to every time the portal sends (Date, resets)
  Fault fault = Fault::kNone;
  std::int64_t fault_every = 1;  // the fault hits every Nth request of the portal (1: all); >= 1
  // Requests per window for each account (the `account` query parameter),
  // counted in the portal's dialect before the portal's own limit; 0: none.
  // Each account shows in the stats as "<portal>@<account>".
  std::int64_t account_limit = 0;
};

struct ServerOptions {
  std::string host = "127.0.0.1";                  // loopback only: 127.0.0.0/8, ::1 or localhost
  int port = 0;                                    // 0: any free port
  std::uint64_t seed = 42;                         // decides which requests get a 5xx
  int threads = 16;                                // concurrent connections served
  std::map<std::string, PortalOptions> portals{};  // missing portals get PortalOptions{}
  // Decides windows, buckets and every time sent. Latency is always real time.
  std::shared_ptr<const Clock> clock = SystemClock::instance();
};

// Sets one option from text: key is a PortalOptions field name ("dialect",
// "limit", "window", "window_offset", "burst", "reset", "retry_after", "error_rate",
// "latency", "malformed_headers", "malformed_body", "date_skew", "fault",
// "fault_every", "account_limit").
Status apply_portal_option(PortalOptions& options, std::string_view key, std::string_view value);

// Reads {"seed", "threads", "port", "portals": {NAME|"*": {KEY: VALUE}}};
// "*" applies to every portal before the named ones.
Status apply_json(ServerOptions& options, const nlohmann::json& doc);

std::string_view to_string(Dialect d) noexcept;

}  // namespace ratchet::mock_portal
