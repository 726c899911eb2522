#include "http/url.hpp"

namespace ratchet::http {
namespace {

bool unreserved(unsigned char c) noexcept {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
         c == '_' || c == '~';
}

}  // namespace

std::string encode_path_segment(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size() * 3);
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (unreserved(c)) {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    }
  }
  return out;
}

std::string redact_url(std::string_view url) {
  url = url.substr(0, url.find_first_of("?#"));
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return std::string(url);
  const auto authority_begin = scheme_end + 3;
  const auto path_begin = url.find('/', authority_begin);
  const auto authority =
      url.substr(authority_begin, path_begin == std::string_view::npos ? std::string_view::npos
                                                                       : path_begin - authority_begin);
  const auto at = authority.rfind('@');
  std::string out(url.substr(0, authority_begin));
  out += at == std::string_view::npos ? authority : authority.substr(at + 1);
  if (path_begin != std::string_view::npos) out += url.substr(path_begin);
  return out;
}

}  // namespace ratchet::http
