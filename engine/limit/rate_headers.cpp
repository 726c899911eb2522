#include "limit/rate_headers.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string_view>

#include "common/duration.hpp"
#include "limit/http_date.hpp"

namespace ratchet::limit {
namespace {

using std::chrono::duration_cast;
using std::chrono::microseconds;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// Every value of a header, joined with ", " as HTTP allows for list headers.
std::optional<std::string> header(std::span<const HttpHeader> headers, std::string_view name) {
  std::optional<std::string> out;
  for (const auto& [n, v] : headers) {
    if (!iequals(trim(n), name)) continue;
    if (out) {
      *out += ", ";
      *out += v;
    } else {
      out = v;
    }
  }
  return out;
}

// A non-negative decimal ("30", "1.5"); no sign, exponent or junk.
std::optional<double> number(std::string_view s) {
  s = trim(s);
  if (s.empty() || s.size() > 24) return std::nullopt;
  double v = 0;
  double scale = 0;
  bool digits = false;
  for (char c : s) {
    if (c >= '0' && c <= '9') {
      digits = true;
      if (scale == 0) {
        v = v * 10 + (c - '0');
      } else {
        v += (c - '0') * scale;
        scale /= 10;
      }
    } else if (c == '.' && scale == 0) {
      scale = 0.1;
    } else {
      return std::nullopt;
    }
  }
  if (!digits) return std::nullopt;
  return v;
}

std::optional<std::int64_t> count(std::string_view s) {
  auto v = number(s);
  if (!v || *v != std::floor(*v) || *v > 1e15) return std::nullopt;
  return static_cast<std::int64_t>(*v);
}

// Only for values already known to fit (at most kLongest); a double beyond
// the clock's range would overflow the conversion.
Duration seconds(double s) { return duration_cast<Duration>(std::chrono::duration<double>(s)); }

double in_seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

// The longest window a policy may state: a quota's window is a pace, not a
// wait, so it is not cut to max_wait, only kept within the clock's range.
constexpr Duration kLongestWindow = std::chrono::hours(24 * 365);

// The most a server's Date may be from our clock and still be what its
// absolute times are read against (see Reader::until).
constexpr double kTrustedDateSkew = 86400;

std::string show(Duration d) { return common::format_duration(std::chrono::ceil<microseconds>(d)); }

// A span of any size: exact units up to about 290000 years, whole years beyond.
std::string show_seconds(double s) {
  if (s < 9e12) return common::format_duration(microseconds(static_cast<std::int64_t>(std::ceil(s * 1e6))));
  const double years = s / (365.25 * 86400);
  if (years >= 9e18) return "over 9e18y";
  return std::to_string(static_cast<std::int64_t>(years)) + "y";
}

// A skew of more than a day, in whole years or days ("56y", "3d").
std::string about(double s) {
  constexpr double kYear = 365.25 * 86400;
  if (!(s < 9e18 * kYear)) return "over 9e18y";
  if (s >= kYear) return std::to_string(static_cast<std::int64_t>(s / kYear)) + "y";
  return std::to_string(static_cast<std::int64_t>(s / 86400)) + "d";
}

// Reads the server's "now" from Date, so absolute times are measured on its clock.
// Times and waits from headers are doubles in seconds until they are cut to
// max_wait: a header may name any number, a Duration holds only ~292 years.
struct Reader {
  std::span<const HttpHeader> headers;
  TimePoint now;
  double server_now;  // seconds since the Unix epoch on the server's clock
  const RateHeaderOptions& options;
  PaceHint& hint;
  double local_now = in_seconds(now.time_since_epoch());
  bool read_on_ours = false;  // a time was read against our clock, not the Date

  // Seconds from now to a time the server wrote (a reset, a Retry-After
  // date), read against its Date: a server whose clock is off still means
  // what it says. A Date more than a day from our clock (a device with no
  // clock that says 1970, a proxy's stale Date) is wrong or the time is,
  // and such a time is read against whichever clock puts it nearer: it is
  // a time soon. Read against a Date decades back, a reset due now was a
  // wait of decades, capped at max_wait.
  double until(double at) {
    const double by_server = at - server_now;
    if (std::abs(server_now - local_now) <= kTrustedDateSkew) return by_server;
    const double by_ours = at - local_now;
    if (!(std::abs(by_ours) < std::abs(by_server))) return by_server;
    read_on_ours = true;
    return by_ours;
  }

  // Cuts a wait of `wait` seconds to [0, max_wait], noting a cut.
  Duration bound(double wait, std::string_view what, std::string_view value) {
    if (!(wait > 0)) return Duration::zero();  // also NaN
    if (wait > in_seconds(options.max_wait)) {
      hint.clamped = std::string(what) + ": " + std::string(trim(value)) + " is " + show_seconds(wait) +
                     " ahead; waiting " + show(options.max_wait) + " at most";
      return options.max_wait;
    }
    return std::min(seconds(wait), options.max_wait);
  }

  void ignore(std::string_view what, std::string_view value, std::string_view why) {
    hint.ignored.push_back(std::string(what) + ": " + std::string(trim(value)) + " (" + std::string(why) +
                           ")");
  }

  std::optional<Duration> retry_after() {
    auto v = header(headers, "Retry-After");
    if (!v) return std::nullopt;
    if (auto s = number(*v)) return bound(*s, "Retry-After", *v);
    if (auto date = parse_http_date_seconds(*v)) {
      return bound(until(static_cast<double>(date->time_since_epoch().count())), "Retry-After", *v);
    }
    ignore("Retry-After", *v, "not delta seconds or an HTTP-date");
    return std::nullopt;
  }

  // X-RateLimit-Reset style: delta seconds, Unix seconds or Unix milliseconds.
  // An absolute reset is also kept as the server wrote it (`epoch_ms`).
  std::optional<Duration> reset_value(std::string_view name, std::string_view v, bool delta_only,
                                      std::optional<std::int64_t>& epoch_ms, std::string& raw) {
    raw = std::string(name) + ": " + std::string(trim(v));
    auto s = number(v);
    if (!s) {
      ignore(name, v, "not a number");
      return std::nullopt;
    }
    // Within a year of the server's time: past that the wait is capped
    // anyway, and the cast stays in range.
    auto keep = [&](double ms) {
      if (std::abs(until(ms / 1000)) < 366.0 * 86400) epoch_ms = static_cast<std::int64_t>(ms);
    };
    if (!delta_only && *s > 1e12) {
      keep(*s);
      return bound(until(*s / 1000), name, v);
    }
    if (!delta_only && *s > 1e9) {
      keep(*s * 1000);
      return bound(until(*s), name, v);
    }
    return bound(*s, name, v);
  }

  struct Quota {
    std::optional<std::int64_t> limit, remaining;
    std::optional<Duration> reset;
    std::optional<std::int64_t> reset_epoch_ms;
    std::string reset_header;  // "X-RateLimit-Reset: 4102444800", for a note
  };

  Quota separate(std::string_view prefix, bool delta_only) {
    Quota q;
    const std::string p(prefix);
    if (auto v = header(headers, p + "Limit")) {
      // Early drafts allow "10, 10;w=1": the first number is the limit.
      std::string_view first = std::string_view(*v).substr(0, std::string_view(*v).find_first_of(",;"));
      q.limit = count(first);
      if (!q.limit) ignore(p + "Limit", *v, "not a count");
    }
    if (auto v = header(headers, p + "Remaining")) {
      q.remaining = count(*v);
      if (!q.remaining) ignore(p + "Remaining", *v, "not a count");
    }
    if (auto v = header(headers, p + "Reset"))
      q.reset = reset_value(p + "Reset", *v, delta_only, q.reset_epoch_ms, q.reset_header);
    return q;
  }

  // RateLimit: either "limit=10, remaining=3, reset=5" or "\"name\";r=3;t=5, ...".
  // The most restrictive item wins.
  Quota ietf() {
    Quota best;
    auto v = header(headers, "RateLimit");
    if (!v) return best;
    std::string_view rest = *v;
    bool any = false;
    Quota dict;
    while (!rest.empty()) {
      std::size_t comma = rest.find(',');
      std::string_view item = trim(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
      if (item.empty()) continue;
      Quota q;
      bool dict_member = false;
      // Split the item into ';'-separated parts; key=value parts are read.
      std::string_view parts = item;
      while (!parts.empty()) {
        std::size_t semi = parts.find(';');
        std::string_view part = trim(parts.substr(0, semi));
        parts = semi == std::string_view::npos ? std::string_view{} : parts.substr(semi + 1);
        std::size_t eq = part.find('=');
        if (eq == std::string_view::npos) continue;  // the quoted policy name
        std::string_view key = trim(part.substr(0, eq));
        std::string_view val = trim(part.substr(eq + 1));
        if (key == "limit" || key == "remaining" || key == "reset") dict_member = true;
        if (key == "r" || key == "remaining") q.remaining = count(val);
        if (key == "limit") q.limit = count(val);
        if (key == "t" || key == "reset")
          q.reset = reset_value("RateLimit", val, true, q.reset_epoch_ms, q.reset_header);
      }
      if (dict_member) {
        if (q.remaining) dict.remaining = q.remaining;
        if (q.limit) dict.limit = q.limit;
        if (q.reset) {
          dict.reset = q.reset;
          dict.reset_header = q.reset_header;
        }
        continue;
      }
      if (!q.remaining && !q.reset) continue;
      if (!any || more_restrictive(q, best)) best = q;
      any = true;
    }
    if (dict.remaining || dict.reset) {
      if (!any || more_restrictive(dict, best)) best = dict;
      any = true;
    }
    if (!any) ignore("RateLimit", *v, "no remaining or reset found");
    return best;
  }

  static double pace_of(const Quota& q) {  // seconds per call the quota allows; larger is tighter
    if (!q.remaining || !q.reset) return 0;
    if (*q.remaining == 0) return 1e18;
    return std::chrono::duration<double>(*q.reset).count() / static_cast<double>(*q.remaining);
  }
  static bool more_restrictive(const Quota& a, const Quota& b) { return pace_of(a) > pace_of(b); }

  // RateLimit-Policy: "10;w=1, 1000;w=3600" or "\"default\";q=10;w=1". Tightest wins.
  void policy() {
    auto v = header(headers, "RateLimit-Policy");
    if (!v) return;
    std::string_view rest = *v;
    double best = -1;
    while (!rest.empty()) {
      std::size_t comma = rest.find(',');
      std::string_view item = trim(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
      std::optional<std::int64_t> quota;
      std::optional<double> window;
      std::string_view parts = item;
      bool first = true;
      while (!parts.empty()) {
        std::size_t semi = parts.find(';');
        std::string_view part = trim(parts.substr(0, semi));
        parts = semi == std::string_view::npos ? std::string_view{} : parts.substr(semi + 1);
        std::size_t eq = part.find('=');
        if (eq == std::string_view::npos) {
          if (first) quota = count(part);  // "10;w=1"; a quoted name reads as nothing
        } else {
          std::string_view key = trim(part.substr(0, eq));
          if (key == "q") quota = count(trim(part.substr(eq + 1)));
          if (key == "w") window = number(trim(part.substr(eq + 1)));
        }
        first = false;
      }
      if (!quota || *quota < 1 || !window || *window <= 0) continue;
      double pace = *window / static_cast<double>(*quota);
      if (pace > best) {
        best = pace;
        hint.limit = *quota;
        hint.window = *window > in_seconds(kLongestWindow) ? kLongestWindow : seconds(*window);
        if (*window > in_seconds(kLongestWindow)) {
          hint.clamped = "RateLimit-Policy: " + std::string(trim(item)) + " has a window of " +
                         show_seconds(*window) + "; reading it as " + show(kLongestWindow);
        }
      }
    }
    if (best < 0) {
      ignore("RateLimit-Policy", *v, "no quota with a window found");
      return;
    }
    if (!hint.interval)
      hint.interval = best >= in_seconds(options.max_wait) ? options.max_wait : seconds(best);
  }

  // Resume time and pace from a remaining/reset pair; true when it applied.
  bool apply(const Quota& q, HintSource source) {
    if (q.limit && !hint.limit) hint.limit = q.limit;
    if (!q.remaining || !q.reset) return false;
    hint.remaining = q.remaining;
    hint.reset_epoch_ms = q.reset_epoch_ms;
    if (*q.remaining == 0) {
      if (!hint.resume_at) {
        hint.resume_at = now + *q.reset;
        hint.source = source;
      }
    } else if (*q.reset > Duration::zero()) {
      // Capped at max_wait as a wait would be (and noted so), the reset
      // is only a span to pace over here.
      hint.reset_in = std::min(*q.reset, options.max_pace_window);
      if (*q.reset >= options.max_wait || *q.reset > options.max_pace_window) {
        hint.clamped = q.reset_header + " is " + (*q.reset >= options.max_wait ? "over " : "") +
                       show(*q.reset) + " ahead with " + std::to_string(*q.remaining) +
                       " calls remaining; pacing them over " + show(*hint.reset_in);
      }
    }
    return true;
  }
};

}  // namespace

PaceHint read_rate_headers(std::span<const HttpHeader> headers, int status, TimePoint now,
                           const RateHeaderOptions& options) {
  PaceHint hint;
  double server_now = in_seconds(now.time_since_epoch());
  if (auto d = header(headers, "Date")) {
    if (auto t = parse_http_date_seconds(*d)) {
      server_now = static_cast<double>(t->time_since_epoch().count());
    } else {
      hint.ignored.push_back("Date: " + *d + " (not an HTTP-date; absolute times read against our clock)");
    }
  }
  Reader r{headers, now, server_now, options, hint};
  if (auto wait = r.retry_after()) {
    hint.resume_at = now + *wait;
    hint.source = HintSource::kRetryAfter;
  }
  const bool ietf = r.apply(r.ietf(), HintSource::kIetfRateLimit) ||
                    r.apply(r.separate("RateLimit-", true), HintSource::kIetfRateLimit);
  if (!ietf) r.apply(r.separate("X-RateLimit-", false), HintSource::kXRateLimit);
  r.policy();
  if (r.read_on_ours) {
    hint.ignored.push_back("Date: " + *header(headers, "Date") + " (" +
                           about(std::abs(server_now - r.local_now)) +
                           " from our clock; a time it was sent with read against our clock)");
  }
  // With no quota to pace by, what is left is spread over the time to the
  // reset. A quota is better: the reset is often rounded to whole seconds,
  // so "1 left, reset in 1s" may mean 1 left for a few milliseconds.
  if (!hint.interval && !hint.limit && hint.reset_in && hint.remaining && *hint.remaining > 0) {
    hint.interval = *hint.reset_in / *hint.remaining;
  }
  hint.throttled = status == 429 || (status == 503 && hint.source == HintSource::kRetryAfter);
  if (status == 429 && hint.source == HintSource::kNone) hint.source = HintSource::kBareThrottle;
  return hint;
}

}  // namespace ratchet::limit
