// Reading a configuration file into a validated, immutable Config.
//
// The whole file is parsed and checked before anything uses it: TOML syntax,
// unknown keys (with "did you mean"), types, ranges, job steps (names, calls,
// dependencies, cycles, placeholders) and ${NAME} environment references.
// Every problem is collected; the result is either a Config or all of them.
//
// `${NAME}` in a string value takes the value of environment variable NAME
// (`$${` writes a literal "${"); names, calls, queues, `after` entries and
// argument types are refused from the environment, since they shape the job
// and appear in summaries. Such values are treated as secrets: their
// JSON pointers are listed in PluginSpec::secret_paths (plugin settings) or
// StepSpec::secret_paths (step arguments), other keys holding them in
// Config::env_keys, and no diagnostic or summary ever shows them.
//
// Relative `engine.database` and `engine.plugins` paths resolve against the
// folder of the config file.
//
// Free functions without shared state; safe to call from any thread as long
// as the EnvLookup is.
#pragma once

#include <expected>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/diagnostic.hpp"
#include "config/spec.hpp"

namespace ratchet::config {

// Returns the value of an environment variable, or nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;

// The process environment (getenv).
EnvLookup process_env();

using LoadResult = std::expected<ConfigPtr, std::vector<Diagnostic>>;

// Reads and validates the file at `path`.
LoadResult load_file(const std::filesystem::path& path, const EnvLookup& env = process_env());

// Reads and validates `text` as if it were the file `file_name` (used in
// diagnostics and as the base of relative paths).
LoadResult load_string(std::string_view text, const std::string& file_name,
                       const EnvLookup& env = process_env());

}  // namespace ratchet::config
