#include "limit/start_journal.hpp"

#include <algorithm>
#include <cstdio>
#include <random>

#include "common/duration.hpp"

namespace ratchet::limit {

namespace {

// Takes up to `units` from the entries at `at` (the latest first), dropping
// those left with none; how many it took. Entries in time order are only
// searched back to `at`.
template <bool kSorted, typename Entries>
std::int64_t take_units(Entries& entries, std::int64_t at, std::int64_t units) {
  std::int64_t taken = 0;
  for (auto it = entries.end(); taken < units && it != entries.begin();) {
    --it;
    if (kSorted && it->at_us < at) break;
    if (it->at_us != at) continue;
    const std::int64_t take = std::min(units - taken, it->units);
    it->units -= take;
    taken += take;
    if (it->units == 0) it = entries.erase(it);
  }
  return taken;
}

}  // namespace

std::string journal_instance_name() {
  std::random_device rd;
  const std::uint64_t v = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
  return text;
}

StartJournal::StartJournal(std::string owner, Options options, std::unique_ptr<store::LimiterTables> db)
    : owner_(std::move(owner)), instance_(journal_instance_name()), db_(std::move(db)), options_(options) {}

Result<std::shared_ptr<StartJournal>> StartJournal::open(std::string owner, Options options,
                                                         const ConnectionFactory& connect,
                                                         std::int64_t now_us) {
  std::unique_ptr<store::LimiterTables> db;
  if (connect) {
    auto opened = connect();
    if (!opened) return fail(opened.error().with_context("limiter history of " + owner));
    db = std::move(*opened);
  }
  std::shared_ptr<StartJournal> journal(new StartJournal(std::move(owner), options, std::move(db)));
  if (auto st = journal->load(now_us); !st) return fail(st.error());
  return journal;
}

StartJournal::~StartJournal() { (void)save(); }

Status StartJournal::load(std::int64_t now_us) {
  if (!db_) return {};
  const std::int64_t since = now_us - options_.keep_us;
  std::vector<std::pair<std::int64_t, std::int64_t>> saved;
  std::vector<std::pair<std::int64_t, std::int64_t>> leases;
  auto st = db_->transact("journal/" + owner_, "read it", [&] {
    db_->journal_prune(owner_, since);
    saved = db_->journal_starts(owner_);
    leases = db_->journal_leases(owner_, since);
    db_->journal_drop_leases(owner_, since);
  });
  if (!st) return fail(st.error().with_context("limiter history of " + owner_));
  recent_.clear();
  for (const auto& [at, units] : saved) recent_.push_back({.at_us = at, .units = units});
  // A lease still open is a process that died (or runs beside this one):
  // its unsaved calls count at the lease's end, and nothing starts before it.
  for (const auto& [until, calls] : leases) {
    not_before_ = std::max(not_before_, until);
    const Start left{.at_us = until, .units = calls};
    recent_.insert(std::upper_bound(recent_.begin(), recent_.end(), left, start_before), left);
  }
  return {};
}

Status StartJournal::write(std::int64_t now_us, bool take_lease) {
  auto st = db_->transact("journal/" + owner_, "save it", [&] {
    for (const Start& s : unsaved_) db_->journal_add(owner_, s.at_us, s.units);
    db_->journal_prune(owner_, now_us - options_.keep_us);
    if (take_lease) {
      db_->journal_take_lease(owner_, instance_, now_us + options_.lease_us, options_.lease_calls);
    } else {
      db_->journal_end_lease(owner_, instance_);
    }
  });
  if (!st) return fail(st.error().with_context("limiter history of " + owner_));
  unsaved_.clear();
  lease_open_ = take_lease;
  lease_until_ = take_lease ? now_us + options_.lease_us : 0;
  lease_left_ = take_lease ? options_.lease_calls : 0;
  return {};
}

void StartJournal::prune(std::int64_t now_us) {
  while (!recent_.empty() && recent_.front().at_us <= now_us - options_.keep_us) recent_.pop_front();
}

std::vector<Start> StartJournal::history(std::int64_t now_us) {
  std::lock_guard lock(mu_);
  prune(now_us);
  return {recent_.begin(), recent_.end()};
}

void StartJournal::set_options(Options options) {
  std::lock_guard lock(mu_);
  options_ = options;
  // The lease taken stays as saved; the next one follows the new options.
  lease_left_ = std::min(lease_left_, options_.lease_calls);
}

Status StartJournal::save() {
  std::lock_guard lock(mu_);
  if (!db_ || (unsaved_.empty() && !lease_open_)) return {};
  const std::int64_t last = recent_.empty() ? 0 : recent_.back().at_us;
  return write(std::max(last, lease_until_ - options_.lease_us), false);
}

Result<std::int64_t> StartJournal::earliest_units(std::int64_t now_us, std::int64_t t_us,
                                                  std::int64_t units) {
  (void)units;
  std::lock_guard lock(mu_);
  return std::max({now_us, t_us, not_before_});
}

Result<Slot> StartJournal::reserve_units(std::int64_t now_us, std::int64_t t_us, std::int64_t units) {
  std::lock_guard lock(mu_);
  Slot slot;
  slot.units = units;
  slot.at_us = std::max({now_us, t_us, not_before_});
  return slot;
}

Status StartJournal::record_locked(std::int64_t at, std::int64_t units) {
  prune(at);
  const Start start{.at_us = at, .units = units};
  recent_.insert(std::upper_bound(recent_.begin(), recent_.end(), start, start_before), start);
  if (!db_) return {};
  unsaved_.push_back(start);
  if (lease_open_ && at <= lease_until_ && lease_left_ >= units) {
    lease_left_ -= units;
    return {};
  }
  // Saved, with a lease on the next starts, before this call goes.
  const std::int64_t now_us = std::max(at, lease_until_ - options_.lease_us);
  if (auto st = write(now_us, true); !st) {
    forget_locked(at, units);
    return st;
  }
  return {};
}

void StartJournal::forget_locked(std::int64_t at, std::int64_t units) {
  take_units<true>(recent_, at, units);
  take_units<false>(unsaved_, at, units);  // in the order recorded
}

Result<UseResult> StartJournal::start(Slot& slot, std::int64_t now_us) {
  if (now_us < slot.at_us) {
    return fail(Error::invalid_argument("a limiter slot was used before its time (a bug in the caller)"));
  }
  std::lock_guard lock(mu_);
  if (now_us < not_before_) {
    slot.at_us = not_before_;
    return UseResult::kMoved;
  }
  if (auto st = record_locked(now_us, slot.units); !st) return fail(st.error());
  slot.at_us = now_us;
  slot.started = true;
  return UseResult::kStarted;
}

Status StartJournal::cancel(const Slot& slot) {
  if (!slot.started) return {};
  std::lock_guard lock(mu_);
  // A start already saved stays in the database (the next process counts
  // it: a little slower, never faster); this process's limiters, and those
  // a reload makes from history(), no longer count it.
  forget_locked(slot.at_us, slot.units);
  return {};
}

Status StartJournal::defer(Slot& slot, std::int64_t now_us, std::int64_t to_us) {
  (void)now_us;
  if (Status st = cancel(slot); !st) return st;
  slot.started = false;
  std::lock_guard lock(mu_);
  slot.at_us = std::max({slot.at_us, to_us, not_before_});
  return {};
}

Status StartJournal::adjust(Slot& slot, std::int64_t units, std::int64_t now_us) {
  if (!slot.started) return adjust_needs_start(slot);
  if (units > slot.units) {
    std::lock_guard lock(mu_);
    // The overdraft is saved as starts at the call's time, like the call.
    if (auto st = record_locked(slot.at_us, units - slot.units); !st) return st;
    (void)now_us;
  } else if (units < slot.units) {
    Slot refund = slot;
    refund.units = slot.units - units;
    if (auto st = cancel(refund); !st) return st;
  }
  slot.units = units;
  return {};
}

std::string StartJournal::describe() const {
  std::lock_guard lock(mu_);
  return "recent starts of " + owner_ + " (kept " +
         common::format_duration(std::chrono::microseconds(options_.keep_us)) + ")";
}

}  // namespace ratchet::limit
