#include "config/source.hpp"

#include <fmt/format.h>
#include <utility>

#include "config/summary.hpp"

namespace ratchet::config {
namespace {

// Settings read once when the engine starts.
std::vector<std::string> restart_only_changes(const EngineSpec& a, const EngineSpec& b) {
  std::vector<std::string> out;
  if (a.database != b.database) out.emplace_back("database");
  if (a.plugins != b.plugins) out.emplace_back("plugins");
  if (a.workers != b.workers) out.emplace_back("workers");
  if (a.sqlite_synchronous_full != b.sqlite_synchronous_full) out.emplace_back("sqlite.synchronous");
  if (a.postgres_connect_timeout != b.postgres_connect_timeout) out.emplace_back("postgres.connect_timeout");
  if (a.busy_timeout != b.busy_timeout) out.emplace_back("busy_timeout");
  return out;
}

template <typename Map, typename Describe>
void compare(const Map& before, const Map& after, std::string_view kind, Describe describe,
             std::vector<std::string>& out) {
  for (const auto& [name, spec] : after) {
    auto it = before.find(name);
    if (it == before.end()) {
      out.push_back(fmt::format("{} {} added", kind, name));
    } else if (describe(it->second) != describe(spec)) {
      out.push_back(fmt::format("{} {} changed", kind, name));
    }
  }
  for (const auto& [name, spec] : before) {
    if (!after.contains(name)) out.push_back(fmt::format("{} {} removed", kind, name));
  }
}

}  // namespace

std::string describe_changes(const Config& before, const Config& after) {
  std::vector<std::string> items;
  // Compared unmasked, so a changed value from the environment still counts.
  auto engine_text = [](const Config& c) {
    Config plain;
    plain.engine = c.engine;
    return summarize_engine(plain);
  };
  if (engine_text(before) != engine_text(after)) {
    std::string item = "engine settings changed";
    auto restart = restart_only_changes(before.engine, after.engine);
    if (!restart.empty()) {
      item += " (";
      for (std::size_t i = 0; i < restart.size(); ++i) item += (i ? ", " : "") + restart[i];
      item += " take effect after a restart)";
    }
    items.push_back(std::move(item));
  }
  // Summaries mask secrets, so a changed secret is compared on the values.
  compare(
      before.plugins, after.plugins, "plugin",
      [](const PluginSpec& p) { return summarize_plugin(p) + p.settings.dump(); }, items);
  compare(
      before.jobs, after.jobs, "job type",
      [](const JobTypeSpec& j) {
        return summarize_job(j) + [&] {
          std::string args;
          for (const auto& s : j.steps) args += s.args.dump();
          return args;
        }();
      },
      items);
  if (items.empty()) return "no changes";
  std::string out;
  for (const auto& item : items) out += item + "\n";
  out.pop_back();
  return out;
}

std::expected<std::unique_ptr<ConfigSource>, std::vector<Diagnostic>> ConfigSource::open(
    const std::filesystem::path& file, EnvLookup env) {
  auto loaded = load_file(file, env);
  if (!loaded) return std::unexpected(std::move(loaded.error()));
  return std::make_unique<ConfigSource>(file, std::move(*loaded), std::move(env));
}

ConfigSource::ConfigSource(std::filesystem::path file, ConfigPtr initial, EnvLookup env)
    : file_(std::move(file)), env_(std::move(env)), current_(std::move(initial)) {}

std::expected<std::string, std::vector<Diagnostic>> ConfigSource::reload() {
  std::lock_guard lock(reload_mutex_);
  auto loaded = load_file(file_, env_);
  if (!loaded) return std::unexpected(std::move(loaded.error()));
  ConfigPtr before = current();
  if (before) {
    // A job type's jobs in flight would run on without their steps' plugin
    // settings, and its parked and scheduled ones would be claimed by a
    // config that no longer declares them: each call failed, and the jobs
    // died of a reload. A restart leaves them in the database instead, for
    // a process whose config has the type.
    std::vector<Diagnostic> removed;
    for (const auto& [name, spec] : before->jobs) {
      if ((*loaded)->jobs.contains(name)) continue;
      removed.push_back(Diagnostic{
          SourceRef{file_.string(), 0, 0, "job." + name},
          "job type \"" + name +
              "\" is no longer declared; removing a job type takes a restart (its jobs stay in the "
              "database for a process whose config declares it), so keep [job." +
              name + "] to reload now"});
    }
    if (!removed.empty()) return std::unexpected(std::move(removed));
  }
  std::string changes = before ? describe_changes(*before, **loaded) : std::string("loaded");
  ConfigPtr previous;
  {
    std::lock_guard swap_lock(current_mutex_);
    previous = std::exchange(current_, std::move(*loaded));
  }
  // `previous` is released here, outside the lock, if nobody else holds it.
  return changes;
}

}  // namespace ratchet::config
