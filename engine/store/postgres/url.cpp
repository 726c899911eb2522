#include "store/postgres/url.hpp"

#include <cctype>

namespace ratchet::store::pg {
namespace {

constexpr std::string_view kMask = "***";

bool starts_with_scheme(std::string_view url) {
  return url.starts_with("postgresql://") || url.starts_with("postgres://");
}

// Masks the value of each `password=` query parameter of a URL.
void mask_query(std::string& out, std::size_t query_start) {
  std::size_t pos = query_start;
  while (pos < out.size()) {
    std::size_t end = out.find('&', pos);
    if (end == std::string::npos) end = out.size();
    constexpr std::string_view key = "password=";
    if (std::string_view(out).substr(pos, end - pos).starts_with(key)) {
      out.replace(pos + key.size(), end - pos - key.size(), kMask);
      end = pos + key.size() + kMask.size();
    }
    pos = end + 1;
  }
}

std::string mask_uri(std::string_view url) {
  std::string out(url);
  const std::size_t authority = out.find("://") + 3;
  // libpq ends the user info at the first '@' before the first '/'; the
  // last one is used here, so a password holding a stray '@', ':' or '?'
  // is still hidden as a whole.
  const std::size_t slash = out.find('/', authority);
  const std::size_t at = out.rfind('@', slash);
  if (at != std::string::npos && at >= authority) {
    const std::size_t colon = out.find(':', authority);
    if (colon != std::string::npos && colon < at) {
      out.replace(colon + 1, at - colon - 1, kMask);
    }
  }
  // Searched after masking, so a '?' that was part of the password is gone.
  const std::size_t query = out.find('?', authority);
  if (query != std::string::npos) mask_query(out, query + 1);
  return out;
}

// key=value form: values may be single-quoted with backslash escapes.
std::string mask_keywords(std::string_view text) {
  std::string out;
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t key_start = i;
    while (i < text.size() && text[i] != '=' && !std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    const std::string_view key = text.substr(key_start, i - key_start);
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i >= text.size() || text[i] != '=') {
      out.append(text.substr(key_start, i - key_start));
      continue;
    }
    ++i;
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    const std::size_t value_start = i;
    if (i < text.size() && text[i] == '\'') {
      ++i;
      while (i < text.size() && text[i] != '\'') i += (text[i] == '\\' && i + 1 < text.size()) ? 2 : 1;
      if (i < text.size()) ++i;
    } else {
      while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    }
    out.append(key);
    out += '=';
    if (key == "password") {
      out.append(kMask);
    } else {
      out.append(text.substr(value_start, i - value_start));
    }
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) out += text[i++];
  }
  return out;
}

// The password part of a URL as written: between the user's ':' and the
// last '@' before the path (as mask_uri), or a key=value string's
// `password=` value; empty when there is none.
std::string written_password(std::string_view url) {
  if (starts_with_scheme(url)) {
    const std::size_t authority = url.find("://") + 3;
    const std::size_t slash = url.find('/', authority);
    const std::size_t at = url.rfind('@', slash);
    if (at == std::string_view::npos || at < authority) return {};
    const std::size_t colon = url.find(':', authority);
    if (colon == std::string_view::npos || colon >= at) return {};
    return std::string(url.substr(colon + 1, at - colon - 1));
  }
  const std::size_t key = url.find("password");
  if (key == std::string_view::npos) return {};
  std::size_t i = url.find('=', key);
  if (i == std::string_view::npos) return {};
  ++i;
  while (i < url.size() && std::isspace(static_cast<unsigned char>(url[i]))) ++i;
  const std::size_t start = i;
  if (i < url.size() && url[i] == '\'') {
    ++i;
    while (i < url.size() && url[i] != '\'') i += (url[i] == '\\' && i + 1 < url.size()) ? 2 : 1;
    return std::string(url.substr(start + 1, i - start - 1));
  }
  while (i < url.size() && !std::isspace(static_cast<unsigned char>(url[i]))) ++i;
  return std::string(url.substr(start, i - start));
}

std::string percent_decoded(std::string_view text) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && hex(text[i + 1]) >= 0 && hex(text[i + 2]) >= 0) {
      out += static_cast<char>(hex(text[i + 1]) * 16 + hex(text[i + 2]));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

}  // namespace

std::string scrub_url_password(std::string text, std::string_view url) {
  const std::string written = written_password(url);
  if (written.empty()) return text;
  text = scrub(std::move(text), written);
  return scrub(std::move(text), percent_decoded(written));
}

std::string mask_url(std::string_view url) {
  return starts_with_scheme(url) ? mask_uri(url) : mask_keywords(url);
}

std::string scrub(std::string text, std::string_view secret) {
  if (secret.empty()) return text;
  for (std::size_t pos = text.find(secret); pos != std::string::npos;
       pos = text.find(secret, pos + kMask.size())) {
    text.replace(pos, secret.size(), kMask);
  }
  return text;
}

}  // namespace ratchet::store::pg
