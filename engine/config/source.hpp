// The running configuration of an engine and its reload from the file.
//
// ConfigSource holds the current ConfigPtr. Readers call current() on any
// thread and keep the returned pointer for as long as they use it (one
// plugin call, one job attempt), so a reload never changes a config under
// a call in flight; the next current() sees the new one.
//
// reload() re-reads the file: when it is valid the new config is swapped in
// and a short account of what changed is returned; when it is not, the
// running config stays and every diagnostic is returned. Settings that only
// take effect at start (database, plugin folder, workers, ...) are swapped
// in too but the account says they need a restart.
//
// Thread-safety: current() is safe from any thread and holds a lock only
// for a pointer copy (libstdc++ 12's std::atomic<shared_ptr> hides its lock
// from ThreadSanitizer, so a plain mutex keeps TSan builds meaningful);
// reload() calls are serialized and never hold that lock while loading.
#pragma once

#include <expected>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "config/load.hpp"

namespace ratchet::config {

class ConfigSource {
 public:
  // Loads `file` for the first time; all diagnostics when it is invalid.
  static std::expected<std::unique_ptr<ConfigSource>, std::vector<Diagnostic>> open(
      const std::filesystem::path& file, EnvLookup env = process_env());

  ConfigSource(std::filesystem::path file, ConfigPtr initial, EnvLookup env);

  ConfigPtr current() const {
    std::lock_guard lock(current_mutex_);
    return current_;
  }

  // What a reload changed ("no changes" when nothing did), or why it was refused.
  std::expected<std::string, std::vector<Diagnostic>> reload();

 private:
  std::filesystem::path file_;
  EnvLookup env_;
  std::mutex reload_mutex_;
  mutable std::mutex current_mutex_;
  ConfigPtr current_;
};

// What differs between two configs, one item per line; "no changes" if none.
std::string describe_changes(const Config& before, const Config& after);

}  // namespace ratchet::config
