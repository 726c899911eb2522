// What the demo config declares per portal, read back as "the most calls
// the declared limit lets reach the server in one second", so the summary
// can set each portal's busiest second against it.
// Pure functions; safe from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace ratchet::demo {

struct AllowedPerSecond {
  std::int64_t calls = 0;  // most calls in one second the declared limit allows
  bool aligned = false;    // counted in clock-aligned seconds (a fixed window), else any second
  std::string shape;       // "20/1s sliding window", "10/1s token bucket, burst 5", "8/1s fixed window"
};

// By plugin name, for each plugin whose first [[plugin.NAME.limit]] is per
// one second; plugins without one are left out. `toml` is the config's text.
std::map<std::string, AllowedPerSecond> allowed_per_second(std::string_view toml);

}  // namespace ratchet::demo
