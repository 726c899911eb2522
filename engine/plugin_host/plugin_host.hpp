// The plugin host: loads every plugin library in a folder, keeps the folder
// and the loaded set in step (hot drop), and runs plugin operations.
//
//   auto host = PluginHost::open({.folder = "plugins"});
//   if (!host) ...;                                  // the folder is unusable
//   for (auto& f : (*host)->failures()) ...;         // each refused file and why
//   if (auto s = (*host)->check_configured({"imdb"}); !s) ...;  // error at start
//   auto reply = (*host)->call("imdb", "get_rating", args, settings, services, ctx);
//
// Loading: every regular `*.so` file in the folder is loaded from a private
// copy (see library.hpp) and registered under the name its descriptor
// declares. A file that is refused (not a shared library, no entry point,
// another ABI version, a name another file already provides, half-written)
// is listed by failures() with the reason and logged; the others load.
//
// Hot drop: rescan(), or the poller every `rescan_interval`, compares each
// file's (size, mtime, inode) with the last scan: a new file is loaded; a
// changed file is loaded as a new version that serves new calls while calls in
// flight finish on the old one (each call holds the old library); a file that
// fails to load leaves the previous version serving; a removed file's plugin
// is unregistered. Each load is logged with the plugin's name and version.
//
// Ownership: the host owns its registry and private copies; libraries are
// shared with the calls using them and unload when the last one lets go,
// which may be after the host is destroyed (an abandoned, hung call).
//
// Thread-safety: every method may be called from any thread at any time.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "plugin_host/host_services.hpp"
#include "plugin_host/library.hpp"
#include "ratchet/clock.hpp"
#include "ratchet/status.hpp"

namespace ratchet::plugin_host {

struct PluginHostOptions {
  std::filesystem::path folder;  // scanned for *.so; must exist
  // Where private copies of libraries are loaded from. Default: a fresh
  // directory under the system temp directory, removed with the host.
  std::filesystem::path private_dir;
  // How often a background poller rescans the folder; zero (the default)
  // means only explicit rescan() calls pick up changes.
  std::chrono::milliseconds rescan_interval{0};
  // Timeout of a call that names none.
  std::chrono::milliseconds default_timeout{30000};
  // Bound on one call's output buffers.
  std::size_t max_output_bytes = 64u << 20;
  // Times call timeouts and the poller. Default: the system clock.
  std::shared_ptr<const Clock> clock;
};

struct PluginInfo {
  std::string name;
  std::string version;
  std::filesystem::path file;
  std::vector<std::string> operations;
};

struct PluginFailure {
  std::filesystem::path file;
  std::string reason;

  std::string to_string() const { return file.string() + ": " + reason; }
};

// What one scan changed.
struct ScanReport {
  std::vector<PluginInfo> loaded;     // new plugins and new versions
  std::vector<PluginFailure> failed;  // files refused in this scan
  std::vector<std::string> removed;   // plugins whose file disappeared
};

class PluginHost {
 public:
  // Opens the folder and loads what it holds. Fails only if the folder is
  // unusable; refused files are reported by failures().
  [[nodiscard]] static Result<std::unique_ptr<PluginHost>> open(PluginHostOptions options);

  PluginHost(const PluginHost&) = delete;
  PluginHost& operator=(const PluginHost&) = delete;
  ~PluginHost();

  // Brings the loaded set in step with the folder now.
  ScanReport rescan();

  std::vector<PluginInfo> list() const;         // sorted by name
  std::vector<PluginFailure> failures() const;  // sorted by file
  std::optional<PluginInfo> find(std::string_view name) const;

  // Error::config naming each plugin in `names` that no loaded file provides
  // (with the folder and the refused files, which may be why).
  [[nodiscard]] Status check_configured(const std::vector<std::string>& names) const;

  // Runs `operation` of `plugin` with `args` and `settings` (null or empty:
  // {}). A plugin's statuses (ok, retryable, throttled, fatal) come back in
  // the CallReply; an Error means the call did not happen or went wrong in a
  // way the plugin did not report: not_found (no such plugin or operation),
  // timeout (past `timeout`, default options.default_timeout), plugin
  // (garbage reply, an escaped exception).
  [[nodiscard]] Result<CallReply> call(std::string_view plugin, std::string_view operation,
                                       const nlohmann::json& args, const nlohmann::json& settings,
                                       HostServices& services, const CallContext& context,
                                       std::optional<std::chrono::milliseconds> timeout = std::nullopt) const;

  // The units `operation` of `plugin` expects a call with `args` and
  // `settings` to cost, from the plugin's estimate function (ratchet_operation
  // ::estimate); 0 when it has none, is not loaded, or answers 0 or less.
  // Runs on the calling thread; a plugin exception counts as no estimate.
  std::int64_t estimate(std::string_view plugin, std::string_view operation, const nlohmann::json& args,
                        const nlohmann::json& settings) const;

  const std::filesystem::path& folder() const { return options_.folder; }

 private:
  struct FileSignature {
    std::uintmax_t size = 0;
    std::int64_t mtime_ns = 0;
    std::uintmax_t inode = 0;
    bool operator==(const FileSignature&) const = default;
  };
  struct FileState {
    FileSignature signature;
    std::string provides;    // plugin name when loaded
    bool retry = false;      // try again on the next scan even if unchanged
    bool duplicate = false;  // refused for a taken name: retry when the name frees up
  };

  explicit PluginHost(PluginHostOptions options, bool owns_private_dir);
  void poll(std::stop_token stop);

  PluginHostOptions options_;
  bool owns_private_dir_ = false;

  std::mutex scan_mu_;            // one scan at a time; held for a whole scan
  mutable std::shared_mutex mu_;  // guards the three maps below
  std::map<std::string, std::shared_ptr<const Library>, std::less<>> plugins_;
  std::map<std::filesystem::path, FileState> files_;
  std::map<std::filesystem::path, std::string> failures_;
  std::uint64_t generation_ = 0;  // names private copies; under scan_mu_

  std::jthread poller_;  // last: stops before the rest is destroyed
};

}  // namespace ratchet::plugin_host
