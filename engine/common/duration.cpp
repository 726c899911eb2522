#include "common/duration.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>

namespace ratchet::common {
namespace {

struct Unit {
  std::string_view name;
  std::int64_t micros;
};

// Longest names first so "ms" is not read as "m" followed by garbage.
constexpr std::array<Unit, 6> kUnits{{
    {"us", 1},
    {"ms", 1'000},
    {"s", 1'000'000},
    {"m", 60'000'000},
    {"h", 3'600'000'000},
    {"d", 86'400'000'000},
}};

Error bad(std::string_view text, std::string_view why) {
  std::string m = "invalid duration \"";
  m += text;
  m += "\": ";
  m += why;
  m += " (write e.g. 250ms, 10s, 5m, 1h, 1d or 1h30m)";
  return Error::invalid_argument(std::move(m));
}

}  // namespace

Result<long double> duration_micros(std::string_view text) {
  if (text.empty()) return fail(bad(text, "it is empty"));
  long double total = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t start = i;
    while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) ++i;
    if (i == start) return fail(bad(text, "expected a number"));
    double value = 0;
    auto [ptr, ec] = std::from_chars(text.data() + start, text.data() + i, value);
    if (ec != std::errc() || ptr != text.data() + i) return fail(bad(text, "malformed number"));
    std::size_t unit_start = i;
    while (i < text.size() && text[i] >= 'a' && text[i] <= 'z') ++i;
    std::string_view unit = text.substr(unit_start, i - unit_start);
    if (unit.empty()) return fail(bad(text, "a unit is missing"));
    const Unit* found = nullptr;
    for (const auto& u : kUnits) {
      if (u.name == unit) found = &u;
    }
    if (found == nullptr) return fail(bad(text, "unknown unit \"" + std::string(unit) + "\""));
    total += static_cast<long double>(value) * static_cast<long double>(found->micros);
  }
  return total;
}

Result<std::chrono::microseconds> parse_duration(std::string_view text) {
  auto total = duration_micros(text);
  if (!total) return fail(total.error());
  // A clock Duration is nanoseconds in an int64 (about 292 years): anything
  // longer than a century overflows once it is converted or added to a time.
  if (*total > static_cast<long double>(kLongestDuration.count())) {
    return fail(bad(text, "it is too long (at most 36500d)"));
  }
  return std::chrono::microseconds(static_cast<std::int64_t>(std::llround(*total)));
}

std::string format_duration(std::chrono::microseconds d) {
  std::int64_t us = d.count();
  if (us == 0) return "0s";
  std::string out;
  if (us < 0) {
    out += '-';
    us = -us;
  }
  // Whole days, hours, minutes and seconds first; a sub-second remainder is
  // written in ms when exact, otherwise in us.
  for (auto it = kUnits.rbegin(); it != kUnits.rend(); ++it) {
    if (it->micros < 1'000'000) break;
    if (us >= it->micros) {
      out += std::to_string(us / it->micros);
      out += it->name;
      us %= it->micros;
    }
  }
  if (us > 0) {
    if (us % 1000 == 0) {
      out += std::to_string(us / 1000) + "ms";
    } else {
      out += std::to_string(us) + "us";
    }
  }
  return out;
}

}  // namespace ratchet::common
