// Database-scope limiter: the limiter's state lives in the SQLite file, so
// every process that shares the database sees one limit, and the state
// survives restarts (a daily quota does not reset when the engine restarts).
//
// Tables (created by the store's migration; see tests/limit/limiter_tables.hpp):
//   limiter_state(key, tat_us, window_start_us, window_count, updated_us, started_tat_us)
//       one row per key: the token bucket's TAT of the slots granted and of
//       the calls started, and the latest `now` seen (the high-water mark
//       that makes pruning safe across processes)
//   limiter_calls(key, at_us)
//       the sliding-window and fixed-window log of every slot granted (a
//       started one at the time its call started); future rows are reservations
//   limiter_starts(key, at_us)
//       the sliding window's calls started, at the times they started
// Every decision is one BEGIN IMMEDIATE transaction, so processes serialize
// on the database's write lock (waiting up to the busy timeout).
//
// A start is counted at the time it really happens: the limiter reads its
// clock inside the transaction, after any wait for the lock, so a caller
// whose `now` went stale while another process held the lock is counted
// when its call goes, not earlier. As in the in-process sliding window, the
// calls started decide who may go and the granted slots say when to come:
// a holder who comes late takes the room there is then, and the next one
// waits a little in its place (ready_at) rather than lose it. The token
// bucket does the same with a second TAT, of the calls started.
//
// Algorithms: the same rules as the in-memory limiters (limit/sliding_log.hpp,
// limit/gcra_math.hpp, epoch-aligned fixed windows), keyed by `key`. The key
// must name the limit and its shape (e.g. "imdb/limit/10per1d") so a changed
// declaration does not inherit an incompatible state.
//
// Cost: a sliding-window decision reads the live log of its key (at most
// about `rate` rows plus reservations).
//
// Thread-safety: all members are safe to call concurrently; calls on one
// limiter share its connection under a mutex.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "config/spec.hpp"
#include "limit/limiter.hpp"
#include "ratchet/clock.hpp"

namespace SQLite {
class Database;
}

namespace ratchet::limit {

// Opens a new connection to the shared database (with a busy timeout set).
using ConnectionFactory = std::function<Result<std::unique_ptr<SQLite::Database>>()>;

// A factory that opens `path` read-write with the given busy timeout. Commits
// do not wait for fsync (synchronous=NORMAL, as the store's own connection),
// so that a call does not leave a disk flush later than it was counted.
ConnectionFactory connect_to(std::filesystem::path path,
                             std::chrono::milliseconds busy_timeout = std::chrono::seconds(5));

struct DatabaseLimiterOptions {
  // Read inside each start (see above); null: the caller's `now` is taken as is.
  std::shared_ptr<const Clock> clock;
  // Added to `per` of sliding windows and token buckets: the slack that
  // absorbs the jitter between a start and its arrival at the server.
  std::int64_t margin_us = 0;
  // A token bucket's burst is held back by this long (see make_limiter).
  std::int64_t burst_guard_us = 0;
};

class DatabaseLimiter final : public Limiter {
 public:
  // Opens its own connection through `connect`. Fails with kDatabase when the
  // database cannot be opened, and kInvalidArgument for a malformed spec.
  static Result<std::shared_ptr<DatabaseLimiter>> open(const config::LimitSpec& spec, std::string key,
                                                       const ConnectionFactory& connect,
                                                       DatabaseLimiterOptions options = {});
  ~DatabaseLimiter() override;

  Result<std::int64_t> earliest(std::int64_t now_us, std::int64_t t_us) override;
  Result<Slot> reserve(std::int64_t now_us, std::int64_t t_us) override;
  Result<std::int64_t> ready_at(Slot& slot, std::int64_t now_us) override;
  Result<UseResult> start(Slot& slot, std::int64_t now_us) override;
  Result<UseResult> restart(Slot& slot, std::int64_t now_us) override;
  Status cancel(const Slot& slot) override;
  std::string describe() const override;

 private:
  DatabaseLimiter(const config::LimitSpec& spec, std::string key, std::unique_ptr<SQLite::Database> db,
                  DatabaseLimiterOptions options);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ratchet::limit
