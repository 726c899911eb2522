// Turns between processes. Within one process a TurnQueue grants the slots
// of the limits its keys share in turns between the keys (stride scheduling,
// retry/turn_queue.hpp). Processes that share a database-scope limit take
// turns on it the same way, one level up: each process has a pass in the
// database, a process granting a slot raises its pass by 1/W, where W is
// the weight of the keys it has waiting now, and the next slot goes to the
// process whose pass is lowest. So a process with three keys waiting gets
// three slots to the one of a process with one, and each key, whichever
// process holds its steps, gets its weight's share of the shared limit.
//
// A process that is not the lowest leaves the slot to the one that is, and
// asks again shortly (its TurnQueue polls). A row counts for kLiveUs after
// it was last written, so a process that died or stopped leaves no turns
// waiting for it for longer than that; and a slot about to start unused
// goes to whoever asks (take with `anyway`), so no slot is lost to a
// process that is slow to ask. A process that joins takes the pass of the
// latest grant, as a key does: time spent idle banks no turns.
//
// Turns decide only who is granted a slot first; the limits themselves are
// kept by the limiters whatever the turns say, so a failure of the turns'
// table leaves each process granting alone (as without shared turns).
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "limit/database_limiter.hpp"
#include "ratchet/status.hpp"

namespace ratchet::limit {

class TurnShares {
 public:
  // How long a process's part counts after it last took or joined.
  static constexpr std::int64_t kLiveUs = 1'000'000;

  virtual ~TurnShares() = default;
  struct Taken {
    // It is this process's turn (or `anyway`), and its pass moved on by
    // 1/weight; false: another process's turn.
    bool mine = false;
    // No other process takes part now.
    bool alone = false;
  };
  // This process has keys of total weight `weight` (> 0) waiting, and a
  // slot to grant. `stays`: keys still wait here after this slot (false:
  // this process leaves the turns with it).
  [[nodiscard]] virtual Result<Taken> take(double weight, std::int64_t now_us, bool anyway, bool stays) = 0;
  // This process has keys of total weight `weight` waiting: the others
  // leave it its turns from now on (and for kLiveUs after the last call).
  [[nodiscard]] virtual Status join(double weight, std::int64_t now_us) = 0;
  // No key waits here any more: no process leaves turns for this one.
  [[nodiscard]] virtual Status leave(std::int64_t now_us) = 0;
};

class DatabaseTurnShares final : public TurnShares {
 public:
  // Rows of processes gone this long are removed.
  static constexpr std::int64_t kForgetUs = 3'600'000'000;

  // The turns named `name` (the limits shared, e.g. "turns/imdb/limit/10per1s"),
  // on a connection of their own; `owner` names this process among those
  // taking them (empty: a random name).
  [[nodiscard]] static Result<std::shared_ptr<DatabaseTurnShares>> open(std::string name,
                                                                        const ConnectionFactory& connect,
                                                                        std::string owner = {});

  Result<Taken> take(double weight, std::int64_t now_us, bool anyway, bool stays) override;
  Status join(double weight, std::int64_t now_us) override;
  Status leave(std::int64_t now_us) override;

 private:
  DatabaseTurnShares(std::string name, std::string owner, std::shared_ptr<SharedLimiterTables> tables);
  // In one transaction: this process's pass (joining at the latest grant's
  // if it was not taking part), whether it is the lowest of those taking
  // part, and (grant) the grant; its row is written with `weight` and
  // counts until `until`.
  [[nodiscard]] Result<Taken> decide(double weight, std::int64_t now_us, bool grant, bool anyway,
                                     std::int64_t until);

  const std::string name_;
  const std::string owner_;
  std::shared_ptr<SharedLimiterTables> tables_;
};

}  // namespace ratchet::limit
