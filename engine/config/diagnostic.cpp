#include "config/diagnostic.hpp"

namespace ratchet::config {

std::string Diagnostic::to_string() const {
  std::string out = where.to_string();
  out += ": ";
  out += message;
  return out;
}

std::string to_string(const std::vector<Diagnostic>& diagnostics) {
  std::string out;
  for (const auto& d : diagnostics) {
    out += d.to_string();
    out += '\n';
  }
  return out;
}

}  // namespace ratchet::config
