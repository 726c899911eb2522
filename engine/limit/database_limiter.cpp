#include "limit/database_limiter.hpp"

#include <SQLiteCpp/SQLiteCpp.h>

#include <algorithm>
#include <vector>

#include "common/duration.hpp"
#include "limit/gcra_math.hpp"
#include "limit/limit_bounds.hpp"
#include "limit/micros.hpp"
#include "limit/sliding_log.hpp"

namespace ratchet::limit {

ConnectionFactory connect_to(std::filesystem::path path, std::chrono::milliseconds busy_timeout) {
  return [path = std::move(path), busy_timeout]() -> Result<std::unique_ptr<SQLite::Database>> {
    try {
      return std::make_unique<SQLite::Database>(path.string(), SQLite::OPEN_READWRITE,
                                                static_cast<int>(busy_timeout.count()));
    } catch (const SQLite::Exception& e) {
      return fail(Error::database("cannot open the limiter database " + path.string() + ": " + e.what() +
                                  " (check the [engine] database path and its permissions)"));
    }
  };
}

struct DatabaseLimiter::Impl {
  config::LimitAlgorithm algorithm;
  std::int64_t rate;
  std::int64_t per;
  std::int64_t burst;
  Gcra gcra;
  std::string key;
  std::unique_ptr<SQLite::Database> db;
  std::mutex mu;

  // Raises the shared high-water mark to now and prunes history that no
  // longer counts; returns the mark. Inside a transaction.
  std::int64_t advance(std::int64_t now) {
    SQLite::Statement read(*db, "SELECT updated_us FROM limiter_state WHERE key = ?");
    read.bind(1, key);
    std::int64_t hw = now;
    bool have_row = read.executeStep();
    if (have_row) hw = std::max(hw, read.getColumn(0).getInt64());
    if (!have_row) {
      SQLite::Statement ins(*db, "INSERT INTO limiter_state(key, updated_us) VALUES(?, ?)");
      ins.bind(1, key);
      ins.bind(2, hw);
      ins.exec();
    } else if (hw == now) {
      SQLite::Statement up(*db, "UPDATE limiter_state SET updated_us = ? WHERE key = ? AND updated_us < ?");
      up.bind(1, hw);
      up.bind(2, key);
      up.bind(3, hw);
      if (up.exec() > 0 && algorithm != config::LimitAlgorithm::kTokenBucket) {
        const std::int64_t horizon =
            algorithm == config::LimitAlgorithm::kSlidingWindow ? hw - per + 1 : floor_div(hw, per) * per;
        SQLite::Statement prune(*db, "DELETE FROM limiter_calls WHERE key = ? AND at_us < ?");
        prune.bind(1, key);
        prune.bind(2, horizon);
        prune.exec();
      }
    }
    return hw;
  }

  std::vector<std::int64_t> load_log(std::int64_t after) {
    SQLite::Statement q(*db, "SELECT at_us FROM limiter_calls WHERE key = ? AND at_us > ? ORDER BY at_us");
    q.bind(1, key);
    q.bind(2, after);
    std::vector<std::int64_t> log;
    while (q.executeStep()) log.push_back(q.getColumn(0).getInt64());
    return log;
  }

  // Entries in (after, before), counted up to `cap`.
  std::int64_t count_between(std::int64_t after, std::int64_t before, std::int64_t cap) {
    SQLite::Statement q(
        *db,
        "SELECT COUNT(*) FROM (SELECT 1 FROM limiter_calls WHERE key = ? AND at_us > ? AND at_us < ? "
        "LIMIT ?)");
    q.bind(1, key);
    q.bind(2, after);
    q.bind(3, before);
    q.bind(4, cap);
    q.executeStep();
    return q.getColumn(0).getInt64();
  }

  std::int64_t window_count(std::int64_t k) {
    SQLite::Statement q(*db, "SELECT COUNT(*) FROM limiter_calls WHERE key = ? AND at_us >= ? AND at_us < ?");
    q.bind(1, key);
    q.bind(2, k * per);
    q.bind(3, (k + 1) * per);
    q.executeStep();
    return q.getColumn(0).getInt64();
  }

  void add_call(std::int64_t at) {
    SQLite::Statement ins(*db, "INSERT INTO limiter_calls(key, at_us) VALUES(?, ?)");
    ins.bind(1, key);
    ins.bind(2, at);
    ins.exec();
  }

  void remove_call(std::int64_t at) {
    SQLite::Statement del(*db,
                          "DELETE FROM limiter_calls WHERE rowid IN "
                          "(SELECT rowid FROM limiter_calls WHERE key = ? AND at_us = ? LIMIT 1)");
    del.bind(1, key);
    del.bind(2, at);
    del.exec();
  }

  std::int64_t read_tat() {
    SQLite::Statement q(*db, "SELECT tat_us FROM limiter_state WHERE key = ?");
    q.bind(1, key);
    if (!q.executeStep() || q.getColumn(0).isNull()) return Gcra::kIdle;
    return q.getColumn(0).getInt64();
  }

  void write_tat(std::int64_t tat) {
    SQLite::Statement up(*db, "UPDATE limiter_state SET tat_us = ? WHERE key = ?");
    up.bind(1, tat);
    up.bind(2, key);
    up.exec();
  }

  // The earliest time >= t (t >= high-water mark) a start fits.
  std::int64_t find(std::int64_t t) {
    switch (algorithm) {
      case config::LimitAlgorithm::kSlidingWindow:
        // Fewer than `rate` entries within per of t: t fits, without reading the log.
        if (count_between(t - per, t + per, rate) < rate) return t;
        return sliding_earliest(load_log(t - per), rate, per, t);
      case config::LimitAlgorithm::kFixedWindow: {
        std::int64_t k = floor_div(t, per);
        while (window_count(k) >= rate) t = ++k * per;
        return t;
      }
      case config::LimitAlgorithm::kTokenBucket: return gcra.earliest(read_tat(), t);
    }
    return t;
  }

  Slot grant(std::int64_t t) {
    if (algorithm == config::LimitAlgorithm::kTokenBucket) {
      std::int64_t tat = read_tat();
      Slot s = gcra.grant(tat, t);
      write_tat(tat);
      return s;
    }
    Slot s;
    s.at_us = find(t);
    add_call(s.at_us);
    return s;
  }

  UseResult use(Slot& slot, std::int64_t now) {
    const std::int64_t hw = advance(now);
    if (now == slot.at_us) return UseResult::kStarted;
    switch (algorithm) {
      case config::LimitAlgorithm::kTokenBucket: {
        std::int64_t tat = read_tat();
        UseResult r = gcra.use(tat, slot, std::max(hw, now));
        write_tat(tat);
        return slot.at_us == now ? r : UseResult::kMoved;
      }
      case config::LimitAlgorithm::kFixedWindow:
        if (floor_div(now, per) == floor_div(slot.at_us, per)) {
          remove_call(slot.at_us);
          add_call(now);
          slot.at_us = now;
          return UseResult::kStarted;
        }
        break;
      case config::LimitAlgorithm::kSlidingWindow: break;
    }
    remove_call(slot.at_us);
    slot.at_us = find(std::max(hw, now));
    add_call(slot.at_us);
    return slot.at_us == now ? UseResult::kStarted : UseResult::kMoved;
  }

  void give_back(const Slot& slot) {
    if (algorithm == config::LimitAlgorithm::kTokenBucket) {
      std::int64_t tat = read_tat();
      gcra.give_back(tat, slot);
      write_tat(tat);
    } else {
      remove_call(slot.at_us);
    }
  }

  // Runs `body` in one BEGIN IMMEDIATE transaction, converting SQLite errors.
  template <typename F>
  auto transact(const char* what, F&& body) -> Result<decltype(body())> {
    std::lock_guard lock(mu);
    try {
      SQLite::Transaction tx(*db, SQLite::TransactionBehavior::IMMEDIATE);
      if constexpr (std::is_void_v<decltype(body())>) {
        body();
        tx.commit();
        return {};
      } else {
        auto out = body();
        tx.commit();
        return out;
      }
    } catch (const SQLite::Exception& e) {
      return fail(Error::database(
          std::string("limiter ") + key + ": cannot " + what + " in " + db->getFilename() + ": " + e.what() +
          " (is the database migrated and not locked for longer than the busy timeout?)"));
    }
  }
};

DatabaseLimiter::DatabaseLimiter(const config::LimitSpec& spec, std::string key,
                                 std::unique_ptr<SQLite::Database> db)
    : impl_(std::make_unique<Impl>()) {
  impl_->algorithm = spec.algorithm;
  impl_->rate = spec.rate;
  impl_->per = spec.per.count();
  impl_->burst = spec.burst.value_or(1);
  impl_->gcra = Gcra::make(impl_->rate, impl_->per, impl_->burst);
  impl_->key = std::move(key);
  impl_->db = std::move(db);
}

DatabaseLimiter::~DatabaseLimiter() = default;

Result<std::shared_ptr<DatabaseLimiter>> DatabaseLimiter::open(const config::LimitSpec& spec, std::string key,
                                                               const ConnectionFactory& connect) {
  if (auto why = limit_out_of_bounds(spec))
    return fail(Error::invalid_argument("limiter " + key + ": " + *why));
  if (!connect) return fail(Error::invalid_argument("limiter " + key + ": no database connection factory"));
  auto db = connect();
  if (!db) return fail(db.error().with_context("limiter " + key));
  return std::shared_ptr<DatabaseLimiter>(new DatabaseLimiter(spec, std::move(key), std::move(*db)));
}

Result<std::int64_t> DatabaseLimiter::earliest(std::int64_t now_us, std::int64_t t_us) {
  return impl_->transact("read the limit",
                         [&] { return impl_->find(std::max(t_us, impl_->advance(now_us))); });
}

Result<Slot> DatabaseLimiter::reserve(std::int64_t now_us, std::int64_t t_us) {
  return impl_->transact("reserve a slot",
                         [&] { return impl_->grant(std::max(t_us, impl_->advance(now_us))); });
}

Result<UseResult> DatabaseLimiter::start(Slot& slot, std::int64_t now_us) {
  if (now_us < slot.at_us) {
    return fail(Error::invalid_argument("a limiter slot was used before its time (a bug in the caller)"));
  }
  // The shared state knows only the granted slots, not who really started,
  // so a start a little late is counted at its slot's time: waking is never
  // exact, and moving such a start behind every slot granted since would
  // send each of a queue of back-to-back slots to the back, forever.
  constexpr std::int64_t kOnTimeUs = 10'000;
  const std::int64_t at = now_us - slot.at_us <= kOnTimeUs ? slot.at_us : now_us;
  return impl_->transact("start a call", [&] { return impl_->use(slot, at); });
}

Status DatabaseLimiter::cancel(const Slot& slot) {
  return impl_->transact("give back a slot", [&] { impl_->give_back(slot); });
}

std::string DatabaseLimiter::describe() const {
  std::string algo = impl_->algorithm == config::LimitAlgorithm::kSlidingWindow ? "sliding window"
                     : impl_->algorithm == config::LimitAlgorithm::kFixedWindow ? "fixed window"
                                                                                : "token bucket";
  return std::to_string(impl_->rate) + "/" + common::format_duration(std::chrono::microseconds(impl_->per)) +
         " " + algo + " (database, key " + impl_->key + ")";
}

}  // namespace ratchet::limit
