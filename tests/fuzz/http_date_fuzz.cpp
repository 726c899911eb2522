// Fuzz target: the HTTP-date parser of Retry-After and Date.
//
// Invariants, beyond "never crashes" (the fuzz build also traps undefined
// behaviour, such as a date too far out for the clock's range):
//   - a parsed date is a whole second;
//   - it formats as an IMF-fixdate that parses back to the same instant;
//   - an IMF-fixdate input reads as the very day and time it spells (a leap
//     second, :60, reads as :59).
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "limit/http_date.hpp"

namespace {

using namespace std::chrono;

std::string imf_fixdate(ratchet::TimePoint t) {
  static constexpr std::array<const char*, 7> kDays = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr std::array<const char*, 12> kMonths = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                          "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const auto day = floor<days>(t);
  const year_month_day ymd(day);
  const hh_mm_ss hms(floor<seconds>(t - day));
  char out[64];
  std::snprintf(out, sizeof out, "%s, %02u %s %04d %02lld:%02lld:%02lld GMT",
                kDays[weekday(day).c_encoding()], static_cast<unsigned>(ymd.day()),
                kMonths[static_cast<unsigned>(ymd.month()) - 1], static_cast<int>(ymd.year()),
                static_cast<long long>(hms.hours().count()), static_cast<long long>(hms.minutes().count()),
                static_cast<long long>(hms.seconds().count()));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// "Sun, 06 Nov 1994 08:49:37 GMT" exactly: a three-letter day, one space
// around each field.
bool is_imf_fixdate(std::string_view s) {
  auto digit = [&](std::size_t i) { return s[i] >= '0' && s[i] <= '9'; };
  return s.size() == 29 && s[3] == ',' && s[4] == ' ' && digit(5) && digit(6) && s[7] == ' ' &&
         s[11] == ' ' && s[16] == ' ' && s[19] == ':' && s[22] == ':' && s.substr(25) == " GMT";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = ratchet::limit::parse_http_date(text);
  if (!parsed) return 0;
  const std::string shown = "\"" + std::string(text) + "\"";
  FUZZ_CHECK(floor<seconds>(*parsed) == *parsed, shown + " is not a whole second");
  const std::string formatted = imf_fixdate(*parsed);
  auto back = ratchet::limit::parse_http_date(formatted);
  FUZZ_CHECK(back.has_value(), shown + " formats as \"" + formatted + "\", which does not parse");
  FUZZ_CHECK(*back == *parsed, shown + " formats as \"" + formatted + "\", another instant");
  const std::string_view t = trim(text);
  if (is_imf_fixdate(t)) {
    std::string expected(t.substr(5));
    if (expected.substr(17, 3) == ":60") expected.replace(17, 3, ":59");
    FUZZ_CHECK(formatted.substr(5) == expected, shown + " reads as \"" + formatted + "\"");
  }
  return 0;
}
