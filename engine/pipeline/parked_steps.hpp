// The step calls a step caller has in hand, from a step's first admission
// to its outcome: each keeps its retry state and reserved limiter slot
// across parks, so a parked job keeps its place in line and its retries are
// not reset by parking. A step parked for a permit or a probe (a wait with
// no known end) waits here for a call of its plugin to end.
//
// Entries are dropped when the engine says the job cannot come back, or
// when the database shows it gone elsewhere; a dropped entry gives back its
// reserved slot when the last holder lets it go.
//
// Thread-safety: none of its own; the step caller's lock guards it and
// every Entry field but `call`.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "ratchet/clock.hpp"
#include "ratchet/job.hpp"
#include "retry/call_gate.hpp"

namespace ratchet::pipeline {

// A job with steps parked in a caller, for checking against the database.
struct ParkedJob {
  JobId job = 0;
  int attempt = 0;
  std::uint64_t park = 0;  // the latest park of its steps (see PluginStepCaller::forget_parked)
};

class ParkedSteps {
 public:
  using Key = std::tuple<JobId, std::string, int>;  // job, step, attempt

  // One step call across its parks, from its first admission to its outcome.
  struct Entry {
    Entry(std::string plugin_name, TimePoint now);
    retry::CallState call;  // used by the step's own call only, outside the lock
    std::string plugin;
    TimePoint started;                            // its first admission here
    std::uint64_t park = 0;                       // nonzero while parked: the number of that park
    std::optional<TimePoint> limiter_wait_since;  // waiting for a limiter slot since then
    // Parked for a permit or a probe (a wait with no known end): resumed by
    // the end of a call of its plugin, once its park has committed. Or for
    // its turn: resumed when the turn is granted.
    bool awaits_release = false;
    bool for_turn = false;  // parked for its turn (park_for_turn)
    TimePoint resume_at{};  // woken: when to resume it (its slot's time, or now)
    bool park_committed = false;
    bool woken = false;
    // A call has it in hand (between come_back and its park or outcome).
    bool in_hand = false;
    bool estimated = false;  // the plugin was asked what its call will cost
    // Calls in a row that could not be set up for a fault of the engine's
    // own (PluginStepCaller::setup_fault): the next waits longer.
    int setup_faults = 0;
  };
  using Entries = std::vector<std::shared_ptr<Entry>>;

  // The entry of the step at `key`, made on its first call; it counts as
  // back from any park. An entry another call still has in hand (the same
  // attempt run again in this process, its lease having run out while the
  // first run went on) is left to that call: this one gets a new entry, so
  // no CallState is ever used by two calls at once.
  std::shared_ptr<Entry> come_back(const Key& key, const std::string& plugin, TimePoint now);
  // Parks `entry`, which a forget while its call was in flight may have
  // dropped: the step still goes on.
  void park(const Key& key, const std::shared_ptr<Entry>& entry);
  // Parks `entry` until a call of `plugin` ends and frees a permit
  // (`for_permit`) or a probe. False, and nothing parked, when such a call
  // ended since `ended_before` (calls_ended): the step looks again.
  bool park_for_release(const Key& key, const std::shared_ptr<Entry>& entry, const std::string& plugin,
                        bool for_permit, std::uint64_t ended_before);
  // Parks `entry` until its turn on the limits its keys share is granted
  // (wake).
  void park_for_turn(const Key& key, const std::shared_ptr<Entry>& entry);
  // The turn `entry` waits for was granted: marks it woken. Returns whether
  // to resume it now (its park committed; otherwise park_committed says so),
  // at `at`.
  bool wake(const Key& key, const std::shared_ptr<Entry>& entry, TimePoint at);
  // The step came to an outcome: its entry goes, unless another replaced it.
  void remove(const Key& key, const std::shared_ptr<Entry>& entry);

  // Takes out every step of `job` up to `attempt`.
  Entries take(JobId job, int attempt);
  // Takes out the steps of `job` up to `attempt` parked by `park` or an
  // earlier park.
  Entries take_parked(JobId job, int attempt, std::uint64_t park);

  // Calls of `plugin` ended so far.
  std::uint64_t calls_ended(const std::string& plugin);
  // Counts an ended call of `plugin` and marks the waiters it frees as woken.
  // Returns the jobs to resume now (their parks committed).
  std::vector<std::pair<JobId, int>> end_call(const std::string& plugin);
  // The park of `job`'s `attempt` committed. Returns when to resume it if
  // what it waits for freed up meanwhile (a call ended: now; a turn
  // granted: its time).
  std::optional<TimePoint> park_committed(JobId job, int attempt);

  // The jobs parked for a turn not yet granted, their parks committed.
  std::vector<std::pair<JobId, int>> waiting_for_turns() const;
  // Jobs with a step parked here, each with the number of its latest park.
  std::vector<ParkedJob> parked_jobs() const;
  const std::map<Key, std::shared_ptr<Entry>>& entries() const { return steps_; }

 private:
  // Steps of one plugin parked for what a call of it frees when it ends, in
  // the order they parked. Entries are checked when taken, not removed when
  // a step comes back or is forgotten.
  struct ReleaseWaiters {
    std::deque<std::pair<Key, std::weak_ptr<Entry>>> permit;  // one resumed per ended call
    std::deque<std::pair<Key, std::weak_ptr<Entry>>> probe;   // all resumed by an ended call
    std::uint64_t ended = 0;                                  // calls of the plugin ended so far
  };

  template <typename Pred>
  Entries take_if(JobId job, int attempt, Pred drop);

  std::map<Key, std::shared_ptr<Entry>> steps_;
  std::uint64_t parks_made_ = 0;
  std::map<std::string, ReleaseWaiters> waiters_;  // by plugin
};

}  // namespace ratchet::pipeline
