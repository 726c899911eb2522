// What a plugin folder provides, read without opening an engine: for
// checking a config against the plugins before an engine opens it.
//
// A free function without shared state; safe from any thread.
#pragma once

#include <filesystem>

#include "ratchet/export.hpp"
#include "ratchet/plugins.hpp"
#include "ratchet/status.hpp"

namespace ratchet {

// Loads every plugin library in `folder` the way an engine does, to read
// what each declares (name, version, operations; `configured` stays false),
// and unloads them again; files that fail to load are listed with why.
// Loading runs each library's initialisers, as opening an engine would.
// Fails with kConfig when the folder does not exist or is not a directory.
[[nodiscard]] RATCHET_API Result<PluginReport> scan_plugin_folder(const std::filesystem::path& folder);

}  // namespace ratchet
