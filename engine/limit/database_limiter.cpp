#include "limit/database_limiter.hpp"

#include <algorithm>
#include <vector>

#include "common/duration.hpp"
#include "limit/gcra_math.hpp"
#include "limit/limit_bounds.hpp"
#include "limit/micros.hpp"
#include "limit/sliding_log.hpp"

namespace ratchet::limit {

struct DatabaseLimiter::Impl {
  config::LimitAlgorithm algorithm;
  std::int64_t rate;
  std::int64_t per;           // as kept: the declared period plus the margin
  std::int64_t grant_per;     // a sliding window's slots are granted in windows this long
  std::int64_t declared_per;  // as declared, for describe()
  std::int64_t burst;
  Gcra gcra;   // grants a token bucket's slots
  Gcra check;  // checks its starts
  // How much sooner the granting bucket lets a call go after a full bucket
  // than the checking one: grants after a start are held back by as much,
  // so a call on time is never turned back.
  std::int64_t tolerance_gap = 0;
  std::string key;
  std::shared_ptr<const Clock> clock;
  std::shared_ptr<SharedLimiterTables> tables;
  store::LimiterTables* db = nullptr;  // tables->db

  // The time a call starting now is counted at: the caller's reading, or the
  // clock's if that is later (the caller may have waited for the lock).
  std::int64_t fresh(std::int64_t now) const { return clock ? std::max(now, to_micros(clock->now())) : now; }

  static store::LimiterLog log_of(bool started_only) {
    return started_only ? store::LimiterLog::kStarts : store::LimiterLog::kCalls;
  }

  // Raises the shared high-water mark to now and prunes history that no
  // longer counts; returns the mark. Inside a transaction.
  std::int64_t advance(std::int64_t now) {
    const std::optional<std::int64_t> stored = db->high_water(key);
    const std::int64_t hw = stored ? std::max(now, *stored) : now;
    if (!stored) {
      db->create_state(key, hw);
    } else if (hw == now) {
      if (db->raise_high_water(key, hw) && algorithm != config::LimitAlgorithm::kTokenBucket) {
        // Entries at or before hw - per are outside every interval that holds
        // a time >= hw (the same boundary as the in-memory log).
        const bool sliding = algorithm == config::LimitAlgorithm::kSlidingWindow;
        db->prune(store::LimiterLog::kCalls, key, sliding ? hw - grant_per + 1 : floor_div(hw, per) * per);
        db->prune(store::LimiterLog::kStarts, key, sliding ? hw - per + 1 : floor_div(hw, per) * per);
      }
    }
    return hw;
  }

  // Entries after `after`, sorted, of every slot granted or (started_only) of the calls started.
  std::vector<std::int64_t> load_log(std::int64_t after, bool started_only) {
    return db->entries_after(log_of(started_only), key, after);
  }

  // Entries in (after, before), counted up to `cap`.
  std::int64_t count_between(std::int64_t after, std::int64_t before, std::int64_t cap, bool started_only) {
    return db->count_between(log_of(started_only), key, after, before, cap);
  }

  std::int64_t window_count(std::int64_t k, bool started_only = false) {
    return db->count_in(log_of(started_only), key, k * per, (k + 1) * per);
  }

  // A call of u units is u rows at its time.
  void add_call(std::int64_t at, std::int64_t units) {
    for (std::int64_t i = 0; i < units; ++i) db->add(store::LimiterLog::kCalls, key, at);
  }
  void remove_call(std::int64_t at, std::int64_t units) {
    for (std::int64_t i = 0; i < units; ++i) db->remove_one(store::LimiterLog::kCalls, key, at);
  }
  void add_start(std::int64_t at, std::int64_t units) {
    for (std::int64_t i = 0; i < units; ++i) db->add(store::LimiterLog::kStarts, key, at);
  }
  void remove_start(std::int64_t at, std::int64_t units) {
    for (std::int64_t i = 0; i < units; ++i) db->remove_one(store::LimiterLog::kStarts, key, at);
  }

  // Moves a granted slot from `from` to `to` (re-adding it when it was
  // pruned, i.e. granted more than a window ago).
  void move_call(std::int64_t from, std::int64_t to, std::int64_t units) {
    for (std::int64_t i = 0; i < units; ++i) {
      if (!db->move_one(store::LimiterLog::kCalls, key, from, to)) add_call(to, 1);
    }
  }

  // The units a window is checked for: at most its whole rate (limiter.hpp).
  std::int64_t fit(std::int64_t units) const { return std::min(units, rate); }

  std::int64_t read_tat() { return db->tat(key).value_or(Gcra::kIdle); }
  void write_tat(std::int64_t tat) { db->set_tat(key, tat); }
  std::int64_t read_started_tat() { return db->started_tat(key).value_or(Gcra::kIdle); }
  void write_started_tat(std::int64_t tat) { db->set_started_tat(key, tat); }

  // The earliest time >= t (t >= high-water mark) a sliding-window start
  // fits among every slot granted (started_only: among the calls started).
  std::int64_t sliding_find(std::int64_t t, bool started_only, std::int64_t units) {
    const std::int64_t w = started_only ? per : grant_per;
    // Room for the units within w of t: t fits, without reading the log.
    if (count_between(t - w, t + w, rate, started_only) + fit(units) <= rate) return t;
    return sliding_earliest(load_log(t - w, started_only), rate, w, t, fit(units));
  }

  // The earliest time >= t (t >= high-water mark) a slot can be granted.
  std::int64_t find(std::int64_t t, std::int64_t units) {
    switch (algorithm) {
      case config::LimitAlgorithm::kSlidingWindow: return sliding_find(t, false, units);
      case config::LimitAlgorithm::kFixedWindow: {
        std::int64_t k = floor_div(t, per);
        while (window_count(k) + fit(units) > rate) t = ++k * per;
        return t;
      }
      case config::LimitAlgorithm::kTokenBucket: return gcra.earliest(read_tat(), t, units);
    }
    return t;
  }

  Slot grant(std::int64_t t, std::int64_t units) {
    if (algorithm == config::LimitAlgorithm::kTokenBucket) {
      std::int64_t tat = read_tat();
      Slot s = gcra.grant(tat, t, units);
      write_tat(tat);
      return s;
    }
    Slot s;
    s.units = units;
    s.at_us = find(t, units);
    add_call(s.at_us, units);
    return s;
  }

  // The earliest time >= max(slot, now) the holder of `slot` may start, by
  // the calls started.
  std::int64_t ready(const Slot& slot, std::int64_t now) {
    const std::int64_t t = std::max({now, advance(now), slot.at_us});
    if (algorithm == config::LimitAlgorithm::kTokenBucket) {
      return check.earliest(read_started_tat(), t, slot.units);
    }
    return sliding_find(t, true, slot.units);
  }

  // Starts `slot` at `now` (the fresh time), or moves it.
  UseResult use(Slot& slot, std::int64_t now) {
    const std::int64_t hw = advance(now);
    switch (algorithm) {
      case config::LimitAlgorithm::kTokenBucket: {
        // The bucket of the calls started decides (as TokenBucketLimiter).
        std::int64_t started_tat = read_started_tat();
        const std::int64_t allowed = std::max(hw, check.earliest(started_tat, now, slot.units));
        if (now < allowed) {
          slot.at_us = allowed;
          return UseResult::kMoved;
        }
        slot.started = true;
        slot.started_before_us = started_tat;
        started_tat = std::max(started_tat, now) + check.charge(slot.units);
        slot.started_after_us = started_tat;
        write_started_tat(started_tat);
        // Slots granted from now on queue behind what really started.
        const std::int64_t tat = read_tat();
        if (tat < started_tat + tolerance_gap) write_tat(started_tat + tolerance_gap);
        slot.at_us = now;
        return UseResult::kStarted;
      }
      case config::LimitAlgorithm::kFixedWindow:
        // The units started decide (an overdraft may have filled the
        // window since the slot was granted); the slots say when to come.
        if (floor_div(now, per) == floor_div(slot.at_us, per) &&
            window_count(floor_div(now, per), true) + fit(slot.units) <= rate) {
          move_call(slot.at_us, now, slot.units);
          add_start(now, slot.units);
          slot.at_us = now;
          slot.started = true;
          return UseResult::kStarted;
        }
        remove_call(slot.at_us, slot.units);
        slot.at_us = find(std::max(hw, now), slot.units);
        add_call(slot.at_us, slot.units);
        if (slot.at_us != now) return UseResult::kMoved;
        add_start(now, slot.units);
        slot.started = true;
        return UseResult::kStarted;
      case config::LimitAlgorithm::kSlidingWindow: {
        // The calls started decide; a slot used on time always fits.
        const std::int64_t at = sliding_find(std::max(hw, now), true, slot.units);
        move_call(slot.at_us, std::max(at, now), slot.units);
        slot.at_us = std::max(at, now);
        if (at > now) return UseResult::kMoved;
        add_start(now, slot.units);
        slot.started = true;
        return UseResult::kStarted;
      }
    }
    return UseResult::kStarted;
  }

  // Turns a started slot back into the slot it was (held for its time):
  // its start leaves the calls started, its entry among the slots granted
  // stays. A token bucket takes it back exactly only while it is the latest.
  void take_back_start(Slot& slot) {
    if (!slot.started) return;
    slot.started = false;
    if (algorithm == config::LimitAlgorithm::kTokenBucket) {
      if (read_started_tat() == slot.started_after_us) write_started_tat(slot.started_before_us);
    } else {
      remove_start(slot.at_us, slot.units);
    }
  }

  void give_back(const Slot& slot) {
    if (algorithm == config::LimitAlgorithm::kTokenBucket) {
      if (slot.started && read_started_tat() == slot.started_after_us)
        write_started_tat(slot.started_before_us);
      std::int64_t tat = read_tat();
      gcra.give_back(tat, slot);
      write_tat(tat);
    } else {
      remove_call(slot.at_us, slot.units);
      if (slot.started) remove_start(slot.at_us, slot.units);
    }
  }

  // A started call's cost corrected from slot.units to `units` (Limiter::adjust).
  void correct(Slot& slot, std::int64_t units, std::int64_t now) {
    const std::int64_t hw = advance(now);
    if (algorithm == config::LimitAlgorithm::kTokenBucket) {
      std::int64_t started_tat = read_started_tat();
      const std::int64_t tat = read_tat();
      const bool latest = tat == started_tat + tolerance_gap;
      check.correct(started_tat, slot.started_before_us, slot.started_after_us, slot.at_us, slot.units,
                    units);
      write_started_tat(started_tat);
      if (latest || tat < started_tat + tolerance_gap) write_tat(started_tat + tolerance_gap);
      slot.started_after_us = started_tat;
    } else {
      // Rows at the call's start, while its window still counts (the
      // slots' window is the longer).
      const bool sliding = algorithm == config::LimitAlgorithm::kSlidingWindow;
      const bool calls_count =
          sliding ? slot.at_us > hw - grant_per : floor_div(slot.at_us, per) >= floor_div(hw, per);
      const bool starts_count =
          sliding ? slot.at_us > hw - per : floor_div(slot.at_us, per) >= floor_div(hw, per);
      if (units > slot.units) {
        if (calls_count) add_call(slot.at_us, units - slot.units);
        if (starts_count) add_start(slot.at_us, units - slot.units);
      } else if (units < slot.units) {
        if (calls_count) remove_call(slot.at_us, slot.units - units);
        if (starts_count) remove_start(slot.at_us, slot.units - units);
      }
    }
    slot.units = units;
  }

  // Runs `body` in one transaction serialised with every other decision on
  // the key (store/limiter_tables.hpp), converting the backend's errors.
  template <typename F>
  auto transact(const char* what, F&& body) -> Result<decltype(body())> {
    std::lock_guard lock(tables->mu);
    using T = decltype(body());
    if constexpr (std::is_void_v<T>) {
      if (auto st = db->transact(key, what, body); !st)
        return fail(st.error().with_context("limiter " + key));
      return {};
    } else {
      std::optional<T> out;
      if (auto st = db->transact(key, what, [&] { out.emplace(body()); }); !st)
        return fail(st.error().with_context("limiter " + key));
      return std::move(*out);
    }
  }
};

DatabaseLimiter::DatabaseLimiter(const config::LimitSpec& spec, std::string key,
                                 std::shared_ptr<SharedLimiterTables> tables, DatabaseLimiterOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->algorithm = spec.algorithm;
  impl_->rate = spec.rate;
  impl_->declared_per = spec.per.count();
  impl_->per = spec.per.count() + (spec.algorithm == config::LimitAlgorithm::kFixedWindow
                                       ? 0
                                       : std::max<std::int64_t>(0, options.margin_us));
  impl_->grant_per = impl_->per + (spec.algorithm == config::LimitAlgorithm::kSlidingWindow
                                       ? std::max<std::int64_t>(0, options.grant_slack_us)
                                       : 0);
  impl_->burst = spec.burst.value_or(1);
  const std::int64_t guard = std::max<std::int64_t>(0, options.burst_guard_us);
  auto guarded = [guard](Gcra g) {
    g.tolerance_us = std::max<std::int64_t>(0, g.tolerance_us - guard);
    return g;
  };
  impl_->gcra = guarded(Gcra::make(impl_->rate, impl_->per, impl_->burst));
  const std::int64_t check_per =
      options.check_per_us > 0 ? std::min(options.check_per_us, impl_->per) : impl_->per;
  impl_->check = guarded(Gcra::make(impl_->rate, check_per, impl_->burst));
  impl_->tolerance_gap = std::max<std::int64_t>(0, impl_->gcra.tolerance_us - impl_->check.tolerance_us);
  impl_->key = std::move(key);
  impl_->clock = std::move(options.clock);
  impl_->db = tables->db.get();
  impl_->tables = std::move(tables);
}

DatabaseLimiter::~DatabaseLimiter() = default;

Result<std::shared_ptr<DatabaseLimiter>> DatabaseLimiter::open(const config::LimitSpec& spec, std::string key,
                                                               const store::LimiterTablesFactory& connect,
                                                               DatabaseLimiterOptions options) {
  if (auto why = limit_out_of_bounds(spec))
    return fail(Error::invalid_argument("limiter " + key + ": " + *why));
  auto tables = SharedLimiterTables::open(connect);
  if (!tables) return fail(tables.error().with_context("limiter " + key));
  return open(spec, std::move(key), std::move(*tables), std::move(options));
}

Result<std::shared_ptr<DatabaseLimiter>> DatabaseLimiter::open(const config::LimitSpec& spec, std::string key,
                                                               std::shared_ptr<SharedLimiterTables> tables,
                                                               DatabaseLimiterOptions options) {
  if (auto why = limit_out_of_bounds(spec))
    return fail(Error::invalid_argument("limiter " + key + ": " + *why));
  if (!tables || !tables->db)
    return fail(Error::invalid_argument("limiter " + key + ": no database connection"));
  return std::shared_ptr<DatabaseLimiter>(
      new DatabaseLimiter(spec, std::move(key), std::move(tables), std::move(options)));
}

Result<std::shared_ptr<SharedLimiterTables>> SharedLimiterTables::open(const ConnectionFactory& connect) {
  if (!connect) return fail(Error::invalid_argument("no database connection factory"));
  auto db = connect();
  if (!db) return fail(db.error());
  auto out = std::make_shared<SharedLimiterTables>();
  out->db = std::move(*db);
  return out;
}

Result<std::int64_t> DatabaseLimiter::earliest_units(std::int64_t now_us, std::int64_t t_us,
                                                     std::int64_t units) {
  return impl_->transact("read the limit",
                         [&] { return impl_->find(std::max(t_us, impl_->advance(now_us)), units); });
}

Result<Slot> DatabaseLimiter::reserve_units(std::int64_t now_us, std::int64_t t_us, std::int64_t units) {
  return impl_->transact("reserve a slot",
                         [&] { return impl_->grant(std::max(t_us, impl_->advance(now_us)), units); });
}

Result<std::int64_t> DatabaseLimiter::ready_at(Slot& slot, std::int64_t now_us) {
  // A fixed window counts every slot granted in it.
  if (impl_->algorithm == config::LimitAlgorithm::kFixedWindow) return std::max(now_us, slot.at_us);
  return impl_->transact("read the limit", [&] {
    // Checked at the time the call would be counted, answered in the
    // caller's time: room then is "now" to the caller.
    const std::int64_t now = impl_->fresh(now_us);
    const std::int64_t at = impl_->ready(slot, now);
    return at <= now ? std::max(now_us, slot.at_us) : at;
  });
}

Result<UseResult> DatabaseLimiter::start(Slot& slot, std::int64_t now_us) {
  if (now_us < slot.at_us) {
    return fail(Error::invalid_argument("a limiter slot was used before its time (a bug in the caller)"));
  }
  // Counted when the call really goes: after any wait for the lock.
  return impl_->transact("start a call", [&] { return impl_->use(slot, impl_->fresh(now_us)); });
}

Result<UseResult> DatabaseLimiter::restart(Slot& slot, std::int64_t now_us) {
  if (now_us < slot.at_us) {
    return fail(
        Error::invalid_argument("a limiter start was recounted before it was made (a bug in the caller)"));
  }
  return impl_->transact("count a call again", [&] {
    impl_->take_back_start(slot);
    return impl_->use(slot, impl_->fresh(now_us));
  });
}

Status DatabaseLimiter::cancel(const Slot& slot) {
  return impl_->transact("give back a slot", [&] { impl_->give_back(slot); });
}

Status DatabaseLimiter::adjust(Slot& slot, std::int64_t units, std::int64_t now_us) {
  if (!slot.started) return adjust_needs_start(slot);
  return impl_->transact("correct a call's cost", [&] { impl_->correct(slot, units, impl_->fresh(now_us)); });
}

std::string DatabaseLimiter::describe() const {
  std::string algo = impl_->algorithm == config::LimitAlgorithm::kSlidingWindow ? "sliding window"
                     : impl_->algorithm == config::LimitAlgorithm::kFixedWindow ? "fixed window"
                                                                                : "token bucket";
  return std::to_string(impl_->rate) + "/" +
         common::format_duration(std::chrono::microseconds(impl_->declared_per)) + " " + algo +
         " (database, key " + impl_->key + ")";
}

Result<bool> forget_idle_keys(SharedLimiterTables& tables, const std::string& prefix, std::int64_t before,
                              std::int64_t most) {
  std::vector<std::string> idle;
  {
    std::lock_guard lock(tables.mu);
    auto st = tables.db->transact(prefix, "list the idle keys of " + prefix,
                                  [&] { idle = tables.db->keys_idle_since(prefix, before, most); });
    if (!st) return fail(st.error());
  }
  for (const auto& key : idle) {
    std::lock_guard lock(tables.mu);
    auto st = tables.db->transact(key, "forget an idle key of " + prefix,
                                  [&] { (void)tables.db->forget_key(key, before); });
    if (!st) return fail(st.error());
  }
  return static_cast<std::int64_t>(idle.size()) < most;
}

}  // namespace ratchet::limit
