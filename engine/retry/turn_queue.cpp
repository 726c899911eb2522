#include "retry/turn_queue.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>

#include "limit/micros.hpp"

namespace ratchet::retry {
namespace {

constexpr std::int64_t kUnknownSpacingUs = 100'000;
// As long as a wait for a permit falls back on by default (a request's timeout).
constexpr std::int64_t kFallbackFloorUs = 30'000'000;
constexpr std::int64_t kFallbackCapUs = 3'600'000'000;

}  // namespace

TurnQueue::TurnQueue(Duration horizon)
    : horizon_us_(std::max<std::int64_t>(
          0, std::chrono::duration_cast<std::chrono::microseconds>(horizon).count())) {}

void TurnQueue::on_waiting(std::function<void()> notify) {
  std::lock_guard lock(mu_);
  notify_ = std::move(notify);
}

void TurnQueue::set_backlog(Backlog backlog) {
  std::lock_guard lock(mu_);
  backlog_ = std::move(backlog);
}

std::size_t TurnQueue::waiting() const {
  std::lock_guard lock(mu_);
  return queued_;
}

std::optional<TimePoint> TurnQueue::next_grant() const {
  std::lock_guard lock(mu_);
  if (!next_us_) return std::nullopt;
  return limit::from_micros(*next_us_);
}

TimePoint TurnQueue::fallback(TimePoint now) const {
  std::lock_guard lock(mu_);
  // From the next grant on, every step queued could take a turn before
  // this one: twice their time at the recent spacing, and 30 s at least.
  // Too early costs the step a second park; too late only delays it after
  // a crash, since a grant wakes it first.
  const std::int64_t now_us = limit::to_micros(now);
  std::int64_t from_us = now_us;
  if (next_us_) from_us = std::max(from_us, *next_us_ + horizon_us_);
  const double spacing = spacing_us_ > 0 ? spacing_us_ : static_cast<double>(kUnknownSpacingUs);
  const auto ahead = static_cast<std::int64_t>(2.0 * static_cast<double>(queued_ + 1) * spacing);
  const std::int64_t wait = std::clamp(from_us - now_us + ahead, kFallbackFloorUs, kFallbackCapUs);
  return now + std::chrono::microseconds(wait);
}

std::shared_ptr<Turn> TurnQueue::head_of(KeyState& ks) {
  while (!ks.queue.empty()) {
    if (auto head = ks.queue.front().lock(); head && head->queued_) return head;
    // Its step gave up, or asked again for other limits.
    ks.queue.pop_front();
    --queued_;
  }
  return nullptr;
}

void TurnQueue::unplace(Entry& key) {
  KeyState& ks = key.second;
  if (ks.where == KeyState::Where::kActive) {
    active_.erase(&key);
    active_weight_ -= ks.weight;
  }
  if (ks.where == KeyState::Where::kWaking) waking_.erase(&key);
  ks.where = KeyState::Where::kIdle;
}

std::int64_t TurnQueue::ready_us(const Turn& turn, std::int64_t now_us) {
  auto ready = limit::LimiterStack::earliest_of(turn.own_, limit::from_micros(now_us), turn.units_);
  return ready ? limit::to_micros(*ready) : now_us;
}

void TurnQueue::place(Entry& key, std::int64_t now_us) {
  unplace(key);
  KeyState& ks = key.second;
  auto head = head_of(ks);
  if (!head) return;
  if (const std::int64_t ready = ready_us(*head, now_us); ready > now_us + horizon_us_) {
    ks.where = KeyState::Where::kWaking;
    ks.waking_at = ready;
    waking_.insert(&key);
    return;
  }
  // Takes part at the latest grant's pass at least: time spent idle, or
  // waiting for its own limits, banks no turns.
  ks.pass = std::max(ks.pass, pass_);
  ks.where = KeyState::Where::kActive;
  ks.weight = static_cast<std::uint16_t>(std::lround(kWeightScale / head->stride_));
  active_weight_ += ks.weight;
  active_.insert(&key);
}

TimePoint TurnQueue::soonest(TimePoint now) const {
  std::lock_guard lock(mu_);
  if (!next_us_) return now;
  return std::max(now, limit::from_micros(*next_us_ + horizon_us_));
}

void TurnQueue::enqueue(const std::shared_ptr<Turn>& turn, std::int64_t now_us) {
  Entry& key = *keys_.try_emplace(turn->key_).first;
  KeyState& ks = key.second;
  const bool idle = head_of(ks) == nullptr;
  ks.queue.push_back(turn);
  turn->queued_ = true;
  ++queued_;
  if (idle) {
    // Filed anew under its new order (it may wait in waking_ meanwhile).
    unplace(key);
    ks.order = joined_++;
    place(key, now_us);
  }
}

std::size_t TurnQueue::grant_locked(std::int64_t now_us, Woken& woken) {
  next_us_.reset();
  std::size_t granted = 0;
  const TimePoint now = limit::from_micros(now_us);
  // Keys whose next step's own limits allow it within the horizon take
  // part in the turns from now on.
  while (!waking_.empty() && (*waking_.begin())->second.waking_at <= now_us + horizon_us_) {
    place(**waking_.begin(), now_us);
  }
  while (!active_.empty()) {
    const auto top = active_.begin();
    Entry& key = **top;
    const double pass = key.second.pass;
    KeyState& ks = key.second;
    std::shared_ptr<Turn> head = head_of(ks);
    if (!head || ready_us(*head, now_us) > now_us + horizon_us_) {
      place(key, now_us);  // idle, or waiting for its own limits
      continue;
    }
    // The count comes before the question of when: a learned pace holds a
    // window's last units for probes only while more calls wait than the
    // window holds, and a run's last call, told nothing, would wait for the
    // window's end.
    const std::int64_t to_come =
        static_cast<std::int64_t>(queued_) + (backlog_ ? std::max<std::int64_t>(0, backlog_()) : 0);
    for (const auto& l : head->shared_) l->waiting(to_come, now_us);
    auto earliest = limit::LimiterStack::earliest_of(head->shared_, now, head->units_);
    if (earliest && limit::to_micros(*earliest) - now_us > horizon_us_) {
      next_us_ = limit::to_micros(*earliest) - horizon_us_;
      break;
    }
    if (earliest && head->in_flight_) {
      // Room for what its call is expected to cost, beside what the calls
      // granted before it may still add.
      if (const std::int64_t extra = head->excess_ + head->in_flight_->units(); extra > 0) {
        auto roomy = limit::LimiterStack::earliest_of(head->shared_, now, head->units_ + extra);
        if (roomy && limit::to_micros(*roomy) - now_us > horizon_us_) {
          next_us_ = std::min(limit::to_micros(*roomy) - horizon_us_, now_us + kInFlightPollUs);
          break;
        }
      }
    }
    if (earliest &&
        !my_turn(limit::to_micros(*earliest), now_us, active_.size() > 1 || ks.queue.size() > 1)) {
      next_us_ = now_us + kSharePollUs;  // another process's turn: it takes the slot meanwhile
      break;
    }
    if (earliest) {
      limit::LimiterStack stack(head->limiters_);
      auto slot = stack.reserve(now, head->units_);
      if (slot) {
        const std::int64_t at_us = limit::to_micros(slot->at());
        if (last_grant_us_ > 0 && at_us >= last_grant_us_) {
          const auto gap = static_cast<double>(at_us - last_grant_us_);
          spacing_us_ = spacing_us_ > 0 ? 0.8 * spacing_us_ + 0.2 * gap : gap;
        }
        last_grant_us_ = std::max(last_grant_us_, at_us);
        head->slot_ = std::move(*slot);
        head->hold_ = UnitsInFlight::hold(head->in_flight_, head->excess_);
      } else {
        head->error_ = slot.error();
      }
    } else {
      head->error_ = earliest.error();  // its step fails with it
    }
    ks.queue.pop_front();
    --queued_;
    head->queued_ = false;
    head->granted_.store(true, std::memory_order_release);
    if (head->wake_) woken.push_back({head.get(), head->wake_, head->slot_.held() ? head->slot_.at() : now});
    ++granted;
    unplace(key);
    pass_ = pass;
    ks.pass = pass + head->stride_;
    place(key, now_us);
  }
  if (!waking_.empty()) {
    const std::int64_t wake_us = (*waking_.begin())->second.waking_at - horizon_us_;
    next_us_ = next_us_ ? std::min(*next_us_, wake_us) : wake_us;
  }
  update_share(now_us);
  if (keys_.size() > 2 * (active_.size() + waking_.size()) + 1024) forget_idle();
  return granted;
}

bool TurnQueue::my_turn(std::int64_t at_us, std::int64_t now_us, bool stays) {
  if (!shares_ || active_weight_ <= 0 || now_us < alone_until_us_) return true;
  // A slot about to pass unused goes to whoever asks: the process whose
  // turn it is was slow to take it, or is gone.
  const bool anyway = at_us - now_us <= horizon_us_ / 4;
  auto took = shares_->take(static_cast<double>(active_weight_) / kWeightScale, now_us, anyway, stays);
  sharing_ = stays;
  shared_weight_ = active_weight_;
  shared_us_ = now_us;
  // Without the shared table, each process grants alone: the limits still hold.
  if (!took) return true;
  if (took->alone) alone_until_us_ = now_us + kAloneUs;
  return took->mine;
}

void TurnQueue::update_share(std::int64_t now_us) {
  if (!shares_) return;
  if (active_.empty()) {
    if (sharing_) (void)shares_->leave(now_us);  // on a failure, its row stops counting by itself
    sharing_ = false;
    return;
  }
  // Keys wait here: the other processes learn it before their next grant,
  // and again before the row stops counting, or when the weight moved by a
  // quarter (a write for every key that comes or goes would be one a call).
  const bool moved = 4 * std::abs(active_weight_ - shared_weight_) > shared_weight_;
  if (sharing_ && !moved && now_us - shared_us_ < limit::TurnShares::kLiveUs / 2) return;
  if (auto joined = shares_->join(static_cast<double>(active_weight_) / kWeightScale, now_us); !joined)
    return;
  sharing_ = true;
  shared_weight_ = active_weight_;
  shared_us_ = now_us;
}

void TurnQueue::share_with(std::shared_ptr<limit::TurnShares> shares) {
  std::lock_guard lock(mu_);
  if (sharing_ && shares_ != shares) (void)shares_->leave(0);
  alone_until_us_ = 0;
  sharing_ = false;
  shares_ = std::move(shares);
}

void TurnQueue::forget_idle() {
  // A key with nothing queued and no turns ahead would join at pass_ anyway.
  absl::erase_if(keys_, [this](const Entry& kv) {
    return kv.second.where == KeyState::Where::kIdle && kv.second.queue.empty() && kv.second.pass <= pass_;
  });
}

std::size_t TurnQueue::grant(TimePoint now) {
  Woken woken;
  std::size_t granted = 0;
  {
    std::lock_guard lock(mu_);
    granted = grant_locked(limit::to_micros(now), woken);
  }
  for (auto& w : woken) w.wake(w.at);
  return granted;
}

Result<std::optional<limit::Reservation>> TurnQueue::ask(std::shared_ptr<Turn>& turn, Ask ask,
                                                         TimePoint now) {
  Woken woken;
  std::optional<limit::Reservation> out;
  std::optional<Error> failed;
  std::function<void()> notify;
  {
    std::lock_guard lock(mu_);
    auto same = [&](const Turn& t) { return t.limiters_ == ask.limiters && t.units_ == ask.units; };
    // Takes what a granted turn holds; the step's next call asks anew. A
    // slot for other limiters or units goes back with the turn.
    auto take = [&]() {
      if (turn->error_) {
        failed = *turn->error_;
      } else if (same(*turn)) {
        out = std::move(turn->slot_);
        if (ask.adopt) *ask.adopt = std::move(turn->hold_);
      }
      turn.reset();
    };
    if (turn && turn->granted()) take();
    if (!out && !failed) {
      if (turn && !same(*turn)) {
        turn->queued_ = false;
        turn.reset();
      }
      const bool was_idle = active_.empty() && waking_.empty();
      if (!turn) {
        turn = std::make_shared<Turn>();
        turn->key_ = std::move(ask.key);
        turn->stride_ = 1.0 / std::clamp(ask.weight, 1.0, kMaxWeight);
        const auto own_begin = ask.limiters.begin() + static_cast<std::ptrdiff_t>(ask.own_first);
        const auto own_end = own_begin + static_cast<std::ptrdiff_t>(ask.own_count);
        turn->own_.assign(own_begin, own_end);
        turn->shared_.assign(ask.limiters.begin(), own_begin);
        turn->shared_.insert(turn->shared_.end(), own_end, ask.limiters.end());
        turn->limiters_ = ask.limiters;
        turn->units_ = ask.units;
        turn->in_flight_ = std::move(ask.in_flight);
        turn->excess_ = std::max<std::int64_t>(0, ask.excess);
        turn->asked_ = now;
        enqueue(turn, limit::to_micros(now));
      }
      turn->wake_ = std::move(ask.wake);
      const std::optional<std::int64_t> due = next_us_;
      grant_locked(limit::to_micros(now), woken);
      if (turn->granted()) {
        // Granted in this pass: the asker needs no wake-up.
        std::erase_if(woken, [&](const Wake& w) { return w.turn == turn.get(); });
        take();
      } else if (was_idle || (next_us_ && (!due || *next_us_ < *due))) {
        // The keeper sleeps until the next grant it knew of: a sooner one
        // (another process's turn, asked again shortly) wakes it.
        notify = notify_;
      }
    }
  }
  for (auto& w : woken) w.wake(w.at);
  if (notify) notify();
  if (failed) return fail(*failed);
  return out;
}

}  // namespace ratchet::retry
