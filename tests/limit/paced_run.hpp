// Drives a real AdaptivePacer with a fake clock against a simulated server:
// `jobs` calls, all ready at once, at most `workers` in flight, each
// started as soon as the pacer allows and answered by the server when it
// arrives there, `latency_us` after its start; a refused call is tried
// again. The server is any type with `latency_us`, `refused` (how many it
// refused) and `PaceHint answer(std::int64_t arrival_us)`, as the fixed
// window below; a server whose reply comes back later than it decides (a
// proxy that refuses at once and forwards the rest) also has
// `std::int64_t reply_after_us(const PaceHint&)`. Before each slot it
// tells the pacer how many calls wait, as the engine's turn queue does.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <map>

#include "limit/adaptive_pacer.hpp"
#include "limit/micros.hpp"

namespace ratchet::limit {

struct PacedRun {
  std::int64_t first_arrival = 0;
  std::int64_t last_arrival = 0;
  int refused = 0;
  int requests = 0;
  std::int64_t interval_us = 0;  // the pace at the end
};

// A fixed-window server: counts a call when it arrives, `latency` after it
// started, and replies then. It says what remains and when it resets, in
// whole seconds of its Unix time, as X-RateLimit-* does; or, `ietf`, in
// whole seconds from now, with its window in a policy, as RateLimit and
// RateLimit-Policy do; or, `delta`, in whole seconds from now and nothing
// of its window, as X-RateLimit-Reset in seconds does; or, `bare`, it says
// nothing and refuses the rest of a spent window with a bare 429.
struct FixedWindowServer {
  std::int64_t window_us;
  std::int64_t offset_us;
  std::int64_t limit;
  std::int64_t latency_us;
  bool bare = false;
  bool ietf = false;
  bool delta = false;
  std::int64_t index = -1;
  std::int64_t count = 0;
  int refused = 0;

  PaceHint answer(std::int64_t arrival_us) {
    constexpr std::int64_t kSecond = 1'000'000;
    const std::int64_t i = (arrival_us - offset_us) / window_us;
    if (i != index) {
      index = i;
      count = 0;
    }
    ++count;
    PaceHint h;
    if (bare) {
      if (count > limit) {
        h.throttled = true;
        h.source = HintSource::kBareThrottle;
        ++refused;
      }
      return h;
    }
    const std::int64_t end = (i + 1) * window_us + offset_us;
    const std::int64_t reset_s = (end + kSecond - 1) / kSecond;  // Unix seconds, rounded up
    const std::int64_t date_s = arrival_us / kSecond;            // Date, rounded down
    h.source = ietf ? HintSource::kIetfRateLimit : HintSource::kXRateLimit;
    h.limit = limit;
    h.remaining = std::max<std::int64_t>(0, limit - count);
    if (ietf) h.window = std::chrono::microseconds(window_us);
    if (!ietf && !delta) h.reset_epoch_ms = reset_s * 1000;
    const auto reset_in =
        std::chrono::seconds(ietf || delta ? (end - arrival_us + kSecond - 1) / kSecond : reset_s - date_s);
    const TimePoint now = from_micros(arrival_us);
    if (count > limit) {
      h.throttled = true;
      h.resume_at = now + reset_in;
      ++refused;
    } else if (*h.remaining == 0) {
      h.resume_at = now + reset_in;
    } else {
      h.reset_in = reset_in;
    }
    return h;
  }
};

// A server that counts each call up to `jitter_us` later than it arrived,
// by a fixed pseudo-random sequence: a machine's and a network's delays
// that vary from call to call. With `delayed_reply`, the reply comes that
// much later too, as it does when the call itself was slowed.
template <typename Server>
struct Jittery {
  Server inner;
  std::int64_t latency_us;
  std::int64_t jitter_us;
  bool delayed_reply = false;
  std::uint64_t state = 88172645463325252ULL;
  int refused = 0;
  std::int64_t delay_us = 0;  // of the call answered last

  PaceHint answer(std::int64_t arrival_us) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    delay_us = static_cast<std::int64_t>(state % static_cast<std::uint64_t>(jitter_us + 1));
    const PaceHint h = inner.answer(arrival_us + delay_us);
    refused = inner.refused;
    return h;
  }
  std::int64_t reply_after_us(const PaceHint&) const { return delayed_reply ? delay_us : 0; }
};

template <typename Server>
PacedRun run_against(Server& server, int jobs, std::int64_t t0, int workers = INT_MAX) {
  AdaptivePacer pacer(plugin_pacing(Duration::zero()));
  std::multimap<std::int64_t, std::int64_t> in_flight;  // arrival -> start
  struct Reply {
    PaceHint hint;
    std::int64_t started;
  };
  std::multimap<std::int64_t, Reply> replies;  // when the client reads it
  int done = 0;
  int waiting = jobs;
  std::int64_t now = t0;
  PacedRun run;
  while (done < jobs) {
    while (waiting > 0 && static_cast<int>(in_flight.size() + replies.size()) < workers) {
      pacer.waiting(waiting, now);  // as the engine's turn queue tells it
      auto at = pacer.earliest(now, now);
      EXPECT_TRUE(at);
      if (!at || *at > now) break;
      pacer.waiting(waiting, now);
      auto slot = pacer.reserve(now, now);
      EXPECT_TRUE(slot);
      if (!slot || slot->at_us > now) {
        if (slot) {
          EXPECT_TRUE(pacer.cancel(*slot));
        }
        break;
      }
      auto used = pacer.start(*slot, now);
      EXPECT_TRUE(used && *used == UseResult::kStarted);
      in_flight.emplace(now + server.latency_us, now);
      ++run.requests;
      --waiting;
    }
    const bool can_start = waiting > 0 && static_cast<int>(in_flight.size() + replies.size()) < workers;
    auto next_ask = can_start ? pacer.earliest(now, now) : Result<std::int64_t>(INT64_MAX);
    const std::int64_t next_arrival = in_flight.empty() ? INT64_MAX : in_flight.begin()->first;
    const std::int64_t next_reply = replies.empty() ? INT64_MAX : replies.begin()->first;
    const std::int64_t next = std::min({next_arrival, next_reply, next_ask ? *next_ask : INT64_MAX});
    if (next == INT64_MAX) {
      ADD_FAILURE() << "nothing in flight and nothing to ask for";
      break;
    }
    now = std::max(now + 1, next);
    while (!in_flight.empty() && in_flight.begin()->first <= now) {
      const auto [arrival, started] = *in_flight.begin();
      in_flight.erase(in_flight.begin());
      if (run.first_arrival == 0) run.first_arrival = arrival;
      run.last_arrival = std::max(run.last_arrival, arrival);
      const PaceHint h = server.answer(arrival);
      std::int64_t after = 0;
      if constexpr (requires { server.reply_after_us(h); }) after = server.reply_after_us(h);
      replies.emplace(arrival + after, Reply{h, started});
    }
    while (!replies.empty() && replies.begin()->first <= now) {
      const auto [at, reply] = *replies.begin();
      replies.erase(replies.begin());
      const PaceHint& h = reply.hint;
      pacer.observe(h, from_micros(at), from_micros(reply.started));
      if (h.throttled) {
        ++waiting;
      } else {
        ++done;
      }
    }
  }
  run.refused = server.refused;
  run.interval_us = to_micros(pacer.interval());
  return run;
}

}  // namespace ratchet::limit
