// The bounds the config puts on durations, timeouts, rates and bursts.
//
// Times are nanoseconds since 1970 in an int64 (a Duration holds about 292
// years), and limiters keep microseconds, so a value far beyond any sensible
// setting ("100000d", a rate near INT64_MAX) would overflow the arithmetic
// that uses it. The loader refuses values outside these bounds with
// file:line:column; the limiters refuse a LimitSpec built in code outside
// them. config/reference.toml states them.
#pragma once

#include <chrono>
#include <cstdint>

namespace ratchet::config {

// Every duration key: at most "365d".
inline constexpr std::chrono::microseconds kMaxDuration = std::chrono::hours(24 * 365);
inline constexpr const char* kMaxDurationText = "365d";

// A limit's `per`: at least "1ms". A request takes longer than that to reach
// a server, so a shorter window cannot be kept there, and a count made
// before a request leaves goes stale before it is sent: `per = "1us"` held
// every request back and spun a core for ever.
inline constexpr std::chrono::microseconds kMinLimitPeriod = std::chrono::milliseconds(1);

// Request timeouts and retry deadlines: at least "1ms", because libcurl counts
// timeouts in whole milliseconds and reads 0 as no timeout at all.
inline constexpr std::chrono::microseconds kMinTimeout = std::chrono::milliseconds(1);

// A limit's rate and burst: at most a billion calls.
inline constexpr std::int64_t kMaxRate = 1'000'000'000;
inline constexpr std::int64_t kMaxBurst = 1'000'000'000;
// Workers of one engine ([engine] workers, `ratchet run --workers`): each is
// a thread with a stack of its own.
inline constexpr std::int64_t kMaxWorkers = 1'024;
// The most units one call may be declared to cost.
inline constexpr std::int64_t kMaxCost = 1'000'000;
// The weight of a key in the turns between keys (TurnQueue::kMaxWeight).
inline constexpr std::int64_t kMaxWeight = 1'000;

}  // namespace ratchet::config
