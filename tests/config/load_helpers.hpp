// Shared helpers of the config tests: loading text with a fixed environment
// and reading diagnostics as strings.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "config/load.hpp"

namespace ratchet::config::testing {

inline EnvLookup fixed_env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

inline LoadResult load(std::string_view text, std::map<std::string, std::string> vars = {}) {
  return load_string(text, "t.toml", fixed_env(std::move(vars)));
}

inline std::vector<std::string> errors(const LoadResult& r) {
  std::vector<std::string> out;
  if (r) return out;
  for (const auto& d : r.error()) out.push_back(d.to_string());
  return out;
}

inline std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

// The one diagnostic starting with `prefix` ("t.toml:3:11: engine.workers: ").
#define EXPECT_DIAGNOSTIC(result, prefix, fragment)                                     \
  do {                                                                                  \
    auto _lines = ::ratchet::config::testing::errors(result);                           \
    int _found = 0;                                                                     \
    for (const auto& _l : _lines) {                                                     \
      if (_l.rfind(prefix, 0) == 0 && _l.find(fragment) != std::string::npos) ++_found; \
    }                                                                                   \
    EXPECT_EQ(_found, 1) << "want " << (prefix) << "..." << (fragment) << "\ngot:\n"    \
                         << ::ratchet::config::testing::joined(_lines);                 \
  } while (false)

}  // namespace ratchet::config::testing
