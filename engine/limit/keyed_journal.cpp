#include "limit/keyed_journal.hpp"

#include <algorithm>

namespace ratchet::limit {
namespace {

// A key's limiter whose starts the keyed limit's journal records.
class JournaledKey final : public Limiter {
 public:
  JournaledKey(std::shared_ptr<KeyedJournal> journal, std::string key, std::uint64_t limit,
               std::shared_ptr<Limiter> inner)
      : journal_(std::move(journal)), key_(std::move(key)), limit_(limit), inner_(std::move(inner)) {}

  Result<std::int64_t> ready_at(Slot& slot, std::int64_t now_us) override {
    auto at = inner_->ready_at(slot, now_us);
    if (!at) return at;
    return std::max(*at, journal_->not_before());
  }

  // Its slots are reserved at or after not_before() (reserve_units).
  Result<UseResult> start(Slot& slot, std::int64_t now_us) override {
    auto used = inner_->start(slot, now_us);
    if (!used || *used != UseResult::kStarted) return used;
    return recorded(slot);
  }

  Result<UseResult> restart(Slot& slot, std::int64_t now_us) override {
    const std::int64_t was = slot.at_us;
    const std::int64_t units = slot.units;
    auto used = inner_->restart(slot, now_us);
    if (!used) return used;
    journal_->forget(limit_, key_, was, units);
    if (*used != UseResult::kStarted) return used;
    return recorded(slot);
  }

  Status cancel(const Slot& slot) override {
    if (auto st = inner_->cancel(slot); !st) return st;
    if (slot.started) journal_->forget(limit_, key_, slot.at_us, slot.units);
    return {};
  }

  Status defer(Slot& slot, std::int64_t now_us, std::int64_t to_us) override {
    const bool started = slot.started;
    const std::int64_t was = slot.at_us;
    const std::int64_t units = slot.units;
    if (auto st = inner_->defer(slot, now_us, std::max(to_us, journal_->not_before())); !st) return st;
    if (started) journal_->forget(limit_, key_, was, units);
    return {};
  }

  Status adjust(Slot& slot, std::int64_t units, std::int64_t now_us) override {
    const std::int64_t was = slot.units;
    if (auto st = inner_->adjust(slot, units, now_us); !st) return st;
    if (units > was) return journal_->record(limit_, key_, slot.at_us, units - was);
    journal_->forget(limit_, key_, slot.at_us, was - units);
    return {};
  }

  void count_started(std::span<const Start> starts) override { inner_->count_started(starts); }
  bool forgettable(std::int64_t now_us) override { return inner_->forgettable(now_us); }
  std::string describe() const override { return inner_->describe(); }

 protected:
  Result<std::int64_t> earliest_units(std::int64_t now_us, std::int64_t t_us, std::int64_t units) override {
    return inner_->earliest(now_us, std::max(t_us, journal_->not_before()), units);
  }
  Result<Slot> reserve_units(std::int64_t now_us, std::int64_t t_us, std::int64_t units) override {
    return inner_->reserve(now_us, std::max(t_us, journal_->not_before()), units);
  }

 private:
  // A start the journal could not save does not go: it is given back.
  Result<UseResult> recorded(Slot& slot) {
    if (auto st = journal_->record(limit_, key_, slot.at_us, slot.units); !st) {
      (void)inner_->cancel(slot);
      return fail(st.error());
    }
    return UseResult::kStarted;
  }

  const std::shared_ptr<KeyedJournal> journal_;
  const std::string key_;
  const std::uint64_t limit_;
  const std::shared_ptr<Limiter> inner_;
};

}  // namespace

KeyedJournal::KeyedJournal(std::string owner, Options options, std::shared_ptr<SharedLimiterTables> tables)
    : owner_(std::move(owner)),
      instance_(journal_instance_name()),
      tables_(std::move(tables)),
      options_(options) {}

Result<std::shared_ptr<KeyedJournal>> KeyedJournal::open(std::string owner, Options options,
                                                         std::shared_ptr<SharedLimiterTables> tables,
                                                         std::int64_t now_us) {
  if (!tables || !tables->db) {
    return fail(Error::invalid_argument("limiter history of " + owner + ": no database connection"));
  }
  std::shared_ptr<KeyedJournal> journal(new KeyedJournal(std::move(owner), options, std::move(tables)));
  if (auto st = journal->load(now_us); !st) return fail(st.error());
  return journal;
}

KeyedJournal::~KeyedJournal() { (void)save(); }

Status KeyedJournal::load(std::int64_t now_us) {
  const std::int64_t since = now_us - options_.keep_us;
  // Leases are the limit's, not a key's: "<limit>#", beside its keys' rows.
  const std::string leases_of = owner_ + "#";
  std::vector<std::pair<std::int64_t, std::int64_t>> leases;
  std::lock_guard lock(tables_->mu);
  auto st = tables_->db->transact("journal/" + owner_, "read it", [&] {
    tables_->db->journal_prune_prefix(leases_of, since);
    leases = tables_->db->journal_leases(leases_of, since);
    tables_->db->journal_drop_leases(leases_of, since);
  });
  if (!st) return fail(st.error().with_context("limiter history of " + owner_));
  opened_us_ = now_us;
  next_prune_us_ = now_us + options_.keep_us;
  for (const auto& [until, calls] : leases) {
    not_before_ = std::max(not_before_, until);
    left_open_ += calls;
  }
  return {};
}

Status KeyedJournal::add_saved(const std::string& key, std::int64_t since, std::vector<Start>& out) {
  std::vector<std::pair<std::int64_t, std::int64_t>> saved;
  std::lock_guard lock(tables_->mu);
  auto st = tables_->db->transact("journal/" + owner_, "read a key's starts",
                                  [&] { saved = tables_->db->journal_starts(owner_of(key)); });
  if (!st) return fail(st.error().with_context("limiter history of " + owner_));
  for (const auto& [at, units] : saved) {
    if (at > since) out.push_back({.at_us = at, .units = units});
  }
  return {};
}

Result<std::vector<Start>> KeyedJournal::history(const std::string& key, std::int64_t now_us) {
  std::vector<Start> out;
  std::int64_t since = 0;
  bool read_saved = false;
  {
    std::lock_guard lock(mu_);
    since = now_us - options_.keep_us;
    const bool recounting = now_us < recount_until_us_;
    // Past the first window nothing an earlier process saved counts any
    // more: a key met later needs no query, unless a reload made a limit
    // anew, which must count this process's calls as well.
    read_saved = recounting || since < std::max(opened_us_, not_before_);
    if (recounting) {
      for (const KeyStart& s : unsaved_) {
        if (s.key == key && s.at_us > since) out.push_back({.at_us = s.at_us, .units = s.units});
      }
    }
    if (not_before_ > since && left_open_ > 0) out.push_back({.at_us = not_before_, .units = left_open_});
  }
  if (read_saved) {
    if (auto st = add_saved(key, since, out); !st) return fail(st.error());
  }
  std::stable_sort(out.begin(), out.end(), start_before);
  return out;
}

void KeyedJournal::recount(std::int64_t now_us) {
  std::lock_guard lock(mu_);
  recount_until_us_ = std::max(recount_until_us_, now_us + options_.keep_us);
}

void KeyedJournal::set_options(Options options) {
  std::lock_guard lock(mu_);
  options_ = options;
  // The lease taken stays as saved; the next one follows the new options.
  lease_left_ = std::min(lease_left_, options_.lease_calls);
}

std::uint64_t KeyedJournal::enlist() {
  std::lock_guard lock(mu_);
  if (recorder_ == 0) recorder_ = enlisted_ + 1;
  return ++enlisted_;
}

void KeyedJournal::records_from(std::uint64_t limit) {
  std::lock_guard lock(mu_);
  recorder_ = limit;
}

std::shared_ptr<Limiter> KeyedJournal::journaled(std::string key, std::uint64_t limit,
                                                 std::shared_ptr<Limiter> inner) {
  return std::make_shared<JournaledKey>(shared_from_this(), std::move(key), limit, std::move(inner));
}

Status KeyedJournal::write(std::int64_t now_us, bool take_lease) {
  const std::string leases_of = owner_ + "#";
  const bool prune = now_us >= next_prune_us_;
  std::lock_guard lock(tables_->mu);
  auto st = tables_->db->transact("journal/" + owner_, "save it", [&] {
    for (const KeyStart& s : unsaved_) tables_->db->journal_add(owner_of(s.key), s.at_us, s.units);
    if (prune) tables_->db->journal_prune_prefix(leases_of, now_us - options_.keep_us);
    if (take_lease) {
      tables_->db->journal_take_lease(leases_of, instance_, now_us + options_.lease_us, options_.lease_calls);
    } else {
      tables_->db->journal_end_lease(leases_of, instance_);
    }
  });
  if (!st) return fail(st.error().with_context("limiter history of " + owner_));
  unsaved_.clear();
  if (prune) next_prune_us_ = now_us + options_.keep_us;
  lease_open_ = take_lease;
  lease_until_ = take_lease ? now_us + options_.lease_us : 0;
  lease_left_ = take_lease ? options_.lease_calls : 0;
  return {};
}

Status KeyedJournal::record(std::uint64_t limit, const std::string& key, std::int64_t at,
                            std::int64_t units) {
  if (units <= 0) return {};
  std::lock_guard lock(mu_);
  if (limit != recorder_) return {};
  unsaved_.push_back({.key = key, .at_us = at, .units = units});
  if (lease_open_ && at <= lease_until_ && lease_left_ >= units) {
    lease_left_ -= units;
    return {};
  }
  // Saved, with a lease on the next starts, before this call goes.
  if (auto st = write(std::max(at, lease_until_ - options_.lease_us), true); !st) {
    unsaved_.pop_back();
    return st;
  }
  return {};
}

void KeyedJournal::forget(std::uint64_t limit, const std::string& key, std::int64_t at, std::int64_t units) {
  std::lock_guard lock(mu_);
  if (limit != recorder_) return;
  for (auto it = unsaved_.end(); units > 0 && it != unsaved_.begin();) {
    --it;
    if (it->at_us != at || it->key != key) continue;
    const std::int64_t take = std::min(units, it->units);
    it->units -= take;
    units -= take;
    if (it->units == 0) it = unsaved_.erase(it);
  }
}

Status KeyedJournal::save() {
  std::lock_guard lock(mu_);
  if (unsaved_.empty() && !lease_open_) return {};
  std::int64_t last = lease_until_ - options_.lease_us;
  for (const KeyStart& s : unsaved_) last = std::max(last, s.at_us);
  return write(last, false);
}

std::string keyed_journal_owner(const std::string& owner, const std::string& key_template) {
  return owner + "/key=" + key_template;
}

}  // namespace ratchet::limit
