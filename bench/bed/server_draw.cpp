#include "server_draw.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

namespace ratchet::bench {

std::string to_string(BedKind kind) {
  switch (kind) {
    case BedKind::kXRateLimit: return "x_ratelimit";
    case BedKind::kIetf: return "ietf";
    case BedKind::kTokenBucket: return "token_bucket";
    case BedKind::kBare429: return "bare_429";
    case BedKind::kRetryAfter429: return "retry_after_429";
    case BedKind::kNginx: return "nginx";
  }
  return "unknown";
}

BedServer draw_server(std::uint64_t seed, int jobs) {
  BedServer s;
  s.seed = seed;
  s.jobs = jobs;
  s.kind = static_cast<BedKind>(seed % 6);
  std::mt19937_64 random(seed * 0x9E3779B97F4A7C15ULL + static_cast<std::uint64_t>(jobs));
  auto uniform = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(random);
  };
  const bool many = jobs >= 200;
  const std::int64_t per_second = many ? uniform(50, 100) : uniform(5, 15);
  s.latency = std::chrono::milliseconds(uniform(0, 50));
  s.error_share = static_cast<double>(uniform(0, 100)) / 1000.0;
  switch (s.kind) {
    case BedKind::kXRateLimit:
    case BedKind::kIetf:
    case BedKind::kBare429:
    case BedKind::kRetryAfter429: {
      const std::int64_t seconds = uniform(1, 2);
      s.window = std::chrono::seconds(seconds);
      s.window_offset = std::chrono::milliseconds(uniform(0, seconds * 1000 - 1));
      s.burst = per_second * seconds;
      s.rate = static_cast<double>(per_second);
      break;
    }
    case BedKind::kTokenBucket:
      s.rate = static_cast<double>(per_second);
      s.burst = uniform(1, per_second);
      break;
    case BedKind::kNginx:
      s.nginx_rate = static_cast<int>(per_second);
      s.nginx_burst = static_cast<int>(uniform(2, std::max<std::int64_t>(2, per_second / 4)));
      s.nginx_retry_after = uniform(0, 1) == 1;
      s.rate = static_cast<double>(per_second);
      s.burst = s.nginx_burst + 1;  // the first request and `burst` more at once
      break;
  }
  return s;
}

bool BedServer::fixed_window() const {
  return kind == BedKind::kXRateLimit || kind == BedKind::kIetf || kind == BedKind::kBare429 ||
         kind == BedKind::kRetryAfter429;
}

bool BedServer::states_its_limit() const { return kind == BedKind::kXRateLimit || kind == BedKind::kIetf; }

double BedServer::max_429_share() const { return states_its_limit() ? 0.02 : 0.05; }

mock_portal::PortalOptions BedServer::portal() const {
  mock_portal::PortalOptions p;
  p.latency = latency;
  p.error_rate = error_share;
  switch (kind) {
    case BedKind::kXRateLimit: p.dialect = mock_portal::Dialect::kFixedWindow; break;
    case BedKind::kIetf: p.dialect = mock_portal::Dialect::kIetf; break;
    case BedKind::kTokenBucket: p.dialect = mock_portal::Dialect::kTokenBucket; break;
    case BedKind::kBare429: p.dialect = mock_portal::Dialect::kBare429; break;
    case BedKind::kRetryAfter429: p.dialect = mock_portal::Dialect::kRetryAfter; break;
    case BedKind::kNginx: p.dialect = mock_portal::Dialect::kNone; return p;
  }
  if (kind == BedKind::kTokenBucket) {
    p.limit = static_cast<std::int64_t>(rate);
    p.window = std::chrono::seconds(1);
    p.burst = burst;
  } else {
    p.limit = burst;
    p.window = window;
    p.window_offset = window_offset;
  }
  return p;
}

double BedServer::bound_seconds(std::chrono::system_clock::time_point first_arrival,
                                std::int64_t errors) const {
  const std::int64_t needed = jobs + errors;
  const double bucket = std::max(0.0, static_cast<double>(needed - burst) / rate);
  if (!fixed_window()) return bucket;
  const std::int64_t windows = (needed + burst - 1) / burst;  // the last is in window windows-1
  if (windows <= 1) return 0;
  using namespace std::chrono;
  const auto w = duration_cast<microseconds>(window).count();
  const auto t = duration_cast<microseconds>(first_arrival.time_since_epoch()).count() -
                 duration_cast<microseconds>(window_offset).count();
  const auto first_end = (t / w + 1) * w;  // t > 0: the epoch is long past
  const double to_first_end = static_cast<double>(first_end - t) / 1e6;
  const double fixed = to_first_end + static_cast<double>(windows - 2) * static_cast<double>(w) / 1e6;
  return std::max(bucket, fixed);
}

std::string BedServer::describe() const {
  std::ostringstream d;
  d << to_string(kind) << ' ';
  switch (kind) {
    case BedKind::kTokenBucket: d << rate << "/s burst " << burst; break;
    case BedKind::kNginx:
      d << "limit_req " << nginx_rate << "r/s burst=" << nginx_burst
        << (nginx_retry_after ? " +Retry-After" : " bare");
      break;
    default: d << burst << "/" << window.count() / 1000 << "s at +" << window_offset.count() << "ms"; break;
  }
  d << ", " << latency.count() << "ms, " << std::lround(error_share * 1000) / 10.0 << "% 5xx";
  return d.str();
}

}  // namespace ratchet::bench
