// The recent call starts of a process-scope keyed limit, per key, kept so
// that each key's window holds across a restart as an unkeyed limit's does
// (limit/start_journal.hpp; docs/semantics.md point 7): the server keeps
// counting a key's calls made before the restart.
//
// One journal per keyed limit, on the one connection its keys share. Each
// key's starts are saved under an owner of their own ("<limit>#<key>"), so
// a key's limiter made later reads only its own. Saving follows the start
// journal's lease, taken for the whole limit rather than per key: a start
// that finds no lease left saves every key's unsaved starts at once and
// takes a lease on the next `lease_calls` starts (of any key) within
// `lease_us`. A process that died with a lease open may have spent all of
// its calls on any one key, so the next process counts that many starts at
// the lease's end in every key, and starts no call of the limit before that
// end: slower for a moment after a crash, never faster.
//
// The journal reads the database only while what earlier processes saved
// can still count (its first window): after that a new key's limiter starts
// empty without a query, and idle keys are dropped as before
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

  // Reads the leases earlier processes left on `owner` (the keyed limit's
  // name) as of now_us. Fails with kDatabase when the tables cannot be read.
  [[nodiscard]] static Result<std::shared_ptr<KeyedJournal>> open(std::string owner, Options options,
                                                                  std::shared_ptr<SharedLimiterTables> tables,
                                                                  std::int64_t now_us);
  ~KeyedJournal();  // saves (see save())

  KeyedJournal(const KeyedJournal&) = delete;
  KeyedJournal& operator=(const KeyedJournal&) = delete;

  // The starts of `key` that earlier processes saved within keep_us before
  // now_us, with the unsaved calls of a lease they left open, sorted: what a
  // limiter made for the key now must count as its own past.
  [[nodiscard]] Result<std::vector<std::int64_t>> history(const std::string& key, std::int64_t now_us);

  // This journal's limit replaces the one `before` journals (a reload
  // changed its rate, window or algorithm, over the same key): until
  // `until_us`, one of that limit's windows on, history() and recent() hold
  // what `before` recorded of a key as well, and what it took over in turn.
  void replaces(std::shared_ptr<KeyedJournal> before, std::int64_t until_us);

  // The starts of `key` recorded here within keep_us before now_us, saved
  // or not yet, with those of the journals this one replaces, sorted: for
  // the limit that replaces this one.
  [[nodiscard]] Result<std::vector<std::int64_t>> recent(const std::string& key, std::int64_t now_us);

  // How long a start counts here: the longest window of the limit.
  std::int64_t keep_us() const { return options_.keep_us; }

  // `inner`, the key's limiter, with its starts recorded here.
  std::shared_ptr<Limiter> journaled(std::string key, std::shared_ptr<Limiter> inner);

  // Saves the starts not yet saved and ends the lease.
  [[nodiscard]] Status save();

  // The end of a lease an earlier process left open: no call starts before it.
  std::int64_t not_before() const { return not_before_; }

  // For the wrapper: `units` starts of `key` at `at`, saved with a lease
  // when the open one does not cover them; and starts given back (a start
  // already saved stays counted: slower, never faster).
  [[nodiscard]] Status record(const std::string& key, std::int64_t at, std::int64_t units);
  void forget(const std::string& key, std::int64_t at, std::int64_t units);

 private:
  KeyedJournal(std::string owner, Options options, std::shared_ptr<SharedLimiterTables> tables);
  [[nodiscard]] Status load(std::int64_t now_us);
  [[nodiscard]] Status write(std::int64_t now_us, bool take_lease);  // needs mu_
  // The journal replaced, while what it recorded still counts (else null).
  std::shared_ptr<KeyedJournal> replaced(std::int64_t now_us);
  // Appends the starts of `key` saved in the database after `since`.
  [[nodiscard]] Status add_saved(const std::string& key, std::int64_t since, std::vector<std::int64_t>& out);
  // Appends what the replaced journals recorded of `key`, and sorts.
  [[nodiscard]] Status add_replaced(const std::string& key, std::int64_t now_us,
                                    std::vector<std::int64_t>& out);
  std::string owner_of(const std::string& key) const { return owner_ + "#" + key; }

  const std::string owner_;
  const std::string instance_;
  const std::shared_ptr<SharedLimiterTables> tables_;
  std::mutex mu_;
  Options options_;
  std::vector<std::pair<std::string, std::int64_t>> unsaved_;  // (key, at), one per unit
  std::int64_t opened_us_ = 0;
  std::int64_t not_before_ = 0;  // set once, by load()
  std::int64_t left_open_ = 0;   // calls of the leases left open, counted at not_before_
  std::int64_t next_prune_us_ = 0;
  std::int64_t lease_until_ = 0;
  std::int64_t lease_left_ = 0;
  bool lease_open_ = false;
  std::shared_ptr<KeyedJournal> replaced_;  // see replaces()
  std::int64_t replaced_until_ = 0;
};

}  // namespace ratchet::limit
