// `ratchet config check FILE`: reads and validates a config file without
// opening its database or loading plugins. Uses the engine's internal config
// loader (ratchet_config), because the public API only reads a config while
// opening an engine.
#include <fmt/format.h>

#include <cstdio>

#include "commands.hpp"
#include "config/load.hpp"
#include "config/summary.hpp"
#include "exit_codes.hpp"

namespace ratchet::cli {

namespace {

struct CheckOptions {
  std::string file;
  bool quiet = false;
};

int check(const CheckOptions& o) {
  std::error_code ec;
  if (!std::filesystem::exists(o.file, ec)) {
    return usage_error(fmt::format("config file \"{}\" not found", o.file));
  }
  auto loaded = config::load_file(o.file);
  if (!loaded) {
    const auto& problems = loaded.error();
    fmt::print(stderr, "ratchet: {} has {} problem{}:\n{}\n", o.file, problems.size(),
               problems.size() == 1 ? "" : "s", config::to_string(problems));
    return kUsage;
  }
  if (o.quiet) return kOk;
  std::string summary = config::summarize(**loaded);
  if (!summary.empty() && summary.back() != '\n') summary += '\n';
  fmt::print("{} is valid\n{}", o.file, summary);
  return kOk;
}

}  // namespace

void add_config(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("config", "Work with config files");
  cmd->require_subcommand(1, 1);
  auto o = std::make_shared<CheckOptions>();
  auto* chk = cmd->add_subcommand(
      "check",
      "Validate a config file without opening its database: print every problem (file:line:column: key: "
      "message) and exit 2, or print a short summary of what it declares (secrets shown as ***)");
  chk->add_option("FILE", o->file, "The TOML config file")->required();
  chk->add_flag("-q,--quiet", o->quiet, "Print nothing when the file is valid");
  chk->callback([o, &action] { action = [o] { return check(*o); }; });
}

}  // namespace ratchet::cli
