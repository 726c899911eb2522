// The pace a plugin learns from its server's replies (docs/semantics.md, rule 9): a
// limiter in the plugin's stack whose spacing and pauses follow PaceHints.
//
//   - Retry-After / a reset with nothing remaining: no start before resume_at.
//   - A pace from the headers: starts are spaced by the quota's window over
//     its quota (the window from RateLimit-Policy, or the longest time to a
//     reset seen, or the step between two resets the server wrote as Unix
//     times when that is shorter by at most two seconds), stretched by a
//     small margin.
//   - A bare 429: multiplicative decrease (the rate is multiplied by
//     `decrease`, or by kKnownLimitDecrease when it drew the 429 within 15 %
//     of the rate that drew the last one: the server's own limit, met again,
//     wants a step under it, not half; from the rate of the starts in the
//     last second when nothing was learned, or the rate admitted in it when
//     lower, both in units, as the pace is: weighted calls halve the units
//     they used) and a pause of one interval (at least `min_pause`, doubling
//     while refusals go on). With no limit declared, the first call after
//     the pause goes alone: the next waits for its reply, or for about as
//     long as replies take (a step held longer would be parked, and woken
//     late once the reply came); then
//     each good reply adds `recovery` times the rate at the decrease
//     (additive increase) up to `ceiling` times the rate that drew the 429,
//     and a tenth as fast beyond it, until the learned or declared pace is
//     reached again. Past the ceiling that step doubles every half second's
//     worth of replies without a refusal, unless the last two refusals came
//     at about the same rate (the server's own limit): a 429 drawn far
//     under the server's rate, by calls that reached it bunched together,
//     is found out in seconds, not minutes.
//   - A 429 with only Retry-After, while its rate is not known: after the
//     pause, a slow start that spreads the calls the last stretch admitted
//     over that stretch plus `restart_spread`, doubling its rate no faster
//     than over that stretch plus the gap the estimate needs (at least
//     every `ramp_doubling`), so that the next refusal ends a stretch long
//     enough to read the rate from (refusal_estimator.hpp). Each refusal
//     costs a whole pause (Retry-After comes in whole seconds), so the rate
//     is read from as few refusals as possible. Once read, so is the
//     bucket's size: the pace lets kBurstShare of it go at once after a
//     pause or an idle spell (a GCRA on the calls' starts), as the server's
//     bucket refilled. A server found to be no bucket gets the later slow
//     starts at `ramp_doubling`: its quota goes quickly from each pause's end.
//     While no pause asked for is longer than a second, a fixed window
//     (two stretches 200 ms apart in length, or three in all, that
//     admitted within a tenth of the least, or no bucket found) is kept by
//     an even pace instead: the least a stretch admitted per the longest
//     pause, or the bucket read when that is slower; kept at a bucket's
//     read a tenth or more under the window's, the pace rises towards the
//     window's while nothing is refused, as towards a bucket's fastest (two
//     stretches of a window can line up as a slow bucket's, and a pace
//     under the quota is never refused). Each pause lands about
//     as late in the next window as the refusal came in its own, so the
//     quota taken from a pause's end goes partly unused there.
//     Once three refusals (two, with no bucket found) fit one fixed window
//     of the longest pause's length (refusal_window.hpp), that window is
//     kept instead, by a fixed-window limiter at its phase: its quota goes
//     at each window's start, outside the span where the boundary is in
//     doubt. A refusal of a call started under it gives it up. A quota
//     read low is probed upward (probe_window_locked).
//   - Until the server has said anything, with no limit declared, the first
//     call goes alone: the next waits for its reply (at most `opening_hold`),
//     which may state the quota. After it, or when it said nothing, starts
//     are spaced by `opening_interval`, doubling their rate every
//     `ramp_doubling`: a first burst then draws one refusal, not one per
//     worker, and reads the server's bucket cleanly; a server that never
//     limits is paced for the first seconds only.
//   - What remains of the server's window (a reply's Remaining and its
//     reset), with no limit declared: the calls started after the replying
//     one, and the slots granted, count against it, for windows of 1.5 s
//     to 10 s, and for any window up to 10 s whose length is not known
//     exactly yet (longer ones are kept by the pace; shorter ones too after
//     the first, from a window's start on, except for calls that all fit
//     in what a window has left: see count_remaining_locked). While some
//     remains, slots are granted at once, unspaced, so that each window's
//     quota goes at its start as the server allows (an even pace would
//     leave a fixed window's first stretch unused); with none left, nothing
//     starts before the reset. Within one of the server's windows the least it said
//     remains is its latest count, less the calls still on their way
//     (replies of calls started together come back in any order).
//   - The reset, in whole seconds, is up to a second late (two, read
//     against a Date): once the window's length is known exactly, its
//     phase is learned (window_phase.hpp) and places every reset instead,
//     and the last units of each window (probes_wanted_locked) go one at a
//     time inside the span of the phase still in doubt, while more calls
//     are to come than the window holds (waiting(): a run's last window
//     sends its calls at once, none held for a probe at its end).
// A bare 429 while the declared pace is kept, the first in ten seconds, is
// taken as arrival jitter at the server: a pause of one interval, no decrease.
// Learned pace never goes faster than `floor` (the tightest declared limit's
// per/rate); the declared limiters stay in the stack anyway, so nothing
// learned can exceed a declared limit. With a limit declared, until the
// server says something the pacer imposes nothing (declared bursts stay
// usable), and once recovered from a bare 429 to the declared pace it stops
// pacing again. A 429 for a call that started before the latest decrease,
// or before a refusal that gave the rate, does not decrease again (replies
// of calls already in flight report the same overload).
//
// Slots granted before a pause or a slowdown were spaced for a pace that no
// longer holds: when they come back each gets its own turn at the new pace,
// from the end of the pause, in the order they come (ready_at), so they do
// not all wake at one time and wait again one start at a time.
//
// Thread-safety: all members are safe to call concurrently (one mutex).
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "limit/fixed_window.hpp"
#include "limit/limiter.hpp"
#include "limit/rate_headers.hpp"
#include "limit/refusal_estimator.hpp"
#include "limit/refusal_window.hpp"
#include "limit/small_mutex.hpp"
#include "limit/time_queue.hpp"
#include "limit/window_phase.hpp"

namespace ratchet::limit {

struct PacerOptions {
  Duration floor = Duration::zero();  // declared pace; zero: none declared
  double decrease = 0.5;              // rate factor on a bare 429, in (0, 1)
  double recovery = 0.02;             // per good reply, fraction of the rate at decrease
  double ceiling = 0.9;               // recovery aims at this fraction of the rate that drew a 429
  double probe = 0.1;                 // past that, the recovery step is scaled by this
  double margin = 1.02;               // a learned quota's pace is stretched by this
  double refusal_margin = 1.02;       // and a rate read from refusals by this
  Duration first_interval = std::chrono::milliseconds(100);  // pace after a 429 when nothing is known
  Duration max_interval = std::chrono::minutes(1);           // slowest pace a 429 storm can push to
  Duration opening_interval = Duration::zero();              // pace of the first calls; zero: unpaced
  Duration opening_hold = Duration::zero();            // with an opening: how long the first reply is awaited
  Duration min_pause = std::chrono::milliseconds(50);  // shortest pause after a bare 429
  Duration ramp_doubling = std::chrono::milliseconds(250);   // a slow start doubles its rate this often
  Duration restart_spread = std::chrono::milliseconds(500);  // see the slow start after Retry-After
};

// A plugin's pacing in the engine: the declared pace as its floor, and the
// opening slow start when nothing is declared.
PacerOptions plugin_pacing(Duration floor);

class AdaptivePacer final : public Limiter {
 public:
  explicit AdaptivePacer(PacerOptions options = {});
  // Options shared by many paces (a keyed limit's, one a key): 16 bytes a
  // pace, where a copy takes 112.
  explicit AdaptivePacer(std::shared_ptr<const PacerOptions> options);

  // Applies what one reply said. `call_started` is when the replying call
  // started (to recognise 429s from calls already in flight at a decrease);
  // `units`, what it was admitted at (the pace is a spacing per unit).
  void observe(const PaceHint& hint, TimePoint now, std::optional<TimePoint> call_started = std::nullopt,
               std::int64_t units = 1);

  // A reply came that another pacer observes (a key's own): the first call's
  // reply awaited by the opening is in.
  void replied(TimePoint now);

  Duration interval() const;    // the current spacing between starts (zero: none)
  TimePoint resume_at() const;  // no start before this (the epoch: no pause)
  // Speeding back up after a 429, or in a slow start (slots granted now may
  // come sooner than the ones granted before).
  bool recovering() const;

  [[nodiscard]] Result<std::int64_t> ready_at(Slot& slot, std::int64_t now_us) override;
  [[nodiscard]] Result<UseResult> start(Slot& slot, std::int64_t now_us) override;
  [[nodiscard]] Result<UseResult> restart(Slot& slot, std::int64_t now_us) override;
  [[nodiscard]] Status defer(Slot& slot, std::int64_t now_us, std::int64_t to_us) override;
  [[nodiscard]] Status cancel(const Slot& slot) override;
  [[nodiscard]] Status adjust(Slot& slot, std::int64_t units, std::int64_t now_us) override;
  void waiting(std::int64_t calls, std::int64_t now_us) override;
  // A key's learned pace (limit/keyed_limiters.hpp) is dropped once its
  // server has said nothing for kForgetAfter and no pause runs: by then the
  // next reply is as good a teacher as the old ones.
  static constexpr Duration kForgetAfter = std::chrono::minutes(10);
  bool forgettable(std::int64_t now_us) override;
  // A key's pace packs (limit/packed_state.hpp) while no slot is held and
  // nothing was read from refusals: what headers taught it, in about fifty
  // bytes where the pacer takes eight hundred.
  PackedLimiter pack(std::string_view name) const override;
  static std::shared_ptr<AdaptivePacer> unpack(std::shared_ptr<const PacerOptions> options,
                                               const PackedLimiter& packed);
  std::string describe() const override;

 protected:
  // A call of u units is spaced by u intervals: a learned quota counts the
  // units the server charges.
  [[nodiscard]] Result<std::int64_t> earliest_units(std::int64_t now_us, std::int64_t t_us,
                                                    std::int64_t units) override;
  [[nodiscard]] Result<Slot> reserve_units(std::int64_t now_us, std::int64_t t_us,
                                           std::int64_t units) override;

 private:
  // Every field of the state, in one order, to a PackWriter or PackReader.
  template <typename Self, typename Io>
  static void each_field(Self& self, Io& io);
  std::int64_t forget_at_locked() const;

  std::int64_t earliest_locked(std::int64_t t, std::int64_t units, bool demand_fits) const;
  // Whether a slot of `units` at `t` comes from what the server said remains.
  bool from_quota_locked(std::int64_t t, std::int64_t units, bool demand_fits) const;
  // What remains of the server's window, from a reply that left
  // `remaining` units until `until_us`; `opened`: the replying call was the
  // first of a window; it started at `started_us`.
  void count_remaining_locked(std::int64_t remaining, std::int64_t until_us, std::int64_t now_us,
                              std::int64_t window_us, bool opened, std::int64_t started_us);
  void note_start_locked(std::int64_t now_us, std::int64_t units);
  // Ends the hold on a reply of the call started at `started_us` (zero:
  // not known).
  void end_hold_locked(std::int64_t now_us, std::int64_t started_us);
  void hold_after_pause_locked();
  // What a reply with no quota says about a server that only refuses: the
  // reading of a refusal, or of the last one taken again with an admitted
  // call that started before it (nothing for other admitted calls, or for
  // a refusal of a call in flight at the last one).
  std::optional<RefusalReading> learn_from_refusals_locked(const PaceHint& hint, std::int64_t now_us,
                                                           std::optional<TimePoint> call_started);
  void respace_locked(std::int64_t now_us);
  // Moves a slow start's pace on to `now_us`.
  void ramp_locked(std::int64_t now_us);
  std::int64_t ramp_interval_at_locked(std::int64_t t_us) const;
  // The spacing after a start at `t_us`, along a slow start's schedule.
  std::int64_t interval_at_locked(std::int64_t t_us) const;
  // A new turn for a slot spaced for an old pace (see the header comment).
  std::int64_t new_turn_locked(Slot& slot, std::int64_t now_us);
  UseResult start_locked(Slot& slot, std::int64_t now_us);
  void start_ramp_locked(std::int64_t from_us, std::int64_t interval_us, std::int64_t doubling_us);

  const std::shared_ptr<const PacerOptions> options_;
  mutable SmallMutex mu_;  // one a key, of up to a hundred thousand
  std::int64_t interval_us_ = 0;
  std::int64_t observed_us_ = 0;  // the latest reply observed
  std::int64_t learned_us_ = 0;   // pace the headers last gave (zero: none)
  std::int64_t resume_us_ = 0;
  std::int64_t tat_ = 0;          // after every slot granted: when to come
  std::int64_t started_tat_ = 0;  // after the calls started: who may go
  std::int64_t outstanding_ = 0;  // units of the slots granted, not yet started or given back
  std::int64_t moved_tat_ = 0;    // after every slot moved (see start)
  // The largest overdraft (units a reply said a call cost beyond its slot)
  // of the last kOverdraftsKept to twice as many corrections, in two blocks:
  // how far a correction may have moved the pace under slots granted
  // before it (see start_locked). Three numbers, not a list: a key of its
  // own pace is one of up to a hundred thousand.
  std::int64_t overdraft_now_ = 0;     // the most in the current block
  std::int64_t overdraft_before_ = 0;  // the most in the block before
  std::int64_t corrections_ = 0;       // in the current block
  static constexpr std::int64_t kOverdraftsKept = 32;
  std::uint64_t generation_ = 0;  // of the pace slots are granted by
  static constexpr std::int64_t kObservedSpan = 1'000'000;
  // A call's start precedes its arrival at the server by the time to send it.
  static constexpr std::int64_t kBoundaryGuard = 10'000;
  double observed_interval_locked(std::int64_t now_us) const;

  // (time, units) of the starts, and of the replies that were not
  // refusals, within the last kObservedSpan: what the server saw, in units.
  TimeQueue<std::pair<std::int64_t, std::int64_t>> starts_;
  TimeQueue<std::pair<std::int64_t, std::int64_t>> admits_;
  std::int64_t first_start_us_ = 0;
  // The latest start that found the pace idle (nothing started still in
  // its future, give or take an interval): room given back by a call
  // started since is still ahead.
  std::int64_t idle_at_us_ = 0;
  std::int64_t window_us_ = 0;                 // the quota's window, or the longest time to a reset seen
  std::int64_t window_start_us_ = 0;           // start of a call that opened a server window
  std::int64_t window_opener_replied_us_ = 0;  // when its reply came
  std::int64_t reset_epoch_ms_ = 0;            // the latest reset in the server's own Unix time
  std::int64_t reset_step_us_ = 0;             // the least step between two of those
  // A reset in whole seconds rounded up, read against a Date in whole
  // seconds rounded down: the time to it is up to two seconds long.
  static constexpr std::int64_t kResetStepSlack = 2'100'000;
  // The quota's window as best known (see window_locked in the .cpp).
  std::int64_t window_locked() const;
  // The window's length when the server said it exactly (a policy's `w`,
  // or the step between two resets it wrote as Unix times); zero otherwise.
  std::int64_t exact_window_locked() const;
  std::int64_t policy_window_us_ = 0;
  // Where the server's windows begin, once their length is known exactly
  // (window_phase.hpp).
  WindowPhase phase_;
  void learn_phase_locked(const PaceHint& hint, std::int64_t started_us, std::int64_t now_us, bool opened);
  // The latest the window of a call started at `started_us` can end, from
  // the phase or else from the first calls of its windows, `window` long
  // (zero: neither), of the windows that end no earlier than `not_before_us`.
  std::int64_t window_end_locked(std::int64_t started_us, std::int64_t now_us, std::int64_t window,
                                 std::int64_t not_before_us) const;
  // How far before the reset a reply states its window may end.
  static std::int64_t reset_slack(const PaceHint& hint);
  // A window's last units go as probes (window_phase.hpp), one at a time:
  // the time for one at or after `t`, or zero. How many: enough to narrow
  // the phase to its resolution, at most four, and fewer for a small quota
  // (a probe that lands in the next window loses the old window's units
  // still held for probes); before the phase is known, as many as the next
  // window could spare were all of them lost (see probes_wanted_locked).
  std::int64_t probe_at_locked(std::int64_t t, std::int64_t units, bool demand_fits) const;
  std::int64_t probes_wanted_locked() const;
  static constexpr std::int64_t kMostScanProbes = 16;
  std::int64_t quota_limit_ = 0;    // the server's quota, as it last said
  std::int64_t probe_slot_us_ = 0;  // a probe granted, its reply not in (zero: none)
  // Calls waiting for a slot, as the turn queue last said (waiting()), and
  // when: a window's last units go as probes only while those fill it.
  std::int64_t waiting_calls_ = 0;
  std::int64_t waiting_at_us_ = 0;
  bool demand_fits_locked(std::int64_t now_us, std::int64_t units) const;
  static constexpr std::int64_t kProbeReplyUs = 2'000'000;
  // 429s within this long of a decrease belong to the same overload: they
  // lengthen the pause instead of slowing the pace again.
  static constexpr std::int64_t kEpisodeUs = 1'000'000;
  std::int64_t decreased_at_us_ = 0;
  // A bare 429 while the declared pace is kept is taken as arrival jitter
  // once per this long (see observe).
  static constexpr std::int64_t kJitterSpellUs = 10'000'000;
  std::int64_t jitter_at_us_ = 0;
  bool at_declared_pace_locked(std::int64_t now_us) const;
  std::int64_t pause_us_ = 0;  // the current pause after a bare 429
  // The rate that drew the last multiplicative decrease (calls per
  // microsecond); one within kSameLimit of it decreases by kKnownLimitDecrease.
  double last_429_rate_ = 0;
  static constexpr double kSameLimit = 0.15;
  static constexpr double kKnownLimitDecrease = 0.75;
  bool admitted_since_decrease_ = false;

  // What is read from a server that only refuses: its bucket
  // (refusal_estimator.hpp) and its fixed window (refusal_window.hpp).
  // Made at the first reply that says nothing of the limits, so a pace
  // learned from headers (a key's own, one of up to a hundred thousand)
  // carries neither.
  struct RefusalLearning {
    RefusalEstimator refusals;
    RefusalWindow window;
  };
  std::unique_ptr<RefusalLearning> refusal_learning_;
  RefusalLearning& refusal_learning_locked();
  // The part of a bucket read from refusals that may go at once (zero:
  // none), and how far ahead of the pace that lets starts run.
  double burst_units_ = 0;
  static constexpr double kBurstShare = 0.75;
  std::int64_t burst_tau_locked() const;
  double rate_at_decrease_ = 0;  // calls per microsecond
  double ceiling_ = 0;           // calls per microsecond; zero: none
  // Good replies since recovery passed the ceiling: unless the refusal met
  // a known limit, the probe's step doubles every kProbeDoublingUs worth of
  // them at the ceiling's rate (at least kProbeDoublingReplies), up to
  // 2^kProbeMaxDoublings.
  std::int64_t probed_ = 0;
  bool probe_doubles_ = false;
  static constexpr std::int64_t kProbeDoublingUs = 500'000;
  static constexpr double kProbeDoublingReplies = 8;
  static constexpr double kProbeMaxDoublings = 10;

  // The opening: after the first slot, none before the first reply or
  // hold_until_us_.
  // After a bare 429's pause, the same hold for the first call after it:
  // only the reply of a call started from hold_from_us_ on ends it (zero:
  // the opening's, any reply).
  bool awaiting_reply_ = false;
  std::int64_t hold_from_us_ = 0;
  // How long the hold lasts at most: the opening's, or after a pause a
  // little more than replies take (reply_took_us_).
  std::int64_t hold_span_locked() const;
  std::int64_t reply_took_us_ = 0;
  std::int64_t hold_until_us_ = 0;
  // What remains of the server's window until quota_until_us_, less the
  // slots granted from it since (may go below zero: none left).
  std::int64_t quota_ = 0;
  std::int64_t quota_until_us_ = 0;
  std::int64_t quota_pending_ = 0;  // units of slots granted from it, not yet started
  // The window is kept by the pace: only calls that all fit go from its quota.
  bool quota_paced_ = false;
  std::int64_t first_until_us_ = 0;    // the end of the first window counted
  std::int64_t least_remaining_ = 0;   // the least the server said remains of its current window
  std::int64_t least_started_us_ = 0;  // the start of the call that said so
  // Recent starts: (time, units), the units zero once the call replied.
  std::vector<std::pair<std::int64_t, std::int64_t>> spent_;
  // A call started this long ago has reached the server (see count_remaining_locked).
  static constexpr std::int64_t kInFlightSpan = 1'000'000;
  // A reply to the call started at `started_us` came: its units are no
  // longer to come (see count_remaining_locked).
  void replied_locked(std::int64_t started_us);
  // Takes back the start made on `slot`, which is held again (restart, defer).
  void unstart_locked(Slot& slot);
  // Takes the start made on `slot` out of the starts seen and the calls to come.
  void forget_start_locked(const Slot& slot);
  static constexpr std::int64_t kSpentSpan = 10'000'000;
  static constexpr std::int64_t kQuotaBurstSpan = 10'000'000;
  static constexpr std::int64_t kQuotaBurstWindow = 1'500'000;

  // A slow start: the interval at ramp_from_us_ (zero: from the first call),
  // halved every ramp_doubling.
  bool ramping_ = false;
  std::int64_t ramp_from_us_ = 0;
  std::int64_t ramp_interval_us_ = 0;
  std::int64_t ramp_doubling_us_ = 1;
  // Refusals with only Retry-After that ended a stretch the rate could not
  // be read from (the first slows the next slow start's doubling).
  int untold_refusals_ = 0;
  // The slow start after such a refusal begins at the stretch's length and
  // a little over, over the calls it admitted: this much over them (zero:
  // the slow start is another's). Calls of the stretch answered after its
  // refusal (late_admission_locked) make it faster.
  std::int64_t untold_spread_us_ = 0;
  // A bucket's rate read from refusals: the pace may rise to this spacing,
  // halfway to the fastest every answer allows (zero: it stays).
  std::int64_t read_fastest_us_ = 0;
  std::int64_t sped_up_at_us_ = 0;
  static constexpr std::int64_t kSpeedUpEveryUs = 500'000;
  static constexpr std::int64_t kSpeedUpShare = 25;  // each step a 25th faster
  void speed_up_locked(std::int64_t now_us);
  void late_admission_locked(const RefusalReading& refusal, std::int64_t now_us);
  // A fixed window that only refuses (refusal_estimator.hpp reads
  // buckets): its quota is the least a stretch admitted, its length at most
  // the longest pause asked for. Read once stretches of different lengths,
  // or three, admitted about the same (or the estimator found no bucket),
  // while no pause was longer than kEvenWindowUs. Whether the refusal came
  // while the pace kept such a window.
  bool window_from_refusal_locked(const RefusalReading& refusal, std::int64_t pause_us);
  bool window_read_ = false;
  bool window_paced_ = false;  // the learned pace is the window's
  std::int64_t least_admitted_ = 0;
  std::int64_t least_length_us_ = 0;
  std::int64_t longest_pause_us_ = 0;
  static constexpr std::int64_t kSameQuotaShare = 10;  // "about the same": within a tenth
  int same_quotas_ = 0;  // refusals that ended a stretch of about the least's count
  static constexpr std::int64_t kEvenWindowUs = 1'000'000;

  // A fixed window read from refusals with Retry-After, or bare ones
  // (refusal_window.hpp), no limit declared: from then on the pace is that window's, at its
  // phase, and its quota goes at each window's start, none in the span
  // where the boundary is still in doubt. A refusal of a call started under
  // it ends it; the next refusals may read it again.
  std::unique_ptr<FixedWindowLimiter> learned_window_;
  std::int64_t learned_window_since_us_ = 0;
  std::uint64_t window_generation_ = 0;  // slots of the current reading carry it
  // Reads a window `w` long from at least `refusals` refusals and keeps it.
  bool read_window_locked(std::int64_t now_us, std::int64_t w, int refusals);
  // The lengths tried for a window that refuses with a bare 429.
  static constexpr std::int64_t kBareWindowsUs[] = {1'000'000, 2'000'000, 5'000'000, 10'000'000};
  // A slot of the window read now; false for one of the pace or of an
  // earlier reading.
  bool window_slot_locked(const Slot& slot) const;
  // While a window is read, a slot of the pace is given back to it and
  // held again by the window; with none read (or another), a slot of an
  // old reading takes a new turn at the pace.
  void adopt_locked(Slot& slot, std::int64_t now_us);
  void disown_locked(Slot& slot);
  void cancel_locked(const Slot& slot);
  Result<UseResult> start_window_locked(Slot& slot, std::int64_t now_us, bool again);
  Result<Slot> reserve_window_locked(std::int64_t now_us, std::int64_t t_us, std::int64_t units);
  static constexpr std::int64_t kMaxLearnedWindowUs = 10'000'000;
  // A server refused under each of this many windows read (a sliding
  // window, say, whose pauses let it fit one) is left to the pace.
  int windows_given_up_ = 0;
  static constexpr int kMaxWindowsGivenUp = 3;

  // A window read from refusals may be read under the server's quota (a
  // stretch that a pause cut short), and a quota kept under the server's
  // is never refused: nothing would say so. So while more calls wait than
  // a window holds, its quota is probed upward after a quiet spell: raised
  // by a step, kept once kWindowProbeWindows windows went by unrefused (and
  // raised again), and set back to the last one kept when a call started
  // under the probe is refused; the step then halves and the spell doubles
  // (from kFirstWindowProbes windows to kMaxWindowProbeUs). A refused probe
  // costs one pause; a quota read right is probed less and less often.
  std::int64_t window_len_us_ = 0;
  std::int64_t window_kept_quota_ = 0;  // while a probe runs: the last quota kept (zero: none runs)
  std::int64_t window_probe_step_ = 0;
  std::int64_t window_probe_at_us_ = 0;  // the next probe, or the end of the one running
  std::int64_t window_probe_every_us_ = 0;
  std::int64_t window_probed_since_us_ = 0;
  static constexpr std::int64_t kFirstWindowProbes = 10;
  static constexpr std::int64_t kMaxWindowProbeUs = 600'000'000;
  static constexpr std::int64_t kWindowProbeWindows = 3;
  void probe_window_locked(std::int64_t now_us);
};

}  // namespace ratchet::limit
