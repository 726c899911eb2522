// Everything an engine opened from a config file has beyond the job runtime:
// the config source (for reloads), the plugin host and the step caller with
// its gates. Engine::open_config builds one; the Engine keeps it.
//
// Ownership: shared by the Engine and its step caller's users.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "config/source.hpp"
#include "pipeline/plugin_step_caller.hpp"
#include "plugin_host/plugin_host.hpp"
#include "ratchet/plugins.hpp"
#include "ratchet/status.hpp"
#include "store/store.hpp"

namespace ratchet::pipeline {

class Assembly {
 public:
  // Opens the plugin folder the config names and checks that every
  // configured plugin has a file.
  [[nodiscard]] static Result<std::shared_ptr<Assembly>> create(std::unique_ptr<config::ConfigSource> source,
                                                                std::filesystem::path database,
                                                                std::shared_ptr<const Clock> clock,
                                                                std::uint64_t seed);

  // Without the plugin host or a step caller, for an engine that only
  // inspects: limits() still lists the declared limits.
  static std::shared_ptr<Assembly> without_plugins(std::unique_ptr<config::ConfigSource> source,
                                                   std::filesystem::path database, std::uint64_t seed);

  config::ConfigPtr config() const { return source_->current(); }
  std::shared_ptr<PluginStepCaller> caller() const { return caller_; }

  // Re-reads the file; see Engine::reload_config.
  [[nodiscard]] Result<std::string> reload();

  PluginReport plugins();
  std::vector<LimiterInfo> limits(TimePoint now);
  std::vector<PluginCallStats> call_stats() const;

  // Forgets the parked steps of jobs that the database shows cancelled,
  // ended, on another attempt, held by another worker than `owner`, or gone:
  // what other processes did to them, which this one hears of no other way.
  // Reads the database at most once a second of `now`.
  void settle_parked(store::Store& store, const std::string& owner, TimePoint now);

 private:
  Assembly() = default;

  std::unique_ptr<config::ConfigSource> source_;
  std::shared_ptr<plugin_host::PluginHost> host_;
  std::shared_ptr<PluginStepCaller> caller_;     // null without plugins
  std::unique_ptr<GateRegistry> inspect_gates_;  // the gates without plugins

  GateRegistry& gates() { return caller_ ? caller_->gates() : *inspect_gates_; }

  std::mutex settle_mu_;  // guards last_settle_
  TimePoint last_settle_{};
};

// All diagnostics of a refused config as one kConfig error, one per line.
Error config_error(const std::vector<config::Diagnostic>& diagnostics);

}  // namespace ratchet::pipeline
