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

KeyedLimiters::KeyedLimiters(Make make, std::int64_t sweep_every_us, Unpack unpack)
    : KeyedLimiters(std::move(make), sweep_every_us) {
  unpack_ = std::move(unpack);
}

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
  if (keys_.size() + packed_.size() >= sweep_at_size_ || now_us >= next_sweep_us_) sweep_locked(now_us);
  if (unpack_ && keys_.size() >= pack_at_size_) pack_locked();
  if (auto found = find_locked(key)) return found;
  auto made = make_(key, now_us);
  if (!made) return fail(made.error());
  keys_.emplace(key, *made);
  return *made;
}

std::shared_ptr<Limiter> KeyedLimiters::find(const std::string& key) {
  std::lock_guard lock(mu_);
  return find_locked(key);
}

std::shared_ptr<Limiter> KeyedLimiters::find_locked(const std::string& key) {
  if (auto it = keys_.find(key); it != keys_.end()) return it->second;
  auto packed = packed_.find(std::string_view(key));
  if (packed == packed_.end()) return nullptr;
  auto woken = unpack_(*packed);
  packed_.erase(packed);
  keys_.emplace(key, woken);
  return woken;
}

void KeyedLimiters::pack_locked() {
  // use_count 1: no caller holds it, as for a sweep.
  for (auto it = keys_.begin(); it != keys_.end();) {
    PackedLimiter packed = it->second.use_count() == 1 ? it->second->pack(it->first) : PackedLimiter{};
    if (packed.empty()) {
      ++it;
      continue;
    }
    packed_.insert(std::move(packed));
    keys_.erase(it++);
  }
  pack_at_size_ = std::max(kMinSweepSize, keys_.size() * 2);
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
  dropped += absl::erase_if(packed_, [now_us](const PackedLimiter& p) { return now_us >= p.forget_at_us(); });
  sweep_at_size_ = std::max(kMinSweepSize, (keys_.size() + packed_.size()) * 2);
  next_sweep_us_ = now_us + sweep_every_us_;
  return dropped;
}

std::size_t KeyedLimiters::size() const {
  std::lock_guard lock(mu_);
  return keys_.size() + packed_.size();
}

std::size_t KeyedLimiters::packed() const {
  std::lock_guard lock(mu_);
  return packed_.size();
}

std::vector<std::pair<std::string, std::shared_ptr<Limiter>>> KeyedLimiters::snapshot() const {
  std::lock_guard lock(mu_);
  std::vector<std::pair<std::string, std::shared_ptr<Limiter>>> out(keys_.begin(), keys_.end());
  // Copies of the packed ones: looking changes nothing kept.
  for (const auto& packed : packed_) out.emplace_back(std::string(packed.name()), unpack_(packed));
  return out;
}

}  // namespace ratchet::limit
