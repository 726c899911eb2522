// The ratchet command: runs, enqueues and inspects jobs of the engine a TOML
// config file declares. See `ratchet --help` and README.md.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "commands.hpp"
#include "exit_codes.hpp"

namespace ratchet::cli {

namespace {

// Every command's own -c, resolved once parsing is done (resolve_config):
// the file may also be named before the command (`ratchet -c F jobs list`,
// `ratchet jobs -c F list`), where the root takes it.
struct ConfigOption {
  const CLI::App* command;
  const CLI::Option* option;
  std::string* path;
  ConfigDefault fallback;
};

std::vector<ConfigOption>& config_options() {
  static std::vector<ConfigOption> options;
  return options;
}

// Precedence: the command's own -c, else the one before it, else
// $RATCHET_CONFIG, else ./ratchet.toml. Two different files named is a
// usage error: which one was meant is not guessed.
int resolve_config(const CLI::Option& outer, const std::string& outer_path) {
  const bool named_before = outer.count() > 0;
  for (const ConfigOption& c : config_options()) {
    // Only the command given: the leaves of a group may share one path.
    if (!c.command->parsed()) continue;
    if (c.option->count() > 0) {
      if (named_before && *c.path != outer_path)
        return usage_error(fmt::format(
            "two config files named, -c \"{}\" before the command and -c \"{}\" after it: name one",
            outer_path, *c.path));
      continue;
    }
    if (named_before) {
      *c.path = outer_path;
    } else if (c.fallback == ConfigDefault::kEnvironmentOrHere) {
      const char* env = std::getenv("RATCHET_CONFIG");
      *c.path = env != nullptr && *env != '\0' ? env : "ratchet.toml";
    }
  }
  return kOk;
}

}  // namespace

void add_config_option(CLI::App& cmd, std::string& path, ConfigDefault fallback, std::string help) {
  if (help.empty()) {
    help =
        "The TOML config file, here or before the command (default: $RATCHET_CONFIG, else ratchet.toml "
        "in the current folder)";
  }
  path.clear();
  config_options().push_back({&cmd, cmd.add_option("-c,--config", path, std::move(help)), &path, fallback});
}

std::unique_ptr<Engine> open_cli_engine(const std::string& config, int& exit_code, EngineUse use,
                                        ConfigOverrides overrides) {
  std::error_code ec;
  if (!std::filesystem::exists(config, ec)) {
    exit_code = usage_error(
        fmt::format("config file \"{}\" not found (looked in {}); pass -c FILE or set RATCHET_CONFIG", config,
                    std::filesystem::current_path(ec).string()));
    return nullptr;
  }
  auto engine = use == EngineUse::kRun ? Engine::open_config(config, std::move(overrides))
                                       : Engine::inspect_config(config, std::move(overrides));
  if (!engine) {
    std::string hint;
    if (engine.error().code() == ErrorCode::kConfig)
      hint = "fix the file and retry; `ratchet config check FILE`";
    exit_code = report(engine.error(), hint);
    return nullptr;
  }
  exit_code = kOk;
  return std::move(*engine);
}

namespace {

int run_main(int argc, char** argv) {
  CLI::App app{
      "ratchet: a durable job engine in one SQLite file (or a PostgreSQL database shared by many machines) "
      "that "
      "calls rate-limited HTTP APIs through plugins.",
      "ratchet"};
  app.footer(std::string(kExitCodeHelp) +
             "\nEvery command that needs the engine takes -c FILE, before or after the command (default "
             "$RATCHET_CONFIG, else ./ratchet.toml)."
             "\nRun `ratchet COMMAND --help` for a command's flags.");
  app.require_subcommand(1, 1);
  app.fallthrough();  // the root's options may be given after the command too
  Globals globals;
  std::string config_before;
  auto* config =
      app.add_option("-c,--config", config_before, "The TOML config file, for the command that follows");
  auto* level =
      app.add_option(
             "--log-level", globals.log_level,
             "Log level: trace, debug, info, warn, error, off (default: info for run, warn otherwise)")
          ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  app.add_option("--log-format", globals.log_format, "Log format on stderr: text or json (default text)")
      ->check(CLI::IsMember({"text", "json"}));

  Action action;
  add_run(app, globals, action);
  add_enqueue(app, action);
  add_jobs(app, action);
  add_plugins(app, action);
  add_limits(app, action);
  add_config(app, action);
  add_web(app, action);
  add_version(app, action);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11 names the flag; say where the help is.
    std::fprintf(stderr,
                 "ratchet: %s\nratchet: run `ratchet --help` (or `ratchet COMMAND --help`) for usage\n",
                 e.what());
    return kUsage;
  }
  if (const int code = resolve_config(*config, config_before); code != kOk) return code;
  // Commands that run the engine set up logging with their status line
  // themselves; everything else logs plainly.
  // Only `run` narrates at info; the other commands print their answer, and
  // the engine's "plugin loaded" lines would only bury it.
  globals.log_level_given = level->count() > 0;
  if (!globals.log_level_given) globals.log_level = "warn";
  if (auto s = setup_logging(globals.log_level, globals.format(), nullptr); !s) return report(s.error());
  if (!action) return usage_error("no command given; run `ratchet --help`");
  return action();
}

}  // namespace
}  // namespace ratchet::cli

int main(int argc, char** argv) {
  // A write past a file size limit (ulimit -f) then fails with EFBIG, which
  // the store reports ("a file size limit was reached") and the run ends on
  // with exit 1, nothing half-written; by default SIGXFSZ killed the process
  // with no word (exit 153).
  ::signal(SIGXFSZ, SIG_IGN);
  try {
    return ratchet::cli::run_main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ratchet: internal error: %s (please report it)\n", e.what());
    return ratchet::cli::kFailure;
  }
}
