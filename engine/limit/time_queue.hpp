// The queue a limiter keeps its recent times in (starts, replies, refusals):
// appended at the back (or inserted near it, in order), pruned at the front
// as they age out.
//
// A vector and the index of its first live entry, not a deque: a keyed
// limit makes a limiter, with a learned pace of its own, for each of up to
// a hundred thousand keys, and most keys hold a few recent times or none.
// This one takes 32 bytes in place, keeps one entry there without
// allocating, and gives its memory back when it drains (boost's deque took
// 80 bytes in place and a map and a block once used; libstdc++'s allocates
// both as it is made). Popping the front moves the index; the vector is
// compacted once half of it is gone, so each entry is moved at most once
// on average.
#pragma once

#include <absl/container/inlined_vector.h>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <utility>

namespace ratchet::limit {

template <typename T>
class TimeQueue {
  using Items = absl::InlinedVector<T, 1>;

 public:
  using value_type = T;
  using iterator = typename Items::iterator;
  using const_iterator = typename Items::const_iterator;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  bool empty() const { return head_ == items_.size(); }
  std::size_t size() const { return items_.size() - head_; }

  iterator begin() { return items_.begin() + head_; }
  iterator end() { return items_.end(); }
  const_iterator begin() const { return items_.begin() + head_; }
  const_iterator end() const { return items_.end(); }
  reverse_iterator rbegin() { return reverse_iterator(end()); }
  reverse_iterator rend() { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const { return const_reverse_iterator(begin()); }

  T& front() { return items_[head_]; }
  const T& front() const { return items_[head_]; }
  T& back() { return items_.back(); }
  const T& back() const { return items_.back(); }
  T& operator[](std::size_t i) { return items_[head_ + i]; }
  const T& operator[](std::size_t i) const { return items_[head_ + i]; }

  void push_back(const T& value) { items_.push_back(value); }
  template <typename... Args>
  T& emplace_back(Args&&... args) {
    return items_.emplace_back(std::forward<Args>(args)...);
  }
  iterator insert(const_iterator at, const T& value) { return items_.insert(at, value); }
  iterator insert(const_iterator at, std::size_t copies, const T& value) {
    return items_.insert(at, copies, value);
  }
  template <typename It>
  void assign(It first, It last) {
    items_.assign(first, last);
    head_ = 0;
  }

  void pop_front() {
    ++head_;
    compact();
  }
  iterator erase(const_iterator at) { return erase(at, std::next(at)); }
  // Erasing from the front only moves the index.
  iterator erase(const_iterator first, const_iterator last) {
    if (first == last) return begin() + (first - cbegin());
    if (first == cbegin()) {
      head_ += static_cast<std::uint32_t>(last - first);
      compact();
      return begin();
    }
    return items_.erase(first, last);
  }
  void clear() {
    items_.clear();
    head_ = 0;
  }

 private:
  const_iterator cbegin() const { return begin(); }
  void compact() {
    if (head_ == items_.size()) {
      clear();  // gives the heap's room back: a key that went quiet holds nothing
    } else if (head_ >= kCompactFrom && 2 * head_ >= items_.size()) {
      items_.erase(items_.begin(), items_.begin() + head_);
      head_ = 0;
    }
  }
  static constexpr std::uint32_t kCompactFrom = 16;

  Items items_;
  std::uint32_t head_ = 0;
};

}  // namespace ratchet::limit
