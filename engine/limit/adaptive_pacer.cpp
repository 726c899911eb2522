#include "limit/adaptive_pacer.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>

#include "common/duration.hpp"
#include "limit/micros.hpp"

namespace ratchet::limit {

PacerOptions plugin_pacing(Duration floor) {
  PacerOptions o;
  o.floor = floor;
  o.opening_interval = std::chrono::milliseconds(8);
  o.opening_hold = std::chrono::seconds(1);
  return o;
}

AdaptivePacer::AdaptivePacer(PacerOptions options)
    : AdaptivePacer(std::make_shared<const PacerOptions>(options)) {}

AdaptivePacer::AdaptivePacer(std::shared_ptr<const PacerOptions> options) : options_(std::move(options)) {
  if (options_->opening_interval > Duration::zero() && options_->floor == Duration::zero()) {
    start_ramp_locked(0, to_micros(options_->opening_interval), to_micros(options_->ramp_doubling));
    awaiting_reply_ = options_->opening_hold > Duration::zero();
  }
}

void AdaptivePacer::start_ramp_locked(std::int64_t from_us, std::int64_t interval_us,
                                      std::int64_t doubling_us) {
  ramping_ = true;
  untold_spread_us_ = 0;
  ramp_doubling_us_ = std::max<std::int64_t>(1, doubling_us);
  ramp_from_us_ = from_us;
  ramp_interval_us_ = std::max<std::int64_t>(1, interval_us);
  interval_us_ = ramp_interval_us_;
  rate_at_decrease_ = 0;
  ceiling_ = 0;
}

std::int64_t AdaptivePacer::ramp_interval_at_locked(std::int64_t t_us) const {
  const std::int64_t from = ramp_from_us_ == 0 ? t_us : ramp_from_us_;
  const double doublings =
      static_cast<double>(std::max<std::int64_t>(0, t_us - from)) / static_cast<double>(ramp_doubling_us_);
  const double interval = static_cast<double>(ramp_interval_us_) * std::exp2(-doublings);
  // As fast as the declared pace (or unpaced): nothing more to find out
  // until the server says no.
  if (interval <= static_cast<double>(std::max<std::int64_t>(1, to_micros(options_->floor))))
    return learned_us_;
  return static_cast<std::int64_t>(interval);
}

std::int64_t AdaptivePacer::interval_at_locked(std::int64_t t_us) const {
  return ramping_ ? ramp_interval_at_locked(t_us) : interval_us_;
}

void AdaptivePacer::ramp_locked(std::int64_t now_us) {
  if (!ramping_) return;
  if (ramp_from_us_ == 0) ramp_from_us_ = now_us;
  // Slots were granted along the ramp's schedule (reserve), so nothing
  // granted needs respacing as it speeds up.
  interval_us_ = ramp_interval_at_locked(now_us);
  if (now_us >= ramp_from_us_ && interval_us_ == learned_us_) ramping_ = false;
}

double AdaptivePacer::observed_interval_locked(std::int64_t now_us) const {
  // The mean spacing per unit of the starts in the last second: what the
  // server saw just before it said no. (A moving average of single gaps
  // would read a burst of simultaneous starts as an absurd rate.) A call's
  // units are spaced after it, so the last start's are not yet spent.
  const std::int64_t since = now_us - kObservedSpan;
  auto first = std::find_if(starts_.begin(), starts_.end(), [&](const auto& s) { return s.first > since; });
  if (first == starts_.end()) return 0;
  std::int64_t units = 0;
  for (auto it = first; it != std::prev(starts_.end()); ++it) units += it->second;
  if (units == 0) {
    const std::int64_t span = std::min<std::int64_t>(kObservedSpan, now_us - first_start_us_);
    return static_cast<double>(span) / static_cast<double>(std::max<std::int64_t>(1, first->second));
  }
  return static_cast<double>(now_us - first->first) / static_cast<double>(units);
}

AdaptivePacer::RefusalLearning& AdaptivePacer::refusal_learning_locked() {
  if (!refusal_learning_) refusal_learning_ = std::make_unique<RefusalLearning>();
  return *refusal_learning_;
}

std::optional<RefusalReading> AdaptivePacer::learn_from_refusals_locked(
    const PaceHint& hint, std::int64_t now_us, std::optional<TimePoint> call_started) {
  const std::int64_t started = call_started ? to_micros(*call_started) : now_us;
  if (!hint.throttled) {
    refusal_learning_locked().window.admitted(started);
    return refusal_learning_locked().refusals.admitted(started);
  }
  const std::int64_t resume = hint.resume_at ? std::max(now_us, to_micros(*hint.resume_at)) : now_us;
  std::optional<RefusalReading> reading = refusal_learning_locked().refusals.refused(started, resume);
  if (reading) refusal_learning_locked().window.refused(started);  // the first refusal of its stretch
  return reading;
}

bool AdaptivePacer::read_window_locked(std::int64_t now_us, std::int64_t w, int refusals) {
  if (w <= 0 || w > kMaxLearnedWindowUs || windows_given_up_ >= kMaxWindowsGivenUp) return false;
  const std::optional<WindowReading> r = refusal_learning_locked().window.read(w, refusals);
  if (!r) return false;
  // No start in the doubt about the boundary, nor within the time to send
  // a call of either side of it.
  const std::int64_t guard = r->latest_us - r->earliest_us + 2 * kBoundaryGuard;
  if (guard >= w - kBoundaryGuard) return false;
  const std::int64_t offset = r->latest_us + kBoundaryGuard;
  learned_window_ = std::make_unique<FixedWindowLimiter>(r->quota, w, guard, offset);
  // The calls of the window it is read in count there; one started where
  // the boundary is in doubt may be the server's next window's.
  std::vector<Start> recent;
  for (std::int64_t t : refusal_learning_locked().window.starts_from(now_us - w)) {
    const std::int64_t into = t - offset - floor_div(t - offset, w) * w;
    recent.push_back({.at_us = into >= w - guard ? t + w - into : t});
  }
  learned_window_->count_started(recent);
  learned_window_since_us_ = now_us;
  ++window_generation_;
  window_len_us_ = w;
  window_kept_quota_ = 0;
  window_probe_step_ = std::max<std::int64_t>(1, r->quota / 16);
  window_probe_every_us_ = kFirstWindowProbes * w;
  window_probe_at_us_ = now_us + window_probe_every_us_;
  return true;
}

void AdaptivePacer::probe_window_locked(std::int64_t now_us) {
  // A probe whose windows went by unrefused: its quota is the server's.
  window_kept_quota_ = 0;
  const std::int64_t quota = learned_window_->rate();
  if (waiting_calls_ <= quota) {
    // A window holds every call waiting: nothing to find out with them.
    window_probe_at_us_ = now_us + window_len_us_;
    return;
  }
  window_kept_quota_ = quota;
  learned_window_->set_rate(quota + window_probe_step_);
  window_probed_since_us_ = now_us;
  window_probe_at_us_ = now_us + kWindowProbeWindows * window_len_us_;
}

bool AdaptivePacer::window_slot_locked(const Slot& slot) const {
  return learned_window_ && slot.learned_window && slot.generation == window_generation_;
}

void AdaptivePacer::cancel_locked(const Slot& slot) {
  if (slot.learned_window) {
    if (slot.started) replied_locked(slot.at_us);  // it never went: nothing to come of it
    if (window_slot_locked(slot)) (void)learned_window_->cancel(slot);
    return;
  }
  // The call the hold lets go first never went: the next one goes instead.
  if (awaiting_reply_) {
    const bool first_went =
        hold_from_us_ > 0 ? !starts_.empty() && starts_.back().first >= hold_from_us_ : first_start_us_ > 0;
    const bool was_first = hold_from_us_ > 0 && slot.started && slot.at_us >= hold_from_us_;
    if (!first_went || was_first) hold_until_us_ = 0;
  }
  if (slot.started) replied_locked(slot.at_us);  // it never went: nothing to come of it
  if (slot.quota_until_us > 0) {
    if (slot.at_us == probe_slot_us_) probe_slot_us_ = 0;
    if (!slot.started) quota_pending_ = std::max<std::int64_t>(0, quota_pending_ - slot.units);
    if (slot.quota_until_us == quota_until_us_) quota_ += slot.units;
    return;
  }
  if (slot.started) {
    if (started_tat_ == slot.started_after_us) started_tat_ = slot.started_before_us;
    return;
  }
  outstanding_ = std::max<std::int64_t>(0, outstanding_ - slot.units);
  if (tat_ == slot.tat_after_us) tat_ = slot.tat_before_us;
}

Result<Slot> AdaptivePacer::reserve_window_locked(std::int64_t now_us, std::int64_t t_us,
                                                  std::int64_t units) {
  Result<Slot> s = learned_window_->reserve(now_us, std::max({now_us, t_us, resume_us_}), units);
  if (!s) return s;
  s->learned_window = true;
  s->generation = window_generation_;
  return s;
}

void AdaptivePacer::adopt_locked(Slot& slot, std::int64_t now_us) {
  // Only a slot not started: a started one keeps its count where it is.
  cancel_locked(slot);
  Result<Slot> held = reserve_window_locked(now_us, now_us, slot.units);
  if (held) slot = *held;
}

void AdaptivePacer::disown_locked(Slot& slot) {
  slot.learned_window = false;
  slot.generation = generation_ + 1;  // a new turn at the pace (start_locked)
  if (!slot.started) outstanding_ += slot.units;
}

bool AdaptivePacer::window_from_refusal_locked(const RefusalReading& refusal, std::int64_t pause_us) {
  // Retry-After is written in whole seconds: the pause asked for, to the
  // nearest one, is how far the window's end can be.
  const std::int64_t pause = std::max<std::int64_t>(1, (pause_us + 500'000) / 1'000'000) * 1'000'000;
  // A fixed window admits its quota from each pause's end whatever the
  // stretch's length; a bucket admits more the longer it is drained.
  const bool same_quota =
      least_admitted_ > 0 && refusal.admitted <= least_admitted_ + least_admitted_ / kSameQuotaShare;
  const bool other_length =
      same_quota && std::abs(refusal.length_us - least_length_us_) >= RefusalEstimator::kMinStretchGapUs;
  if (same_quota) ++same_quotas_;
  if (refusal.admitted > 0 && (least_admitted_ == 0 || refusal.admitted < least_admitted_)) {
    least_admitted_ = refusal.admitted;
    least_length_us_ = refusal.length_us;
  }
  longest_pause_us_ = std::max(longest_pause_us_, pause);
  const bool refused_at_window_pace = window_paced_ && learned_us_ > 0;
  if (longest_pause_us_ > kEvenWindowUs) {
    // A longer window is better taken as a ramp from each pause's end
    // takes it: its quota goes early in it, where an even pace would
    // spread it over the whole window.
    if (window_paced_) learned_us_ = 0;
    window_paced_ = false;
    window_read_ = false;
    return false;
  }
  if (other_length || same_quotas_ >= 2 || refusal.not_a_bucket) window_read_ = true;
  return refused_at_window_pace;
}

void AdaptivePacer::late_admission_locked(const RefusalReading& refusal, std::int64_t now_us) {
  // The stretch the last refusal ended admitted one call more than it had
  // when the refusal was answered: a proxy that refuses at once answered it
  // before the calls it forwarded. Counted one short, a bucket of three
  // behind nginx was read as a window of one call a second.
  if (least_admitted_ == refusal.admitted - 1 && least_length_us_ == refusal.length_us) {
    least_admitted_ = refusal.admitted;
  }
  if (ramping_ && untold_spread_us_ > 0) {
    const std::int64_t floor_us = std::max<std::int64_t>(1, to_micros(options_->floor));
    const std::int64_t max_us = std::max(to_micros(options_->max_interval), floor_us);
    ramp_interval_us_ =
        std::clamp(untold_spread_us_ / std::max<std::int64_t>(1, refusal.admitted), floor_us, max_us);
    if (now_us < ramp_from_us_) interval_us_ = ramp_interval_us_;
  }
}

void AdaptivePacer::speed_up_locked(std::int64_t now_us) {
  // A rate read from refusals is the slowest of the buckets two stretches
  // allow, or a bound under it: nginx's 5 r/s, read at 4.4, was kept so for
  // the whole run. While calls are admitted and none refused, the pace
  // speeds up a step at a time towards halfway to the fastest rate no
  // answer rules out; a refusal on the way narrows that and slows the pace
  // again.
  if (read_fastest_us_ <= 0 || learned_us_ <= read_fastest_us_ || interval_us_ != learned_us_ || ramping_ ||
      window_paced_ || learned_window_ || rate_at_decrease_ > 0) {
    return;
  }
  if (now_us - std::max(decreased_at_us_, sped_up_at_us_) < kSpeedUpEveryUs) return;
  // Worth the refusal it may draw: the calls waiting would all go sooner,
  // at the fastest rate allowed, by more than the longest pause a refusal
  // asked for.
  if (waiting_calls_ * (learned_us_ - read_fastest_us_) < longest_pause_us_) return;
  sped_up_at_us_ = now_us;
  learned_us_ = std::max(read_fastest_us_, learned_us_ - learned_us_ / kSpeedUpShare);
  interval_us_ = learned_us_;
}

void AdaptivePacer::observe(const PaceHint& hint, TimePoint now, std::optional<TimePoint> call_started,
                            std::int64_t units) {
  const std::int64_t now_us = to_micros(now);
  const std::int64_t floor_us = to_micros(options_->floor);
  const std::int64_t max_us = std::max(to_micros(options_->max_interval), floor_us);
  std::lock_guard lock(mu_);
  observed_us_ = std::max(observed_us_, now_us);
  if (learned_window_ && hint.throttled && call_started && window_kept_quota_ > 0 &&
      to_micros(*call_started) >= window_probed_since_us_) {
    // A probe above the quota kept was refused: the quota kept is the
    // server's. Refusals of the calls in flight now report the same.
    learned_window_->set_rate(window_kept_quota_);
    window_kept_quota_ = 0;
    window_probe_step_ = std::max<std::int64_t>(1, window_probe_step_ / 2);
    window_probe_every_us_ = std::min(2 * window_probe_every_us_, kMaxWindowProbeUs);
    window_probe_at_us_ = now_us + window_probe_every_us_;
    learned_window_since_us_ = now_us;
  } else if (learned_window_ && hint.throttled && call_started &&
             to_micros(*call_started) >= learned_window_since_us_) {
    // Refused under the window read: it was read wrong, or the server
    // changed. The pace takes over; the next refusals may read it again.
    learned_window_.reset();
    window_kept_quota_ = 0;
    ++windows_given_up_;
    // Its window began at most a window before it.
    refusal_learning_locked().window.forget_before(to_micros(*call_started) - longest_pause_us_);
  }
  if (learned_window_ && !hint.throttled && now_us >= window_probe_at_us_) probe_window_locked(now_us);
  const std::int64_t interval_before = interval_us_;
  struct Respace {
    AdaptivePacer& p;
    std::int64_t before;
    std::int64_t resume_before;
    std::int64_t now;
    ~Respace() {
      const bool paused = p.resume_us_ != resume_before && p.resume_us_ > now;
      if (paused || p.interval_us_ > before) {
        // The slots granted so far were spaced for a pace that no longer
        // holds: they take new turns when they come back (start).
        ++p.generation_;
        p.moved_tat_ = std::max(now, p.resume_us_);
      }
      if (paused || p.interval_us_ != before) p.respace_locked(now);
    }
  } respace{*this, interval_before, resume_us_, now_us};
  if (hint.window) {
    window_us_ = std::max(window_us_, to_micros(*hint.window));
    policy_window_us_ = to_micros(*hint.window);
  }
  if (hint.reset_epoch_ms) {
    // Two windows' resets as the server wrote them differ by the window (or
    // a multiple of it, when windows went by unused: the least is kept).
    if (reset_epoch_ms_ > 0 && *hint.reset_epoch_ms > reset_epoch_ms_) {
      const std::int64_t step = (*hint.reset_epoch_ms - reset_epoch_ms_) * 1000;
      if (reset_step_us_ == 0 || step < reset_step_us_) reset_step_us_ = step;
    }
    reset_epoch_ms_ = std::max(reset_epoch_ms_, *hint.reset_epoch_ms);
  }
  // The first call of a server window (or of its first window seen).
  const bool opened = hint.limit && hint.remaining && call_started && *hint.remaining == *hint.limit - 1;
  // A reply of a call started before the latest window's first tells of a
  // window gone by: what remains of it, or that it is spent, says nothing
  // of the window now.
  const bool stale = !opened && call_started && to_micros(*call_started) < window_start_us_;
  if (opened) {
    window_start_us_ = to_micros(*call_started);
    window_opener_replied_us_ = now_us;
  }
  if (call_started) {
    // How long replies take: fast to grow, slow to shrink.
    const std::int64_t took = std::max<std::int64_t>(0, now_us - to_micros(*call_started));
    reply_took_us_ = took > reply_took_us_ ? took : reply_took_us_ - (reply_took_us_ - took) / 8;
    replied_locked(to_micros(*call_started));
    learn_phase_locked(hint, to_micros(*call_started), now_us, opened);
    if (probe_slot_us_ > 0 && to_micros(*call_started) >= probe_slot_us_) probe_slot_us_ = 0;
  }
  if (hint.limit) quota_limit_ = *hint.limit;
  end_hold_locked(now_us, call_started ? to_micros(*call_started) : 0);
  if (hint.throttled) {
    quota_until_us_ = 0;  // refused: the pause below says when to go on
  } else if (options_->floor == Duration::zero() && hint.remaining && call_started && !stale &&
             (hint.reset_in || hint.resume_at)) {
    const std::int64_t reset_in =
        hint.reset_in ? to_micros(*hint.reset_in) : to_micros(*hint.resume_at) - now_us;
    std::int64_t until = now_us + std::max<std::int64_t>(0, reset_in);
    phase_.ends_by(to_micros(*call_started), until);
    const std::int64_t known = window_locked();
    const std::int64_t window = known > 0 ? known : reset_in;
    // As for a spent quota below: the server's windows, as learned, place
    // its reset more exactly than a reset in whole seconds.
    if (const std::int64_t end =
            window_end_locked(to_micros(*call_started), now_us, window, until - reset_slack(hint));
        end > 0) {
      until = std::min(until, end);
    }
    count_remaining_locked(*hint.remaining, until, now_us, window, opened, to_micros(*call_started));
  }
  if (hint.resume_at && !stale) {
    std::int64_t resume = to_micros(*hint.resume_at);
    if (!hint.throttled && hint.remaining == 0 && call_started) {
      // Spent, not refused: the quota renews at the server's next window,
      // which the phase of its windows (or their first calls) places more
      // exactly than a reset in whole seconds (rounded up, so up to a
      // second late, read against a Date rounded down).
      const std::int64_t started = to_micros(*call_started);
      phase_.ends_by(started, resume);
      if (const std::int64_t end =
              window_end_locked(started, now_us, window_locked(), resume - reset_slack(hint));
          end > 0) {
        resume = std::min(resume, end);
      }
    }
    resume_us_ = std::max(resume_us_, resume);
  }
  std::optional<std::int64_t> learned;
  std::optional<RefusalReading> refusal;
  // A fixed window's reading faster than the bucket's kept (zero: none).
  std::int64_t faster_window_us = 0;
  if (hint.interval) {
    learned = to_micros(*hint.interval);
  } else if (hint.limit && *hint.limit > 0 && hint.reset_in) {
    // The quota's window is at least the longest time to a reset seen.
    window_us_ = std::max(window_us_, to_micros(*hint.reset_in));
    learned = window_locked() / *hint.limit;
  } else if (!hint.limit && (!hint.throttled || hint.resume_at)) {
    refusal = learn_from_refusals_locked(hint, now_us, call_started);
    if (refusal && refusal->late) late_admission_locked(*refusal, now_us);
    std::int64_t read_us = refusal && refusal->rate ? static_cast<std::int64_t>(1.0 / *refusal->rate) : 0;
    const bool window_refused = refusal && hint.throttled && hint.resume_at &&
                                window_from_refusal_locked(*refusal, to_micros(*hint.resume_at) - now_us);
    if (refusal && hint.throttled && hint.resume_at && !learned_window_ &&
        options_->floor == Duration::zero()) {
      // Retry-After is whole seconds: the longest pause asked for is the
      // window's length, once a refusal came early in a window.
      read_window_locked(now_us, longest_pause_us_, refusal->not_a_bucket ? 2 : 3);
    }
    bool from_window = false;
    if (window_refused) {
      // The quota spread over the window came a little too fast (arrival
      // jitter, a stretch that crossed two windows): slower, below.
      read_us = 0;
    } else if (refusal && window_read_) {
      // Two stretches of a fixed window can line up as a bucket's: the
      // slower of the two readings is kept.
      const std::int64_t w = longest_pause_us_ / std::max<std::int64_t>(1, least_admitted_);
      from_window = read_us == 0 || w > read_us;
      if (from_window) read_us = w;
    }
    // A bucket read far under the least a stretch admitted per pause may be
    // a fixed window read as a bucket: two stretches of one line up as a
    // bucket's. Nothing would ever say so (a pace under the quota is never
    // refused): a window of 57 a second read as a bucket of 37 was kept at
    // 37 for the whole run. So the pace may rise to the window's (as to a
    // bucket's fastest, speed_up_locked), and a refusal on the way stops it
    // there. Within a tenth of it, the reading is taken as it is: the first
    // stretch, across a window's boundary, admits more than a window's quota.
    if (!from_window && refusal && read_us > 0 && least_admitted_ > 0 && longest_pause_us_ <= kEvenWindowUs) {
      const std::int64_t w = longest_pause_us_ / least_admitted_;
      if (w * kSameQuotaShare < read_us * (kSameQuotaShare - 1)) faster_window_us = w;
    }
    if (read_us > 0) {
      learned = read_us;
      window_paced_ = from_window;
    }
  }
  // A refusal of a call started at the pace read from refusals (not in a
  // slow start, nor a window's) says that pace is too fast, whatever the
  // next reading says: a bucket of one, met with arrival jitter of a few
  // milliseconds, was read again at the edge of its answers refusal after
  // refusal, and at last as a window of one call a second.
  const bool refused_at_read_pace =
      refusal && hint.throttled && learned_us_ > 0 && !ramping_ && !window_paced_ && !learned_window_;
  // Whatever the server said about its limits ends a slow start (a refusal
  // with only Retry-After, below, ends it or starts the next).
  const bool retry_after_only = hint.throttled && hint.resume_at && !hint.limit && !hint.interval;
  if (ramping_ && (hint.limit || hint.interval || (hint.throttled && !retry_after_only) || learned)) {
    ramping_ = false;
    // Not refused: the pace is what the server said (or none); refused: the
    // slow start's pace is the one that drew it.
    if (!hint.throttled) interval_us_ = learned ? *learned : learned_us_;
  }
  if (learned) {
    // Replies of calls in flight now report the overload this reading is of.
    if (hint.throttled) decreased_at_us_ = now_us;
    // A little under the quota: arrival jitter at the server would otherwise
    // now and then put one call too many into its window.
    // A rate read from refusals has a margin of its own (the same by
    // default): read a little high, it draws a refusal, a whole pause, and
    // is slowed by a tenth; read too low, every call after it pays.
    const std::int64_t refused_pace_us = learned_us_;
    const double margin = refusal && !window_paced_ ? options_->refusal_margin : options_->margin;
    auto paced = static_cast<std::int64_t>(static_cast<double>(*learned) * margin);
    if (refused_at_read_pace) paced = std::max(paced, learned_us_ + learned_us_ / 10 + 1);
    learned_us_ = std::clamp(paced, floor_us, max_us);
    interval_us_ = learned_us_;
    rate_at_decrease_ = 0;
    ceiling_ = 0;
    pause_us_ = interval_us_;
    // A bucket read from refusals is used as the server keeps it: what
    // refills while the pace waits (a pause, an idle spell) goes at once, up
    // to a share of its size. The refusal says the bucket was empty then.
    burst_units_ = refusal && refusal->burst && !window_paced_ ? kBurstShare * *refusal->burst : 0;
    // Halfway (in ratio) from the rate read to the fastest the answers
    // allow, with the same margin: the pace rises towards it while nothing
    // is refused (speed_up_locked). The fastest itself is no answer's
    // contradiction only for want of answers there: nginx's 6 r/s was
    // allowed up to 6.4, and a pace raised to it drew a third refusal.
    read_fastest_us_ =
        refusal && refusal->rate && refusal->fastest && *refusal->fastest > *refusal->rate && !window_paced_
            ? static_cast<std::int64_t>(margin / std::sqrt(*refusal->rate * *refusal->fastest))
            : 0;
    if (faster_window_us > 0 && !window_paced_) {
      const auto window_pace = static_cast<std::int64_t>(static_cast<double>(faster_window_us) * margin);
      if (window_pace < learned_us_ && (read_fastest_us_ == 0 || window_pace < read_fastest_us_))
        read_fastest_us_ = std::max(window_pace, floor_us);
    }
    // Refused at the pace read (or one sped up from it): never that fast
    // again, whatever the answers allow (a server's jitter).
    if (refused_at_read_pace && read_fastest_us_ > 0) {
      read_fastest_us_ = std::max(read_fastest_us_, refused_pace_us + refused_pace_us / kSpeedUpShare + 1);
    }
    if (const std::int64_t tau = burst_tau_locked(); tau > 0 && hint.throttled && call_started) {
      started_tat_ = std::max(started_tat_, to_micros(*call_started) + tau);
    }
  }
  if (retry_after_only && !learned) {
    // Refused with only a Retry-After, and nothing read from it yet.
    // A refusal of a call in flight at the last one reports that overload.
    if (!refusal) return;
    decreased_at_us_ = now_us;
    if (learned_us_ > 0) {
      // The rate read before was a little high (or the server's clock
      // jittered): a little slower, not a new search.
      learned_us_ = std::min(max_us, learned_us_ + learned_us_ / 10 + 1);
      interval_us_ = learned_us_;
      burst_units_ /= 2;
      read_fastest_us_ = 0;  // no reading narrowed it: the pace stays
      return;
    }
    const std::int64_t spread = refusal->length_us + to_micros(options_->restart_spread);
    const std::int64_t first = spread / std::max<std::int64_t>(1, refusal->admitted);
    // The rate is read from two stretches of different lengths. A slow
    // start that doubles as fast as the first one's ends about as long
    // when the bucket's size, not its rate, set where the first ended: the
    // first slow start doubles no faster than over that stretch and the
    // gap the estimate needs. A server that a longer stretch told nothing
    // either is no bucket (a fixed window admits its quota whatever the
    // stretch's length): its quota is then taken quickly from each pause's
    // end, as the later slow starts double as fast as the first calls'.
    const std::int64_t doubling = refusal->not_a_bucket || untold_refusals_ > 0
                                      ? to_micros(options_->ramp_doubling)
                                      : std::max(to_micros(options_->ramp_doubling),
                                                 refusal->length_us + RefusalEstimator::kMinStretchGapUs);
    ++untold_refusals_;
    start_ramp_locked(std::max(now_us, resume_us_),
                      std::clamp(first, std::max<std::int64_t>(floor_us, 1), max_us), doubling);
    untold_spread_us_ = spread;
    return;
  }
  // A 429 that names the quota, while its pace is kept, is arrival jitter
  // at the server: the pause it asks for is enough.
  const bool quota_kept = hint.limit && learned_us_ > 0;
  if (hint.throttled && !learned && !quota_kept) {
    const bool in_flight_at_decrease = call_started && to_micros(*call_started) < decreased_at_us_;
    // The same overload while nothing was admitted since the last refusal;
    // one admitted since means the server's window renewed.
    const bool same_episode =
        decreased_at_us_ > 0 && !admitted_since_decrease_ && now_us - decreased_at_us_ < kEpisodeUs;
    if (!in_flight_at_decrease && same_episode) {
      // Refused again soon after slowing down: the server's window is spent
      // (by us before the decrease, or by another client). Halving again for
      // every such 429 would end far below its limit; waiting longer each
      // time rides the window out instead.
      pause_us_ = std::clamp<std::int64_t>(2 * pause_us_, std::max<std::int64_t>(interval_us_, 1), max_us);
      if (!hint.resume_at) {
        resume_us_ = std::max(resume_us_, now_us + pause_us_);
        hold_after_pause_locked();
      }
      decreased_at_us_ = now_us;
      admitted_since_decrease_ = false;
    } else if (!in_flight_at_decrease && at_declared_pace_locked(now_us) &&
               (jitter_at_us_ == 0 || now_us - jitter_at_us_ > kJitterSpellUs)) {
      // The first refusal in a long while with the declared pace kept: the
      // network's jitter put one call too many into the server's window.
      // A pause of one interval rides it out; a second refusal soon after
      // means the declared limit is too high, and the pace comes down.
      jitter_at_us_ = now_us;
      decreased_at_us_ = now_us;
      admitted_since_decrease_ = false;
      pause_us_ = floor_us;
      if (!hint.resume_at) resume_us_ = std::max(resume_us_, now_us + floor_us);
    } else if (!in_flight_at_decrease) {
      if (call_started && options_->floor == Duration::zero() && !learned_window_) {
        // The first refusal since calls were admitted again: a fixed
        // window's first refusal in its window, if it is one. Its length
        // is not said: the usual ones are tried, shortest first.
        refusal_learning_locked().window.refused(to_micros(*call_started));
        for (const std::int64_t w : kBareWindowsUs) {
          if (read_window_locked(now_us, w, 3)) break;
        }
      }
      // Multiplicative decrease from the pace actually used.
      // Never from faster than the declared pace: with declared limits kept,
      // a 429 means the server allows less than declared, not less than a
      // quiet spell happened to use.
      // Nor from faster than the server let through in the last second: a
      // start rate far above it (a first burst) would take many halvings,
      // each with its own 429s, to come down to it.
      while (!admits_.empty() && admits_.front().first <= now_us - kObservedSpan) admits_.pop_front();
      const std::int64_t span = std::min(kObservedSpan, now_us - first_start_us_);
      std::int64_t admitted = 0;
      for (const auto& a : admits_) admitted += a.second;
      const double admitted_interval = admits_.size() < 2 || first_start_us_ == 0 || span <= 0
                                           ? 0.0
                                           : static_cast<double>(span) / static_cast<double>(admitted);
      double current = std::max({static_cast<double>(interval_us_), observed_interval_locked(now_us),
                                 admitted_interval, static_cast<double>(floor_us)});
      if (current <= 0)
        current = static_cast<double>(to_micros(options_->first_interval)) * options_->decrease;
      // A limit that drew this 429 at about the rate the last one did is
      // the server's own, not a passing overload: a step under it is
      // enough, where halving would spend most of each cycle climbing back.
      const double drew = 1.0 / current;
      const bool known_limit = last_429_rate_ > 0 && drew >= last_429_rate_ * (1 - kSameLimit) &&
                               drew <= last_429_rate_ * (1 + kSameLimit);
      last_429_rate_ = drew;
      const auto next =
          static_cast<std::int64_t>(current / (known_limit ? kKnownLimitDecrease : options_->decrease));
      interval_us_ = std::clamp<std::int64_t>(next, std::max<std::int64_t>(floor_us, 1), max_us);
      rate_at_decrease_ = 1.0 / static_cast<double>(interval_us_);
      probed_ = 0;
      probe_doubles_ = !known_limit;
      // Recovery stops short of the rate that drew this 429, and only
      // creeps above it, so one overload does not come back every few calls.
      ceiling_ = options_->ceiling / current;
      decreased_at_us_ = now_us;
      pause_us_ = std::max(interval_us_, to_micros(options_->min_pause));
      admitted_since_decrease_ = false;
      // Retry-After already says when to resume; a bare 429 pauses (one
      // interval, at least min_pause).
      if (!hint.resume_at) {
        resume_us_ = std::max(resume_us_, now_us + pause_us_);
        hold_after_pause_locked();
      }
    }
    return;
  }
  if (hint.throttled) return;
  if (call_started && to_micros(*call_started) >= decreased_at_us_) admitted_since_decrease_ = true;
  admits_.emplace_back(now_us, std::max<std::int64_t>(1, units));
  while (!admits_.empty() && admits_.front().first <= now_us - kObservedSpan) admits_.pop_front();
  speed_up_locked(now_us);
  if (rate_at_decrease_ > 0) {
    // Additive increase back towards the learned (or declared) pace.
    double rate = 1.0 / static_cast<double>(std::max<std::int64_t>(interval_us_, 1));
    const double step = options_->recovery * rate_at_decrease_;
    if (rate < ceiling_) {
      rate = std::min(ceiling_, rate + step);
    } else {
      // Past the ceiling, unless the last two refusals came at about the
      // same rate (the server's own limit, met again), the probe's step
      // doubles with every half second's worth of replies and no refusal:
      // a 429 drawn far under the server's rate (calls that reached it
      // bunched together, another client's burst) would otherwise hold the
      // pace near where it came for minutes; one at the server's own rate
      // comes back within a few steps of it, and the next is known.
      const double doubling =
          std::max(kProbeDoublingReplies, ceiling_ * static_cast<double>(kProbeDoublingUs));
      const double growth =
          probe_doubles_ ? std::exp2(std::min(kProbeMaxDoublings, static_cast<double>(probed_) / doubling))
                         : 1.0;
      ceiling_ += step * options_->probe * growth;
      ++probed_;
      rate = ceiling_;
    }
    // Back at the learned pace (or the declared one when nothing was learned),
    // pacing hands over to what the server said, or to the declared limiters.
    const std::int64_t target = std::max(learned_us_, floor_us);
    interval_us_ = static_cast<std::int64_t>(1.0 / rate);
    if (interval_us_ <= target) {
      interval_us_ = learned_us_;
      rate_at_decrease_ = 0;
      ceiling_ = 0;
    }
  }
}

void AdaptivePacer::hold_after_pause_locked() {
  // A bare 429 says neither when the window renews nor how much it holds:
  // the first call after the pause finds out alone. Several at once would
  // all be refused while the window is still spent (a pause doubling from
  // 50 ms takes a few tries to ride out a window of seconds), each a 429.
  // Not with a limit declared: the server's own pace is known there.
  if (options_->floor != Duration::zero() || options_->opening_hold <= Duration::zero()) return;
  awaiting_reply_ = true;
  hold_until_us_ = 0;
  hold_from_us_ = std::max<std::int64_t>(1, resume_us_);
}

std::int64_t AdaptivePacer::hold_span_locked() const {
  const std::int64_t most = to_micros(options_->opening_hold);
  if (hold_from_us_ == 0 || reply_took_us_ <= 0) return most;
  // After a pause, for about as long as replies take: the steps held are
  // granted their slots then, in time to be woken for them, rather than
  // only once the reply came (a parked step takes a while to wake). A reply
  // later than that lets a second call go before it.
  return std::min(most, reply_took_us_ + reply_took_us_ / 2 + kBoundaryGuard);
}

void AdaptivePacer::end_hold_locked(std::int64_t now_us, std::int64_t started_us) {
  if (!awaiting_reply_) return;
  // After a pause, only the reply of a call started since it ends the hold:
  // those of the calls in flight at the refusal tell of the window it ended.
  if (hold_from_us_ > 0 && started_us < hold_from_us_) return;
  // The reply awaited: the steps held for it go now, at the pace or at what
  // it said.
  awaiting_reply_ = false;
  hold_from_us_ = 0;
  if (hold_until_us_ > now_us) {
    ++generation_;
    moved_tat_ = now_us;
    respace_locked(now_us);
  }
}

void AdaptivePacer::replied(TimePoint now) {
  std::lock_guard lock(mu_);
  end_hold_locked(to_micros(now), 0);
}

Duration AdaptivePacer::interval() const {
  std::lock_guard lock(mu_);
  return std::chrono::duration_cast<Duration>(std::chrono::microseconds(interval_us_));
}

TimePoint AdaptivePacer::resume_at() const {
  std::lock_guard lock(mu_);
  return from_micros(resume_us_);
}

std::int64_t AdaptivePacer::earliest_locked(std::int64_t t, std::int64_t units, bool demand_fits) const {
  t = std::max(t, resume_us_);
  if (awaiting_reply_ && hold_until_us_ > 0) t = std::max(t, hold_until_us_);
  if (from_quota_locked(t, units, demand_fits)) {
    const std::int64_t probe = probe_at_locked(t, units, demand_fits);
    return probe > 0 ? probe : t;
  }
  // None left before the reset (a window kept by the pace places its resets
  // by the pace and its phase).
  if (!quota_paced_ && quota_until_us_ > t && quota_ < units) t = quota_until_us_;
  return interval_us_ > 0 ? std::max(t, tat_ - burst_tau_locked()) : t;
}

std::int64_t AdaptivePacer::burst_tau_locked() const {
  // Only at the pace the bucket was read with: not in a slow start, nor
  // while recovering from a bare 429.
  if (burst_units_ < 2 || ramping_ || rate_at_decrease_ > 0 || interval_us_ <= 0) return 0;
  return (static_cast<std::int64_t>(burst_units_) - 1) * interval_us_;
}

bool AdaptivePacer::from_quota_locked(std::int64_t t, std::int64_t units, bool demand_fits) const {
  // Only what remains of a window counted (count_remaining_locked) goes
  // at once, and only in the last ten seconds before a reset; of a window
  // kept by the pace, only when every call waiting fits in it.
  return quota_until_us_ > t && quota_until_us_ - t <= kQuotaBurstSpan && quota_ >= units &&
         (!quota_paced_ || demand_fits);
}

void AdaptivePacer::count_remaining_locked(std::int64_t remaining, std::int64_t until_us, std::int64_t now_us,
                                           std::int64_t window_us, bool opened, std::int64_t started_us) {
  // The server counted the replying call and every call whose reply came
  // before it. The calls still on their way (no reply yet: counted or not,
  // in an order nobody knows; one started a second ago has arrived, and
  // its count is in later replies) and the slots granted and not yet
  // started are still to come out of what it said remains.
  std::int64_t to_come = quota_pending_ + outstanding_;
  for (auto it = spent_.rbegin(); it != spent_.rend() && it->first > now_us - kInFlightSpan; ++it) {
    to_come += it->second;
  }
  if (window_us > kQuotaBurstSpan) {
    // A long window (an hour's quota) is kept by the pace alone.
    quota_until_us_ = 0;
    return;
  }
  // A window of a second or so is kept by an even pace: in a steady stream
  // of calls the pace uses it whole, where bursts at its starts lose units
  // to probes and to each boundary still in doubt (the oscar benchmark's
  // learned row: 1.02 to 1.06 times the bound paced, 1.05 to 1.13 in bursts). What
  // remains of it is still counted, for the calls of a run's end: when all
  // that wait fit in it, they go at once (from_quota_locked) rather than a
  // window's pace apart. What the first window has left goes at once too:
  // paced, it would be spread over a whole window from the first reply,
  // and the part of it after the window's end lost; its end is probed like
  // a longer window's. A time to a reset under 1.5 s, the
  // window's length not known, may be the tail of a longer window: that
  // one goes in bursts (a two-second window's first reply, 0.1 s from its
  // end, says one second).
  if (first_until_us_ == 0) first_until_us_ = until_us;
  // Calls started together reach the server in any order, and their
  // replies come back in any order: within one window of the server the
  // least it said remains is its latest count, and what is still to come
  // shrinks as the calls on their way reply (a reply that came before
  // those of calls counted ahead of it takes nothing for good). A window's
  // first call answered after a later call of its window (one started no
  // later than the least's) opens no new one: taken for a new window, the
  // calls sent together at a boundary and counted past it were counted
  // as if none were, and a thirteenth call was sent into a window of
  // twelve. A reset well past the window's (or the window gone by) is the
  // next one.
  const bool opener_of_this_window =
      opened && quota_until_us_ > now_us && least_started_us_ > 0 && started_us <= least_started_us_;
  const bool next_window = (opened && !opener_of_this_window) || quota_until_us_ <= now_us ||
                           until_us > quota_until_us_ + window_us / 2;
  if (next_window || remaining < least_remaining_) least_started_us_ = started_us;
  if (next_window) {
    least_remaining_ = remaining;
    quota_until_us_ = until_us;
    // The pace takes a window over from its start only. A window whose
    // first calls went at once from its quota goes on so to its end, its
    // quota counted: a pace taken up midway (the first window's reset,
    // rounded up, falls inside the next one) would add a window's worth
    // of calls to what its start had used, and draw refusals at its end.
    quota_paced_ = window_us < kQuotaBurstWindow && exact_window_locked() > 0 && now_us >= first_until_us_;
  } else {
    least_remaining_ = std::min(least_remaining_, remaining);
    quota_until_us_ = std::min(quota_until_us_, until_us);  // resets are rounded up: the earliest is nearest
  }
  quota_ = least_remaining_ - to_come;
  // None left: no slot is granted before the reset (earliest_locked). The
  // slots already granted go: they are what spent it.
}

std::int64_t AdaptivePacer::exact_window_locked() const {
  if (policy_window_us_ > 0) return policy_window_us_;
  if (reset_step_us_ > 0 && reset_step_us_ >= window_us_ - kResetStepSlack) return reset_step_us_;
  return 0;
}

void AdaptivePacer::learn_phase_locked(const PaceHint& hint, std::int64_t started_us, std::int64_t now_us,
                                       bool opened) {
  const std::int64_t window = exact_window_locked();
  if (options_->floor != Duration::zero() || window > kQuotaBurstSpan) return;
  if (!hint.throttled && !hint.remaining) return;  // a reply that says nothing of the window
  if (window > 0) phase_.set_window(window);
  phase_.replied(started_us, now_us);
  if (hint.throttled) {
    phase_.refused(started_us);
  } else if (opened) {
    phase_.opened(started_us, now_us);
  } else {
    phase_.counted(started_us);
  }
}

std::int64_t AdaptivePacer::window_end_locked(std::int64_t started_us, std::int64_t now_us,
                                              std::int64_t window, std::int64_t not_before_us) const {
  if (phase_.known()) return phase_.end_after(started_us) + kBoundaryGuard;
  if (window_start_us_ <= 0 || window <= 0) return 0;
  // The first calls of the server's windows place their ends (each start
  // moved on by how much slower than the quickest its reply came: a call
  // slowed on its way was counted that much later): the end of the window
  // the reply is of, which its reset says is no earlier than
  // `not_before_us`. A run's first call, counted just before its window's
  // end, is taken for a window's first call; the calls sent after it may
  // be counted past that end, and what their replies said remains is of
  // the window after it, not of the first call's.
  // (The quickest reply is known better the more came: the first call's
  // own was the only one when it was answered.)
  const std::int64_t opened = phase_.corrected(window_start_us_, window_opener_replied_us_);
  std::int64_t windows = (now_us - opened) / window + 1;
  const std::int64_t end = opened + windows * window + kBoundaryGuard;
  if (not_before_us > end) windows += (not_before_us - end + window - 1) / window;
  return opened + windows * window + kBoundaryGuard;
}

std::int64_t AdaptivePacer::reset_slack(const PaceHint& hint) {
  // A reset in seconds from now, rounded either way, is less than a second
  // off; one written as a Unix time and read against a Date, both in whole
  // seconds, up to two.
  return hint.reset_epoch_ms ? 2'000'000 : 1'000'000;
}

void AdaptivePacer::waiting(std::int64_t calls, std::int64_t now_us) {
  std::lock_guard lock(mu_);
  waiting_calls_ = calls;
  waiting_at_us_ = now_us;
}

bool AdaptivePacer::demand_fits_locked(std::int64_t now_us, std::int64_t units) const {
  // Every call waiting fits in what remains of the window: none would wait
  // for the next one, so no boundary after this window needs placing, and
  // the last units go now rather than as probes at the window's end (the
  // last calls of a run would wait for it).
  return waiting_at_us_ == now_us && waiting_calls_ > 0 && waiting_calls_ * units <= quota_;
}

std::int64_t AdaptivePacer::probes_wanted_locked() const {
  if (quota_until_us_ <= 0) return 0;
  const std::int64_t doubt = phase_.doubt(quota_until_us_ - kBoundaryGuard);
  if (doubt <= WindowPhase::kResolution) return 0;
  const auto halvings =
      static_cast<std::int64_t>(std::ceil(std::log2(static_cast<double>(doubt) / WindowPhase::kResolution)));
  // Before the phase is known, the probes scan the span from its start, and
  // the first to land in the next window loses the old window's units
  // still held: more probes find the boundary sooner, each held one may be
  // lost. A span of up to two seconds (a reset read against a Date) is
  // found soonest, for a quota a second, at about a quarter of it held.
  const std::int64_t share = phase_.known() ? 10 : 4;
  const std::int64_t wanted =
      std::min({halvings, std::int64_t{4}, std::max<std::int64_t>(1, quota_limit_ / share)});
  if (phase_.known() || waiting_calls_ <= 0) return wanted;
  // Units held that the next window would hold anyway, were all of them
  // lost, cost no window: the calls waiting, less what this window sends
  // at once, fit in the next one. A run's last two windows scan the span
  // with that many (at most kMostScanProbes), and the last calls go that
  // much sooner after the boundary.
  const std::int64_t spare = std::min(quota_ + quota_limit_ - waiting_calls_, kMostScanProbes);
  return std::max(wanted, spare);
}

std::int64_t AdaptivePacer::probe_at_locked(std::int64_t t, std::int64_t units, bool demand_fits) const {
  // The window's last units, while the phase is wider than its resolution:
  // sent inside it, each shows on which side of the boundary it landed.
  if (demand_fits || quota_until_us_ <= t || quota_ > probes_wanted_locked() * units) return 0;
  // One at a time: the next goes where the last one's reply leaves the
  // middle. (A probe whose reply never came is given up after a while.)
  if (probe_slot_us_ > 0 && t < probe_slot_us_ + kProbeReplyUs) return quota_until_us_;
  const std::int64_t end = quota_until_us_ - kBoundaryGuard;
  const std::int64_t probe = phase_.probe_before(end, quota_ / std::max<std::int64_t>(1, units));
  if (probe <= 0 || probe >= quota_until_us_) return 0;
  return std::max(probe, t);
}

std::int64_t AdaptivePacer::window_locked() const {
  // A time to a reset read against a Date in whole seconds comes out up to
  // two seconds long (kResetStepSlack); the step between two resets the
  // server wrote is its window, when it is not much shorter than the
  // longest time to a reset seen (a server that moves its reset with every
  // call, as a sliding window may, steps by less than its window).
  if (reset_step_us_ > 0 && reset_step_us_ >= window_us_ - kResetStepSlack) {
    return std::min(window_us_, reset_step_us_);
  }
  return window_us_;
}

void AdaptivePacer::respace_locked(std::int64_t now_us) {
  // The slots held were spaced by the pace when they were granted. Slots
  // granted from now on queue behind as many calls at the pace of now, so a
  // pace that recovers is used at once (a holder that comes back before its
  // slot trades it for a sooner one, see CallGate::admit).
  tat_ = std::max({started_tat_, now_us, resume_us_});
  if (!ramping_) {
    tat_ += outstanding_ * interval_us_;
  } else {
    // Along the slow start's schedule; past a few thousand slots its
    // spacing no longer matters.
    std::int64_t i = 0;
    for (; i < std::min<std::int64_t>(outstanding_, 4096); ++i) tat_ += interval_at_locked(tat_);
    tat_ += (outstanding_ - i) * interval_at_locked(tat_);
  }
}

bool AdaptivePacer::at_declared_pace_locked(std::int64_t now_us) const {
  const std::int64_t floor_us = to_micros(options_->floor);
  if (floor_us <= 0 || interval_us_ > floor_us || rate_at_decrease_ > 0) return false;
  // Starts a tenth slower than declared still count: the declared limiters
  // keep a margin of their own.
  return observed_interval_locked(now_us) <= 1.1 * static_cast<double>(floor_us);
}

bool AdaptivePacer::recovering() const {
  std::lock_guard lock(mu_);
  return rate_at_decrease_ > 0 || ramping_;
}

Result<std::int64_t> AdaptivePacer::earliest_units(std::int64_t now_us, std::int64_t t_us,
                                                   std::int64_t units) {
  // The spacing follows a call, it does not precede it: units matter only
  // against what remains of the server's window.
  std::lock_guard lock(mu_);
  if (learned_window_) return learned_window_->earliest(now_us, std::max({now_us, t_us, resume_us_}), units);
  ramp_locked(now_us);
  return earliest_locked(std::max(now_us, t_us), units, demand_fits_locked(now_us, units));
}

Result<Slot> AdaptivePacer::reserve_units(std::int64_t now_us, std::int64_t t_us, std::int64_t units) {
  std::lock_guard lock(mu_);
  if (learned_window_) return reserve_window_locked(now_us, t_us, units);
  ramp_locked(now_us);
  Slot s;
  s.units = units;
  const bool fits = demand_fits_locked(now_us, units);
  s.at_us = earliest_locked(std::max(now_us, t_us), units, fits);
  s.generation = generation_;
  if (from_quota_locked(s.at_us, units, fits)) {
    if (quota_ <= probes_wanted_locked() * units) probe_slot_us_ = s.at_us;
    quota_ -= units;
    quota_pending_ += units;
    s.quota_until_us = quota_until_us_;
    return s;
  }
  if (quota_until_us_ > s.at_us) quota_ -= units;
  if (awaiting_reply_ && hold_until_us_ == 0) hold_until_us_ = s.at_us + hold_span_locked();
  s.tat_before_us = tat_;
  // With a burst, the slot may come before tat_, which still moves on by its units.
  tat_ = burst_tau_locked() > 0 ? std::max(tat_, s.at_us) + units * interval_us_
                                : std::max(tat_, s.at_us + units * interval_at_locked(s.at_us));
  s.tat_after_us = tat_;
  outstanding_ += units;
  return s;
}

std::int64_t AdaptivePacer::new_turn_locked(Slot& slot, std::int64_t now_us) {
  // Granted before a pause or a slowdown, its time was spaced for the old
  // pace. Such slots take turns at the new pace from the end of the pause,
  // in the order they come back: each its own turn, or all would wait, wake
  // and be moved together, one start at a time.
  std::int64_t turn = std::max({now_us, resume_us_, moved_tat_ - burst_tau_locked()});
  if (awaiting_reply_ && hold_until_us_ > 0) {
    turn = std::max(turn, hold_until_us_);
  } else if (awaiting_reply_) {
    hold_until_us_ = turn + hold_span_locked();  // this one goes first, alone
  }
  moved_tat_ = std::max(moved_tat_, turn) + slot.units * interval_at_locked(turn);
  slot.generation = generation_;
  return turn;
}

Result<std::int64_t> AdaptivePacer::ready_at(Slot& slot, std::int64_t now_us) {
  std::lock_guard lock(mu_);
  if (learned_window_) {
    if (!window_slot_locked(slot) && !slot.started) adopt_locked(slot, now_us);
    return std::max({now_us, slot.at_us, resume_us_});
  }
  if (slot.learned_window) disown_locked(slot);
  ramp_locked(now_us);
  if (slot.generation != generation_ || now_us < resume_us_) {
    slot.at_us = new_turn_locked(slot, now_us);
    return slot.at_us;
  }
  return std::max(now_us, slot.at_us);
}

Result<UseResult> AdaptivePacer::start(Slot& slot, std::int64_t now_us) {
  if (now_us < slot.at_us) {
    return fail(Error::invalid_argument("a limiter slot was used before its time (a bug in the caller)"));
  }
  std::lock_guard lock(mu_);
  if (learned_window_) return start_window_locked(slot, now_us, false);
  if (slot.learned_window) disown_locked(slot);
  return start_locked(slot, now_us);
}

Result<UseResult> AdaptivePacer::start_window_locked(Slot& slot, std::int64_t now_us, bool again) {
  if (!window_slot_locked(slot)) {
    if (slot.started) unstart_locked(slot);
    adopt_locked(slot, now_us);
    if (slot.at_us > now_us) return UseResult::kMoved;
  } else if (now_us < resume_us_) {
    // Paused since it was granted (a refusal of a call started before the
    // window was read): held again from the pause's end.
    if (Status held = learned_window_->defer(slot, now_us, resume_us_); !held) return fail(held.error());
    return UseResult::kMoved;
  }
  Result<UseResult> used =
      again ? learned_window_->restart(slot, now_us) : learned_window_->start(slot, now_us);
  if (used && *used == UseResult::kStarted) {
    if (first_start_us_ == 0) first_start_us_ = now_us;
    note_start_locked(now_us, slot.units);
  }
  return used;
}

Result<UseResult> AdaptivePacer::restart(Slot& slot, std::int64_t now_us) {
  if (now_us < slot.at_us) {
    return fail(
        Error::invalid_argument("a limiter start was recounted before it was made (a bug in the caller)"));
  }
  std::lock_guard lock(mu_);
  if (learned_window_) {
    if (window_slot_locked(slot) && slot.started) forget_start_locked(slot);
    return start_window_locked(slot, now_us, window_slot_locked(slot) && slot.started);
  }
  if (slot.learned_window) disown_locked(slot);
  if (slot.started) unstart_locked(slot);
  return start_locked(slot, now_us);
}

Status AdaptivePacer::defer(Slot& slot, std::int64_t now_us, std::int64_t to_us) {
  std::lock_guard lock(mu_);
  if (window_slot_locked(slot)) return learned_window_->defer(slot, now_us, std::max(to_us, resume_us_));
  if (slot.learned_window) disown_locked(slot);
  if (slot.started) unstart_locked(slot);
  slot.at_us = std::max(slot.at_us, to_us);
  return {};
}

void AdaptivePacer::unstart_locked(Slot& slot) {
  // Taken back exactly when it is still the latest start; otherwise the
  // pace counts it beside the next one.
  if (started_tat_ == slot.started_after_us) started_tat_ = slot.started_before_us;
  forget_start_locked(slot);
  outstanding_ += slot.units;  // a slot held again, until start_locked uses it
  slot.started = false;
}

void AdaptivePacer::forget_start_locked(const Slot& slot) {
  auto seen =
      std::find_if(starts_.rbegin(), starts_.rend(), [&](const auto& s) { return s.first == slot.at_us; });
  if (seen != starts_.rend()) starts_.erase(std::next(seen).base());
  replied_locked(slot.at_us);  // counted again at its next start
}

void AdaptivePacer::replied_locked(std::int64_t started_us) {
  // Its start, or, recounted when its request left later than counted
  // (restart), the first start after it still waiting: one reply, one call
  // less to come.
  auto waiting = [](const auto& e) { return e.second > 0; };
  auto it = std::find_if(spent_.begin(), spent_.end(),
                         [&](const auto& e) { return e.first == started_us && waiting(e); });
  if (it == spent_.end()) {
    it = std::find_if(spent_.begin(), spent_.end(),
                      [&](const auto& e) { return e.first > started_us && waiting(e); });
  }
  if (it != spent_.end()) it->second = 0;
}

void AdaptivePacer::note_start_locked(std::int64_t now_us, std::int64_t units) {
  starts_.emplace_back(now_us, units);
  while (!starts_.empty() && starts_.front().first <= now_us - kObservedSpan) starts_.pop_front();
  phase_.started(now_us);
  // Kept for kSpentSpan; its units are zero once its reply came.
  spent_.emplace_back(now_us, units);
  if (spent_.size() >= 64 && spent_[spent_.size() / 2].first <= now_us - kSpentSpan) {
    auto stale = std::find_if(spent_.begin(), spent_.end(),
                              [&](const auto& e) { return e.first > now_us - kSpentSpan; });
    spent_.erase(spent_.begin(), stale);
  }
}

UseResult AdaptivePacer::start_locked(Slot& slot, std::int64_t now_us) {
  ramp_locked(now_us);
  if (slot.quota_until_us > 0 && !slot.started) {
    quota_pending_ = std::max<std::int64_t>(0, quota_pending_ - slot.units);
    if (slot.generation == generation_ && now_us >= resume_us_) {
      // Out of what the server said remains: not spaced.
      if (first_start_us_ == 0) first_start_us_ = now_us;
      note_start_locked(now_us, slot.units);
      slot.started = true;
      slot.started_before_us = started_tat_;
      slot.started_after_us = started_tat_;
      slot.at_us = now_us;
      return UseResult::kStarted;
    }
    // Paused since (a refusal): it takes a turn at the pace, as any slot.
    slot.quota_until_us = 0;
    outstanding_ += slot.units;
  }
  if (slot.generation != generation_ || now_us < resume_us_) {
    const std::int64_t turn = new_turn_locked(slot, now_us);
    if (turn > now_us) {
      slot.at_us = turn;
      return UseResult::kMoved;
    }
  }
  // A slot of the current pace used late may start up to one interval
  // closer to the last start than the pace (a burst of two at most): a late
  // start then does not push every slot behind it, each of which would
  // wait again. While replies overdraw (a call admitted at the least its
  // operation costs), each correction moves the pace on under the slots
  // granted before it came: those may start up to one call's largest
  // overdraft closer still, the most a limit is over with reported costs
  // anyway. Moved instead, each parked again, and the moved ones queued
  // behind each other (moved_tat_) pushed the last of them further on.
  const std::int64_t tau = burst_tau_locked();
  const std::int64_t overdraft = std::max(overdraft_now_, overdraft_before_) * interval_us_;
  const std::int64_t slack = interval_us_ + tau + overdraft;
  if (interval_us_ > 0 && now_us < started_tat_ - slack) {
    const std::int64_t turn = std::max(started_tat_ - slack, moved_tat_);
    moved_tat_ = turn + slot.units * interval_us_;
    slot.at_us = turn;
    return UseResult::kMoved;
  }
  if (first_start_us_ == 0) first_start_us_ = now_us;
  note_start_locked(now_us, slot.units);
  slot.started = true;
  slot.started_before_us = started_tat_;
  // A start a little late on its slot leaves no room unused worth a refund.
  if (started_tat_ + interval_us_ < now_us) idle_at_us_ = now_us;
  started_tat_ = std::max(started_tat_, now_us) + slot.units * interval_us_;
  slot.started_after_us = started_tat_;
  tat_ = std::max(tat_, started_tat_);
  outstanding_ = std::max<std::int64_t>(0, outstanding_ - slot.units);
  slot.at_us = now_us;
  return UseResult::kStarted;
}

Status AdaptivePacer::cancel(const Slot& slot) {
  std::lock_guard lock(mu_);
  cancel_locked(slot);
  return {};
}

Status AdaptivePacer::adjust(Slot& slot, std::int64_t units, std::int64_t now_us) {
  if (!slot.started) return adjust_needs_start(slot);
  std::lock_guard lock(mu_);
  if (slot.learned_window) {
    // Counted in the window read, while it holds; a window gone counts nothing.
    if (window_slot_locked(slot)) return learned_window_->adjust(slot, units, now_us);
    slot.units = units;
    return {};
  }
  if (slot.quota_until_us > 0) {
    // What the server charged comes out of what remains; the next reply
    // says it anyway.
    if (slot.quota_until_us == quota_until_us_) quota_ -= units - slot.units;
    slot.units = units;
    return {};
  }
  if (++corrections_ > kOverdraftsKept) {
    overdraft_before_ = overdraft_now_;
    overdraft_now_ = 0;
    corrections_ = 1;
  }
  overdraft_now_ = std::max(overdraft_now_, units - slot.units);
  if (units > slot.units) {
    started_tat_ += (units - slot.units) * interval_us_;
    tat_ = std::max(tat_, started_tat_);
  } else if (units < slot.units && started_tat_ == slot.started_after_us) {
    const bool latest = tat_ == started_tat_;
    started_tat_ = std::max(slot.started_before_us, slot.at_us) + units * interval_us_;
    if (latest) tat_ = started_tat_;
  } else if (units < slot.units && slot.at_us >= idle_at_us_ && started_tat_ > now_us) {
    // Behind later starts, but the pace has been busy ever since this one:
    // the units it did not use are still ahead in the pace, and are given
    // back there (the server only charged what the call cost). After an
    // idle spell they are kept: the room went by unused.
    const std::int64_t refund = (slot.units - units) * interval_us_;
    started_tat_ = std::max(started_tat_ - refund, now_us);
    tat_ = std::max(tat_ - refund, started_tat_);
  }
  slot.started_after_us = started_tat_;
  slot.units = units;
  return {};
}

bool AdaptivePacer::forgettable(std::int64_t now_us) {
  std::lock_guard lock(mu_);
  return now_us >= forget_at_locked();
}

// A field added to the pacer must be packed too: each_field lists them all,
// and this size says when one came or went.
#if defined(__x86_64__) && defined(__GLIBCXX__)
static_assert(sizeof(AdaptivePacer) == 752, "a field of AdaptivePacer changed: update each_field");
static_assert(sizeof(WindowPhase) == 88, "a field of WindowPhase changed: update its each_field");
#endif

template <typename Self, typename Io>
void AdaptivePacer::each_field(Self& p, Io& io) {
  io.time(p.observed_us_);  // first: the other times step from it
  io.number(p.interval_us_);
  io.number(p.learned_us_);
  io.time(p.resume_us_);
  io.time(p.tat_);
  io.time(p.started_tat_);
  io.number(p.outstanding_);
  io.time(p.moved_tat_);
  io.number(p.overdraft_now_);
  io.number(p.overdraft_before_);
  io.number(p.corrections_);
  io.number(p.generation_);
  io.times(p.starts_);
  io.times(p.admits_);
  io.time(p.first_start_us_);
  io.time(p.idle_at_us_);
  io.number(p.window_us_);
  io.time(p.window_start_us_);
  io.time(p.window_opener_replied_us_);
  io.number(p.reset_epoch_ms_);
  io.number(p.reset_step_us_);
  io.number(p.policy_window_us_);
  WindowPhase::each_field(p.phase_, io);
  io.number(p.quota_limit_);
  io.time(p.probe_slot_us_);
  io.number(p.waiting_calls_);
  io.time(p.waiting_at_us_);
  io.time(p.decreased_at_us_);
  io.time(p.jitter_at_us_);
  io.number(p.pause_us_);
  io.real(p.last_429_rate_);
  io.flag(p.admitted_since_decrease_);
  io.real(p.burst_units_);
  io.real(p.rate_at_decrease_);
  io.real(p.ceiling_);
  io.number(p.probed_);
  io.flag(p.probe_doubles_);
  io.flag(p.awaiting_reply_);
  io.time(p.hold_from_us_);
  io.number(p.reply_took_us_);
  io.time(p.hold_until_us_);
  io.number(p.quota_);
  io.time(p.quota_until_us_);
  io.number(p.quota_pending_);
  io.flag(p.quota_paced_);
  io.time(p.first_until_us_);
  io.number(p.least_remaining_);
  io.time(p.least_started_us_);
  io.times(p.spent_);
  io.flag(p.ramping_);
  io.time(p.ramp_from_us_);
  io.number(p.ramp_interval_us_);
  io.number(p.ramp_doubling_us_);
  io.number(p.untold_refusals_);
  io.number(p.untold_spread_us_);
  io.number(p.read_fastest_us_);
  io.time(p.sped_up_at_us_);
  io.flag(p.window_read_);
  io.flag(p.window_paced_);
  io.number(p.least_admitted_);
  io.number(p.least_length_us_);
  io.number(p.longest_pause_us_);
  io.number(p.same_quotas_);
  io.time(p.learned_window_since_us_);
  io.number(p.window_generation_);
  io.number(p.windows_given_up_);
  io.number(p.window_len_us_);
  io.number(p.window_kept_quota_);
  io.number(p.window_probe_step_);
  io.time(p.window_probe_at_us_);
  io.number(p.window_probe_every_us_);
  io.time(p.window_probed_since_us_);
}

std::int64_t AdaptivePacer::forget_at_locked() const {
  return std::max(resume_us_, observed_us_ + to_micros(kForgetAfter));
}

PackedLimiter AdaptivePacer::pack(std::string_view name) const {
  std::lock_guard lock(mu_);
  // What refusals taught (a bucket's reading, a window kept by a limiter of
  // its own) stays unpacked: such a key is one a server refuses, and few are.
  if (outstanding_ != 0 || refusal_learning_ || learned_window_) return {};
  PackWriter out;
  each_field(*this, out);
  return out.finish(name, forget_at_locked());
}

std::shared_ptr<AdaptivePacer> AdaptivePacer::unpack(std::shared_ptr<const PacerOptions> options,
                                                     const PackedLimiter& packed) {
  auto p = std::make_shared<AdaptivePacer>(std::move(options));
  FieldCounter fields;
  each_field(*p, fields);
  PackReader in(packed, fields.fields);
  each_field(*p, in);
  return p;
}

std::string AdaptivePacer::describe() const {
  std::lock_guard lock(mu_);
  if (learned_window_) return "read from refusals: " + learned_window_->describe();
  const std::string pace = common::format_duration(std::chrono::microseconds(interval_us_));
  if (ramping_) {
    return "starting slowly: " + pace + " per call, the rate doubling every " +
           common::format_duration(std::chrono::microseconds(ramp_doubling_us_));
  }
  return "learned pace " + pace + " per call";
}

}  // namespace ratchet::limit
