// Expansion of ${NAME} environment references in configuration strings.
//
// Pure function over its inputs; thread-safe when the lookup is.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/load.hpp"

namespace ratchet::config {

struct EnvExpansion {
  std::string value;                 // the text with every reference replaced
  bool used_env = false;             // at least one ${NAME} was replaced: treat value as secret
  std::vector<std::string> missing;  // referenced variables that are not set
  std::vector<std::string> values;   // what each replaced reference stood for: secrets
  std::optional<std::string> error;  // malformed reference (e.g. "${" never closed)
};

// Replaces every ${NAME} (NAME = letters, digits, '_', not starting with a
// digit) by the variable's value; "$${" stands for a literal "${".
EnvExpansion expand_env(std::string_view text, const EnvLookup& env);

}  // namespace ratchet::config
