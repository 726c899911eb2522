#include "limit/keyed_limiters.hpp"

#include <algorithm>

namespace ratchet::limit {

namespace {
constexpr std::size_t kMinSweepSize = 1024;
constexpr std::int64_t kTidyAgainUs = 1'000'000;
}  // namespace

KeyedLimiters::KeyedLimiters(Make make, std::int64_t sweep_every_us)
    : KeyedLimiters(std::move(make), sweep_every_us, {}, 0) {}

KeyedLimiters::KeyedLimiters(Make make, std::int64_t sweep_every_us, Tidy tidy, std::int64_t tidy_every_us)
    : make_(std::move(make)),
      sweep_every_us_(std::max<std::int64_t>(1, sweep_every_us)),
      tidy_(std::move(tidy)),
      tidy_every_us_(std::max<std::int64_t>(1, tidy_every_us)) {}

Result<std::shared_ptr<Limiter>> KeyedLimiters::get(const std::string& key, std::int64_t now_us) {
  bool tidy = false;
  Result<std::shared_ptr<Limiter>> out = [&] {
    std::lock_guard lock(mu_);
    if (tidy_ && !tidying_) {
      if (next_tidy_us_ == 0) next_tidy_us_ = now_us + tidy_every_us_;
      tidy = tidying_ = now_us >= next_tidy_us_;
    }
    return get_locked(key, now_us);
  }();
  if (tidy) {
    // Outside the lock: the tidy may take a while (a database's rows), and
    // decisions on the keys go on meanwhile.
    const Result<bool> done = tidy_(now_us);
    std::lock_guard lock(mu_);
    tidying_ = false;
    // More to do: soon, but not at every decision (a backlog of keys, say
    // after an upgrade, is worked off a batch a second).
    next_tidy_us_ =
        now_us + (done && !*done ? std::min<std::int64_t>(tidy_every_us_, kTidyAgainUs) : tidy_every_us_);
  }
  return out;
}

Result<std::shared_ptr<Limiter>> KeyedLimiters::get_locked(const std::string& key, std::int64_t now_us) {
  if (keys_.size() >= sweep_at_size_ || now_us >= next_sweep_us_) sweep_locked(now_us);
  if (auto it = keys_.find(key); it != keys_.end()) return it->second;
  auto made = make_(key, now_us);
  if (!made) return fail(made.error());
  keys_.emplace(key, *made);
  return *made;
}

std::shared_ptr<Limiter> KeyedLimiters::find(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = keys_.find(key);
  return it == keys_.end() ? nullptr : it->second;
}

std::size_t KeyedLimiters::sweep(std::int64_t now_us) {
  std::lock_guard lock(mu_);
  return sweep_locked(now_us);
}

std::size_t KeyedLimiters::sweep_locked(std::int64_t now_us) {
  std::size_t dropped = 0;
  // use_count 1: only this set holds it, so no caller holds a slot in it
  // and none can take one before the lock is let go.
  dropped = absl::erase_if(keys_, [now_us](const auto& entry) {
    return entry.second.use_count() == 1 && entry.second->forgettable(now_us);
  });
  sweep_at_size_ = std::max(kMinSweepSize, keys_.size() * 2);
  next_sweep_us_ = now_us + sweep_every_us_;
  return dropped;
}

std::size_t KeyedLimiters::size() const {
  std::lock_guard lock(mu_);
  return keys_.size();
}

std::vector<std::pair<std::string, std::shared_ptr<Limiter>>> KeyedLimiters::snapshot() const {
  std::lock_guard lock(mu_);
  return {keys_.begin(), keys_.end()};
}

}  // namespace ratchet::limit
