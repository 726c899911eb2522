// A limiter's state packed into a few bytes while nothing uses it: a keyed
// limit keeps one limiter a key, of up to a hundred thousand, and most of
// them idle (limit/keyed_limiters.hpp). The packing is lossless: a limiter
// unpacked decides as the one packed would have.
//
// A limiter lists its fields once, in one order, to a visitor (`Io`) that
// is a PackWriter when packing and a PackReader when unpacking:
//
//   io.flag(b)    a bool: its presence bit is its value
//   io.number(n)  an integer: zigzag varint, absent when zero
//   io.time(t)    a time in microseconds: the varint of its step from the
//                 time before it (the first: none, it is the base below),
//                 absent when zero (times of one limiter lie close
//                 together, so a step takes a byte or three)
//   io.real(x)    a double: eight bytes, absent when zero
//   io.times(q)   a queue of times, or of (time, units) pairs
//
// Layout: the name it is kept under (a key) with its length, the first time
// as a varint, the time the limiter may be forgotten (Limiter::forgettable)
// in whole seconds after it, the presence bits in groups of eight (a byte
// saying which groups have a bit set, per eight groups, then those groups),
// then each present field's bytes. A key idle with a pace learned from
// headers takes under fifty bytes in all.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace ratchet::limit {

// The packed bytes; move-only, eight bytes in place.
class PackedLimiter {
 public:
  PackedLimiter() = default;
  explicit PackedLimiter(const std::vector<std::uint8_t>& bytes);

  bool empty() const { return bytes_ == nullptr; }
  const std::uint8_t* data() const { return bytes_.get(); }
  // The name it was packed under.
  std::string_view name() const;
  // From when the limiter packed holds nothing a new one would not.
  std::int64_t forget_at_us() const;
  // Where the state starts, after the name.
  const std::uint8_t* state() const;

 private:
  std::unique_ptr<std::uint8_t[]> bytes_;
};

namespace packing {

inline std::uint64_t zigzag(std::int64_t v) {
  return (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63);
}
inline std::int64_t unzigzag(std::uint64_t v) {
  return static_cast<std::int64_t>(v >> 1) ^ -static_cast<std::int64_t>(v & 1);
}
void put_varint(std::vector<std::uint8_t>& out, std::uint64_t v);
std::uint64_t get_varint(const std::uint8_t*& in);

}  // namespace packing

class PackWriter {
 public:
  void flag(bool b) { bit(b); }
  template <typename Int>
  void number(const Int& n) {
    bit(n != 0);
    if (n != 0) packing::put_varint(payload_, packing::zigzag(static_cast<std::int64_t>(n)));
  }
  void time(std::int64_t t);
  void real(double x);
  template <typename Queue>
  void times(const Queue& q) {
    bit(!q.empty());
    if (q.empty()) return;
    packing::put_varint(payload_, q.size());
    for (const auto& e : q) element(e);
  }

  // The bytes, under `name`, with the time the limiter may be forgotten from.
  PackedLimiter finish(std::string_view name, std::int64_t forget_at_us) const;

 private:
  void bit(bool b);
  void step(std::int64_t t);
  void element(std::int64_t t) { step(t); }
  void element(const std::pair<std::int64_t, std::int64_t>& e) {
    step(e.first);
    packing::put_varint(payload_, packing::zigzag(e.second));
  }

  std::vector<std::uint8_t> bits_;
  int used_ = 8;  // bits used of the last byte of bits_
  std::vector<std::uint8_t> payload_;
  bool based_ = false;
  std::int64_t base_ = 0;  // the first time
  std::int64_t last_ = 0;  // the time before the next
};

// Counts the fields a limiter lists: a PackReader needs to know how many.
class FieldCounter {
 public:
  std::size_t fields = 0;
  template <typename T>
  void flag(const T&) {
    ++fields;
  }
  template <typename T>
  void number(const T&) {
    ++fields;
  }
  template <typename T>
  void time(const T&) {
    ++fields;
  }
  template <typename T>
  void real(const T&) {
    ++fields;
  }
  template <typename T>
  void times(const T&) {
    ++fields;
  }
};

class PackReader {
 public:
  // `fields`: how many the limiter lists (FieldCounter).
  PackReader(const PackedLimiter& packed, std::size_t fields);

  void flag(bool& b) { b = bit(); }
  template <typename Int>
  void number(Int& n) {
    n = bit() ? static_cast<Int>(packing::unzigzag(packing::get_varint(payload_))) : Int{};
  }
  void time(std::int64_t& t);
  void real(double& x);
  template <typename Queue>
  void times(Queue& q) {
    q.clear();
    if (!bit()) return;
    const std::uint64_t n = packing::get_varint(payload_);
    for (std::uint64_t i = 0; i < n; ++i) q.push_back(element<typename Queue::value_type>());
  }

 private:
  bool bit();
  std::int64_t step();
  template <typename T>
  T element() {
    if constexpr (std::is_same_v<T, std::int64_t>) {
      return step();
    } else {
      const std::int64_t t = step();
      return {t, packing::unzigzag(packing::get_varint(payload_))};
    }
  }

  const std::uint8_t* bits_ = nullptr;  // the next mask or group of bits
  std::size_t bit_ = 0;
  std::uint8_t mask_ = 0;
  std::uint8_t group_ = 0;
  const std::uint8_t* payload_ = nullptr;
  std::int64_t last_ = 0;
  bool first_taken_ = false;  // the first time is the base
};

}  // namespace ratchet::limit
