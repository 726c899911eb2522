#include "config/env.hpp"

#include <cstdlib>

namespace ratchet::config {
namespace {

bool name_char(char c, bool first) {
  bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  return first ? alpha : alpha || (c >= '0' && c <= '9');
}

}  // namespace

EnvLookup process_env() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* v = std::getenv(std::string(name).c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

EnvExpansion expand_env(std::string_view text, const EnvLookup& env) {
  EnvExpansion out;
  std::size_t i = 0;
  while (i < text.size()) {
    if (text.compare(i, 3, "$${") == 0) {
      out.value += "${";
      i += 3;
      continue;
    }
    if (text.compare(i, 2, "${") != 0) {
      out.value += text[i++];
      continue;
    }
    std::size_t close = text.find('}', i + 2);
    if (close == std::string_view::npos) {
      out.error = "a \"${\" is never closed with \"}\" (write ${NAME}, or $${ for a literal \"${\")";
      return out;
    }
    std::string_view name = text.substr(i + 2, close - i - 2);
    bool valid = !name.empty();
    for (std::size_t k = 0; k < name.size() && valid; ++k) valid = name_char(name[k], k == 0);
    if (!valid) {
      out.error = "\"${" + std::string(name) +
                  "}\" is not a variable reference (names hold letters, digits and '_' and do not "
                  "start with a digit)";
      return out;
    }
    out.used_env = true;
    if (auto v = env ? env(name) : std::nullopt) {
      out.value += *v;
      out.values.push_back(std::move(*v));
    } else {
      out.missing.emplace_back(name);
    }
    i = close + 1;
  }
  return out;
}

}  // namespace ratchet::config
