// One portal of the mock server: enforces its rate limit, picks the answer
// (200 with the movie, 429, or an injected 500/503) with the headers of its
// dialect, and counts what it saw. Knows nothing of HTTP transport: the
// server hands it each request and the clock to read, so tests can drive it
// on a fake clock.
//
// Every request counts at the server, whatever its answer: a rejected
// request still uses up its window, as real portals count it.
//
// Thread-safety: every method may be called from many threads at once.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mock_portal/options.hpp"
#include "mock_portal/stats.hpp"
#include "ratchet/clock.hpp"

namespace ratchet::mock_portal {

struct Answer {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;  // without Date; the server adds it
  std::string body;
  std::string content_type = "application/json";
};

class Portal {
 public:
  Portal(std::string name, PortalOptions options, std::uint64_t seed);

  // Decides the answer to GET /{name}/movies/{movie}. The arrival time is
  // read from `clock` under the portal's lock, so arrivals are counted in
  // the order they are decided.
  // `cost` (>= 1): the units of the limit the request takes (a query's
  // points); the answer then says so in X-Query-Cost. Windows count units.
  Answer handle(std::string_view movie, const Clock& clock, std::int64_t cost = 1);

  // Replaces the options and forgets the limiter state (not the counts).
  void configure(PortalOptions options);
  PortalOptions options() const;

  PortalStats stats() const;
  // Forgets counts and limiter state.
  void reset();

  const std::string& name() const noexcept { return name_; }

 private:
  struct Limit {
    bool admitted = true;
    std::int64_t remaining = 0;
    TimePoint reset_at;       // end of the current window
    Duration retry_after{0};  // a refusal: until the call would be admitted
  };
  Limit decide(TimePoint now, std::int64_t cost);
  void add_limit_headers(Answer& a, const Limit& l, TimePoint now) const;
  bool inject_error(std::uint64_t sequence, int* status) const;
  std::string retry_after_value(const Limit& l, TimePoint server_now) const;
  // Fixed windows: the offset of their start from the clock's whole windows,
  // and the index of the window holding `now`.
  std::int64_t offset_us() const;
  std::int64_t window_index(TimePoint now) const;

  const std::string name_;
  const std::uint64_t seed_;
  mutable std::mutex mu_;
  PortalOptions options_;
  PortalStats stats_;
  std::deque<TimePoint> recent_;        // arrivals within the last window, for max_in_window
  std::int64_t arrivals_index_ = 0;     // the clock-aligned window of the latest arrival
  std::int64_t arrivals_in_index_ = 0;  // and the arrivals in it, for max_in_aligned_window
  std::int64_t window_index_ = -1;
  std::int64_t window_count_ = 0;
  bool bucket_started_ = false;
  std::int64_t credit_ = 0;  // token bucket: one token is `window` microseconds of credit
  TimePoint bucket_time_;
};

}  // namespace ratchet::mock_portal
