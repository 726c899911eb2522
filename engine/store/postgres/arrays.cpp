#include "store/postgres/arrays.hpp"

namespace ratchet::store::pg {

std::string bigint_array(const std::vector<std::int64_t>& values) {
  std::string out = "{";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(values[i]);
  }
  out += '}';
  return out;
}

std::string text_array(const std::vector<std::string>& values) {
  std::size_t size = 2;
  for (const auto& v : values) size += v.size() + 3;
  std::string out;
  out.reserve(size);
  out += '{';
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += '"';
    for (char c : values[i]) {
      // Inside a quoted element only the quote and the backslash are special.
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  out += '}';
  return out;
}

}  // namespace ratchet::store::pg
