// Checks a config against the plugins a folder provides: every configured
// plugin ([plugin.X]) has a file, and every step calls a plugin that is
// there and an operation it has. Opening an engine refuses what this finds,
// and `ratchet config check` reports it, so both say the same.
//
// A step may call a plugin without a [plugin.X] table: it runs with the
// default policy, as long as a file provides it.
//
// Free function without shared state; safe from any thread.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "config/diagnostic.hpp"
#include "config/spec.hpp"

namespace ratchet::config {

// What one loaded plugin provides.
struct ProvidedPlugin {
  std::string name;
  std::string version;
  std::vector<std::string> operations;
};

// One diagnostic per problem, at the [plugin.X] table or the step, in file
// order. `folder` is named in the messages.
std::vector<Diagnostic> check_plugin_calls(const Config& config, const std::vector<ProvidedPlugin>& provided,
                                           const std::filesystem::path& folder);

}  // namespace ratchet::config
