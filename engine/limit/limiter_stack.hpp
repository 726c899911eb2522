// Stacked limits: several limiters on one call (e.g. 10/s and 10,000/day, the
// plugin's limits and the operation's, the learned pace). A call starts only
// when every limiter allows it; a stacked reservation holds one slot at the
// same time in each.
//
//   LimiterStack stack({per_second, per_day});
//   auto r = stack.reserve(now);           // r->at(): earliest time all allow
//   ... park until r->at() ...
//   auto go = stack.start(*r, clock.now()); // true: call now; false: wait for r->at() again
//
// A Reservation gives its slots back when destroyed unless started, so a job
// that gives up (cancelled, failed elsewhere) never leaks capacity.
//
// A start is counted when the call's request leaves, not when the call was
// admitted: a worker descheduled in between, or a slow connect or TLS
// handshake, would otherwise put the request at the server later than
// counted, closer to the next one than the limit allows. So the caller asks
// again right before the request goes; a start counted too long before is
// counted anew then (recount), or waits if that no longer fits.
//
// A call that one limiter has no room for when it is to start or leave
// waits in its place in every limiter (Limiter::defer), for the time that
// limiter names: slots granted after it were spaced with it counted there,
// and it never queues behind them. In a window of an hour that is the
// difference between a few milliseconds and the next hour.
//
// Thread-safety: LimiterStack is safe to share between threads; a Reservation
// belongs to one caller at a time.
#pragma once

#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "limit/limiter.hpp"
#include "ratchet/clock.hpp"

namespace ratchet::limit {

class Reservation {
 public:
  Reservation() = default;  // holds nothing
  Reservation(Reservation&& other) noexcept;
  Reservation& operator=(Reservation&& other) noexcept;
  Reservation(const Reservation&) = delete;
  Reservation& operator=(const Reservation&) = delete;
  ~Reservation();

  TimePoint at() const;                // when the call may start
  TimePoint counted_at() const;        // started: when its start is counted
  bool held() const { return held_; }  // reserved, not yet started or cancelled
  // The limiters it holds slots in (the stack it came from).
  std::vector<std::shared_ptr<Limiter>> limiters() const;
  bool started() const { return started_; }
  std::int64_t units() const { return units_; }  // of the budget it holds (Limiter::reserve)

  // Gives the slots back now (also done by the destructor). Errors from
  // database-scope limiters are returned; the slots are forgotten either way.
  [[nodiscard]] Status cancel();

  // Gives back the start of a call whose request never left (Limiter::
  // cancel of a started slot): as if it had not been counted.
  [[nodiscard]] Status give_back_start();

 private:
  friend class LimiterStack;
  std::vector<std::pair<std::shared_ptr<Limiter>, Slot>> slots_;
  std::int64_t at_us_ = 0;
  std::int64_t counted_us_ = 0;  // started: the time every limiter counts it at
  bool held_ = false;            // reserved (possibly on an empty stack) and not yet started or cancelled
  bool started_ = false;
  std::int64_t units_ = 1;
};

class LimiterStack {
 public:
  LimiterStack() = default;  // no limits: every call may start at once
  explicit LimiterStack(std::vector<std::shared_ptr<Limiter>> limiters);

  // The earliest time >= now at which every limiter allows a call costing
  // `units`, reserved in all of them.
  [[nodiscard]] Result<Reservation> reserve(TimePoint now, std::int64_t units = 1);

  // Starts the call held by `r` at `now`. Returns true when the call may go
  // (the slots now count it). Returns false when now < r.at() (nothing
  // changes), or when a slot used late could not be honoured without breaking
  // a limit: `r` then holds a new, later time to wait for.
  [[nodiscard]] Result<bool> start(Reservation& r, TimePoint now);

  // Counts the started call of `r` at `now` instead of when it was counted:
  // its request did not leave then. Its starts are given back and the call
  // is started anew at now, as a call of its own: true when it may go now
  // (r.counted_at() == now or later, the time a limiter read its own clock
  // at); false when the limits no longer leave room now: `r` then holds a
  // slot for a later time, to start() once it has come.
  [[nodiscard]] Result<bool> recount(Reservation& r, TimePoint now);

  // The time reserve(now, units) would answer, without reserving anything.
  [[nodiscard]] Result<TimePoint> earliest(TimePoint now, std::int64_t units = 1);
  // The same over some limiters, without making a stack of them.
  [[nodiscard]] static Result<TimePoint> earliest_of(std::span<const std::shared_ptr<Limiter>> limiters,
                                                     TimePoint now, std::int64_t units = 1);

  // The started call of `r` cost `units`, not r.units(): every limiter
  // counts the difference at its start (Limiter::adjust). Every limiter is
  // corrected; the first error is returned.
  [[nodiscard]] Status adjust(Reservation& r, std::int64_t units, TimePoint now);

  // reserve + start when the earliest time is now; otherwise gives the slots
  // back and returns false. For callers that never wait.
  [[nodiscard]] Result<bool> try_acquire(TimePoint now);

  std::size_t size() const { return limiters_.size(); }
  const std::vector<std::shared_ptr<Limiter>>& limiters() const { return limiters_; }

  // One reservation holding the slots of `a` and `b`, made in disjoint parts
  // of this stack's limiters that together are all of them, in this stack's
  // order, for the later of their times. Fails (giving both back) when they
  // are not such parts.
  [[nodiscard]] Result<Reservation> join(Reservation a, Reservation b) const;

  // Whether `r` holds slots in exactly this stack's limiters (a reservation
  // made before a reload may hold slots in limiters since replaced).
  bool holds_slots_of(const Reservation& r) const;

 private:
  [[nodiscard]] Result<Reservation> reserve_from(std::int64_t now_us, std::int64_t t_us, std::int64_t units);
  // Uses every slot of `r` at now_us (Limiter::start, or restart for a
  // recount); when one limiter has no room, gives them all back and reserves
  // anew. Needs the start mutex.
  using UseSlot = Result<UseResult> (Limiter::*)(Slot&, std::int64_t);
  [[nodiscard]] Result<bool> use_slots(Reservation& r, std::int64_t now_us, UseSlot use);
  // The earliest time >= t_us that every limiter allows, reserving nothing.
  [[nodiscard]] Result<std::int64_t> agree(std::int64_t now_us, std::int64_t t_us, std::int64_t units);
  [[nodiscard]] static Result<std::int64_t> agree_of(std::span<const std::shared_ptr<Limiter>> limiters,
                                                     std::int64_t now_us, std::int64_t t_us,
                                                     std::int64_t units);

  std::vector<std::shared_ptr<Limiter>> limiters_;
};

}  // namespace ratchet::limit
