// Strategy (b): one blocking barrier per portal that reads the reset header.
//
// The timed barrier of hand-written API clients: every call to a portal
// passes through that portal's gate, one call at a time. Each answer is read
// for the portal's say on its limit: `Retry-After` (seconds or an HTTP-date)
// when given, else `X-RateLimit-Remaining: 0` with `X-RateLimit-Reset` (a
// Unix time, or seconds when small). When the portal says stop, the gate
// stays closed until that time and every later call to the portal waits at
// it; a 429 is retried once the gate opens again.
//
// What it does not know: the IETF `RateLimit` header and bare 429s. On a 429
// that says nothing it can read, it closes the gate for one second, the
// usual hand-written fallback. It never learns a pace either: it runs into
// each window's end before it stops.
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <ctime>
#include <mutex>
#include <optional>
#include <string>

#include "portal_call.hpp"
#include "strategies.hpp"
#include "worker_pool.hpp"

namespace ratchet::bench {
namespace {

using SysTime = std::chrono::system_clock::time_point;
using namespace std::chrono_literals;

constexpr auto kUnknownThrottleHold = 1s;  // a 429 that names no time to come back

std::optional<long long> integer(std::string_view text) {
  long long v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return v;
}

// "Sun, 06 Nov 1994 08:49:37 GMT", the form servers send.
std::optional<SysTime> http_date(std::string_view text) {
  std::tm tm{};
  const std::string s(text);
  const char* end = strptime(s.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (end == nullptr || *end != '\0') return std::nullopt;
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

SysTime unix_seconds(long long s) { return SysTime(std::chrono::seconds(s)); }

// When the gate may open again after this answer; nullopt: at once.
std::optional<SysTime> reopen_time(const CallResult& call, SysTime now) {
  if (const auto retry_after = call.headers.get("Retry-After")) {
    if (const auto seconds = integer(*retry_after)) return now + std::chrono::seconds(*seconds);
    if (const auto date = http_date(*retry_after)) return *date;
  }
  const auto remaining = call.headers.get("X-RateLimit-Remaining");
  const auto reset = call.headers.get("X-RateLimit-Reset");
  if (remaining && reset && integer(*remaining) == 0) {
    if (const auto r = integer(*reset)) {
      return *r > 1'000'000'000 ? unix_seconds(*r) : now + std::chrono::seconds(*r);
    }
  }
  if (call.status == 429) return now + kUnknownThrottleHold;
  return std::nullopt;
}

// One portal's gate: a single slot, held for the call and, when the portal
// said so, until its window resets.
class Barrier {
 public:
  // Waits until no call to the portal is in flight and the gate is open;
  // false on stop.
  bool enter(std::stop_token stop) {
    std::unique_lock lock(mu_);
    while (!stop.stop_requested()) {
      if (busy_) {
        changed_.wait(lock, stop, [&] { return !busy_; });
        continue;
      }
      const auto until = closed_until_;
      if (std::chrono::system_clock::now() < until) {
        changed_.wait_until(lock, stop, until, [&] { return closed_until_ != until; });
        continue;
      }
      busy_ = true;
      return true;
    }
    return false;
  }

  void leave(std::optional<SysTime> reopen) {
    {
      std::lock_guard lock(mu_);
      busy_ = false;
      if (reopen) closed_until_ = std::max(closed_until_, *reopen);
    }
    changed_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable_any changed_;
  bool busy_ = false;
  SysTime closed_until_{};
};

}  // namespace

RunResult run_barrier(const BenchSetup& setup) {
  auto [result, client] = start_strategy(setup);
  if (!client) return result;
  std::array<Barrier, kPortals> barriers;
  std::atomic<std::size_t> next_job{0};

  const auto run = run_workers(setup.workers, setup.deadline, [&](int, std::stop_token stop) {
    for (std::size_t job = next_job++; job < setup.movies.size() && !stop.stop_requested();
         job = next_job++) {
      JobRecord& record = result.jobs[job];
      bool fatal = false;
      for (std::size_t p = 0; p < kPortals && !fatal; ++p) {
        while (!record.ratings[p]) {
          if (!barriers[p].enter(stop)) return;
          const auto call = call_portal(*client, setup.portals[p], setup.movies[job], stop);
          barriers[p].leave(reopen_time(call, std::chrono::system_clock::now()));
          if (call.ok()) {
            record.ratings[p] = call.rating;
          } else if (!call.transient()) {
            fatal = true;
            break;
          }
        }
      }
      record.completed = !fatal;
    }
  });
  result.makespan_s = run.seconds;
  if (run.cut_off) result.note = "cut off at the deadline";
  return result;
}

}  // namespace ratchet::bench
