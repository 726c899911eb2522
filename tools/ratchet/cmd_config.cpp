// `ratchet config check [FILE]`: reads and validates a config file without
// opening its database, and checks its plugins and the steps' calls against
// the plugin folder (loading each library there to read what it provides),
// so it refuses what opening the engine would. Uses the engine's internal
// config loader (ratchet_config), because the public API only reads a
// config while opening an engine.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

#include "commands.hpp"
#include "config/load.hpp"
#include "config/plugin_check.hpp"
#include "config/summary.hpp"
#include "exit_codes.hpp"
#include "ratchet/plugin_folder.hpp"

namespace ratchet::cli {

namespace {

struct CheckOptions {
  std::string file;  // as a positional
  std::string flag;  // as -c FILE
  bool quiet = false;
};

// The calls of the steps and the configured plugins checked against the
// plugin folder, as opening the engine checks them, and the files there
// that failed to load. A folder that is not there is only noted: the file
// may be checked away from where it runs.
struct PluginCheck {
  std::vector<config::Diagnostic> problems;
  std::vector<PluginLoadFailure> refused;
  std::string note;
};

PluginCheck check_plugins(const config::Config& c, const std::string& file) {
  PluginCheck out;
  std::error_code ec;
  if (!std::filesystem::is_directory(c.engine.plugins, ec)) {
    out.note = fmt::format(
        "plugin folder {} does not exist: the steps' calls were not checked against plugins (opening the "
        "engine there refuses the file)",
        c.engine.plugins.string());
    return out;
  }
  auto report = scan_plugin_folder(c.engine.plugins);
  if (!report) {
    out.problems.push_back({config::SourceRef{file, 0, 0, "engine.plugins"}, report.error().message()});
    return out;
  }
  std::vector<config::ProvidedPlugin> provided;
  for (const auto& p : report->loaded) provided.push_back({p.name, p.version, p.operations});
  out.problems = config::check_plugin_calls(c, provided, report->folder);
  out.refused = std::move(report->failed);
  return out;
}

// "/headers/X-Api-Key" as ".headers.X-Api-Key", the way keys are named in
// the file.
std::string pointer_to_dotted(const std::string& pointer) {
  std::string out;
  for (std::size_t i = 0; i < pointer.size(); ++i) {
    if (pointer[i] == '/') {
      out += '.';
    } else if (pointer[i] == '~' && i + 1 < pointer.size()) {
      out += pointer[++i] == '0' ? '~' : '/';
    } else {
      out += pointer[i];
    }
  }
  return out;
}

// The file named, as a positional or with -c as every other command takes
// it; else where those look: $RATCHET_CONFIG, else ./ratchet.toml.
Result<std::string> file_to_check(const CheckOptions& o) {
  if (!o.file.empty() && !o.flag.empty() && o.file != o.flag) {
    return fail(Error::invalid_argument(
        fmt::format("two config files named, \"{}\" and -c \"{}\": check one at a time", o.file, o.flag)));
  }
  if (!o.file.empty()) return o.file;
  if (!o.flag.empty()) return o.flag;
  if (const char* env = std::getenv("RATCHET_CONFIG"); env && *env) return std::string(env);
  return std::string("ratchet.toml");
}

int check(CheckOptions o) {
  auto file = file_to_check(o);
  if (!file) return usage_error(file.error().message());
  o.file = *file;
  std::error_code ec;
  if (!std::filesystem::exists(o.file, ec)) {
    return usage_error(fmt::format(
        "config file \"{}\" not found (looked in {}); name it, pass -c FILE or set RATCHET_CONFIG", o.file,
        std::filesystem::current_path(ec).string()));
  }
  auto loaded = config::load_file(o.file);
  PluginCheck plugins;
  if (loaded) plugins = check_plugins(**loaded, o.file);
  const auto& problems = loaded ? plugins.problems : loaded.error();
  if (!problems.empty()) {
    fmt::print(stderr, "ratchet: {} has {} problem{}:\n{}", o.file, problems.size(),
               problems.size() == 1 ? "" : "s", config::to_string(problems));
    if (!plugins.refused.empty()) {
      fmt::print(stderr, "plugin files that failed to load (one may be what is missing):\n");
      for (const auto& f : plugins.refused) fmt::print(stderr, "  {}: {}\n", f.file.string(), f.reason);
    }
    return kUsage;
  }
  if (o.quiet) return kOk;
  std::string summary = config::summarize(**loaded);
  if (!summary.empty() && summary.back() != '\n') summary += '\n';
  fmt::print("{} is valid\n{}", o.file, summary);
  for (const auto& f : plugins.refused) {
    fmt::print(stderr, "ratchet: warning: plugin file {}: {} (nothing in {} needs it)\n", f.file.string(),
               f.reason, o.file);
  }
  if (!plugins.note.empty()) fmt::print(stderr, "ratchet: warning: {}\n", plugins.note);
  // A value of a few characters cannot be masked in what a server sends
  // back without hiding ordinary text too (engine/common/secret_mask.hpp).
  for (const auto& [name, spec] : (*loaded)->plugins) {
    for (const auto& pointer : spec.secret_paths) {
      const nlohmann::json::json_pointer at(pointer);
      if (!spec.settings.contains(at) || !spec.settings[at].is_string()) continue;
      const std::size_t length = spec.settings[at].get_ref<const std::string&>().size();
      if (length == 0 || length >= 4) continue;
      fmt::print(stderr,
                 "ratchet: warning: plugin.{}{}: the value from the environment has only {} character{}; "
                 "values under 4 characters are not masked (they would hide ordinary text), so it may "
                 "show in step outputs and logs: use a longer secret\n",
                 name, pointer_to_dotted(pointer), length, length == 1 ? "" : "s");
    }
  }
  return kOk;
}

}  // namespace

void add_config(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("config", "Work with config files");
  cmd->require_subcommand(1, 1);
  auto o = std::make_shared<CheckOptions>();
  auto* chk = cmd->add_subcommand(
      "check",
      "Validate a config file without opening its database, its plugins and steps' calls against the plugin "
      "folder included: print every problem (file:line:column: key: message) and exit 2, or print a short "
      "summary of what it declares (secrets shown as ***)");
  chk->add_option(
      "FILE", o->file,
      "The TOML config file (or -c FILE; default: $RATCHET_CONFIG, else ratchet.toml in the current "
      "folder)");
  add_config_option(*chk, o->flag, ConfigDefault::kLeaveEmpty,
                    "The TOML config file, as every other command takes it (here or before the command)");
  chk->add_flag("-q,--quiet", o->quiet, "Print nothing when the file is valid");
  chk->callback([o, &action] { action = [o] { return check(*o); }; });
}

}  // namespace ratchet::cli
