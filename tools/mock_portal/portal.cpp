#include "mock_portal/portal.hpp"

#include <algorithm>

#include "mock_portal/bodies.hpp"
#include "mock_portal/http_date.hpp"

namespace ratchet::mock_portal {
namespace {

using std::chrono::ceil;
using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::seconds;

constexpr seconds kHour{3600};
constexpr seconds kTenYears{315'360'000};

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

std::uint64_t hash_name(std::string_view s) {
  std::uint64_t h = 14695981039346656037ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
}

// Whole seconds, rounded up: a client that waits this long is never early.
std::int64_t ceil_seconds(Duration d) { return ceil<seconds>(d).count(); }

std::int64_t unix_seconds_ceil(TimePoint t) { return ceil<seconds>(t.time_since_epoch()).count(); }

std::string error_json(std::string_view message) {
  return nlohmann::json{{"error", std::string(message)}}.dump();
}

}  // namespace

Portal::Portal(std::string name, PortalOptions options, std::uint64_t seed)
    : name_(std::move(name)), seed_(seed), options_(std::move(options)) {
  stats_.window = options_.window;
}

void Portal::configure(PortalOptions options) {
  std::lock_guard lock(mu_);
  options_ = std::move(options);
  stats_.window = options_.window;
  recent_.clear();
  window_index_ = -1;
  window_count_ = 0;
  bucket_started_ = false;
  arrivals_index_ = 0;
  arrivals_in_index_ = 0;
}

PortalOptions Portal::options() const {
  std::lock_guard lock(mu_);
  return options_;
}

PortalStats Portal::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void Portal::reset() {
  std::lock_guard lock(mu_);
  stats_ = PortalStats{};
  stats_.window = options_.window;
  recent_.clear();
  window_index_ = -1;
  window_count_ = 0;
  bucket_started_ = false;
}

Portal::Limit Portal::decide(TimePoint now, std::int64_t cost) {
  Limit l;
  const auto window = duration_cast<microseconds>(options_.window);
  switch (options_.dialect) {
    case Dialect::kNone: return l;
    case Dialect::kFixedWindow:
    case Dialect::kIetf:
    case Dialect::kBare429:
    case Dialect::kRetryAfter: {
      const auto index = window_index(now);
      if (index != window_index_) {
        window_index_ = index;
        window_count_ = 0;
      }
      window_count_ += cost;
      l.admitted = window_count_ <= options_.limit;
      l.remaining = std::max<std::int64_t>(0, options_.limit - window_count_);
      l.reset_at =
          TimePoint(duration_cast<Duration>(microseconds((index + 1) * window.count() + offset_us())));
      if (!l.admitted) l.retry_after = l.reset_at - now;
      return l;
    }
    case Dialect::kTokenBucket: {
      // Integer credit so that waits come out exact: one token is worth
      // `window` microseconds of credit, and each elapsed microsecond adds
      // `limit` of it.
      const std::int64_t token = window.count();
      const std::int64_t capacity = options_.burst.value_or(options_.limit) * token;
      if (!bucket_started_) {
        bucket_started_ = true;
        credit_ = capacity;
        bucket_time_ = now;
      } else if (now > bucket_time_) {
        const auto elapsed = duration_cast<microseconds>(now - bucket_time_).count();
        credit_ = elapsed >= capacity / options_.limit + 1
                      ? capacity
                      : std::min(capacity, credit_ + elapsed * options_.limit);
        bucket_time_ = now;
      }
      const std::int64_t charge = token * cost;
      if (credit_ >= charge) {
        credit_ -= charge;
        l.remaining = credit_ / token;
      } else {
        l.admitted = false;
        const std::int64_t wait_us = (charge - credit_ + options_.limit - 1) / options_.limit;
        l.retry_after = duration_cast<Duration>(microseconds(wait_us));
      }
      return l;
    }
  }
  return l;
}

void Portal::add_limit_headers(Answer& a, const Limit& l, TimePoint now) const {
  const auto& o = options_;
  const TimePoint server_now = now + o.date_skew;
  const auto limit = std::to_string(o.limit);
  switch (o.dialect) {
    case Dialect::kNone:
    case Dialect::kBare429: return;
    case Dialect::kRetryAfter:
      if (!l.admitted) a.headers.emplace_back("Retry-After", retry_after_value(l, server_now));
      return;
    case Dialect::kFixedWindow: {
      std::string reset;
      const bool unix_time = o.reset_style == ResetStyle::kUnixTime;
      switch (o.malformed_headers) {
        case MalformedHeaders::kNone:
          reset = std::to_string(unix_time ? unix_seconds_ceil(l.reset_at + o.date_skew)
                                           : ceil_seconds(l.reset_at - now));
          break;
        case MalformedHeaders::kGarbage: reset = "tomorrow"; break;
        case MalformedHeaders::kPast:
          reset = std::to_string(unix_time ? unix_seconds_ceil(server_now - kHour) : -kHour.count());
          break;
        case MalformedHeaders::kFarFuture:
          reset = std::to_string(unix_time ? unix_seconds_ceil(server_now + kTenYears) : kTenYears.count());
          break;
      }
      a.headers.emplace_back("X-RateLimit-Limit", limit);
      a.headers.emplace_back("X-RateLimit-Remaining", std::to_string(l.remaining));
      a.headers.emplace_back("X-RateLimit-Reset", reset);
      return;
    }
    case Dialect::kIetf: {
      std::string reset;
      switch (o.malformed_headers) {
        case MalformedHeaders::kNone: reset = std::to_string(ceil_seconds(l.reset_at - now)); break;
        case MalformedHeaders::kGarbage: reset = "later"; break;
        case MalformedHeaders::kPast: reset = std::to_string(-kHour.count()); break;
        case MalformedHeaders::kFarFuture: reset = std::to_string(kTenYears.count()); break;
      }
      if (o.malformed_headers == MalformedHeaders::kGarbage) {
        a.headers.emplace_back("RateLimit", "limit=ten, remaining=?, reset=" + reset);
      } else {
        a.headers.emplace_back("RateLimit", "limit=" + limit + ", remaining=" + std::to_string(l.remaining) +
                                                ", reset=" + reset);
      }
      // The policy's window is whole seconds; rounding up keeps a client that
      // follows it within the real, shorter window.
      const auto w = std::max<std::int64_t>(1, ceil_seconds(o.window));
      a.headers.emplace_back("RateLimit-Policy", limit + ";w=" + std::to_string(w));
      return;
    }
    case Dialect::kTokenBucket:
      if (!l.admitted) a.headers.emplace_back("Retry-After", retry_after_value(l, server_now));
      return;
  }
}

std::string Portal::retry_after_value(const Limit& l, TimePoint server_now) const {
  const auto& o = options_;
  const bool date = o.retry_after_style == RetryAfterStyle::kHttpDate;
  switch (o.malformed_headers) {
    case MalformedHeaders::kNone:
      return date ? format_http_date(ceil<seconds>(server_now + l.retry_after))
                  : std::to_string(std::max<std::int64_t>(1, ceil_seconds(l.retry_after)));
    case MalformedHeaders::kGarbage: return "soon-ish";
    case MalformedHeaders::kPast:
      return date ? format_http_date(server_now - kHour) : std::to_string(-kHour.count());
    case MalformedHeaders::kFarFuture:
      return date ? format_http_date(server_now + kTenYears) : std::to_string(kTenYears.count());
  }
  return "1";
}

std::int64_t Portal::offset_us() const {
  const auto window = duration_cast<microseconds>(options_.window).count();
  return duration_cast<microseconds>(options_.window_offset).count() % window;
}

std::int64_t Portal::window_index(TimePoint now) const {
  const auto t = duration_cast<microseconds>(now.time_since_epoch()).count();
  return floor_div(t - offset_us(), duration_cast<microseconds>(options_.window).count());
}

bool Portal::inject_error(std::uint64_t sequence, int* status) const {
  if (options_.error_rate <= 0.0) return false;
  const std::uint64_t x = splitmix64(seed_ ^ hash_name(name_) ^ (sequence * 0x9E3779B97F4A7C15ULL));
  const double u = static_cast<double>(x >> 11) * 0x1.0p-53;
  if (u >= options_.error_rate) return false;
  *status = (x & 1) != 0 ? 503 : 500;
  return true;
}

Answer Portal::handle(std::string_view movie, const Clock& clock, std::int64_t cost) {
  std::lock_guard lock(mu_);
  const TimePoint now = clock.now();
  ++stats_.requests;
  ++stats_.movies[std::string(movie)];
  // Half-open windows: arrivals exactly `window` apart are never in one.
  while (!recent_.empty() && recent_.front() <= now - options_.window) recent_.pop_front();
  recent_.insert(recent_.end(), static_cast<std::size_t>(cost), now);
  stats_.max_in_window =
      std::max<std::int64_t>(stats_.max_in_window, static_cast<std::int64_t>(recent_.size()));
  if (stats_.requests == 1) stats_.first_arrival = now;
  stats_.last_arrival = now;
  const std::int64_t aligned = window_index(now);
  if (aligned != arrivals_index_) {
    arrivals_index_ = aligned;
    arrivals_in_index_ = 0;
  }
  arrivals_in_index_ += cost;
  stats_.max_in_aligned_window = std::max(stats_.max_in_aligned_window, arrivals_in_index_);
  stats_.units += cost;

  const Limit limit = decide(now, cost);
  Answer a;
  int error_status = 0;
  if (!limit.admitted) {
    a.status = 429;
    a.body = error_json("rate limit exceeded");
    ++stats_.throttled;
  } else if (inject_error(static_cast<std::uint64_t>(stats_.requests), &error_status)) {
    a.status = error_status;
    a.body = error_json(error_status == 503 ? "service unavailable" : "internal server error");
    ++stats_.errors;
  } else {
    a.status = 200;
    a.body = movie_body(name_, movie, options_.malformed_body);
    if (options_.malformed_body == MalformedBody::kHtml) a.content_type = "text/html";
    ++stats_.ok;
  }
  add_limit_headers(a, limit, now);
  if (cost != 1) a.headers.emplace_back("X-Query-Cost", std::to_string(cost));
  return a;
}

}  // namespace ratchet::mock_portal
