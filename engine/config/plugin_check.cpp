#include "config/plugin_check.hpp"

#include <algorithm>

#include "config/suggest.hpp"

namespace ratchet::config {

namespace {

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

}  // namespace

std::vector<Diagnostic> check_plugin_calls(const Config& config, const std::vector<ProvidedPlugin>& provided,
                                           const std::filesystem::path& folder) {
  std::vector<std::string> loaded;
  for (const auto& p : provided) loaded.push_back(p.name);
  auto find = [&](const std::string& name) -> const ProvidedPlugin* {
    auto it = std::ranges::find(provided, name, &ProvidedPlugin::name);
    return it == provided.end() ? nullptr : &*it;
  };

  std::vector<Diagnostic> out;
  for (const auto& [name, spec] : config.plugins) {
    if (const ProvidedPlugin* plugin = find(name)) {
      // A misspelt [plugin.X.operation.Y] applied its limits to nothing:
      // the operation meant ran unlimited, and nothing said so.
      for (const auto& [operation, policy] : spec.operations) {
        if (std::ranges::find(plugin->operations, operation) != plugin->operations.end()) continue;
        SourceRef at = policy.limits.empty() ? spec.source : policy.limits.front().source;
        at.key_path = "plugin." + name + ".operation." + operation;
        out.push_back({std::move(at), "plugin " + name + " " + plugin->version + " has no operation \"" +
                                          operation + "\"" + did_you_mean(operation, plugin->operations) +
                                          " (it has: " + joined(plugin->operations) +
                                          "), so these settings would apply to no call"});
      }
      continue;
    }
    out.push_back({spec.source, "plugin \"" + name + "\" is configured ([plugin." + name +
                                    "]) but no file in " + folder.string() + " provides it (loaded: " +
                                    joined(loaded) + "); put its library there or remove the table"});
  }
  for (const auto& [job, spec] : config.jobs) {
    for (const auto& step : spec.steps) {
      const std::string call =
          "job " + job + " step " + step.name + " calls " + step.plugin + "." + step.operation;
      const ProvidedPlugin* plugin = find(step.plugin);
      if (!plugin) {
        std::string what =
            call + ", but no plugin named \"" + step.plugin + "\" is loaded from " + folder.string();
        if (!config.plugins.contains(step.plugin))
          what += ", and the file has no [plugin." + step.plugin + "] table";
        what += " (loaded: " + joined(loaded) + ")";
        out.push_back({step.source, std::move(what)});
        continue;
      }
      if (std::ranges::find(plugin->operations, step.operation) != plugin->operations.end()) continue;
      out.push_back({step.source, call + ", but plugin " + step.plugin + " " + plugin->version +
                                      " has no operation \"" + step.operation + "\"" +
                                      did_you_mean(step.operation, plugin->operations) +
                                      " (it has: " + joined(plugin->operations) + ")"});
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return std::pair(a.where.line, a.where.column) < std::pair(b.where.line, b.where.column);
  });
  return out;
}

}  // namespace ratchet::config
