// Database-scope limiter: the limiter's state lives in the engine's database,
// so every process and host that shares the database sees one limit, and the
// state survives restarts (a daily quota does not reset when the engine
// restarts).
//
// The rows (store/limiter_tables.hpp, kept by the store's backend): per key,
// the token bucket's TAT of the slots granted and of the calls started and
// the latest `now` seen (the high-water mark that makes pruning safe across
// processes); the log of every slot granted (a started one at the time its
// call started; future rows are reservations); and the sliding window's log
// of the calls started. Every decision is one transaction that no other
// decision on the key interleaves with, so processes serialise on it.
//
// Slots are granted with slack over the starts they check (grant_slack_us,
// check_per_us): a call that starts a little late, after its slot, still
// fits, and does not push every later holder back by as much.
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
// Units: a call of u units is u rows at its time in the logs, and u
// intervals of a bucket's TAT (limiter.hpp).
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
#include "store/limiter_tables.hpp"

namespace ratchet::limit {

// Opens a new connection to the shared database's limiter state.
using ConnectionFactory = store::LimiterTablesFactory;

struct DatabaseLimiterOptions {
  // Read inside each start (see above); null: the caller's `now` is taken as is.
  std::shared_ptr<const Clock> clock;
  // Added to `per` of sliding windows and token buckets: the slack that
  // absorbs the jitter between a start and its arrival at the server.
  std::int64_t margin_us = 0;
  // A token bucket's burst is held back by this long (see make_limiter).
  std::int64_t burst_guard_us = 0;
  // Slack between the slots granted and the starts checked, as in the
  // in-process limiters (limit/sliding_window.hpp, limit/token_bucket.hpp):
  // a sliding window grants its slots in a window longer by this than the
  // one it checks starts in; a token bucket checks starts against a bucket
  // of this period (0: the granting one's; at most that).
  std::int64_t grant_slack_us = 0;
  std::int64_t check_per_us = 0;
};

// One connection to the limiter tables, taken in turns by the limiters that
// share it (the keys of a keyed limit: one connection, not one per key).
struct SharedLimiterTables {
  std::mutex mu;  // one decision at a time
  std::unique_ptr<store::LimiterTables> db;
  [[nodiscard]] static Result<std::shared_ptr<SharedLimiterTables>> open(const ConnectionFactory& connect);
};

// Removes from the store the rows of keys under `prefix` (a keyed limit's
// "<name>#") that hold nothing at or after `before` (LimiterTables::
// forget_key), at most `most` keys, each in a transaction of its own so
// decisions on other keys go on between them; whether fewer than `most`
// were found idle (none left to look at).
[[nodiscard]] Result<bool> forget_idle_keys(SharedLimiterTables& tables, const std::string& prefix,
                                            std::int64_t before, std::int64_t most);

class DatabaseLimiter final : public Limiter {
 public:
  // Opens its own connection through `connect`. Fails with kDatabase when the
  // database cannot be opened, and kInvalidArgument for a malformed spec.
  [[nodiscard]] static Result<std::shared_ptr<DatabaseLimiter>> open(const config::LimitSpec& spec,
                                                                     std::string key,
                                                                     const ConnectionFactory& connect,
                                                                     DatabaseLimiterOptions options = {});
  // The same, on a connection shared with other limiters.
  [[nodiscard]] static Result<std::shared_ptr<DatabaseLimiter>> open(
      const config::LimitSpec& spec, std::string key, std::shared_ptr<SharedLimiterTables> tables,
      DatabaseLimiterOptions options = {});
  ~DatabaseLimiter() override;

  [[nodiscard]] Result<std::int64_t> ready_at(Slot& slot, std::int64_t now_us) override;
  [[nodiscard]] Result<UseResult> start(Slot& slot, std::int64_t now_us) override;
  [[nodiscard]] Result<UseResult> restart(Slot& slot, std::int64_t now_us) override;
  [[nodiscard]] Status cancel(const Slot& slot) override;
  [[nodiscard]] Status adjust(Slot& slot, std::int64_t units, std::int64_t now_us) override;
  // Its state is in the database: a new limiter on the key reads it there.
  bool forgettable(std::int64_t now_us) override {
    (void)now_us;
    return true;
  }
  std::string describe() const override;

 protected:
  [[nodiscard]] Result<std::int64_t> earliest_units(std::int64_t now_us, std::int64_t t_us,
                                                    std::int64_t units) override;
  [[nodiscard]] Result<Slot> reserve_units(std::int64_t now_us, std::int64_t t_us,
                                           std::int64_t units) override;

 private:
  DatabaseLimiter(const config::LimitSpec& spec, std::string key, std::shared_ptr<SharedLimiterTables> tables,
                  DatabaseLimiterOptions options);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ratchet::limit
