#include "limit/packed_state.hpp"

#include <algorithm>

namespace ratchet::limit {

namespace packing {

void put_varint(std::vector<std::uint8_t>& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<std::uint8_t>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<std::uint8_t>(v));
}

std::uint64_t get_varint(const std::uint8_t*& in) {
  std::uint64_t v = 0;
  for (int shift = 0;; shift += 7) {
    const std::uint8_t b = *in++;
    v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return v;
  }
}

}  // namespace packing

PackedLimiter::PackedLimiter(const std::vector<std::uint8_t>& bytes)
    : bytes_(std::make_unique_for_overwrite<std::uint8_t[]>(bytes.size())) {
  std::copy(bytes.begin(), bytes.end(), bytes_.get());
}

std::string_view PackedLimiter::name() const {
  const std::uint8_t* p = bytes_.get();
  const std::uint64_t n = packing::get_varint(p);
  return {reinterpret_cast<const char*>(p), n};
}

const std::uint8_t* PackedLimiter::state() const {
  const std::uint8_t* p = bytes_.get();
  const std::uint64_t n = packing::get_varint(p);
  return p + n;
}

std::int64_t PackedLimiter::forget_at_us() const {
  const std::uint8_t* p = state();
  const auto base = static_cast<std::int64_t>(packing::get_varint(p));
  return base + packing::unzigzag(packing::get_varint(p)) * 1'000'000;
}

void PackWriter::bit(bool b) {
  if (used_ == 8) {
    bits_.push_back(0);
    used_ = 0;
  }
  if (b) bits_.back() = static_cast<std::uint8_t>(bits_.back() | (1u << used_));
  ++used_;
}

void PackWriter::step(std::int64_t t) {
  if (!based_) {
    // The first time is the base, in the header: its step is none.
    based_ = true;
    base_ = last_ = t;
    return;
  }
  packing::put_varint(payload_, packing::zigzag(t - last_));
  last_ = t;
}

void PackWriter::time(std::int64_t t) {
  bit(t != 0);
  if (t != 0) step(t);
}

void PackWriter::real(double x) {
  bit(x != 0);
  if (x == 0) return;
  const auto raw = std::bit_cast<std::uint64_t>(x);
  for (int i = 0; i < 8; ++i) payload_.push_back(static_cast<std::uint8_t>(raw >> (8 * i)));
}

PackedLimiter PackWriter::finish(std::string_view name, std::int64_t forget_at_us) const {
  std::vector<std::uint8_t> out;
  out.reserve(16 + name.size() + bits_.size() + payload_.size());
  packing::put_varint(out, name.size());
  out.insert(out.end(), name.begin(), name.end());
  packing::put_varint(out, static_cast<std::uint64_t>(base_));
  // Whole seconds, rounded up: forgetting a little late loses nothing.
  const std::int64_t after = forget_at_us - base_;
  const std::int64_t s = after >= 0 ? (after + 999'999) / 1'000'000 : -(-after / 1'000'000);
  packing::put_varint(out, packing::zigzag(s));
  // The groups of eight bits, eight groups a mask: most fields are absent.
  for (std::size_t g = 0; g < bits_.size(); g += 8) {
    std::uint8_t mask = 0;
    for (std::size_t i = g; i < std::min(g + 8, bits_.size()); ++i)
      if (bits_[i] != 0) mask = static_cast<std::uint8_t>(mask | (1u << (i - g)));
    out.push_back(mask);
    for (std::size_t i = g; i < std::min(g + 8, bits_.size()); ++i)
      if (bits_[i] != 0) out.push_back(bits_[i]);
  }
  out.insert(out.end(), payload_.begin(), payload_.end());
  return PackedLimiter(out);
}

PackReader::PackReader(const PackedLimiter& packed, std::size_t fields) : bits_(packed.state()) {
  last_ = static_cast<std::int64_t>(packing::get_varint(bits_));
  (void)packing::get_varint(bits_);
  // The payload follows the groups of bits: a mask, then its groups present.
  const std::size_t groups = (fields + 7) / 8;
  payload_ = bits_;
  for (std::size_t g = 0; g < groups; g += 8) {
    const std::uint8_t mask = *payload_++;
    payload_ += std::popcount(mask);
  }
}

bool PackReader::bit() {
  if (bit_ % 64 == 0) mask_ = *bits_++;
  if (bit_ % 8 == 0) group_ = (mask_ >> (bit_ % 64 / 8)) & 1u ? *bits_++ : 0;
  const bool b = (group_ >> (bit_ % 8)) & 1u;
  ++bit_;
  return b;
}

std::int64_t PackReader::step() {
  if (!first_taken_) {
    first_taken_ = true;
    return last_;
  }
  last_ += packing::unzigzag(packing::get_varint(payload_));
  return last_;
}

void PackReader::time(std::int64_t& t) { t = bit() ? step() : 0; }

void PackReader::real(double& x) {
  x = 0;
  if (!bit()) return;
  std::uint64_t raw = 0;
  for (int i = 0; i < 8; ++i) raw |= static_cast<std::uint64_t>(*payload_++) << (8 * i);
  x = std::bit_cast<double>(raw);
}

}  // namespace ratchet::limit
