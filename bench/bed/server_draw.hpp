// The servers of the learned-pace test bed: one rate-limited server per seed,
// its kind, rate, burst, window alignment, latency and error share all drawn
// from the seed, so that no run meets only the servers the pacer was tuned
// on, and a failing seed can be run again.
//
// Kinds (the seed modulo 6, so that six consecutive seeds meet each once):
//   x_ratelimit      fixed window, X-RateLimit-Limit/Remaining/Reset on every answer
//   ietf             fixed window, RateLimit and RateLimit-Policy on every answer
//   token_bucket     token bucket, 429 with Retry-After and nothing else
//   bare_429         fixed window, 429 with no header at all
//   retry_after_429  fixed window, 429 with Retry-After (the window's end) and nothing else
//   nginx            Debian's nginx limit_req (burst >= 2, nodelay,
//                    limit_req_status 429) in front of an unlimited portal;
//                    its 429 is bare or, on some seeds, carries Retry-After: 1
//
// Targets, from the 429 share and the makespan:
//   - servers that state their limit on every answer (x_ratelimit, ietf):
//     at most 2 % of requests answered 429;
//   - servers whose only signal is the refusal (the other four): at most 5 %;
//   - 5xx answers are not 429s;
//   - makespan, first request to last response, at most 1.15 times the bound.
// The bound is (N + E - burst) / rate: the server's burst (a fixed window's
// limit, a bucket's size, nginx's burst + 1) at once, then its rate, for the
// N requests that succeed and the E that it answered 5xx (each of those is
// counted by its limit and must be sent again). A fixed window cannot do
// better than the start of the window that holds the last of them, counted
// from the window the first request fell in, so for fixed windows the bound
// is the larger of the two.
//
// Thread-safety: plain values.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "mock_portal/options.hpp"

namespace ratchet::bench {

enum class BedKind { kXRateLimit, kIetf, kTokenBucket, kBare429, kRetryAfter429, kNginx };

struct BedServer {
  std::uint64_t seed = 0;
  int jobs = 0;
  BedKind kind = BedKind::kXRateLimit;
  double rate = 0;                         // requests a second the server allows in the long run
  std::int64_t burst = 0;                  // requests it admits at once from rest
  std::chrono::milliseconds window{1000};  // fixed windows
  std::chrono::milliseconds window_offset{0};
  std::chrono::milliseconds latency{0};
  double error_share = 0;          // admitted requests answered 500/503
  bool nginx_retry_after = false;  // nginx: its 429 carries Retry-After: 1
  int nginx_rate = 0;              // nginx: r/s
  int nginx_burst = 0;             // nginx: burst

  bool fixed_window() const;
  bool states_its_limit() const;  // x_ratelimit, ietf
  double max_429_share() const;   // 0.02 or 0.05
  // The portal behind it (for nginx: an unlimited one with its latency and errors).
  mock_portal::PortalOptions portal() const;
  // The bound for this server, given when its first request arrived.
  double bound_seconds(std::chrono::system_clock::time_point first_arrival, std::int64_t errors) const;
  std::string describe() const;
};

std::string to_string(BedKind kind);

// The server a seed draws for a run of `jobs`: a rate of 5-15/s for a few
// dozen jobs, 50-100/s for a thousand, so that every trial takes seconds.
BedServer draw_server(std::uint64_t seed, int jobs);

}  // namespace ratchet::bench
