// A sorted log of times that drops its oldest entries in amortised O(1):
// a vector read from `head_`, compacted once the dropped part outgrows the
// rest. Unlike a deque, a log never used allocates nothing, and a short one
// lives inside the log: a keyed limit keeps one sliding window (two logs)
// per key, and at 100,000 keys each heap block is one more cache miss in
// every decision.
//
// Thread-safety: none; the limiter that owns it locks around it.
#pragma once

#include <absl/container/inlined_vector.h>
#include <algorithm>
#include <cstdint>
#include <span>

namespace ratchet::limit {

class SortedLog {
 public:
  std::span<const std::int64_t> view() const { return {v_.data() + head_, v_.size() - head_}; }
  bool empty() const { return head_ == v_.size(); }

  void insert(std::int64_t at, std::int64_t copies = 1) {
    if (copies <= 0) return;
    v_.insert(std::upper_bound(v_.begin() + static_cast<std::ptrdiff_t>(head_), v_.end(), at),
              static_cast<std::size_t>(copies), at);
  }
  // Removes up to `copies` entries equal to `at`.
  void erase(std::int64_t at, std::int64_t copies) {
    if (copies <= 0) return;
    auto first = std::lower_bound(v_.begin() + static_cast<std::ptrdiff_t>(head_), v_.end(), at);
    auto last = first;
    while (last != v_.end() && *last == at && last - first < copies) ++last;
    v_.erase(first, last);
  }
  // Removes one entry equal to `at`; false when there is none.
  bool erase_one(std::int64_t at) {
    auto it = std::lower_bound(v_.begin() + static_cast<std::ptrdiff_t>(head_), v_.end(), at);
    if (it == v_.end() || *it != at) return false;
    v_.erase(it);
    return true;
  }
  // Drops every entry at or before `gone`.
  void drop_through(std::int64_t gone) {
    auto first = v_.begin() + static_cast<std::ptrdiff_t>(head_);
    head_ = static_cast<std::size_t>(std::upper_bound(first, v_.end(), gone) - v_.begin());
    if (head_ == v_.size()) {
      v_.erase(v_.begin(),
               v_.end());  // keeps its room (clear() would not): a log that drains often fills again
      head_ = 0;
    } else if (head_ > v_.size() - head_) {
      v_.erase(v_.begin(), v_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
  }

 private:
  // Two entries: a key calling once or twice a window never allocates, and
  // at 100,000 keys each entry held in place is 1.5 MiB in every key's two logs.
  absl::InlinedVector<std::int64_t, 2> v_;
  std::size_t head_ = 0;
};

}  // namespace ratchet::limit
