// The recent call starts of one owner of process-scope limits (a plugin, or
// one of its operations), kept so that those limits hold across a reload and
// a restart (docs/semantics.md points 5 and 11): the server keeps counting the calls
// made before either, so the limiters after it must count them too.
//
// It sits in the owner's limiter stack as one more Limiter that never limits
// by itself: it records every call that starts, and hands the starts of the
// last `keep_us` to limiters built later (history()), which take them as
// their own past (Limiter::count_started).
//
// Saved in the database the engine has open (the journal of
// store/limiter_tables.hpp), so that the next process resumes the
// windows. A write per call would double the engine's writes; instead a start
// that finds no lease left saves the starts not yet saved and takes a lease
// on the next `lease_calls` starts within `lease_us`, before its own call
// goes. A process that dies with a lease open may have started that many
// calls unsaved, so the next process counts them as started at the lease's
// end and starts nothing before that end: any interval that holds one of
// those calls and a later call also holds the lease's end, so no window sees
// more than it counts. A process that stops cleanly saves every start and
// ends its lease.
//
// Units: a call of u units is one entry (its time and u), in memory and as
// one row, and takes u of a lease's calls. A call's cost may be a million
// units, and its entry is saved before its request leaves: saved a unit a
// row, it took longer than a count may age (retry/call_gate.hpp,
// send_slack), and the request was never sent.
//
// Scope: several live processes on one database each keep their own journal
// for an owner; a process that starts counts what all of them saved (it may
// be slower for a moment after a restart, never faster). Database-scope
// limiters keep their own state and need no journal.
//
// Thread-safety: all members are safe to call concurrently (one mutex).
#pragma once

#include <algorithm>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "limit/database_limiter.hpp"
#include "limit/limiter.hpp"
#include "limit/time_queue.hpp"

namespace ratchet::limit {

// A random name for one journal's leases, apart from other processes'.
std::string journal_instance_name();

class StartJournal final : public Limiter {
 public:
  struct Options {
    std::int64_t keep_us = 0;         // the longest window of the owner's limits
    std::int64_t lease_us = 500'000;  // longest a start may stay unsaved
    std::int64_t lease_calls = 1;     // most starts unsaved at once

    // For limits whose longest window is keep_us and whose tightest allows
    // `rate` calls in `per_us`: a save at least every quarter of that
    // limit's calls, and every half second (what a crash may leave unsaved,
    // the next process waits out).
    static Options for_limits(std::int64_t keep_us, std::int64_t rate, std::int64_t per_us) {
      Options o;
      o.keep_us = keep_us;
      o.lease_calls = std::clamp<std::int64_t>(rate / 4, 1, 64);
      o.lease_us = std::min<std::int64_t>(500'000, per_us);
      return o;
    }
  };

  // Reads what earlier processes saved for `owner` as of now_us when
  // `connect` is given; without it nothing is saved or read (a reload still
  // hands the history on). Fails with kDatabase when the tables cannot be read.
  [[nodiscard]] static Result<std::shared_ptr<StartJournal>> open(std::string owner, Options options,
                                                                  const ConnectionFactory& connect,
                                                                  std::int64_t now_us);
  ~StartJournal() override;  // saves (see save())

  StartJournal(const StartJournal&) = delete;
  StartJournal& operator=(const StartJournal&) = delete;

  // The starts counted within keep_us before now_us, sorted by time: this
  // process's, those saved by earlier ones, and the unsaved calls of a
  // lease left open (one entry at its end).
  std::vector<Start> history(std::int64_t now_us);

  // The owner's limits changed (a reload): the new options apply from now.
  void set_options(Options options);

  // Saves the starts not yet saved and ends the lease.
  [[nodiscard]] Status save();

  [[nodiscard]] Result<UseResult> start(Slot& slot, std::int64_t now_us) override;
  [[nodiscard]] Status cancel(const Slot& slot) override;
  [[nodiscard]] Status defer(Slot& slot, std::int64_t now_us, std::int64_t to_us) override;
  [[nodiscard]] Status adjust(Slot& slot, std::int64_t units, std::int64_t now_us) override;
  std::string describe() const override;

 protected:
  [[nodiscard]] Result<std::int64_t> earliest_units(std::int64_t now_us, std::int64_t t_us,
                                                    std::int64_t units) override;
  [[nodiscard]] Result<Slot> reserve_units(std::int64_t now_us, std::int64_t t_us,
                                           std::int64_t units) override;

 private:
  // Records a start of `units` at `at`, saved with a lease when the open
  // one does not cover them. Needs mu_.
  [[nodiscard]] Status record_locked(std::int64_t at, std::int64_t units);
  // Takes back `units` counted at `at`, from memory and from what is not
  // saved yet. Needs mu_.
  void forget_locked(std::int64_t at, std::int64_t units);
  StartJournal(std::string owner, Options options, std::unique_ptr<store::LimiterTables> db);
  [[nodiscard]] Status load(std::int64_t now_us);                    // needs mu_ (or no sharing yet)
  [[nodiscard]] Status write(std::int64_t now_us, bool take_lease);  // needs mu_
  void prune(std::int64_t now_us);                                   // needs mu_

  const std::string owner_;
  std::string instance_;  // this journal's lease, apart from other processes'
  std::unique_ptr<store::LimiterTables> db_;
  mutable std::mutex mu_;
  Options options_;
  TimeQueue<Start> recent_;  // starts within keep_us, sorted by time
  std::vector<Start> unsaved_;
  std::int64_t not_before_ = 0;  // the end of a lease an earlier process left open
  std::int64_t lease_until_ = 0;
  std::int64_t lease_left_ = 0;
  bool lease_open_ = false;
};

}  // namespace ratchet::limit
