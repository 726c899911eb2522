#include "http/headers.hpp"

namespace ratchet::http {
namespace {

char lower(char c) noexcept { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

}  // namespace

bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

std::optional<std::string_view> Headers::get(std::string_view name) const noexcept {
  for (const auto& [n, v] : fields_) {
    if (iequals(n, name)) return std::string_view(v);
  }
  return std::nullopt;
}

std::vector<std::string_view> Headers::get_all(std::string_view name) const {
  std::vector<std::string_view> out;
  for (const auto& [n, v] : fields_) {
    if (iequals(n, name)) out.emplace_back(v);
  }
  return out;
}

}  // namespace ratchet::http
