// The interface every rate limiter implements: sliding window, token bucket
// (GCRA) and fixed window, each in process or database scope, and the
// adaptive pacer learned from server replies.
//
// A limiter answers "when may one more call start?" and holds the answer as a
// reservation (a Slot) so that a caller who must wait can park and come back:
//   reserve(now, t)  -> the earliest slot at or after max(now, t), held until used or cancelled
//   reserve(now, t, units) -> the same for a call that costs `units` of the budget
//   start(slot, now) -> the call starts now (now >= slot.at_us); see UseResult
//   cancel(slot)     -> the slot is given back
// Slots are granted in request order: a granted slot never moves, and a later
// request only gets an earlier time if no earlier request could use it.
//
// Times are whole microseconds since the Unix epoch (limit/micros.hpp). `now`
// is the caller's clock reading; a limiter never answers earlier than the
// latest `now` it has seen, so a caller whose reading is a little stale does
// not get a time whose history was already pruned.
//
// Thread-safety: every Limiter is safe to call from many threads at once.
// Units. A limit's rate counts units; a call costs one unless its operation
// declares a cost (`cost = 5`) or its plugin estimates one. A slot holds the
// units it was reserved for (Slot::units), and start, restart and cancel use
// them. A call costing more than a limit can ever hold (its rate, or a
// bucket's burst) is reserved as if it cost that much: it then has the whole
// budget to itself, and its remaining units are counted as an overdraft.
// adjust() corrects a started call to its actual cost at once: an overdraft
// makes the calls after it wait, a refund frees room where that is exact.
//
// Ownership: limiters are shared (std::shared_ptr) by every operation and
// step that the limit applies to; a Slot is a plain value owned by one caller.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>

#include "limit/packed_state.hpp"
#include "ratchet/status.hpp"

namespace ratchet::limit {

// One held place in one limiter.
struct Slot {
  std::int64_t at_us = 0;  // the start time the slot is for
  // Token bucket bookkeeping: the theoretical arrival time before and after
  // this slot was granted (to give it back exactly when it is the latest).
  std::int64_t tat_before_us = 0;
  std::int64_t tat_after_us = 0;
  // Set by limiters that admit by the calls actually started (see ready_at).
  bool started = false;
  std::int64_t started_before_us = 0;
  std::int64_t started_after_us = 0;
  // Set by limiters whose pace can change under granted slots: the pace
  // (its generation) the slot was spaced by.
  std::uint64_t generation = 0;
  // The units of the budget the call holds (>= 1; see "Units" above).
  std::int64_t units = 1;
  // AdaptivePacer: granted from what the server said remains of its window,
  // which ends then (zero: spaced by the pace).
  std::int64_t quota_until_us = 0;
  // AdaptivePacer: granted by the fixed window it read from refusals (of
  // that reading's `generation`), not by the pace.
  bool learned_window = false;
};

// A call counted as started: when, and the units of the budget it took.
struct Start {
  std::int64_t at_us = 0;
  std::int64_t units = 1;
  friend bool operator==(const Start&, const Start&) = default;
};

// Orders starts by time (a history is sorted so).
inline bool start_before(const Start& a, const Start& b) { return a.at_us < b.at_us; }

enum class UseResult {
  kStarted,  // the call is counted as starting at `now`; go
  // Used late, the start at `now` would have broken the limit because other
  // slots were granted after this one; the slot now holds the next time that
  // keeps the limit (slot.at_us > now). Wait for it. Used on time, a slot is
  // always honoured.
  kMoved,
};

class Limiter {
 public:
  virtual ~Limiter() = default;

  // The earliest time >= max(now_us, t_us) at which one more call costing
  // `units` (>= 1) could start. Changes nothing; another caller may take
  // that time first.
  [[nodiscard]] Result<std::int64_t> earliest(std::int64_t now_us, std::int64_t t_us,
                                              std::int64_t units = 1) {
    return earliest_units(now_us, t_us, std::max<std::int64_t>(units, 1));
  }

  // Reserves the earliest slot at or after max(now_us, t_us) for a call
  // costing `units` (>= 1); the slot keeps them.
  [[nodiscard]] Result<Slot> reserve(std::int64_t now_us, std::int64_t t_us, std::int64_t units = 1) {
    return reserve_units(now_us, t_us, std::max<std::int64_t>(units, 1));
  }

  // The earliest time >= max(now_us, slot.at_us) at which a held slot may
  // start. Changes nothing, except in a limiter whose pace changed under the
  // slot (AdaptivePacer), which gives it a new time there. The in-process token bucket and sliding window
  // admit by the calls actually started, and a slot's time is when its
  // holder should come: a holder who came late took whatever room there was
  // then, so the next one may wait a little, keeping its place, rather than
  // lose it. Other limiters answer max(now_us, slot.at_us).
  [[nodiscard]] virtual Result<std::int64_t> ready_at(Slot& slot, std::int64_t now_us);

  // Uses a reserved slot for a call starting at now_us. now_us < slot.at_us is
  // a caller bug and fails with kInvalidArgument. Called at or after
  // ready_at(), a limiter that admits by the calls started always starts it.
  [[nodiscard]] virtual Result<UseResult> start(Slot& slot, std::int64_t now_us) = 0;

  // The call started on `slot` did not go when it was counted (its request
  // had not left yet): counts it at now_us instead (now_us >= the time it
  // was counted), as start() would a slot held for that earlier time, so it
  // keeps its place among the slots granted after it. kMoved as for start().
  // A limiter that cannot take back the earlier start exactly keeps it
  // counted too: slower for a while, never faster. The default gives the
  // start back (cancel) and starts the slot again.
  [[nodiscard]] virtual Result<UseResult> restart(Slot& slot, std::int64_t now_us);

  // The call holding `slot` will not start before to_us (>= now_us): another
  // limiter of its stack had no room for it sooner. A start this use made
  // at now_us is taken back (the call has not gone), and the slot is held
  // again for to_us, keeping its place among the slots granted after it
  // rather than queuing behind them: those were spaced with it counted where
  // it was, and each start is checked against the calls started anyway. The
  // default gives the slot back and reserves anew from to_us.
  [[nodiscard]] virtual Status defer(Slot& slot, std::int64_t now_us, std::int64_t to_us);

  // Gives back a slot that was reserved and not started, or started at
  // slot.at_us (a call that never reached the server). Giving back a token
  // bucket slot that later slots depend on keeps the limit but loses the slot.
  [[nodiscard]] virtual Status cancel(const Slot& slot) = 0;

  // The call started on `slot` cost `units` (>= 0), not slot.units: the
  // difference is counted at the time it started (more: later calls wait
  // for the overdraft; fewer: the room is given back where that is exact,
  // kept otherwise, slower for a while, never faster). slot.units becomes
  // `units`. Only for a started slot; others fail with kInvalidArgument.
  [[nodiscard]] virtual Status adjust(Slot& slot, std::int64_t units, std::int64_t now_us) = 0;

  // Counts calls that started before this limiter was made (sorted by time:
  // the history of a limit rebuilt by a reload, or of a restarted process),
  // whether or not they fit, so that the calls after them keep the limit.
  // Limiters that keep a state of their own (database scope, the learned
  // pace) ignore it.
  virtual void count_started(std::span<const Start> starts) { (void)starts; }

  // Calls waiting for a slot here (the next one's included) and the jobs the
  // engine holds behind them, as the queue that grants turns counts them
  // (retry/turn_queue.hpp) just before it reserves that slot at now_us. A
  // hint: the learned pace holds a window's last units back as probes of
  // its end only while more calls are to come than the window still holds.
  virtual void waiting(std::int64_t calls, std::int64_t now_us) {
    (void)calls;
    (void)now_us;
  }

  // Whether the limiter, as of now_us, holds nothing a new one would not:
  // no start that still counts, no slot held. A keyed limit drops such a
  // key's limiter (limit/keyed_limiters.hpp). Limiters that keep their state
  // elsewhere (database scope) are always forgettable.
  virtual bool forgettable(std::int64_t now_us) {
    (void)now_us;
    return false;
  }

  // Its state packed into a few bytes under `name` (limit/packed_state.hpp),
  // for a keyed limit to keep under the key while no caller holds it; empty
  // when it cannot be (a slot held, or state that does not pack). Unpacked
  // by the keyed limit's own means (KeyedLimiters::Unpack).
  virtual PackedLimiter pack(std::string_view name) const {
    (void)name;
    return {};
  }

  // "10/1s sliding window" for messages and logs.
  virtual std::string describe() const = 0;

 protected:
  // earliest() and reserve() with units >= 1.
  [[nodiscard]] virtual Result<std::int64_t> earliest_units(std::int64_t now_us, std::int64_t t_us,
                                                            std::int64_t units) = 0;
  [[nodiscard]] virtual Result<Slot> reserve_units(std::int64_t now_us, std::int64_t t_us,
                                                   std::int64_t units) = 0;

  // A helper for adjust(): the error for a slot not started.
  static Status adjust_needs_start(const Slot& slot);
};

}  // namespace ratchet::limit
