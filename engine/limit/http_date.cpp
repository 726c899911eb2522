#include "limit/http_date.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>

namespace ratchet::limit {
namespace {

// A tiny cursor over the text; every reader fails softly.
struct Cursor {
  std::string_view s;
  std::size_t i = 0;

  bool lit(std::string_view l) {
    if (s.substr(i, l.size()) != l) return false;
    i += l.size();
    return true;
  }
  bool spaces() {
    std::size_t start = i;
    while (i < s.size() && s[i] == ' ') ++i;
    return i > start;
  }
  std::optional<int> digits(std::size_t min, std::size_t max) {
    std::size_t n = 0;
    int v = 0;
    while (i < s.size() && n < max && std::isdigit(static_cast<unsigned char>(s[i]))) {
      v = v * 10 + (s[i] - '0');
      ++i;
      ++n;
    }
    if (n < min) return std::nullopt;
    return v;
  }
  std::optional<int> month() {
    static constexpr std::array<std::string_view, 12> kMonths = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                                 "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    for (std::size_t m = 0; m < kMonths.size(); ++m) {
      if (lit(kMonths[m])) return static_cast<int>(m) + 1;
    }
    return std::nullopt;
  }
  bool word() {  // a day name; its value is not checked against the date
    std::size_t start = i;
    while (i < s.size() && std::isalpha(static_cast<unsigned char>(s[i]))) ++i;
    return i > start;
  }
  bool at_end() const { return i == s.size(); }
};

// Whole seconds hold every 4-digit year; a TimePoint (nanoseconds) would
// overflow past 2262, so the conversion to it is checked separately.
std::optional<std::chrono::sys_seconds> make(int year, int month, int day, int h, int m, int sec) {
  if (h > 23 || m > 59 || sec > 60) return std::nullopt;
  const std::chrono::year_month_day ymd{std::chrono::year(year),
                                        std::chrono::month(static_cast<unsigned>(month)),
                                        std::chrono::day(static_cast<unsigned>(day))};
  if (!ymd.ok()) return std::nullopt;
  return std::chrono::sys_seconds(std::chrono::sys_days(ymd)) + std::chrono::hours(h) +
         std::chrono::minutes(m) + std::chrono::seconds(std::min(sec, 59));
}

bool time_of_day(Cursor& c, int& h, int& m, int& s) {
  auto hh = c.digits(2, 2);
  if (!hh || !c.lit(":")) return false;
  auto mm = c.digits(2, 2);
  if (!mm || !c.lit(":")) return false;
  auto ss = c.digits(2, 2);
  if (!ss) return false;
  h = *hh;
  m = *mm;
  s = *ss;
  return true;
}

}  // namespace

std::optional<std::chrono::sys_seconds> parse_http_date_seconds(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  Cursor c{text};
  if (!c.word()) return std::nullopt;
  int h = 0, m = 0, s = 0;
  if (c.lit(",")) {
    c.spaces();
    auto day = c.digits(1, 2);
    if (!day) return std::nullopt;
    if (c.lit("-")) {  // RFC 850: 06-Nov-94
      auto mon = c.month();
      if (!mon || !c.lit("-")) return std::nullopt;
      auto yy = c.digits(2, 2);
      if (!yy || !c.spaces() || !time_of_day(c, h, m, s) || !c.spaces() || !c.lit("GMT") || !c.at_end()) {
        return std::nullopt;
      }
      // Two-digit years: RFC 9110 says to read a year more than 50 years in
      // the future as the past century.
      return make(*yy < 70 ? 2000 + *yy : 1900 + *yy, *mon, *day, h, m, s);
    }
    if (!c.spaces()) return std::nullopt;
    auto mon = c.month();
    if (!mon || !c.spaces()) return std::nullopt;
    auto year = c.digits(4, 4);
    if (!year || !c.spaces() || !time_of_day(c, h, m, s) || !c.spaces() || !c.lit("GMT") || !c.at_end()) {
      return std::nullopt;
    }
    return make(*year, *mon, *day, h, m, s);
  }
  // asctime: "Sun Nov  6 08:49:37 1994"
  if (!c.spaces()) return std::nullopt;
  auto mon = c.month();
  if (!mon || !c.spaces()) return std::nullopt;
  auto day = c.digits(1, 2);
  if (!day || !c.spaces() || !time_of_day(c, h, m, s) || !c.spaces()) return std::nullopt;
  auto year = c.digits(4, 4);
  if (!year || !c.at_end()) return std::nullopt;
  return make(*year, *mon, *day, h, m, s);
}

std::optional<TimePoint> parse_http_date(std::string_view text) {
  auto t = parse_http_date_seconds(text);
  if (!t) return std::nullopt;
  const auto lo = std::chrono::ceil<std::chrono::seconds>(TimePoint::min());
  const auto hi = std::chrono::floor<std::chrono::seconds>(TimePoint::max());
  if (*t < lo || *t > hi) return std::nullopt;
  return TimePoint(*t);
}

}  // namespace ratchet::limit
