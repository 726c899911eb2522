#include "plugin_host/plugin_host.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>
#include <system_error>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "plugin_host/call.hpp"
#include "plugin_host/private_dir.hpp"

namespace ratchet::plugin_host {
namespace {

namespace fs = std::filesystem;

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

PluginInfo info_of(const Library& lib) { return {lib.name(), lib.version(), lib.file(), lib.operations()}; }

}  // namespace

Result<std::unique_ptr<PluginHost>> PluginHost::open(PluginHostOptions options) {
  std::error_code ec;
  if (options.folder.empty())
    return fail(Error::invalid_argument("no plugin folder given ([engine] plugins)"));
  if (!fs::is_directory(options.folder, ec))
    return fail(Error::config("plugin folder " + options.folder.string() +
                              " does not exist or is not a directory; create it or fix [engine] plugins"));
  options.folder = fs::absolute(options.folder, ec);
  if (!options.clock) options.clock = SystemClock::instance();

  bool owns = false;
  if (options.private_dir.empty()) {
    const fs::path parent = fs::temp_directory_path(ec);
    if (ec)
      return fail(Error::io("no temp directory for plugin copies: " + ec.message() + " (check TMPDIR)"));
    const SweepReport swept = sweep_private_dirs(parent);
    if (swept.removed > 0) {
      spdlog::info("removed {} plugin folder(s) of stopped processes from {}", swept.removed,
                   parent.string());
    }
    auto made = make_private_dir(parent);
    if (!made) return fail(made.error());
    options.private_dir = std::move(*made);
    owns = true;
  }
  fs::create_directories(options.private_dir, ec);
  if (ec)
    return fail(Error::io("cannot create the private plugin directory " + options.private_dir.string() +
                          ": " + ec.message()));

  std::unique_ptr<PluginHost> host(new PluginHost(std::move(options), owns));
  host->rescan();
  if (host->options_.rescan_interval.count() > 0)
    host->poller_ = std::jthread([h = host.get()](std::stop_token stop) { h->poll(std::move(stop)); });
  return host;
}

PluginHost::PluginHost(PluginHostOptions options, bool owns_private_dir)
    : options_(std::move(options)), owns_private_dir_(owns_private_dir) {}

PluginHost::~PluginHost() {
  if (poller_.joinable()) {
    poller_.request_stop();
    poller_.join();
  }
  {
    std::unique_lock lock(mu_);
    plugins_.clear();  // libraries still used by calls in flight stay loaded
  }
  if (owns_private_dir_) {
    // A copy still mapped by an abandoned call can be unlinked safely; its
    // pages stay until it is unloaded.
    std::error_code ec;
    fs::remove_all(options_.private_dir, ec);
  }
}

void PluginHost::poll(std::stop_token stop) {
  while (options_.clock->wait_for(options_.rescan_interval, stop)) {
    if (stop.stop_requested()) return;
    rescan();
  }
}

ScanReport PluginHost::rescan() {
  std::lock_guard scan_lock(scan_mu_);
  ScanReport report;

  // What the folder holds now, sorted so that the first of two files with one
  // plugin name wins predictably.
  std::map<fs::path, FileSignature> present;
  std::error_code ec;
  for (fs::directory_iterator it(options_.folder, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    if (p.extension() != ".so") continue;
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    present[p] = FileSignature{static_cast<std::uintmax_t>(st.st_size),
                               std::int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec,
                               static_cast<std::uintmax_t>(st.st_ino)};
  }
  if (ec)
    spdlog::warn("plugin folder {} could not be read completely: {}", options_.folder.string(), ec.message());

  // Files that disappeared: their plugins go; names they held free up. Only
  // a complete listing says a file is gone: one cut short (too many open
  // files) unloaded every plugin, and each call then failed its job's
  // attempt with "no plugin is loaded".
  if (!ec) {
    std::unique_lock lock(mu_);
    bool freed = false;
    for (auto it = files_.begin(); it != files_.end();) {
      if (present.contains(it->first)) {
        ++it;
        continue;
      }
      if (!it->second.provides.empty()) {
        auto p = plugins_.find(it->second.provides);
        if (p != plugins_.end() && p->second->file() == it->first) {
          spdlog::info("plugin {} {} unloaded: {} was removed", p->first, p->second->version(),
                       it->first.string());
          report.removed.push_back(p->first);
          plugins_.erase(p);
          freed = true;
        }
      }
      failures_.erase(it->first);
      it = files_.erase(it);
    }
    if (freed)
      for (auto& [path, state] : files_)
        if (state.duplicate) state.retry = true;
  }

  for (const auto& [path, sig] : present) {
    {
      std::shared_lock lock(mu_);
      auto known = files_.find(path);
      if (known != files_.end() && known->second.signature == sig && !known->second.retry) continue;
    }
    const fs::path copy = options_.private_dir / fmt::format("{}.{}{}", path.stem().string(), ++generation_,
                                                             path.extension().string());
    auto loaded = load_library(path, copy);

    std::unique_lock lock(mu_);
    FileState& state = files_[path];
    state.signature = sig;
    state.retry = false;
    state.duplicate = false;
    auto refuse = [&](std::string reason) {
      const bool keeps = !state.provides.empty() && plugins_.contains(state.provides);
      spdlog::warn("plugin file {} refused: {}{}", path.string(), reason,
                   keeps ? fmt::format(" (plugin {} keeps its previous version)", state.provides) : "");
      failures_[path] = reason;
      report.failed.push_back({path, std::move(reason)});
    };
    if (!loaded) {
      state.retry = loaded.error().retry;
      refuse(loaded.error().reason);
      continue;
    }
    std::shared_ptr<const Library> lib = std::move(*loaded);
    auto taken = plugins_.find(lib->name());
    if (taken != plugins_.end() && taken->second->file() != path) {
      state.duplicate = true;
      refuse(
          fmt::format("it declares plugin name '{}', which {} already provides; remove one of the two files",
                      lib->name(), taken->second->file().string()));
      continue;  // `lib` unloads here: nothing from it was handed out
    }
    if (!state.provides.empty() && state.provides != lib->name()) {
      // The file now declares another name: its old plugin goes.
      plugins_.erase(state.provides);
      report.removed.push_back(state.provides);
    }
    if (taken != plugins_.end())
      spdlog::info(
          "plugin {} reloaded: version {} replaces {} (from {}; calls in flight finish on the old one)",
          lib->name(), lib->version(), taken->second->version(), path.string());
    else
      spdlog::info("plugin {} {} loaded from {} (operations: {})", lib->name(), lib->version(), path.string(),
                   join(lib->operations()));
    state.provides = lib->name();
    failures_.erase(path);
    report.loaded.push_back(info_of(*lib));
    plugins_[lib->name()] = std::move(lib);
  }
  return report;
}

std::vector<PluginInfo> PluginHost::list() const {
  std::shared_lock lock(mu_);
  std::vector<PluginInfo> out;
  for (const auto& [name, lib] : plugins_) out.push_back(info_of(*lib));
  return out;
}

std::vector<PluginFailure> PluginHost::failures() const {
  std::shared_lock lock(mu_);
  std::vector<PluginFailure> out;
  for (const auto& [file, reason] : failures_) out.push_back({file, reason});
  return out;
}

std::optional<PluginInfo> PluginHost::find(std::string_view name) const {
  std::shared_lock lock(mu_);
  auto it = plugins_.find(name);
  if (it == plugins_.end()) return std::nullopt;
  return info_of(*it->second);
}

Status PluginHost::check_configured(const std::vector<std::string>& names) const {
  std::shared_lock lock(mu_);
  std::vector<std::string> missing;
  for (const auto& n : names)
    if (!plugins_.contains(n)) missing.push_back(n);
  if (missing.empty()) return {};
  std::string msg;
  for (const auto& n : missing)
    msg += fmt::format("{}plugin '{}' is configured ([plugin.{}]) but no file in {} provides it",
                       msg.empty() ? "" : "; ", n, n, options_.folder.string());
  if (!failures_.empty()) {
    msg += "; files that were refused:";
    for (const auto& [file, reason] : failures_)
      msg += fmt::format(" {}: {};", file.filename().string(), reason);
  }
  return fail(Error::config(std::move(msg)));
}

Result<CallReply> PluginHost::call(std::string_view plugin, std::string_view operation,
                                   const nlohmann::json& args, const nlohmann::json& settings,
                                   HostServices& services, const CallContext& context,
                                   std::optional<std::chrono::milliseconds> timeout) const {
  Invocation inv;
  {
    std::shared_lock lock(mu_);
    auto it = plugins_.find(plugin);
    if (it == plugins_.end()) {
      std::vector<std::string> names;
      for (const auto& [n, l] : plugins_) names.push_back(n);
      return fail(
          Error::not_found(fmt::format("no plugin named '{}' is loaded from {} (loaded: {})", plugin,
                                       options_.folder.string(), names.empty() ? "none" : join(names))));
    }
    inv.library = it->second;  // held for the whole call, however long
  }
  inv.fn = inv.library->find(operation);
  if (inv.fn == nullptr)
    return fail(
        Error::not_found(fmt::format("plugin '{}' {} has no operation '{}' (it has: {})", plugin,
                                     inv.library->version(), operation, join(inv.library->operations()))));
  inv.operation = std::string(operation);
  try {
    inv.args = args.is_null() ? "{}" : args.dump();
    inv.config = settings.is_null() ? "{}" : settings.dump();
  } catch (const nlohmann::json::exception& e) {
    return fail(Error::invalid_argument(
        fmt::format("arguments for {}.{} cannot be encoded: {}", plugin, operation, e.what())));
  }
  inv.context = context;
  inv.timeout = timeout.value_or(options_.default_timeout);
  inv.max_output_bytes = options_.max_output_bytes;
  return invoke(std::move(inv), services, *options_.clock);
}

std::int64_t PluginHost::estimate(std::string_view plugin, std::string_view operation,
                                  const nlohmann::json& args, const nlohmann::json& settings) const {
  std::shared_ptr<const Library> library;
  {
    std::shared_lock lock(mu_);
    auto it = plugins_.find(plugin);
    if (it == plugins_.end()) return 0;
    library = it->second;  // held while its code runs
  }
  ratchet_estimate_fn fn = library->find_estimate(operation);
  if (fn == nullptr) return 0;
  try {
    const std::string a = args.is_null() ? "{}" : args.dump();
    const std::string c = settings.is_null() ? "{}" : settings.dump();
    const std::int64_t units = fn(ratchet_str{a.data(), a.size()}, ratchet_str{c.data(), c.size()});
    return units > 0 ? units : 0;
  } catch (...) {
    // A C function that throws is the plugin's bug; the call goes on at its
    // declared cost, and the request's own estimate still counts.
    return 0;
  }
}

}  // namespace ratchet::plugin_host
