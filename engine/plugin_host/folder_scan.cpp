// ratchet::scan_plugin_folder: what a plugin folder provides, read by
// loading it in a host of its own that is gone when the report is made.
#include "plugin_host/plugin_host.hpp"
#include "ratchet/plugin_folder.hpp"

namespace ratchet {

Result<PluginReport> scan_plugin_folder(const std::filesystem::path& folder) {
  plugin_host::PluginHostOptions options;
  options.folder = folder;
  auto host = plugin_host::PluginHost::open(std::move(options));
  if (!host) return fail(host.error());
  PluginReport report;
  report.folder = (*host)->folder();
  for (auto& p : (*host)->list()) report.loaded.push_back({p.name, p.version, p.file, p.operations, false});
  for (auto& f : (*host)->failures()) report.failed.push_back({f.file, f.reason});
  return report;
}

}  // namespace ratchet
