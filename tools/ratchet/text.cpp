#include "text.hpp"

#include "ratchet/job.hpp"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <ctime>

namespace ratchet::cli {

using namespace std::chrono;

Result<Duration> parse_duration(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return fail(Error::invalid_argument(
        fmt::format("invalid duration \"{}\": {} (write e.g. 30s, 10m, 7d or 1h30m)", text, why)));
  };
  if (text.empty()) return bad("it is empty");
  Duration total{0};
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t start = i;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
    if (start == i) return bad("expected a number");
    double value = 0;
    auto [p, ec] = std::from_chars(text.data() + start, text.data() + i, value);
    if (ec != std::errc{} || p != text.data() + i) return bad("expected a number");
    std::size_t unit_start = i;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
    std::string_view unit = text.substr(unit_start, i - unit_start);
    double us = 0;
    if (unit == "us") {
      us = 1;
    } else if (unit == "ms") {
      us = 1e3;
    } else if (unit == "s") {
      us = 1e6;
    } else if (unit == "m") {
      us = 60e6;
    } else if (unit == "h") {
      us = 3600e6;
    } else if (unit == "d") {
      us = 86400e6;
    } else if (unit.empty()) {
      return bad("a number needs a unit (us, ms, s, m, h, d)");
    } else {
      return bad(fmt::format("unknown unit \"{}\" (use us, ms, s, m, h or d)", unit));
    }
    // Checked before the sum: a Duration wraps past 292 years.
    const double limit = static_cast<double>(duration_cast<microseconds>(kMaxScheduleSpan).count());
    if (value * us > limit ||
        static_cast<double>(duration_cast<microseconds>(total).count()) + value * us > limit) {
      return bad("it is longer than 36500d (100 years), the longest ratchet takes");
    }
    total += duration_cast<Duration>(microseconds(static_cast<std::int64_t>(std::llround(value * us))));
  }
  return total;
}

namespace {

bool read_int(std::string_view s, std::size_t pos, std::size_t len, int& out) {
  if (pos + len > s.size()) return false;
  auto [p, ec] = std::from_chars(s.data() + pos, s.data() + pos + len, out);
  return ec == std::errc{} && p == s.data() + pos + len;
}

}  // namespace

Result<TimePoint> parse_time(std::string_view text) {
  auto bad = [&] {
    return fail(Error::invalid_argument(fmt::format(
        "invalid time \"{}\" (write e.g. 2026-11-30T08:00:00Z, 2026-11-30T09:00:00+01:00 or @1764489600)",
        text)));
  };
  // From 1970 to the end of 2199: beyond, a TimePoint comes near its wrap.
  constexpr std::int64_t kLastUnixSecond = 7'258'118'399;
  auto out_of_range = [&] {
    return fail(Error::invalid_argument(
        fmt::format("invalid time \"{}\": ratchet takes times from 1970 to the end of 2199", text)));
  };
  if (!text.empty() && text[0] == '@') {
    std::int64_t secs = 0;
    auto [p, ec] = std::from_chars(text.data() + 1, text.data() + text.size(), secs);
    if (ec != std::errc{} || p != text.data() + text.size() || secs < 0 || secs > kLastUnixSecond) {
      return out_of_range();
    }
    return TimePoint{duration_cast<Duration>(seconds(secs))};
  }
  std::tm tm{};
  int year = 0, mon = 0, day = 0, hour = 0, min = 0, sec = 0;
  if (!read_int(text, 0, 4, year) || text.size() < 10 || text[4] != '-' || !read_int(text, 5, 2, mon) ||
      text[7] != '-' || !read_int(text, 8, 2, day)) {
    return bad();
  }
  std::size_t i = 10;
  microseconds frac{0};
  seconds offset{0};
  if (i < text.size()) {
    if ((text[i] != 'T' && text[i] != ' ') || !read_int(text, i + 1, 2, hour) || text.size() < i + 9 ||
        text[i + 3] != ':' || !read_int(text, i + 4, 2, min) || text[i + 6] != ':' ||
        !read_int(text, i + 7, 2, sec)) {
      return bad();
    }
    i += 9;
    if (i < text.size() && text[i] == '.') {
      std::size_t start = ++i;
      while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
      std::string digits(text.substr(start, std::min<std::size_t>(i - start, 6)));
      if (digits.empty()) return bad();
      digits.resize(6, '0');
      frac = microseconds(std::stoll(digits));
    }
    if (i < text.size()) {
      if (text[i] == 'Z' && i + 1 == text.size()) {
        ++i;
      } else if ((text[i] == '+' || text[i] == '-') && text.size() == i + 6 && text[i + 3] == ':') {
        int oh = 0, om = 0;
        if (!read_int(text, i + 1, 2, oh) || !read_int(text, i + 4, 2, om) || oh > 23 || om > 59)
          return bad();
        offset = hours(oh) + minutes(om);
        if (text[i] == '-') offset = -offset;
        i = text.size();
      } else {
        return bad();
      }
    }
  }
  if (mon < 1 || mon > 12 || day < 1 || day > 31 || hour > 23 || min > 59 || sec > 60) return bad();
  tm.tm_year = year - 1900;
  tm.tm_mon = mon - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = min;
  tm.tm_sec = sec;
  if (year < 1970 || year > 2199) return out_of_range();
  std::time_t t = timegm(&tm);
  // timegm carries a day past the month's end into the next (30 February
  // would be 2 March): such a date is a typo, not a time.
  std::tm back{};
  gmtime_r(&t, &back);
  if (back.tm_mday != day || back.tm_mon != mon - 1) return bad();
  return TimePoint{duration_cast<Duration>(seconds(t) - offset + frac)};
}

std::string format_time(TimePoint t) {
  auto us = duration_cast<microseconds>(t.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(us >= 0 ? us / 1000000 : (us - 999999) / 1000000);
  int millis = static_cast<int>((us - static_cast<std::int64_t>(secs) * 1000000) / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
}

std::string format_duration(Duration d) {
  double s = duration<double>(d).count();
  if (s < 0) s = 0;
  if (s < 10) return fmt::format("{:.3f}s", s);
  if (s < 60) return fmt::format("{:.1f}s", s);
  auto total = static_cast<std::int64_t>(s);
  if (total < 3600) return fmt::format("{}m{:02}s", total / 60, total % 60);
  if (total < 86400) return fmt::format("{}h{:02}m", total / 3600, (total % 3600) / 60);
  return fmt::format("{}d{:02}h", total / 86400, (total % 86400) / 3600);
}

std::string format_relative(TimePoint t, TimePoint now) {
  auto d = t - now;
  if (d > -milliseconds(1) && d < milliseconds(1)) return "now";
  if (d > Duration{0}) return "in " + format_duration(d);
  return format_duration(-d) + " ago";
}

}  // namespace ratchet::cli
