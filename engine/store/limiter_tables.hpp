// The state of database-scope limiters and the journal of process-scope
// limiters' starts, as a backend keeps it. The limiter algorithms
// (limit/database_limiter.cpp, limit/start_journal.cpp) are written once
// over this interface; each backend stores their rows.
//
// Every decision runs inside transact(key, ...): one transaction that no
// other decision on the same key, from any connection, process or host,
// interleaves with (SQLite: BEGIN IMMEDIATE, the database's one write lock;
// a server database: the key's row locked for the transaction). So a budget
// is never spent twice, however many workers contend for it.
//
// Tables, per key:
//   state      the token bucket's TAT of the slots granted and of the calls
//              started, and the latest `now` seen (the high-water mark that
//              makes pruning safe across processes)
//   calls      the log of every slot granted (future rows are reservations)
//   starts     the log of the calls started (sliding windows)
// and, per owner of process-scope limits, the journal of starts and the
// leases on starts not yet saved (limit/start_journal.hpp says why); and,
// per name, the turns that processes sharing a limit take
// (limit/turn_shares.hpp).
//
// The methods other than transact() may only be called inside its body, on
// the thread running it; a backend's failure propagates out of them as an
// exception that transact() turns into an Error.
//
// Thread-safety: one thread at a time per LimiterTables (a limiter holds a
// mutex around its own).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ratchet/status.hpp"

namespace ratchet::store {

enum class LimiterLog { kCalls, kStarts };

class LimiterTables {
 public:
  virtual ~LimiterTables() = default;

  // Runs body in one transaction serialised with every other on `key`. A
  // failure is an Error that names `doing`, where the database is and what to do.
  [[nodiscard]] virtual Status transact(const std::string& key, std::string_view doing,
                                        const std::function<void()>& body) = 0;
  // Where the tables are, for messages (a path, or a URL without its password).
  virtual std::string location() const = 0;

  // The key's state row.
  virtual std::optional<std::int64_t> high_water(const std::string& key) = 0;  // nullopt: no row yet
  virtual void create_state(const std::string& key, std::int64_t high_water) = 0;
  // Raises the mark to `to` when it is lower; whether it did.
  virtual bool raise_high_water(const std::string& key, std::int64_t to) = 0;
  virtual std::optional<std::int64_t> tat(const std::string& key) = 0;  // nullopt: idle
  virtual void set_tat(const std::string& key, std::int64_t tat) = 0;
  virtual std::optional<std::int64_t> started_tat(const std::string& key) = 0;
  virtual void set_started_tat(const std::string& key, std::int64_t tat) = 0;

  // The logs.
  virtual void prune(LimiterLog log, const std::string& key, std::int64_t before) = 0;  // at < before
  virtual std::vector<std::int64_t> entries_after(LimiterLog log, const std::string& key,
                                                  std::int64_t after) = 0;  // sorted
  // Entries in (after, before), counted up to `cap`.
  virtual std::int64_t count_between(LimiterLog log, const std::string& key, std::int64_t after,
                                     std::int64_t before, std::int64_t cap) = 0;
  // Entries in [from, to).
  virtual std::int64_t count_in(LimiterLog log, const std::string& key, std::int64_t from,
                                std::int64_t to) = 0;
  virtual void add(LimiterLog log, const std::string& key, std::int64_t at) = 0;
  virtual void remove_one(LimiterLog log, const std::string& key, std::int64_t at) = 0;
  // Moves one entry at `from` to `to`; false when there was none.
  virtual bool move_one(LimiterLog log, const std::string& key, std::int64_t from, std::int64_t to) = 0;

  // The keys under `prefix` (a keyed limit's, "imdb/keyed#") whose
  // high-water mark is before `before`, at most `most` of them: keys that
  // may hold nothing still counting (forget_key decides).
  virtual std::vector<std::string> keys_idle_since(const std::string& prefix, std::int64_t before,
                                                   std::int64_t most) = 0;
  // Removes every row of `key` when none holds a time at or after `before`
  // (its mark, its TATs, its logs' entries: a slot reserved for later keeps
  // it); whether it did. A key without rows counts as new: the same state.
  virtual bool forget_key(const std::string& key, std::int64_t before) = 0;

  // The journal of process-scope starts, per owner: one row per call, with
  // the units it cost (a call of 10,000 units is one row, not 10,000).
  virtual void journal_prune(const std::string& owner, std::int64_t until) = 0;  // at <= until
  // (at, units), sorted by at.
  virtual std::vector<std::pair<std::int64_t, std::int64_t>> journal_starts(const std::string& owner) = 0;
  virtual void journal_add(const std::string& owner, std::int64_t at, std::int64_t units) = 0;
  // journal_prune for every owner whose name starts with `prefix` (the keys
  // of a keyed limit, which each have an owner of their own).
  virtual void journal_prune_prefix(const std::string& prefix, std::int64_t until) = 0;
  // Open leases after `after`: (until, calls).
  virtual std::vector<std::pair<std::int64_t, std::int64_t>> journal_leases(const std::string& owner,
                                                                            std::int64_t after) = 0;
  virtual void journal_drop_leases(const std::string& owner, std::int64_t until) = 0;  // until_us <= until
  virtual void journal_take_lease(const std::string& owner, const std::string& instance, std::int64_t until,
                                  std::int64_t calls) = 0;
  virtual void journal_end_lease(const std::string& owner, const std::string& instance) = 0;

  // Turns shared between processes (limit/turn_shares.hpp): one row per
  // owner under `name`, with its pass, the weight of the keys it has
  // waiting, and until when the row counts.
  struct TurnRow {
    std::string owner;
    double pass = 0;
    double weight = 0;
    std::int64_t until = 0;
  };
  virtual std::vector<TurnRow> turn_rows(const std::string& name) = 0;
  virtual void put_turn_row(const std::string& name, const TurnRow& row) = 0;      // insert or replace
  virtual void prune_turn_rows(const std::string& name, std::int64_t before) = 0;  // until < before

  // Values kept once per database (the salt of keyed limits' hashes): the
  // value of `name`, written as `value` when it had none (the first writer wins).
  virtual std::string meta_value(const std::string& name, const std::string& value) = 0;
};

// Opens a new connection's LimiterTables; kDatabase when the database cannot be opened.
using LimiterTablesFactory = std::function<Result<std::unique_ptr<LimiterTables>>()>;

}  // namespace ratchet::store
