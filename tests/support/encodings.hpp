// Encodings a secret may be sent or echoed in, written independently of
// the engine's own, for the tests that check it is masked in each.
#pragma once

#include <cstdint>
#include <string>

namespace ratchet::testing {

// Standard base64 with '=' padding (RFC 4648).
inline std::string base64(const std::string& bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    std::uint32_t g = static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i])) << 16;
    if (i + 1 < bytes.size()) g |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8;
    if (i + 2 < bytes.size()) g |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 2]));
    out += kAlphabet[(g >> 18) & 63];
    out += kAlphabet[(g >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(g >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[g & 63] : '=';
  }
  return out;
}

}  // namespace ratchet::testing
