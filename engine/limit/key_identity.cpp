#include "limit/key_identity.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <array>

namespace ratchet::limit {
namespace {

constexpr char kHex[] = "0123456789abcdef";

std::string hex(const unsigned char* bytes, std::size_t n) {
  std::string out;
  out.reserve(n * 2);
  for (std::size_t i = 0; i < n; ++i) {
    out += kHex[bytes[i] >> 4];
    out += kHex[bytes[i] & 0xf];
  }
  return out;
}

bool plain(std::string_view text) {
  if (text.size() > kMaxPlainKey || (!text.empty() && text.front() == '#')) return false;
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) return false;
  }
  return true;
}

}  // namespace

std::string key_identity(std::string_view text, bool hashed, std::string_view salt) {
  if (!hashed && plain(text)) return std::string(text);
  std::array<unsigned char, EVP_MAX_MD_SIZE> mac{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), salt.data(), static_cast<int>(salt.size()),
       reinterpret_cast<const unsigned char*>(text.data()), text.size(), mac.data(), &len);
  return "#" + hex(mac.data(), std::min<std::size_t>(len, 16));
}

Result<std::string> key_salt(const ConnectionFactory& connect) {
  std::array<unsigned char, 32> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1)
    return fail(Error::internal("no random bytes for the salt of keyed limits (OpenSSL RAND_bytes failed)"));
  const std::string fresh = hex(bytes.data(), bytes.size());
  if (!connect) return fresh;
  auto db = connect();
  if (!db) return fail(db.error().with_context("the salt of keyed limits"));
  std::string salt;
  Status st = (*db)->transact("ratchet/limit-key-salt", "read the salt of keyed limits",
                              [&] { salt = (*db)->meta_value("limit_key_salt", fresh); });
  if (!st) return fail(st.error());
  return salt;
}

}  // namespace ratchet::limit
