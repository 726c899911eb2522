// The recent call starts of the process-scope keyed limits of one owner (a
// plugin, or one of its operations) over one key template, per key, kept so
// that each key's window holds across a reload and a restart as an unkeyed
// limit's does (limit/start_journal.hpp; docs/semantics.md point 7): the
// server keeps counting a key's calls made before either.
//
// One journal per key template, not per limit: it is named by the owner and
// the template alone ("<owner>/key=<template>"), so a restart or a reload
// that changes a limit's rate, window or algorithm finds the calls the old
// limit made. Every call starts under each keyed limit of its template, so
// the journal takes its starts from one of them (the recorder, see
// records_from()) and records each call once: two limits over one key (10 a
// second and 1,000 an hour per account) count a call once each, not twice.
//
// Each key's starts are saved under an owner of their own
// ("<journal>#<key>"), so a key's limiter made later reads only its own.
// Saving follows the start journal's lease, taken for the whole journal
// rather than per key: a start that finds no lease left saves every key's
// unsaved starts at once and takes a lease on the next `lease_calls` starts
// (of any key) within `lease_us`. A process that died with a lease open may
// have spent all of its calls on any one key, so the next process counts
// that many starts at the lease's end in every key, and starts no call of
// the template's limits before that end: slower for a moment after a crash,
// never faster.
//
// The journal reads the database only while what earlier processes saved
// can still count (its first window), and for one window after a reload
// made a limit anew (recount()): otherwise a new key's limiter starts empty
// without a query, and idle keys are dropped as before
// (limit/keyed_limiters.hpp). Rows of keys not seen again are pruned by
// prefix as the journal saves.
//
// Each key's limiter is wrapped by journaled(): the wrapper passes every
// decision to the key's own limiter and records its starts here.
//
// Thread-safety: every method may be called from any thread (one mutex,
// then the shared connection's).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "limit/database_limiter.hpp"
#include "limit/limiter.hpp"
#include "limit/start_journal.hpp"

namespace ratchet::limit {

class KeyedJournal : public std::enable_shared_from_this<KeyedJournal> {
 public:
  using Options = StartJournal::Options;

  // Reads the leases earlier processes left on `owner` (the journal's name,
  // keyed_journal_owner()) as of now_us. Fails with kDatabase when the
  // tables cannot be read.
  [[nodiscard]] static Result<std::shared_ptr<KeyedJournal>> open(std::string owner, Options options,
                                                                  std::shared_ptr<SharedLimiterTables> tables,
                                                                  std::int64_t now_us);
  ~KeyedJournal();  // saves (see save())

  KeyedJournal(const KeyedJournal&) = delete;
  KeyedJournal& operator=(const KeyedJournal&) = delete;

  // The starts of `key` within keep_us before now_us that a limiter made for
  // the key now must count as its own past, sorted: those earlier processes
  // saved, with the unsaved calls of a lease they left open, during the
  // first window; and, during a recount, those of this process as well.
  [[nodiscard]] Result<std::vector<Start>> history(const std::string& key, std::int64_t now_us);

  // A limit over this journal's template was made anew (a reload changed
  // its rate, window or algorithm, or added it): for one window from
  // now_us, history() holds this process's starts of a key too, so that no
  // key's window at the server takes the calls made before the reload and
  // the new limit's whole budget on top.
  void recount(std::int64_t now_us);

  // The reload's options (the longest window of the template's limits now).
  void set_options(Options options);

  // A name for one more limit over this template, for journaled(). The
  // first one named records until records_from() names another.
  std::uint64_t enlist();
  // The starts recorded from now on are those of the limit named `limit`
  // (the others' wrappers only read): each call is recorded once.
  void records_from(std::uint64_t limit);

  // `inner`, the key's limiter under the limit named `limit`, with its
  // starts recorded here while that limit is the recorder.
  std::shared_ptr<Limiter> journaled(std::string key, std::uint64_t limit, std::shared_ptr<Limiter> inner);

  // Saves the starts not yet saved and ends the lease.
  [[nodiscard]] Status save();

  // The end of a lease an earlier process left open: no call starts before it.
  std::int64_t not_before() const { return not_before_; }

  // For the wrapper of the limit named `limit` (nothing unless it is the
  // recorder): `units` starts of `key` at `at`, saved with a lease when the
  // open one does not cover them; and starts given back (a start already
  // saved stays counted: slower, never faster).
  [[nodiscard]] Status record(std::uint64_t limit, const std::string& key, std::int64_t at,
                              std::int64_t units);
  void forget(std::uint64_t limit, const std::string& key, std::int64_t at, std::int64_t units);

 private:
  KeyedJournal(std::string owner, Options options, std::shared_ptr<SharedLimiterTables> tables);
  [[nodiscard]] Status load(std::int64_t now_us);
  [[nodiscard]] Status write(std::int64_t now_us, bool take_lease);  // needs mu_
  // Appends the starts of `key` saved in the database after `since`.
  [[nodiscard]] Status add_saved(const std::string& key, std::int64_t since, std::vector<Start>& out);
  std::string owner_of(const std::string& key) const { return owner_ + "#" + key; }

  const std::string owner_;
  const std::string instance_;
  const std::shared_ptr<SharedLimiterTables> tables_;
  std::mutex mu_;
  Options options_;
  struct KeyStart {
    std::string key;
    std::int64_t at_us = 0;
    std::int64_t units = 0;
  };
  std::vector<KeyStart> unsaved_;  // one per call (or overdraft), in the order recorded
  std::int64_t opened_us_ = 0;
  std::int64_t not_before_ = 0;  // set once, by load()
  std::int64_t left_open_ = 0;   // calls of the leases left open, counted at not_before_
  std::int64_t next_prune_us_ = 0;
  std::int64_t lease_until_ = 0;
  std::int64_t lease_left_ = 0;
  bool lease_open_ = false;
  std::int64_t recount_until_us_ = 0;  // see recount()
  std::uint64_t enlisted_ = 0;
  std::uint64_t recorder_ = 0;
};

// The name of the journal of `owner`'s keyed limits over `key_template`.
std::string keyed_journal_owner(const std::string& owner, const std::string& key_template);

}  // namespace ratchet::limit
