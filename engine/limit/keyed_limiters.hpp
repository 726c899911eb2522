// A keyed limit: one budget per key (`key = "{{args.account}}"`), each kept
// by a limiter of its own, made on the key's first call.
//
// Memory stays bounded however many keys a run meets: a key whose limiter
// holds nothing a new one would not (Limiter::forgettable: no start still in
// its window, no slot held) and that no caller holds is dropped. Sweeps run
// when the set has doubled since the last one, and at least once per
// `sweep_every_us`, so a decision costs amortised O(1). A database-scope
// key's state stays in the store: dropping its limiter loses nothing.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>
#include <absl/hash/hash.h>

#include "limit/limiter.hpp"
#include "ratchet/status.hpp"

namespace ratchet::limit {

class KeyedLimiters {
 public:
  // Makes the limiter of a key it has not seen (or has dropped), as of now_us.
  using Make = std::function<Result<std::shared_ptr<Limiter>>(const std::string& key, std::int64_t now_us)>;

  // Tidies what the keys keep outside memory (a database-scope limit's
  // rows of keys long idle), as of now_us; whether it finished (false: more
  // to do, at the next decision).
  using Tidy = std::function<Result<bool>(std::int64_t now_us)>;

  KeyedLimiters(Make make, std::int64_t sweep_every_us);
  // With `tidy`, run by a decision (get) at most once per `tidy_every_us`,
  // outside the set's lock, never by two at once. A failed tidy is tried
  // again at the next: nothing it would remove still counts.
  KeyedLimiters(Make make, std::int64_t sweep_every_us, Tidy tidy, std::int64_t tidy_every_us);

  // The limiter a key's packed state describes.
  using Unpack = std::function<std::shared_ptr<Limiter>(const PackedLimiter& packed)>;
  KeyedLimiters(Make make, std::int64_t sweep_every_us, Unpack unpack);

  // The limiter of `key`, made on first use. now_us paces the sweeps.
  [[nodiscard]] Result<std::shared_ptr<Limiter>> get(const std::string& key, std::int64_t now_us);

  // The limiter of `key` if it has one, else null (makes nothing; unpacks
  // a packed one).
  std::shared_ptr<Limiter> find(const std::string& key);

  // Drops every key that is forgettable and held by no caller; how many.
  std::size_t sweep(std::int64_t now_us);

  std::size_t size() const;
  // Of those, the keys whose limiter is packed now.
  std::size_t packed() const;

  // The keys kept now, with their limiters (for `ratchet limits`).
  std::vector<std::pair<std::string, std::shared_ptr<Limiter>>> snapshot() const;

 private:
  std::size_t sweep_locked(std::int64_t now_us);
  void pack_locked();
  std::shared_ptr<Limiter> find_locked(const std::string& key);
  Result<std::shared_ptr<Limiter>> get_locked(const std::string& key, std::int64_t now_us);

  const Make make_;
  const std::int64_t sweep_every_us_;
  const Tidy tidy_;
  const std::int64_t tidy_every_us_ = 0;
  std::int64_t next_tidy_us_ = 0;  // zero: the first decision's time plus tidy_every_us_
  bool tidying_ = false;
  mutable std::mutex mu_;
  // Open addressing (abseil's Swiss table): one probe where a node map
  // takes two cache misses, which is most of a keyed decision at 100,000 keys.
  absl::flat_hash_map<std::string, std::shared_ptr<Limiter>> keys_;
  // Keys whose limiter is packed, each under its key: out of keys_, back in
  // at their next use. A set of the packed bytes, found by the key they
  // hold: eight bytes a key in the table, where a map's own copy of the key
  // would take forty.
  struct ByName {
    using is_transparent = void;
    static std::string_view name(std::string_view s) { return s; }
    static std::string_view name(const PackedLimiter& p) { return p.name(); }
    template <typename T>
    std::size_t operator()(const T& t) const {
      return absl::Hash<std::string_view>{}(name(t));
    }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return name(a) == name(b);
    }
  };
  Unpack unpack_;
  absl::flat_hash_set<PackedLimiter, ByName, ByName> packed_;
  std::size_t pack_at_size_ = 1024;
  std::size_t sweep_at_size_ = 1024;
  std::int64_t next_sweep_us_ = 0;
};

}  // namespace ratchet::limit
