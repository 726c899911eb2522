#include "store/sqlite/sqlite_limiter_tables.hpp"

#include <cerrno>

#include <SQLiteCpp/SQLiteCpp.h>

#include <unordered_map>

#include "store/sqlite/opened_file.hpp"
#include "store/sqlite/statement_use.hpp"

namespace ratchet::store {
namespace {

class SqliteLimiterTables final : public LimiterTables {
 public:
  SqliteLimiterTables(std::unique_ptr<SQLite::Database> db, const std::filesystem::path& path)
      : db_(std::move(db)), opened_(path) {}
  ~SqliteLimiterTables() override { cache_.clear(); }  // statements before their connection

  // The lock is the database's one write lock, so `key` needs no lock of its own.
  Status transact(const std::string&, std::string_view doing, const std::function<void()>& body) override {
    // A file replaced under the process would keep the limits' history
    // where the next process does not read it: it would exceed them.
    if (auto gone = opened_.replaced()) return fail(gone->with_context("cannot " + std::string(doing)));
    try {
      SQLite::Transaction tx(*db_, SQLite::TransactionBehavior::IMMEDIATE);
      body();
      tx.commit();
      return {};
    } catch (const SQLite::Exception& e) {
      return fail(
          Error::database("cannot " + std::string(doing) + " in " + db_->getFilename() + ": " + e.what() +
                          " (is the database migrated and not locked for longer than the busy timeout?)"));
    }
  }

  std::string location() const override { return db_->getFilename(); }

  std::optional<std::int64_t> high_water(const std::string& key) override {
    Use q(stmt("SELECT updated_us FROM limiter_state WHERE key = ?"));
    q->bind(1, key);
    if (!q->executeStep()) return std::nullopt;
    return q->getColumn(0).getInt64();
  }

  void create_state(const std::string& key, std::int64_t high_water) override {
    Use q(stmt("INSERT INTO limiter_state(key, updated_us) VALUES(?, ?)"));
    q->bind(1, key);
    q->bind(2, high_water);
    q->exec();
  }

  bool raise_high_water(const std::string& key, std::int64_t to) override {
    Use q(stmt("UPDATE limiter_state SET updated_us = ? WHERE key = ? AND updated_us < ?"));
    q->bind(1, to);
    q->bind(2, key);
    q->bind(3, to);
    return q->exec() > 0;
  }

  std::optional<std::int64_t> tat(const std::string& key) override {
    return nullable(stmt("SELECT tat_us FROM limiter_state WHERE key = ?"), key);
  }
  void set_tat(const std::string& key, std::int64_t tat) override {
    set(stmt("UPDATE limiter_state SET tat_us = ? WHERE key = ?"), key, tat);
  }
  std::optional<std::int64_t> started_tat(const std::string& key) override {
    return nullable(stmt("SELECT started_tat_us FROM limiter_state WHERE key = ?"), key);
  }
  void set_started_tat(const std::string& key, std::int64_t tat) override {
    set(stmt("UPDATE limiter_state SET started_tat_us = ? WHERE key = ?"), key, tat);
  }

  void prune(LimiterLog log, const std::string& key, std::int64_t before) override {
    Use q(stmt(log, "DELETE FROM limiter_calls WHERE key = ? AND at_us < ?",
               "DELETE FROM limiter_starts WHERE key = ? AND at_us < ?"));
    q->bind(1, key);
    q->bind(2, before);
    q->exec();
  }

  std::vector<std::int64_t> entries_after(LimiterLog log, const std::string& key,
                                          std::int64_t after) override {
    Use q(stmt(log, "SELECT at_us FROM limiter_calls WHERE key = ? AND at_us > ? ORDER BY at_us",
               "SELECT at_us FROM limiter_starts WHERE key = ? AND at_us > ? ORDER BY at_us"));
    q->bind(1, key);
    q->bind(2, after);
    std::vector<std::int64_t> out;
    while (q->executeStep()) out.push_back(q->getColumn(0).getInt64());
    return out;
  }

  std::int64_t count_between(LimiterLog log, const std::string& key, std::int64_t after, std::int64_t before,
                             std::int64_t cap) override {
    Use q(stmt(log,
               "SELECT COUNT(*) FROM (SELECT 1 FROM limiter_calls WHERE key = ? AND at_us > ? AND at_us < ? "
               "LIMIT ?)",
               "SELECT COUNT(*) FROM (SELECT 1 FROM limiter_starts WHERE key = ? AND at_us > ? AND at_us < ? "
               "LIMIT ?)"));
    q->bind(1, key);
    q->bind(2, after);
    q->bind(3, before);
    q->bind(4, cap);
    q->executeStep();
    return q->getColumn(0).getInt64();
  }

  std::int64_t count_in(LimiterLog log, const std::string& key, std::int64_t from, std::int64_t to) override {
    Use q(stmt(log, "SELECT COUNT(*) FROM limiter_calls WHERE key = ? AND at_us >= ? AND at_us < ?",
               "SELECT COUNT(*) FROM limiter_starts WHERE key = ? AND at_us >= ? AND at_us < ?"));
    q->bind(1, key);
    q->bind(2, from);
    q->bind(3, to);
    q->executeStep();
    return q->getColumn(0).getInt64();
  }

  void add(LimiterLog log, const std::string& key, std::int64_t at) override {
    Use q(stmt(log, "INSERT INTO limiter_calls(key, at_us) VALUES(?, ?)",
               "INSERT INTO limiter_starts(key, at_us) VALUES(?, ?)"));
    q->bind(1, key);
    q->bind(2, at);
    q->exec();
  }

  void remove_one(LimiterLog log, const std::string& key, std::int64_t at) override {
    Use q(
        stmt(log,
             "DELETE FROM limiter_calls WHERE rowid IN (SELECT rowid FROM limiter_calls WHERE key = ? AND "
             "at_us = ? LIMIT 1)",
             "DELETE FROM limiter_starts WHERE rowid IN (SELECT rowid FROM limiter_starts WHERE key = ? AND "
             "at_us = ? LIMIT 1)"));
    q->bind(1, key);
    q->bind(2, at);
    q->exec();
  }

  bool move_one(LimiterLog log, const std::string& key, std::int64_t from, std::int64_t to) override {
    Use q(stmt(
        log,
        "UPDATE limiter_calls SET at_us = ? WHERE rowid IN (SELECT rowid FROM limiter_calls WHERE key = ? "
        "AND at_us = ? LIMIT 1)",
        "UPDATE limiter_starts SET at_us = ? WHERE rowid IN (SELECT rowid FROM limiter_starts WHERE key = "
        "? AND at_us = ? LIMIT 1)"));
    q->bind(1, to);
    q->bind(2, key);
    q->bind(3, from);
    return q->exec() > 0;
  }

  void journal_prune(const std::string& owner, std::int64_t until) override {
    Use q(stmt("DELETE FROM limiter_journal WHERE owner = ? AND at_us <= ?"));
    q->bind(1, owner);
    q->bind(2, until);
    q->exec();
  }

  std::vector<std::pair<std::int64_t, std::int64_t>> journal_starts(const std::string& owner) override {
    Use q(stmt("SELECT at_us, units FROM limiter_journal WHERE owner = ? ORDER BY at_us"));
    q->bind(1, owner);
    std::vector<std::pair<std::int64_t, std::int64_t>> out;
    while (q->executeStep()) out.emplace_back(q->getColumn(0).getInt64(), q->getColumn(1).getInt64());
    return out;
  }

  std::vector<std::string> keys_idle_since(const std::string& prefix, std::int64_t before,
                                           std::int64_t most) override {
    // A range over the key's index: the keys that start with `prefix` sort
    // from it to just before `prefix` with its last byte raised.
    std::string past = prefix;
    while (!past.empty() && static_cast<unsigned char>(past.back()) == 0xFF) past.pop_back();
    if (!past.empty()) past.back() = static_cast<char>(static_cast<unsigned char>(past.back()) + 1);
    Use q(stmt(past.empty()
                   ? "SELECT key FROM limiter_state WHERE key >= ?1 AND substr(key, 1, length(?1)) = ?1 "
                     "AND updated_us < ?3 LIMIT ?4"
                   : "SELECT key FROM limiter_state WHERE key >= ?1 AND key < ?2 AND updated_us < ?3 "
                     "LIMIT ?4"));
    q->bind(1, prefix);
    if (!past.empty()) q->bind(2, past);
    q->bind(3, before);
    q->bind(4, most);
    std::vector<std::string> out;
    while (q->executeStep()) out.push_back(q->getColumn(0).getString());
    return out;
  }

  bool forget_key(const std::string& key, std::int64_t before) override {
    {
      Use q(stmt("SELECT updated_us, tat_us, started_tat_us FROM limiter_state WHERE key = ?"));
      q->bind(1, key);
      if (!q->executeStep()) return false;
      for (int c = 0; c < 3; ++c) {
        if (!q->getColumn(c).isNull() && q->getColumn(c).getInt64() >= before) return false;
      }
    }
    for (const LimiterLog log : {LimiterLog::kCalls, LimiterLog::kStarts}) {
      Use q(stmt(log, "SELECT 1 FROM limiter_calls WHERE key = ? AND at_us >= ? LIMIT 1",
                 "SELECT 1 FROM limiter_starts WHERE key = ? AND at_us >= ? LIMIT 1"));
      q->bind(1, key);
      q->bind(2, before);
      if (q->executeStep()) return false;
    }
    for (const char* sql :
         {"DELETE FROM limiter_calls WHERE key = ?", "DELETE FROM limiter_starts WHERE key = ?",
          "DELETE FROM limiter_state WHERE key = ?"}) {
      Use q(stmt(sql));
      q->bind(1, key);
      q->exec();
    }
    return true;
  }

  void journal_prune_prefix(const std::string& prefix, std::int64_t until) override {
    // substr, not LIKE: a key may hold '%' and '_'.
    Use q(stmt("DELETE FROM limiter_journal WHERE substr(owner, 1, length(?1)) = ?1 AND at_us <= ?2"));
    q->bind(1, prefix);
    q->bind(2, until);
    q->exec();
  }

  void journal_add(const std::string& owner, std::int64_t at, std::int64_t units) override {
    Use q(stmt("INSERT INTO limiter_journal(owner, at_us, units) VALUES(?, ?, ?)"));
    q->bind(1, owner);
    q->bind(2, at);
    q->bind(3, units);
    q->exec();
  }

  std::vector<std::pair<std::int64_t, std::int64_t>> journal_leases(const std::string& owner,
                                                                    std::int64_t after) override {
    Use q(stmt("SELECT until_us, calls FROM limiter_leases WHERE owner = ? AND until_us > ?"));
    q->bind(1, owner);
    q->bind(2, after);
    std::vector<std::pair<std::int64_t, std::int64_t>> out;
    while (q->executeStep()) out.emplace_back(q->getColumn(0).getInt64(), q->getColumn(1).getInt64());
    return out;
  }

  void journal_drop_leases(const std::string& owner, std::int64_t until) override {
    Use q(stmt("DELETE FROM limiter_leases WHERE owner = ? AND until_us <= ?"));
    q->bind(1, owner);
    q->bind(2, until);
    q->exec();
  }

  void journal_take_lease(const std::string& owner, const std::string& instance, std::int64_t until,
                          std::int64_t calls) override {
    Use q(stmt(
        "INSERT INTO limiter_leases(owner, instance, until_us, calls) VALUES(?, ?, ?, ?) "
        "ON CONFLICT(owner, instance) DO UPDATE SET until_us = excluded.until_us, calls = excluded.calls"));
    q->bind(1, owner);
    q->bind(2, instance);
    q->bind(3, until);
    q->bind(4, calls);
    q->exec();
  }

  void journal_end_lease(const std::string& owner, const std::string& instance) override {
    Use q(stmt("DELETE FROM limiter_leases WHERE owner = ? AND instance = ?"));
    q->bind(1, owner);
    q->bind(2, instance);
    q->exec();
  }

  std::vector<TurnRow> turn_rows(const std::string& name) override {
    Use q(stmt("SELECT owner, pass, weight, until_us FROM limiter_turns WHERE name = ?"));
    q->bind(1, name);
    std::vector<TurnRow> out;
    while (q->executeStep()) {
      out.push_back({q->getColumn(0).getString(), q->getColumn(1).getDouble(), q->getColumn(2).getDouble(),
                     q->getColumn(3).getInt64()});
    }
    return out;
  }

  void put_turn_row(const std::string& name, const TurnRow& row) override {
    Use q(stmt(
        "INSERT OR REPLACE INTO limiter_turns(name, owner, pass, weight, until_us) VALUES(?, ?, ?, ?, ?)"));
    q->bind(1, name);
    q->bind(2, row.owner);
    q->bind(3, row.pass);
    q->bind(4, row.weight);
    q->bind(5, row.until);
    q->exec();
  }

  void prune_turn_rows(const std::string& name, std::int64_t before) override {
    Use q(stmt("DELETE FROM limiter_turns WHERE name = ? AND until_us < ?"));
    q->bind(1, name);
    q->bind(2, before);
    q->exec();
  }

  std::string meta_value(const std::string& name, const std::string& value) override {
    {
      Use q(stmt("INSERT OR IGNORE INTO database_meta (name, value) VALUES (?, ?)"));
      q->bind(1, name);
      q->bind(2, value);
      q->exec();
    }
    Use q(stmt("SELECT value FROM database_meta WHERE name = ?"));
    q->bind(1, name);
    if (!q->executeStep()) return value;
    return q->getColumn(0).getString();
  }

 private:
  SQLite::Statement& stmt(const char* sql) {
    auto it = cache_.find(sql);
    if (it == cache_.end()) it = cache_.emplace(sql, std::make_unique<SQLite::Statement>(*db_, sql)).first;
    return *it->second;
  }
  SQLite::Statement& stmt(LimiterLog log, const char* calls, const char* starts) {
    return stmt(log == LimiterLog::kCalls ? calls : starts);
  }

  std::optional<std::int64_t> nullable(SQLite::Statement& s, const std::string& key) {
    Use q(s);
    q->bind(1, key);
    if (!q->executeStep() || q->getColumn(0).isNull()) return std::nullopt;
    return q->getColumn(0).getInt64();
  }
  void set(SQLite::Statement& s, const std::string& key, std::int64_t value) {
    Use q(s);
    q->bind(1, value);
    q->bind(2, key);
    q->exec();
  }

  std::unique_ptr<SQLite::Database> db_;
  std::unordered_map<std::string, std::unique_ptr<SQLite::Statement>> cache_;
  OpenedFile opened_;
};

// The message of an exception thrown when the process may be out of file
// descriptors. UndefinedBehaviorSanitizer checks a member call's dynamic
// type by reading the object through a pipe, which such a process cannot
// make: it would report the exception as no object at all.
__attribute__((no_sanitize("vptr"))) std::string message_of(const SQLite::Exception& e) { return e.what(); }

}  // namespace

LimiterTablesFactory sqlite_limiter_tables(std::filesystem::path path,
                                           std::chrono::milliseconds busy_timeout) {
  return [path = std::move(path), busy_timeout]() -> Result<std::unique_ptr<LimiterTables>> {
    try {
      auto db = std::make_unique<SQLite::Database>(path.string(), SQLite::OPEN_READWRITE,
                                                   static_cast<int>(busy_timeout.count()));
      db->exec("PRAGMA synchronous=NORMAL");
      return std::make_unique<SqliteLimiterTables>(std::move(db), path);
    } catch (const SQLite::Exception& e) {
      // SQLite says "unable to open database file" whatever the cause; the
      // open(2) it failed in left errno, which tells a process out of file
      // descriptors from a path or permission problem.
      const int cause = errno;
      const char* hint = cause == EMFILE || cause == ENFILE
                             ? " (too many open files: raise the limit, e.g. ulimit -n, or run fewer workers)"
                             : " (check the [engine] database path and its permissions)";
      return fail(
          Error::database("cannot open the limiter database " + path.string() + ": " + message_of(e) + hint));
    }
  };
}

}  // namespace ratchet::store
