// Fuzz target: reading rate-limit headers from a reply.
//
// Input: the first byte picks the status (429, 503, 200 or 500); the rest
// is header lines "Name: value" separated by '\n' (a line without ':' is a
// header with an empty value). Each input is read twice: with the default
// cap on waits (1h) and with a short one (7s).
//
// Invariants, beyond "never crashes" (the fuzz build also traps undefined
// behaviour such as a conversion that overflows the clock):
//   - no wait beyond the cap and none negative: resume_at within
//     [now, now + max_wait], reset_in within (0, max_wait], the learned
//     interval within [0, max_wait], a learned window not negative;
//   - a cut wait is reported in `clamped`; every ignored value is named;
//   - `throttled` only for a 429, or a 503 with Retry-After; a Retry-After
//     that was read decides the resume time;
//   - simple header sets (a lone Retry-After of whole seconds, a
//     Remaining: 0 with a Reset of whole seconds) wait what they spell, up
//     to the cap, computed apart from the engine (see expected_wait).
#include <cctype>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/duration.hpp"
#include "fuzz_check.hpp"
#include "limit/rate_headers.hpp"

namespace {

using namespace std::chrono;
using ratchet::Duration;
using ratchet::TimePoint;
using ratchet::limit::HintSource;
using ratchet::limit::HttpHeader;
using ratchet::limit::PaceHint;
using ratchet::limit::RateHeaderOptions;

std::string show(Duration d) { return std::to_string(duration_cast<microseconds>(d).count()) + "us"; }

std::string show(const std::vector<HttpHeader>& headers, int status) {
  std::string out = "status " + std::to_string(status);
  for (const auto& [n, v] : headers) out += "\n  " + n + ": " + v;
  return out;
}

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool named(const HttpHeader& h, std::string_view lower_name) {
  const std::string_view n = trimmed(h.first);
  if (n.size() != lower_name.size()) return false;
  for (std::size_t i = 0; i < n.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(n[i])) != lower_name[i]) return false;
  }
  return true;
}

// A value of only digits (at most 20), as a number.
std::optional<long double> whole(const HttpHeader& h) {
  const std::string_view v = trimmed(h.second);
  if (v.empty() || v.size() > 20) return std::nullopt;
  long double n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
  }
  return n;
}

struct ExpectedWait {
  Duration wait;
  Duration tolerance;  // the engine reads through doubles
};

// The wait a few simple header sets must give, computed apart from the
// engine in long double seconds:
//   Retry-After: N                               min(N s, cap)
//   RateLimit-Remaining: 0, RateLimit-Reset: N   min(N s, cap)
//   X-RateLimit-Remaining: 0, X-RateLimit-Reset: N
//       N <= 1e9 delta seconds, <= 1e12 a Unix time in s, else in ms;
//       the time to it, within [0, cap]
std::optional<ExpectedWait> expected_wait(const std::vector<HttpHeader>& headers, TimePoint now,
                                          Duration cap) {
  const long double cap_s = duration<long double>(cap).count();
  auto clamp = [&](long double s) -> Duration {
    if (s <= 0) return Duration::zero();
    if (s >= cap_s) return cap;
    return duration_cast<Duration>(duration<long double>(s));
  };
  if (headers.size() == 1 && named(headers[0], "retry-after")) {
    if (auto n = whole(headers[0])) return ExpectedWait{clamp(*n), Duration::zero()};
    return std::nullopt;
  }
  if (headers.size() != 2) return std::nullopt;
  for (const std::string_view prefix : {"ratelimit-", "x-ratelimit-"}) {
    const std::string remaining = std::string(prefix) + "remaining";
    const std::string reset = std::string(prefix) + "reset";
    for (int first = 0; first < 2; ++first) {
      const HttpHeader& r = headers[first];
      const HttpHeader& t = headers[1 - first];
      if (!named(r, remaining) || !named(t, reset)) continue;
      auto left = whole(r);
      auto n = whole(t);
      if (!left || *left != 0 || !n) return std::nullopt;
      if (prefix == "ratelimit-" || *n <= 1e9) return ExpectedWait{clamp(*n), Duration::zero()};
      const long double now_s = duration<long double>(now.time_since_epoch()).count();
      const long double at_s = *n <= 1e12 ? *n : *n / 1000;
      return ExpectedWait{clamp(at_s - now_s), milliseconds(1)};
    }
  }
  return std::nullopt;
}

void check(const std::vector<HttpHeader>& headers, int status, TimePoint now, Duration cap) {
  RateHeaderOptions options;
  options.max_wait = cap;
  const PaceHint h = ratchet::limit::read_rate_headers(headers, status, now, options);
  const std::string input = show(headers, status) + "\n  (cap " + show(cap) + ")";
  if (h.resume_at) {
    const Duration wait = *h.resume_at - now;
    FUZZ_CHECK(wait >= Duration::zero(), "a negative wait " + show(wait) + " from " + input);
    FUZZ_CHECK(wait <= cap, "a wait of " + show(wait) + " beyond the cap from " + input);
  }
  if (h.reset_in) {
    FUZZ_CHECK(*h.reset_in > Duration::zero(), "reset_in " + show(*h.reset_in) + " from " + input);
    FUZZ_CHECK(*h.reset_in <= cap, "reset_in " + show(*h.reset_in) + " beyond the cap from " + input);
  }
  if (h.interval) {
    FUZZ_CHECK(*h.interval >= Duration::zero(),
               "a negative interval " + show(*h.interval) + " from " + input);
    FUZZ_CHECK(*h.interval <= cap, "an interval of " + show(*h.interval) + " beyond the cap from " + input);
  }
  if (h.window) FUZZ_CHECK(*h.window >= Duration::zero(), "a negative window from " + input);
  if (h.limit) FUZZ_CHECK(*h.limit >= 0, "a negative limit from " + input);
  if (h.remaining) FUZZ_CHECK(*h.remaining >= 0, "a negative remaining from " + input);
  if (h.clamped) FUZZ_CHECK(!h.clamped->empty(), "an empty clamp note from " + input);
  for (const auto& i : h.ignored) FUZZ_CHECK(!i.empty(), "an empty ignored note from " + input);
  if (h.throttled) FUZZ_CHECK(status == 429 || status == 503, "throttled without a 429 or 503: " + input);
  if (h.source == HintSource::kRetryAfter)
    FUZZ_CHECK(h.resume_at.has_value(), "Retry-After without resume_at");
  if (auto e = expected_wait(headers, now, cap)) {
    FUZZ_CHECK(h.resume_at.has_value(), "a wait the headers spell was not read: " + input);
    const Duration wait = *h.resume_at - now;
    const Duration off = wait > e->wait ? wait - e->wait : e->wait - wait;
    FUZZ_CHECK(off <= e->tolerance, "waits " + show(wait) + ", not " + show(e->wait) + ": " + input);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  static constexpr int kStatuses[] = {429, 503, 200, 500};
  const int status = kStatuses[data[0] % 4];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  std::vector<HttpHeader> headers;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) {
      headers.emplace_back(std::string(line), std::string());
    } else {
      headers.emplace_back(std::string(line.substr(0, colon)), std::string(line.substr(colon + 1)));
    }
    start = end + 1;
  }
  // A fixed "now", so that every replay of an input sees the same clock.
  const TimePoint now = sys_days(year(2026) / 6 / 1) + hours(12);
  check(headers, status, now, hours(1));
  check(headers, status, now, seconds(7));
  return 0;
}
