// In-memory (process scope) fixed-window limiter: at most `rate` call starts
// in each window [k * per, (k + 1) * per) aligned to the Unix epoch. Note that
// two adjacent windows can together put 2 * rate starts into one unaligned
// interval; use it only for servers that count exactly these windows.
//
// A call reaches the server a little after it starts, so a start in the
// last `guard` of a window could be counted in the next one there: no call
// starts then. Its slot is in the next window (find), and a holder that
// comes that late to its window gets a slot in the next window with room.
//
// As in the sliding window, the units started decide who may go and the
// slots granted say when to come: a slot granted in a window that an
// overdraft (Limiter::adjust) has filled since gets a slot in the next
// window with room when it comes.
//
// Thread-safety: all members are safe to call concurrently (one mutex).
#pragma once

#include <atomic>

#include <cstdint>
#include <map>
#include <mutex>

#include "limit/limiter.hpp"
#include "limit/small_mutex.hpp"

namespace ratchet::limit {

class FixedWindowLimiter final : public Limiter {
 public:
  // rate >= 1, per_us >= 1, 0 <= guard_us < per_us. The windows begin at
  // offset_us past each multiple of per_us (a window learned from a
  // server's refusals, AdaptivePacer).
  FixedWindowLimiter(std::int64_t rate, std::int64_t per_us, std::int64_t guard_us = 0,
                     std::int64_t offset_us = 0);

  [[nodiscard]] Result<UseResult> start(Slot& slot, std::int64_t now_us) override;
  [[nodiscard]] Result<UseResult> restart(Slot& slot, std::int64_t now_us) override;
  [[nodiscard]] Status defer(Slot& slot, std::int64_t now_us, std::int64_t to_us) override;
  [[nodiscard]] Status cancel(const Slot& slot) override;
  [[nodiscard]] Status adjust(Slot& slot, std::int64_t units, std::int64_t now_us) override;
  void count_started(std::span<const Start> starts) override;
  bool forgettable(std::int64_t now_us) override;
  std::string describe() const override;

  // A new quota for every window, this one included (rate >= 1): what is
  // counted stays counted; slots granted stay granted.
  void set_rate(std::int64_t rate);
  std::int64_t rate() const { return rate_.load(std::memory_order_relaxed); }

 protected:
  [[nodiscard]] Result<std::int64_t> earliest_units(std::int64_t now_us, std::int64_t t_us,
                                                    std::int64_t units) override;
  [[nodiscard]] Result<Slot> reserve_units(std::int64_t now_us, std::int64_t t_us,
                                           std::int64_t units) override;

 private:
  std::int64_t advance(std::int64_t now_us);  // raises the high-water mark and prunes; needs mu_
  // The earliest time >= t_us outside every window's guard, in a window with
  // room for `units` (at most the whole window: limiter.hpp).
  std::int64_t find(std::int64_t t_us, std::int64_t units) const;
  bool in_guard(std::int64_t t_us) const;
  std::int64_t index_of(std::int64_t t_us) const;  // the window t_us falls in
  std::int64_t start_of(std::int64_t k) const;
  void release(std::int64_t at_us, std::int64_t units);

  // Set only by set_rate (a window read from refusals that is probed upward).
  std::atomic<std::int64_t> rate_;
  const std::int64_t per_;
  const std::int64_t guard_;
  const std::int64_t offset_;  // in [0, per_)
  SmallMutex mu_;              // one a key, of up to a hundred thousand
  std::int64_t high_water_ = 0;
  std::map<std::int64_t, std::int64_t> counts_;   // window index -> units started and reserved
  std::map<std::int64_t, std::int64_t> started_;  // window index -> units started: who may go
  UseResult start_locked(Slot& slot, std::int64_t now_us);
  static void take(std::map<std::int64_t, std::int64_t>& m, std::int64_t k, std::int64_t units);
};

}  // namespace ratchet::limit
