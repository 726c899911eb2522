#include "common/database_url.hpp"

namespace ratchet::common {

bool is_server_url(std::string_view database) noexcept {
  const auto sep = database.find("://");
  if (sep == std::string_view::npos || sep == 0) return false;
  for (char c : database.substr(0, sep)) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '+' ||
                    c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

}  // namespace ratchet::common
