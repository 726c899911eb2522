// Loads the plugins built into the build tree's plugin folder once per test
// binary and calls them against a FakeHostServices: no network.
#pragma once

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "fake_host_services.hpp"
#include "plugin_host/plugin_host.hpp"
#include "ratchet_test_paths.hpp"

namespace ratchet::testing {

inline plugin_host::PluginHost& built_plugins() {
  static std::unique_ptr<plugin_host::PluginHost> host = [] {
    plugin_host::PluginHostOptions options;
    options.folder = RATCHET_PLUGIN_DIR;
    auto h = plugin_host::PluginHost::open(options);
    if (!h) throw std::runtime_error(h.error().to_string());
    return std::move(*h);
  }();
  return *host;
}

inline Result<plugin_host::CallReply> call_plugin(FakeHostServices& services, const std::string& plugin,
                                                  const std::string& operation, const nlohmann::json& args,
                                                  const nlohmann::json& settings) {
  return built_plugins().call(plugin, operation, args, settings, services, {"key-1", "job-1", "step-1"});
}

// A transport failure as the engine's HTTP client would report it.
inline plugin_host::HttpResult transport_failure(plugin_host::HttpFailure error, std::string message) {
  plugin_host::HttpResult r;
  r.error = error;
  r.message = std::move(message);
  return r;
}

}  // namespace ratchet::testing
