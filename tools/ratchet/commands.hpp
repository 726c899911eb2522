// The subcommands of the ratchet command. Each add_* declares one command's
// flags on `app` and sets `action` to what runs once the command line
// parsed; the action returns the exit code (see exit_codes.hpp).
//
// Not thread-safe: used from main() only.
#pragma once

#include <CLI/CLI.hpp>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "log_setup.hpp"
#include "ratchet/engine.hpp"
#include "ratchet/status.hpp"

namespace ratchet::cli {

struct Globals {
  std::string log_level = "info";
  std::string log_format = "text";
  bool log_level_given = false;
  LogFormat format() const { return log_format == "json" ? LogFormat::kJson : LogFormat::kText; }
};

using Action = std::function<int()>;

// Adds -c/--config (default: $RATCHET_CONFIG, else ratchet.toml in the
// current folder) to a command.
void add_config_option(CLI::App& cmd, std::string& path);

// How a command opens the engine: with its plugins (to run jobs or list
// plugins), or only its database and config (to look at jobs and act on
// them, which no plugin file, missing or broken, may stop).
enum class EngineUse { kRun, kInspect };

// Opens the engine a config file declares, or prints why not (with a hint
// when the file is missing) and returns nullptr with `exit_code` set.
std::unique_ptr<Engine> open_cli_engine(const std::string& config, int& exit_code, EngineUse use,
                                        ConfigOverrides overrides = {});

void add_run(CLI::App& app, const Globals& globals, Action& action);
void add_enqueue(CLI::App& app, Action& action);
void add_jobs(CLI::App& app, Action& action);
void add_plugins(CLI::App& app, Action& action);
void add_limits(CLI::App& app, Action& action);
void add_config(CLI::App& app, Action& action);
void add_version(CLI::App& app, Action& action);

}  // namespace ratchet::cli
