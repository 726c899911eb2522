// `ratchet plugins`, `ratchet limits`, `ratchet version`.
#include <fmt/format.h>

#include <cstdio>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "exit_codes.hpp"
#include "ratchet/version.hpp"
#include "text.hpp"
#include "web/api.hpp"

namespace ratchet::cli {

namespace {

struct InfoOptions {
  std::string config;
  bool json = false;
};

int show_plugins(const InfoOptions& o) {
  int code = kOk;
  auto engine = open_cli_engine(o.config, code, EngineUse::kRun);
  if (!engine) return code;
  if (o.json) {
    // The dashboard's API answers with the same shape.
    fmt::print("{}\n", web::plugins(*engine, engine->now())
                           .body.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return kOk;
  }
  PluginReport r = engine->plugins();
  fmt::print("plugin folder {}\n", r.folder.string());
  if (r.loaded.empty()) fmt::print("  no plugin loaded\n");
  for (const auto& p : r.loaded) {
    fmt::print("  {:<18} {:<10} {:<14} {}\n", p.name, p.version,
               p.configured ? "configured" : "not configured", fmt::join(p.operations, ", "));
    fmt::print("  {:<18} {}\n", "", p.file.string());
  }
  if (!r.failed.empty()) {
    fmt::print("files that failed to load\n");
    for (const auto& f : r.failed) fmt::print("  {}: {}\n", f.file.string(), f.reason);
  }
  return kOk;
}

int show_limits(const InfoOptions& o) {
  int code = kOk;
  auto engine = open_cli_engine(o.config, code, EngineUse::kInspect);
  if (!engine) return code;
  auto now = engine->now();
  if (o.json) {
    fmt::print("{}\n",
               web::limits(*engine, now).body.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return kOk;
  }
  // With what the running engines reported: their learned paces, the keys
  // waiting, and next free slots only they know.
  auto limits = web::merged_limits(*engine, web::engine_reports(*engine), now);
  if (limits.empty()) {
    fmt::print("no limiter declared or learned\n");
    return kOk;
  }
  fmt::print("{:<18} {:<14} {:<40} {}\n", "PLUGIN", "OPERATION", "LIMIT", "NEXT FREE SLOT");
  for (const auto& l : limits) {
    const std::string limit = l.key.empty() ? l.declared : l.declared + " [" + l.key + "]";
    fmt::print("{:<18} {:<14} {:<40} {}\n", l.plugin, l.operation.empty() ? "(all)" : l.operation, limit,
               l.next_free <= now ? "now" : format_relative(l.next_free, now));
  }
  return kOk;
}

}  // namespace

void add_plugins(CLI::App& app, Action& action) {
  auto o = std::make_shared<InfoOptions>();
  auto* cmd = app.add_subcommand(
      "plugins",
      "List the plugin folder: loaded plugins (version, file, operations) and files that failed to load");
  add_config_option(*cmd, o->config);
  cmd->add_flag("--json", o->json, "Print JSON instead of text");
  cmd->callback([o, &action] { action = [o] { return show_plugins(*o); }; });
}

void add_limits(CLI::App& app, Action& action) {
  auto o = std::make_shared<InfoOptions>();
  auto* cmd = app.add_subcommand(
      "limits", "List every limiter: plugin, operation, declared or learned limit and its next free slot");
  add_config_option(*cmd, o->config);
  cmd->add_flag("--json", o->json, "Print JSON instead of text");
  cmd->callback([o, &action] { action = [o] { return show_limits(*o); }; });
}

void add_version(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("version", "Print the version of the ratchet command and of libratchet");
  cmd->callback([&action] {
    action = [] {
      fmt::print("ratchet {} (libratchet {})\n", kHeaderVersion, version());
      return kOk;
    };
  });
}

}  // namespace ratchet::cli
