// Readers of the kinds of section of a configuration file: [engine],
// [plugin.NAME], [job.NAME] and [web]. Each reads what it can, reports every
// problem to the Reader and returns a spec with defaults where a value was
// missing or wrong. Internal to the config part; one thread per load.
#pragma once

#include <filesystem>
#include <string>

#include <toml++/toml.h>

#include "config/reader.hpp"
#include "config/spec.hpp"

namespace ratchet::config::detail {

// `base` is the folder relative database and plugin paths resolve against.
EngineSpec read_engine(Reader& r, const toml::table& t, const std::filesystem::path& base);

PluginSpec read_plugin(Reader& r, const std::string& name, const toml::table& t);

JobTypeSpec read_job(Reader& r, const std::string& name, const toml::table& t);

WebSpec read_web(Reader& r, const toml::table& t);

}  // namespace ratchet::config::detail
