// The demo's config: config/oscar.toml with its base URLs pointed at the
// mock portal server, its plugin folder set to the build tree's, and short
// leases so that jobs held by a killed worker are taken over within seconds.
// Pure function; safe from any thread.
#pragma once

#include <string>
#include <string_view>

#include "ratchet/status.hpp"

namespace ratchet::demo {

// `oscar` is the text of config/oscar.toml; `base_url` is the mock server's
// "http://127.0.0.1:PORT". Fails when the text lacks what it rewrites.
Result<std::string> demo_config(std::string_view oscar, std::string_view base_url,
                                std::string_view plugin_dir);

}  // namespace ratchet::demo
