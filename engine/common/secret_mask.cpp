#include "common/secret_mask.hpp"

#include <algorithm>
#include <array>

namespace ratchet::common {
namespace {

constexpr std::size_t kNone = std::string_view::npos;
constexpr char kHex[] = "0123456789ABCDEF";

char upper(char c) noexcept { return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c; }

bool unprintable(unsigned char u) noexcept { return u < 0x20 || u >= 0x7f; }

// Whether text[q, q+2) are the two hex digits of byte `u`, in either case.
bool hex_at(std::string_view text, std::size_t q, unsigned char u) noexcept {
  return q + 1 < text.size() && upper(text[q]) == kHex[u >> 4] && upper(text[q + 1]) == kHex[u & 15];
}

// The letter after '\' that JSON may write for `c`, or 0.
char json_short_escape(char c) noexcept {
  switch (c) {
    case '"': return '"';
    case '\\': return '\\';
    case '/': return '/';
    case '\n': return 'n';
    case '\t': return 't';
    case '\r': return 'r';
    case '\b': return 'b';
    case '\f': return 'f';
    default: return 0;
  }
}

// The name HTML gives byte `c` ("amp" for '&'), or empty.
std::string_view html_name(char c) noexcept {
  switch (c) {
    case '&': return "amp";
    case '<': return "lt";
    case '>': return "gt";
    case '"': return "quot";
    case '\'': return "apos";
    default: return {};
  }
}

// The length of an HTML character reference to byte `u` that text[p...]
// begins with ("&amp;", "&#38;", "&#x26;", "&#X0026;"), or 0.
std::size_t html_reference_at(std::string_view text, std::size_t p, char c) noexcept {
  if (p + 3 >= text.size() || text[p] != '&') return 0;
  const auto u = static_cast<unsigned char>(c);
  if (const std::string_view name = html_name(c); !name.empty()) {
    if (text.substr(p + 1, name.size()) == name && p + 1 + name.size() < text.size() &&
        text[p + 1 + name.size()] == ';')
      return name.size() + 2;
  }
  if (text[p + 1] != '#' || u >= 0x80) return 0;
  std::size_t q = p + 2;
  const bool hex = text[q] == 'x' || text[q] == 'X';
  if (hex) ++q;
  unsigned value = 0;
  const std::size_t digits_from = q;
  for (; q < text.size() && q - digits_from < 8; ++q) {
    const char d = text[q];
    unsigned digit = 0;
    if (d >= '0' && d <= '9') {
      digit = static_cast<unsigned>(d - '0');
    } else if (hex && upper(d) >= 'A' && upper(d) <= 'F') {
      digit = static_cast<unsigned>(upper(d) - 'A' + 10);
    } else {
      break;
    }
    value = value * (hex ? 16 : 10) + digit;
  }
  if (q == digits_from || q >= text.size() || text[q] != ';' || value != u) return 0;
  return q + 1 - p;
}

// The lengths of the forms of byte `c` that text[p...] begins with.
std::size_t forms_at(std::string_view text, std::size_t p, char c, std::array<std::size_t, 8>& lens) {
  std::size_t n = 0;
  if (p >= text.size()) return 0;
  const auto u = static_cast<unsigned char>(c);
  const char t = text[p];
  if (t == c) lens[n++] = 1;
  if (t == '%') {
    if (hex_at(text, p + 1, u)) lens[n++] = 3;
    if (p + 2 < text.size() && text[p + 1] == '2' && text[p + 2] == '5' && hex_at(text, p + 3, u))
      lens[n++] = 5;
  }
  if (t == '+' && c == ' ') lens[n++] = 1;
  if (t == '?' && unprintable(u)) lens[n++] = 1;
  if (t == '\\' && p + 1 < text.size()) {
    const char e = text[p + 1];
    if (const char s = json_short_escape(c); s != 0 && e == s) lens[n++] = 2;
    if ((e == 'u' || e == 'U') && u < 0x80 && p + 5 < text.size() && text[p + 2] == '0' &&
        text[p + 3] == '0' && hex_at(text, p + 4, u)) {
      lens[n++] = 6;
    }
  }
  if (t == '&') {
    if (const std::size_t len = html_reference_at(text, p, c); len != 0) lens[n++] = len;
  }
  return n;
}

// The end of a form of `secret` that starts at text[p], or kNone. Only a byte
// with several forms here (a '%' or '\' in the secret) tries each of them.
std::size_t match_at(std::string_view text, std::size_t p, std::string_view secret) {
  std::array<std::size_t, 8> lens{};
  for (std::size_t i = 0; i < secret.size(); ++i) {
    const std::size_t n = forms_at(text, p, secret[i], lens);
    if (n == 0) return kNone;
    if (n > 1) {
      const auto choices = lens;
      for (std::size_t k = 0; k < n; ++k) {
        if (auto end = match_at(text, p + choices[k], secret.substr(i + 1)); end != kNone) return end;
      }
      return kNone;
    }
    p += lens[0];
  }
  return p;
}

std::string base64(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    std::uint32_t group = static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i])) << 16;
    if (i + 1 < bytes.size())
      group |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8;
    if (i + 2 < bytes.size()) group |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 2]));
    for (int k = 3; k >= 0; --k) out += kAlphabet[(group >> (6 * k)) & 63];
  }
  return out;
}

// `bytes` as hex digits, in lower or upper case.
std::string hex(std::string_view bytes, bool lower) {
  std::string out;
  for (const char c : bytes) {
    const auto u = static_cast<unsigned char>(c);
    for (const unsigned d : {static_cast<unsigned>(u >> 4), static_cast<unsigned>(u & 15)}) {
      const char digit = kHex[d];
      out += lower && digit >= 'A' ? static_cast<char>(digit - 'A' + 'a') : digit;
    }
  }
  return out;
}

bool base64_char(char c) noexcept {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/' ||
         c == '-' || c == '_';
}

}  // namespace

SecretMask::SecretMask(const std::vector<std::string>& secrets) {
  for (const auto& s : secrets) {
    if (s.size() < kMinLength) continue;
    if (std::ranges::any_of(entries_, [&](const Entry& e) { return e.secret == s; })) continue;
    Entry& e = entries_.emplace_back();
    e.secret = s;
    const auto first = static_cast<unsigned char>(s[0]);
    for (unsigned char c : {first, static_cast<unsigned char>('%'), static_cast<unsigned char>('\\'),
                            static_cast<unsigned char>('&')})
      e.starts[c] = true;
    e.hex = {hex(s, true), hex(s, false)};
    if (s[0] == ' ') e.starts[static_cast<unsigned char>('+')] = true;
    if (unprintable(first)) e.starts[static_cast<unsigned char>('?')] = true;
    // Preceded by k bytes in its group of three, the secret's bits start at
    // bit 8k: only the characters whose six bits all lie inside it are the
    // same whatever surrounds it.
    for (std::size_t k = 0; k < 3; ++k) {
      const std::string encoded = base64(std::string(k, '\0') + s);
      const std::size_t from = (8 * k + 5) / 6;
      const std::size_t to = 8 * (k + s.size()) / 6;
      if (to <= from || to - from < kMinLength) continue;
      std::string middle = encoded.substr(from, to - from);
      std::string url = middle;
      std::ranges::replace(url, '+', '-');
      std::ranges::replace(url, '/', '_');
      e.base64.push_back(std::move(middle));
      if (url != e.base64.back()) e.base64.push_back(std::move(url));
    }
  }
}

std::vector<SecretMask::Range> SecretMask::find(std::string_view text) const {
  std::vector<Range> found;
  for (const auto& e : entries_) {
    for (std::size_t p = 0; p < text.size(); ++p) {
      if (!e.starts[static_cast<unsigned char>(text[p])]) continue;
      if (auto end = match_at(text, p, e.secret); end != kNone) {
        found.emplace_back(p, end);
        p = end - 1;
      }
    }
    for (const auto& digits : e.hex) {
      for (auto at = text.find(digits); at != kNone; at = text.find(digits, at + digits.size()))
        found.emplace_back(at, at + digits.size());
    }
    for (const auto& middle : e.base64) {
      for (auto at = text.find(middle); at != kNone; at = text.find(middle, at + middle.size())) {
        std::size_t begin = at;
        std::size_t end = at + middle.size();
        while (begin > 0 && base64_char(text[begin - 1])) --begin;
        while (end < text.size() && base64_char(text[end])) ++end;
        while (end < text.size() && text[end] == '=') ++end;
        found.emplace_back(begin, end);
      }
    }
  }
  std::ranges::sort(found);
  std::vector<Range> merged;
  for (const auto& r : found) {
    if (!merged.empty() && r.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  return merged;
}

std::string SecretMask::mask(std::string_view text) const {
  if (entries_.empty()) return std::string(text);
  const auto ranges = find(text);
  std::string out;
  out.reserve(text.size());
  std::size_t done = 0;
  for (const auto& [begin, end] : ranges) {
    out.append(text.substr(done, begin - done));
    out += kMask;
    done = end;
  }
  out.append(text.substr(done));
  return out;
}

bool SecretMask::holds_secret(std::string_view text) const {
  return !entries_.empty() && !find(text).empty();
}

nlohmann::json SecretMask::mask_json(const nlohmann::json& value) const {
  if (entries_.empty()) return value;
  if (value.is_string()) return mask(value.get_ref<const std::string&>());
  if (value.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& item : value) out.push_back(mask_json(item));
    return out;
  }
  if (value.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [key, item] : value.items()) out[mask(key)] = mask_json(item);
    return out;
  }
  return value;
}

std::string mask_secrets(std::string_view text, const std::vector<std::string>& secrets) {
  return SecretMask(secrets).mask(text);
}

}  // namespace ratchet::common
