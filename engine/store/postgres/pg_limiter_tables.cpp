#include "store/postgres/pg_limiter_tables.hpp"

#include <array>
#include <charconv>
#include <chrono>
#include <optional>
#include <thread>

#include "store/postgres/session.hpp"
#include "store/postgres/url.hpp"

namespace ratchet::store::pg {
namespace {

// A double as text that reads back as the same double (parameters go as text).
Param exact(double v) {
  std::array<char, 32> buf{};
  const auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  (void)ec;  // 32 characters hold any double's shortest form
  return p(std::string(buf.data(), end));
}

const char* table_sql(LimiterLog log, const char* calls, const char* starts) {
  return log == LimiterLog::kCalls ? calls : starts;
}

class PgLimiterTables final : public LimiterTables {
 public:
  PgLimiterTables(Connection c, std::string where, std::chrono::milliseconds busy_timeout)
      : connection_(std::move(c)),
        session_(connection_),
        where_(std::move(where)),
        busy_timeout_(busy_timeout) {}

  Status transact(const std::string& key, std::string_view doing,
                  const std::function<void()>& body) override {
    // A server that restarts or fails over refuses connections for a moment:
    // the decision is run again, with backoff, for up to the busy timeout
    // (as the job store's reads are), rather than failing the call that
    // asked, and with it a job's attempt.
    std::optional<std::chrono::steady_clock::time_point> give_up;
    auto pause = std::chrono::milliseconds(10);
    for (;;) {
      std::optional<PgError> failed;
      if (connection_.is_broken()) {
        if (auto st = connection_.reset(); !st) failed = st.error();
      }
      if (!failed) {
        try {
          // The commit does not wait for the log's flush to disk: the key's
          // lock is held until the commit returns, so a flush slowed by other
          // writes (a busy disk) would slow every decision on the key, in every
          // process, and a call counted in a commit that returns late leaves
          // after its count. What a database server's crash can lose is the
          // last moments' decisions, as SQLite's synchronous=NORMAL on a power
          // loss; the server's own restart keeps them.
          session_.simple("BEGIN; SET LOCAL synchronous_commit TO off");
          session_.run("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", {p(key)});
          body();
          session_.simple("COMMIT");
          return {};
        } catch (const PgFailure& e) {
          (void)connection_.exec("ROLLBACK");
          failed = e.error();
        }
      }
      const bool transient = failed->needs_reconnect() || failed->transaction_retryable();
      const auto now = std::chrono::steady_clock::now();
      if (!give_up) give_up = now + busy_timeout_;
      if (!transient || now + pause > *give_up) return fail(error(doing, *failed));
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(250));
    }
  }

  std::string location() const override { return where_; }

  std::optional<std::int64_t> high_water(const std::string& key) override {
    Rows r = session_.run("SELECT updated_us FROM ratchet_limiter_state WHERE key = $1", {p(key)});
    if (r.size() == 0) return std::nullopt;
    return i64(r, 0, 0);
  }
  void create_state(const std::string& key, std::int64_t high_water) override {
    session_.run("INSERT INTO ratchet_limiter_state (key, updated_us) VALUES ($1, $2)",
                 {p(key), p(high_water)});
  }
  bool raise_high_water(const std::string& key, std::int64_t to) override {
    Rows r =
        session_.run("UPDATE ratchet_limiter_state SET updated_us = $1 WHERE key = $2 AND updated_us < $1",
                     {p(to), p(key)});
    return r.affected() > 0;
  }
  std::optional<std::int64_t> tat(const std::string& key) override {
    Rows r = session_.run("SELECT tat_us FROM ratchet_limiter_state WHERE key = $1", {p(key)});
    return r.size() == 0 ? std::nullopt : opt_i64(r, 0, 0);
  }
  void set_tat(const std::string& key, std::int64_t tat) override {
    session_.run("UPDATE ratchet_limiter_state SET tat_us = $1 WHERE key = $2", {p(tat), p(key)});
  }
  std::optional<std::int64_t> started_tat(const std::string& key) override {
    Rows r = session_.run("SELECT started_tat_us FROM ratchet_limiter_state WHERE key = $1", {p(key)});
    return r.size() == 0 ? std::nullopt : opt_i64(r, 0, 0);
  }
  void set_started_tat(const std::string& key, std::int64_t tat) override {
    session_.run("UPDATE ratchet_limiter_state SET started_tat_us = $1 WHERE key = $2", {p(tat), p(key)});
  }

  void prune(LimiterLog log, const std::string& key, std::int64_t before) override {
    session_.run(table_sql(log, "DELETE FROM ratchet_limiter_calls WHERE key = $1 AND at_us < $2",
                           "DELETE FROM ratchet_limiter_starts WHERE key = $1 AND at_us < $2"),
                 {p(key), p(before)});
  }
  std::vector<std::int64_t> entries_after(LimiterLog log, const std::string& key,
                                          std::int64_t after) override {
    Rows r = session_.run(
        table_sql(log, "SELECT at_us FROM ratchet_limiter_calls WHERE key = $1 AND at_us > $2 ORDER BY at_us",
                  "SELECT at_us FROM ratchet_limiter_starts WHERE key = $1 AND at_us > $2 ORDER BY at_us"),
        {p(key), p(after)});
    std::vector<std::int64_t> out;
    for (int i = 0; i < r.size(); ++i) out.push_back(i64(r, i, 0));
    return out;
  }
  std::int64_t count_between(LimiterLog log, const std::string& key, std::int64_t after, std::int64_t before,
                             std::int64_t cap) override {
    Rows r = session_.run(
        table_sql(log,
                  "SELECT COUNT(*) FROM (SELECT 1 FROM ratchet_limiter_calls WHERE key = $1 AND "
                  "at_us > $2 AND at_us < $3 LIMIT $4) AS c",
                  "SELECT COUNT(*) FROM (SELECT 1 FROM ratchet_limiter_starts WHERE key = $1 AND "
                  "at_us > $2 AND at_us < $3 LIMIT $4) AS c"),
        {p(key), p(after), p(before), p(cap)});
    return i64(r, 0, 0);
  }
  std::int64_t count_in(LimiterLog log, const std::string& key, std::int64_t from, std::int64_t to) override {
    Rows r = session_.run(
        table_sql(
            log, "SELECT COUNT(*) FROM ratchet_limiter_calls WHERE key = $1 AND at_us >= $2 AND at_us < $3",
            "SELECT COUNT(*) FROM ratchet_limiter_starts WHERE key = $1 AND at_us >= $2 AND at_us < $3"),
        {p(key), p(from), p(to)});
    return i64(r, 0, 0);
  }
  void add(LimiterLog log, const std::string& key, std::int64_t at) override {
    session_.run(table_sql(log, "INSERT INTO ratchet_limiter_calls (key, at_us) VALUES ($1, $2)",
                           "INSERT INTO ratchet_limiter_starts (key, at_us) VALUES ($1, $2)"),
                 {p(key), p(at)});
  }
  void remove_one(LimiterLog log, const std::string& key, std::int64_t at) override {
    session_.run(
        table_sql(log,
                  "DELETE FROM ratchet_limiter_calls WHERE seq = (SELECT seq FROM ratchet_limiter_calls "
                  "WHERE key = $1 AND at_us = $2 LIMIT 1)",
                  "DELETE FROM ratchet_limiter_starts WHERE seq = (SELECT seq FROM ratchet_limiter_starts "
                  "WHERE key = $1 AND at_us = $2 LIMIT 1)"),
        {p(key), p(at)});
  }
  bool move_one(LimiterLog log, const std::string& key, std::int64_t from, std::int64_t to) override {
    Rows r =
        session_.run(table_sql(log,
                               "UPDATE ratchet_limiter_calls SET at_us = $3 WHERE seq = (SELECT seq FROM "
                               "ratchet_limiter_calls WHERE key = $1 AND at_us = $2 LIMIT 1)",
                               "UPDATE ratchet_limiter_starts SET at_us = $3 WHERE seq = (SELECT seq FROM "
                               "ratchet_limiter_starts WHERE key = $1 AND at_us = $2 LIMIT 1)"),
                     {p(key), p(from), p(to)});
    return r.affected() > 0;
  }

  void journal_prune(const std::string& owner, std::int64_t until) override {
    session_.run("DELETE FROM ratchet_limiter_journal WHERE owner = $1 AND at_us <= $2",
                 {p(owner), p(until)});
  }
  std::vector<std::pair<std::int64_t, std::int64_t>> journal_starts(const std::string& owner) override {
    Rows r = session_.run("SELECT at_us, units FROM ratchet_limiter_journal WHERE owner = $1 ORDER BY at_us",
                          {p(owner)});
    std::vector<std::pair<std::int64_t, std::int64_t>> out;
    for (int i = 0; i < r.size(); ++i) out.emplace_back(i64(r, i, 0), i64(r, i, 1));
    return out;
  }
  std::vector<std::string> keys_idle_since(const std::string& prefix, std::int64_t before,
                                           std::int64_t most) override {
    Rows r = session_.run(
        "SELECT key FROM ratchet_limiter_state WHERE starts_with(key, $1) AND updated_us < $2 LIMIT $3",
        {p(prefix), p(before), p(most)});
    std::vector<std::string> out;
    for (int i = 0; i < r.size(); ++i) out.push_back(text(r, i, 0));
    return out;
  }

  bool forget_key(const std::string& key, std::int64_t before) override {
    // One statement: the state row goes only when it and the logs hold
    // nothing at or after `before`, and the logs' rows with it.
    Rows r = session_.run(
        "WITH gone AS (DELETE FROM ratchet_limiter_state WHERE key = $1 AND updated_us < $2 "
        "AND (tat_us IS NULL OR tat_us < $2) AND (started_tat_us IS NULL OR started_tat_us < $2) "
        "AND NOT EXISTS (SELECT 1 FROM ratchet_limiter_calls WHERE key = $1 AND at_us >= $2) "
        "AND NOT EXISTS (SELECT 1 FROM ratchet_limiter_starts WHERE key = $1 AND at_us >= $2) RETURNING "
        "key), "
        "calls AS (DELETE FROM ratchet_limiter_calls WHERE key IN (SELECT key FROM gone)), "
        "starts AS (DELETE FROM ratchet_limiter_starts WHERE key IN (SELECT key FROM gone)) "
        "SELECT COUNT(*) FROM gone",
        {p(key), p(before)});
    return i64(r, 0, 0) > 0;
  }

  void journal_prune_prefix(const std::string& prefix, std::int64_t until) override {
    // starts_with, not LIKE: a key may hold '%' and '_'.
    session_.run("DELETE FROM ratchet_limiter_journal WHERE starts_with(owner, $1) AND at_us <= $2",
                 {p(prefix), p(until)});
  }
  void journal_add(const std::string& owner, std::int64_t at, std::int64_t units) override {
    session_.run("INSERT INTO ratchet_limiter_journal (owner, at_us, units) VALUES ($1, $2, $3)",
                 {p(owner), p(at), p(units)});
  }
  std::vector<std::pair<std::int64_t, std::int64_t>> journal_leases(const std::string& owner,
                                                                    std::int64_t after) override {
    Rows r =
        session_.run("SELECT until_us, calls FROM ratchet_limiter_leases WHERE owner = $1 AND until_us > $2",
                     {p(owner), p(after)});
    std::vector<std::pair<std::int64_t, std::int64_t>> out;
    for (int i = 0; i < r.size(); ++i) out.emplace_back(i64(r, i, 0), i64(r, i, 1));
    return out;
  }
  void journal_drop_leases(const std::string& owner, std::int64_t until) override {
    session_.run("DELETE FROM ratchet_limiter_leases WHERE owner = $1 AND until_us <= $2",
                 {p(owner), p(until)});
  }
  void journal_take_lease(const std::string& owner, const std::string& instance, std::int64_t until,
                          std::int64_t calls) override {
    session_.run(
        "INSERT INTO ratchet_limiter_leases (owner, instance, until_us, calls) VALUES ($1, $2, $3, $4) "
        "ON CONFLICT (owner, instance) DO UPDATE SET until_us = excluded.until_us, calls = excluded.calls",
        {p(owner), p(instance), p(until), p(calls)});
  }
  void journal_end_lease(const std::string& owner, const std::string& instance) override {
    session_.run("DELETE FROM ratchet_limiter_leases WHERE owner = $1 AND instance = $2",
                 {p(owner), p(instance)});
  }

  std::vector<TurnRow> turn_rows(const std::string& name) override {
    Rows r = session_.run("SELECT owner, pass, weight, until_us FROM ratchet_limiter_turns WHERE name = $1",
                          {p(name)});
    std::vector<TurnRow> out;
    for (int i = 0; i < r.size(); ++i) {
      out.push_back({text(r, i, 0), std::stod(text(r, i, 1)), std::stod(text(r, i, 2)), i64(r, i, 3)});
    }
    return out;
  }
  void put_turn_row(const std::string& name, const TurnRow& row) override {
    session_.run(
        "INSERT INTO ratchet_limiter_turns (name, owner, pass, weight, until_us) VALUES ($1, $2, $3, $4, $5) "
        "ON CONFLICT (name, owner) DO UPDATE SET pass = excluded.pass, weight = excluded.weight, "
        "until_us = excluded.until_us",
        {p(name), p(row.owner), exact(row.pass), exact(row.weight), p(row.until)});
  }
  void prune_turn_rows(const std::string& name, std::int64_t before) override {
    session_.run("DELETE FROM ratchet_limiter_turns WHERE name = $1 AND until_us < $2", {p(name), p(before)});
  }

  std::string meta_value(const std::string& name, const std::string& value) override {
    session_.run(
        "INSERT INTO ratchet_database_meta (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
        {p(name), p(value)});
    Rows r = session_.run("SELECT value FROM ratchet_database_meta WHERE name = $1", {p(name)});
    return r.size() == 0 ? value : text(r, 0, 0);
  }

 private:
  Error error(std::string_view doing, const PgError& e) const {
    return Error::database("cannot " + std::string(doing) + ": " + e.error().message() +
                           " (is the database reachable and migrated?)");
  }

  Connection connection_;
  Session session_;
  std::string where_;
  std::chrono::milliseconds busy_timeout_;
};

}  // namespace

LimiterTablesFactory pg_limiter_tables(ConnectOptions options, std::chrono::milliseconds busy_timeout) {
  return [options = std::move(options), busy_timeout]() -> Result<std::unique_ptr<LimiterTables>> {
    auto c = connect(options);
    if (!c) return fail(c.error().error().with_context("limiter state"));
    return std::make_unique<PgLimiterTables>(std::move(*c), mask_url(options.url), busy_timeout);
  };
}

}  // namespace ratchet::store::pg
