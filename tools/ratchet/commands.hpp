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

#include "config/spec.hpp"
#include "log_setup.hpp"
#include "ratchet/engine.hpp"
#include "ratchet/status.hpp"

namespace ratchet::cli {

namespace web {
struct WebOptions;
class WebServer;
}  // namespace web

struct Globals {
  std::string log_level = "info";
  std::string log_format = "text";
  bool log_level_given = false;
  LogFormat format() const { return log_format == "json" ? LogFormat::kJson : LogFormat::kText; }
};

using Action = std::function<int()>;

// Adds -c/--config to a command. Once parsed, `path` is the file named
// there, else the one named before the command (`ratchet -c F jobs list`),
// else, with kEnvironmentOrHere, $RATCHET_CONFIG or ratchet.toml in the
// current folder (kLeaveEmpty: the command looks for it itself). `help`
// empty: the usual text.
enum class ConfigDefault { kEnvironmentOrHere, kLeaveEmpty };
void add_config_option(CLI::App& cmd, std::string& path,
                       ConfigDefault fallback = ConfigDefault::kEnvironmentOrHere, std::string help = {});

// How a command opens the engine: with its plugins (to run jobs or list
// plugins), or only its database and config (to look at jobs and act on
// them, which no plugin file, missing or broken, may stop).
enum class EngineUse { kRun, kInspect };

// Opens the engine a config file declares, or prints why not (with a hint
// when the file is missing) and returns nullptr with `exit_code` set.
std::unique_ptr<Engine> open_cli_engine(const std::string& config, int& exit_code, EngineUse use,
                                        ConfigOverrides overrides = {});

// The [web] section of a config file the engine opened (defaults when it
// has none).
config::WebSpec web_spec(const std::string& config_file);
// The dashboard's token from the environment variable `token_env`, when
// given (else `token` is left as it is): kOk, or the usage error's exit code
// when it is unset or short.
int web_token(const std::string& token_env, std::string& token);
// Serves the dashboard of `engine` on `address` and prints where, with the
// login link when no token is set (`token_from` names where the token is
// read, for the message); nullptr with `exit_code` set on failure.
std::unique_ptr<web::WebServer> start_web(const std::string& address, Engine& engine,
                                          const web::WebOptions& options, const std::string& token_from,
                                          int& exit_code);

void add_run(CLI::App& app, const Globals& globals, Action& action);
void add_enqueue(CLI::App& app, Action& action);
void add_jobs(CLI::App& app, Action& action);
void add_plugins(CLI::App& app, Action& action);
void add_limits(CLI::App& app, Action& action);
void add_config(CLI::App& app, Action& action);
void add_version(CLI::App& app, Action& action);
void add_web(CLI::App& app, Action& action);

}  // namespace ratchet::cli
