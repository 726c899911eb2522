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
//   - a lone "Retry-After: N" (N whole seconds) waits exactly min(N, cap).
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

// The whole seconds a lone Retry-After spells, when it is only digits (at
// most 15, so the reference arithmetic is exact).
std::optional<std::int64_t> lone_retry_after_seconds(const std::vector<HttpHeader>& headers) {
  if (headers.size() != 1) return std::nullopt;
  const auto& [name, value] = headers[0];
  std::string_view n = name;
  while (!n.empty() && (n.front() == ' ' || n.front() == '\t')) n.remove_prefix(1);
  while (!n.empty() && (n.back() == ' ' || n.back() == '\t')) n.remove_suffix(1);
  if (n.size() != 11) return std::nullopt;
  for (std::size_t i = 0; i < n.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(n[i])) != "retry-after"[i]) return std::nullopt;
  }
  std::string_view v = value;
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  if (v.empty() || v.size() > 15) return std::nullopt;
  std::int64_t s = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return std::nullopt;
    s = s * 10 + (c - '0');
  }
  return s;
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
  if (auto n = lone_retry_after_seconds(headers)) {
    // Compared in seconds first: N seconds may not fit the clock's ticks.
    const Duration expected = *n > duration_cast<seconds>(cap).count() ? cap : Duration(seconds(*n));
    FUZZ_CHECK(h.resume_at.has_value(), "a whole-second Retry-After was not read: " + input);
    FUZZ_CHECK(*h.resume_at - now == expected,
               "Retry-After waits " + show(*h.resume_at - now) + ", not " + show(expected) + ": " + input);
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
