#include "limit/limiter_stack.hpp"

#include <algorithm>
#include <mutex>

#include "limit/micros.hpp"

namespace ratchet::limit {

Result<std::int64_t> Limiter::ready_at(Slot& slot, std::int64_t now_us) {
  return std::max(now_us, slot.at_us);
}

Status Limiter::adjust_needs_start(const Slot& slot) {
  (void)slot;
  return fail(Error::invalid_argument("a call's cost was corrected before it started (a bug in the caller)"));
}

Result<UseResult> Limiter::restart(Slot& slot, std::int64_t now_us) {
  if (Status s = cancel(slot); !s) return fail(s.error());
  slot.started = false;
  return start(slot, now_us);
}

Status Limiter::defer(Slot& slot, std::int64_t now_us, std::int64_t to_us) {
  if (Status s = cancel(slot); !s) return s;
  auto fresh = reserve(now_us, to_us, slot.units);
  if (!fresh) return fail(fresh.error());
  slot = *fresh;
  return {};
}

namespace {

// Starts are checked against every limiter of a stack, then made in each:
// serialised, so that no other start takes the room in between (limiters
// are shared between stacks, so one lock per stack would not do).
std::mutex& start_mutex() {
  static std::mutex mu;
  return mu;
}

}  // namespace

Reservation::Reservation(Reservation&& other) noexcept
    : slots_(std::move(other.slots_)),
      at_us_(other.at_us_),
      counted_us_(other.counted_us_),
      held_(other.held_),
      started_(other.started_),
      units_(other.units_) {
  other.slots_.clear();
  other.held_ = false;
}

Reservation& Reservation::operator=(Reservation&& other) noexcept {
  if (this != &other) {
    (void)cancel();
    slots_ = std::move(other.slots_);
    at_us_ = other.at_us_;
    counted_us_ = other.counted_us_;
    held_ = other.held_;
    started_ = other.started_;
    units_ = other.units_;
    other.slots_.clear();
    other.held_ = false;
  }
  return *this;
}

Reservation::~Reservation() { (void)cancel(); }

std::vector<std::shared_ptr<Limiter>> Reservation::limiters() const {
  std::vector<std::shared_ptr<Limiter>> out;
  out.reserve(slots_.size());
  for (const auto& [limiter, slot] : slots_) out.push_back(limiter);
  return out;
}

TimePoint Reservation::at() const { return from_micros(at_us_); }
TimePoint Reservation::counted_at() const { return from_micros(counted_us_); }

Status Reservation::cancel() {
  Status out;
  if (held_) {
    for (auto& [limiter, slot] : slots_) {
      Status s = limiter->cancel(slot);
      if (!s && out) out = std::move(s);
    }
  }
  slots_.clear();
  held_ = false;
  return out;
}

Status Reservation::give_back_start() {
  if (!started_) return cancel();
  Status out;
  for (auto& [limiter, slot] : slots_) {
    Status s = limiter->cancel(slot);
    if (!s && out) out = std::move(s);
  }
  slots_.clear();
  started_ = false;
  return out;
}

LimiterStack::LimiterStack(std::vector<std::shared_ptr<Limiter>> limiters) : limiters_(std::move(limiters)) {}

Result<Reservation> LimiterStack::reserve_from(std::int64_t now_us, std::int64_t t_us, std::int64_t units) {
  units = std::max<std::int64_t>(units, 1);
  Reservation r;
  r.held_ = true;
  r.units_ = units;
  r.slots_.reserve(limiters_.size());
  // Rarely more than two rounds: a round fails only when another caller took
  // the agreed time in one limiter between the query and the reservation.
  for (int round = 0; round < 1000; ++round) {
    // The first round reserves straight away (the common case: every limiter
    // has room); later rounds first agree on a time without reserving.
    if (round > 0 && limiters_.size() > 1) {
      auto agreed_at = agree(now_us, t_us, units);
      if (!agreed_at) return fail(agreed_at.error());
      t_us = *agreed_at;
    }
    bool agreed = true;
    for (auto& l : limiters_) {
      auto s = l->reserve(now_us, t_us, units);
      if (!s) {
        (void)r.cancel();
        return fail(s.error());
      }
      r.slots_.emplace_back(l, *s);
      if (s->at_us > t_us) {
        t_us = s->at_us;
        agreed = false;
        break;
      }
    }
    if (agreed) {
      r.at_us_ = std::max(t_us, now_us);
      return r;
    }
    Status st = r.cancel();
    if (!st) return fail(st.error());
    r.held_ = true;
  }
  return fail(Error::internal("stacked limiters did not agree on a start time after 1000 rounds"));
}

Result<std::int64_t> LimiterStack::agree(std::int64_t now_us, std::int64_t t_us, std::int64_t units) {
  return agree_of(limiters_, now_us, t_us, units);
}

Result<TimePoint> LimiterStack::earliest_of(std::span<const std::shared_ptr<Limiter>> limiters, TimePoint now,
                                            std::int64_t units) {
  const std::int64_t now_us = to_micros(now);
  auto t = agree_of(limiters, now_us, now_us, std::max<std::int64_t>(units, 1));
  if (!t) return fail(t.error());
  return from_micros(*t);
}

Result<std::int64_t> LimiterStack::agree_of(std::span<const std::shared_ptr<Limiter>> limiters,
                                            std::int64_t now_us, std::int64_t t_us, std::int64_t units) {
  // Each answer can only push the time later, so this ends.
  for (bool moved = true; moved;) {
    moved = false;
    for (const auto& l : limiters) {
      auto e = l->earliest(now_us, t_us, units);
      if (!e) return fail(e.error());
      if (*e > t_us) {
        t_us = *e;
        moved = true;
      }
    }
  }
  return t_us;
}

Result<TimePoint> LimiterStack::earliest(TimePoint now, std::int64_t units) {
  const std::int64_t now_us = to_micros(now);
  auto t = agree(now_us, now_us, std::max<std::int64_t>(units, 1));
  if (!t) return fail(t.error());
  return from_micros(*t);
}

Result<Reservation> LimiterStack::reserve(TimePoint now, std::int64_t units) {
  const std::int64_t now_us = to_micros(now);
  return reserve_from(now_us, now_us, units);
}

Status LimiterStack::adjust(Reservation& r, std::int64_t units, TimePoint now) {
  if (!r.started_) return fail(Error::invalid_argument("a call's cost was corrected before it started"));
  units = std::max<std::int64_t>(units, 0);
  if (units == r.units_) return {};
  const std::int64_t now_us = to_micros(now);
  std::lock_guard serial(start_mutex());
  Status out;
  for (auto& [limiter, slot] : r.slots_) {
    Status s = limiter->adjust(slot, units, now_us);
    if (!s && out) out = std::move(s);
  }
  r.units_ = units;
  return out;
}

Result<bool> LimiterStack::start(Reservation& r, TimePoint now) {
  if (!r.held_) return fail(Error::invalid_argument("a limiter reservation was used twice or after cancel"));
  const std::int64_t now_us = to_micros(now);
  if (now_us < r.at_us_) return false;
  std::lock_guard serial(start_mutex());
  std::int64_t ready = now_us;
  for (auto& [limiter, slot] : r.slots_) {
    auto t = limiter->ready_at(slot, now_us);
    if (!t) return fail(t.error());
    ready = std::max(ready, *t);
  }
  if (ready > now_us) {
    r.at_us_ = ready;  // a short wait, in place
    return false;
  }
  return use_slots(r, now_us, &Limiter::start);
}

Result<bool> LimiterStack::recount(Reservation& r, TimePoint now) {
  if (r.held_) return start(r, now);
  if (!r.started_) return fail(Error::invalid_argument("a limiter reservation was recounted after cancel"));
  const std::int64_t now_us = std::max(to_micros(now), r.counted_us_);
  std::lock_guard serial(start_mutex());
  return use_slots(r, now_us, &Limiter::restart);
}

Result<bool> LimiterStack::use_slots(Reservation& r, std::int64_t now_us, UseSlot use) {
  std::int64_t later = 0;
  std::size_t done = 0;
  for (; done < r.slots_.size(); ++done) {
    auto& [limiter, slot] = r.slots_[done];
    auto u = ((*limiter).*use)(slot, now_us);
    if (!u) return fail(u.error());
    if (*u == UseResult::kMoved) {
      later = slot.at_us;
      break;
    }
  }
  if (done == r.slots_.size()) {
    // A database-scope limiter counts at its own reading of the clock, taken
    // once it holds the lock: the latest of them is when the call counts.
    r.counted_us_ = now_us;
    for (const auto& [limiter, slot] : r.slots_) r.counted_us_ = std::max(r.counted_us_, slot.at_us);
    r.at_us_ = r.counted_us_;
    r.held_ = false;
    r.started_ = true;
    return true;
  }
  // One limiter has no room now: the call does not go now. Each slot is
  // held for the time that limiter named, in its place: given back and
  // reserved anew, it would queue behind every slot granted since, which in
  // a window of an hour is the next hour.
  //
  // The slots end up held for one time that every limiter agreed to, as at
  // reserve: a limiter with no room at `later` holds its slot later still,
  // and the others follow it there. Left in different windows, calls that
  // fill each other's windows in turn were each moved on by the limiter
  // whose slot had gone stale, forever (two calls under two fixed windows
  // that each hold one of them never started).
  r.held_ = true;
  r.started_ = false;
  Status out;
  // The first round defers every slot (taking back the starts this use
  // made); later rounds only those left behind. Each round only moves the
  // time on, and each limiter has room at some later time, so this ends;
  // the bound guards against a limiter that breaks that.
  for (int round = 0;; ++round) {
    bool moved = false;
    for (auto& [limiter, slot] : r.slots_) {
      if (round > 0 && slot.at_us >= later) continue;
      if (Status st = limiter->defer(slot, now_us, later); !st) {
        if (out) out = std::move(st);
        continue;
      }
      if (slot.at_us > later) {
        later = slot.at_us;
        moved = true;
      }
    }
    if (!out || !moved) break;
    if (round == 1000) {
      out = fail(Error::internal("stacked limiters did not agree on a later start time after 1000 rounds"));
      break;
    }
  }
  r.at_us_ = later;
  if (!out) return fail(out.error());
  return false;
}

Result<Reservation> LimiterStack::join(Reservation a, Reservation b) const {
  if (!a.held_ || !b.held_) return fail(Error::invalid_argument("joined a limiter reservation not held"));
  if (a.units_ != b.units_) return fail(Error::internal("joined limiter reservations of different costs"));
  Reservation out;
  out.held_ = true;
  out.units_ = a.units_;
  out.at_us_ = std::max(a.at_us_, b.at_us_);
  for (const auto& l : limiters_) {
    bool found = false;
    for (auto* part : {&a, &b}) {
      for (auto it = part->slots_.begin(); it != part->slots_.end(); ++it) {
        if (it->first != l) continue;
        out.slots_.push_back(std::move(*it));
        part->slots_.erase(it);
        found = true;
        break;
      }
      if (found) break;
    }
    if (!found) {
      (void)out.cancel();
      return fail(Error::internal("joined limiter reservations do not cover the stack"));
    }
  }
  if (!a.slots_.empty() || !b.slots_.empty()) {
    (void)out.cancel();
    return fail(Error::internal("joined limiter reservations hold slots outside the stack"));
  }
  a.held_ = false;
  b.held_ = false;
  return out;
}

bool LimiterStack::holds_slots_of(const Reservation& r) const {
  if (r.slots_.size() != limiters_.size()) return false;
  for (std::size_t i = 0; i < limiters_.size(); ++i) {
    if (r.slots_[i].first != limiters_[i]) return false;
  }
  return true;
}

Result<bool> LimiterStack::try_acquire(TimePoint now) {
  auto r = reserve(now);
  if (!r) return fail(r.error());
  if (r->at_us_ > to_micros(now)) return false;  // the destructor gives the slots back
  return start(*r, now);
}

}  // namespace ratchet::limit
