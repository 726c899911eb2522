#include "pipeline/assembly.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "config/plugin_check.hpp"
#include "runtime/engine_impl.hpp"
#include "store/open_store.hpp"

namespace ratchet::pipeline {

Error config_error(const std::vector<config::Diagnostic>& diagnostics) {
  std::string message = std::to_string(diagnostics.size()) +
                        (diagnostics.size() == 1 ? " problem" : " problems") + " in the configuration:";
  for (const auto& d : diagnostics) message += "\n  " + d.to_string();
  return Error::config(std::move(message));
}

namespace {

// The database-scope limiters' connections: to the engine's database, with
// the busy timeout the file declares.
store::StoreOptions limiter_store(const std::filesystem::path& database, const config::Config& config) {
  store::StoreOptions s;
  s.database = database.string();
  s.busy_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(config.engine.busy_timeout);
  return s;
}

}  // namespace

Result<std::shared_ptr<Assembly>> Assembly::create(std::unique_ptr<config::ConfigSource> source,
                                                   std::filesystem::path database,
                                                   std::shared_ptr<const Clock> clock, std::uint64_t seed) {
  std::shared_ptr<Assembly> a(new Assembly());
  a->source_ = std::move(source);
  config::ConfigPtr config = a->source_->current();

  plugin_host::PluginHostOptions options;
  options.folder = config->engine.plugins;
  options.clock = clock;
  // Dropped-in and replaced plugin files are picked up while the engine runs.
  options.rescan_interval =
      std::chrono::duration_cast<std::chrono::milliseconds>(config->engine.plugin_rescan);
  auto host = plugin_host::PluginHost::open(options);
  if (!host) return fail(host.error());
  a->host_ = std::move(*host);
  for (const auto& f : a->host_->failures()) spdlog::warn("plugin file refused: {}", f.to_string());

  std::vector<std::string> configured;
  for (const auto& [name, spec] : config->plugins) configured.push_back(name);
  if (auto st = a->host_->check_configured(configured); !st) return fail(st.error());
  // A step may call a plugin that has no [plugin.X] section (it runs on
  // defaults), but the plugin and its operation must exist.
  std::vector<config::ProvidedPlugin> provided;
  for (auto& p : a->host_->list()) provided.push_back({p.name, p.version, p.operations});
  if (auto problems = config::check_plugin_calls(*config, provided, a->host_->folder()); !problems.empty())
    return fail(config_error(problems));

  auto connect = store::limiter_tables_for(limiter_store(database, *config));
  a->caller_ =
      std::make_shared<PluginStepCaller>(a->host_, config, std::move(connect), std::move(clock), seed);
  return a;
}

std::shared_ptr<Assembly> Assembly::without_plugins(std::unique_ptr<config::ConfigSource> source,
                                                    std::filesystem::path database, std::uint64_t seed) {
  std::shared_ptr<Assembly> a(new Assembly());
  a->source_ = std::move(source);
  config::ConfigPtr config = a->source_->current();
  auto connect = store::limiter_tables_for(limiter_store(database, *config));
  a->inspect_gates_ = std::make_unique<GateRegistry>(config, std::move(connect), seed);
  return a;
}

Result<std::string> Assembly::reload() {
  auto changed = source_->reload();
  if (!changed) return fail(config_error(changed.error()));
  if (caller_) {
    caller_->reconfigure(source_->current());
  } else {
    inspect_gates_->reconfigure(source_->current());
  }
  return *changed;
}

PluginReport Assembly::plugins() {
  config::ConfigPtr config = source_->current();
  PluginReport report;
  if (!host_) {
    report.folder = config->engine.plugins;
    return report;
  }
  host_->rescan();
  report.folder = host_->folder();
  for (auto& p : host_->list()) {
    report.loaded.push_back({p.name, p.version, p.file, p.operations, config->plugins.contains(p.name)});
  }
  for (auto& f : host_->failures()) report.failed.push_back({f.file, f.reason});
  return report;
}

std::vector<LimiterInfo> Assembly::limits(TimePoint now) {
  auto now_us = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  // Gates are built at a plugin's first call: build those of every declared
  // limit now, so they are listed (with the database's state for
  // database-scope ones) before any call.
  const config::ConfigPtr config = source_->current();
  for (const auto& [plugin, spec] : config->plugins) {
    if (spec.operations.empty()) (void)gates().gate(plugin, "");
    for (const auto& [operation, policy] : spec.operations) (void)gates().gate(plugin, operation);
  }
  std::vector<LimiterInfo> out;
  for (auto& v : gates().limiters(now_us)) {
    out.push_back({v.plugin, v.operation, v.declared,
                   TimePoint(std::chrono::duration_cast<Duration>(std::chrono::microseconds(v.next_free_us))),
                   v.key});
  }
  return out;
}

std::vector<PluginCallStats> Assembly::call_stats() const {
  if (!caller_) return {};
  auto counters = caller_->counters();
  // Configured plugins are listed with every operation before their first
  // call, so a metrics scrape has each series from the start.
  // Held here: a range-for over a temporary's member would let a reload
  // free the map while it is being read.
  const config::ConfigPtr config = source_->current();
  for (const auto& [plugin, spec] : config->plugins) {
    CallCounters& c = counters[plugin];
    if (auto info = host_->find(plugin)) {
      for (const auto& operation : info->operations) {
        if (!c.durations.contains(operation)) c.durations.emplace(operation, step_duration_histogram());
      }
    }
  }
  std::vector<PluginCallStats> out;
  for (auto& [plugin, c] : counters) {
    PluginCallStats s{.plugin = plugin,
                      .calls = c.calls,
                      .throttled = c.throttled,
                      .retries = c.retries,
                      .parks = c.parks,
                      .parked_now = c.parked_now,
                      .limiter_wait = c.limiter_wait,
                      .step_durations = {}};
    for (auto& [operation, histogram] : c.durations)
      s.step_durations.push_back({operation, std::move(histogram)});
    out.push_back(std::move(s));
  }
  return out;
}

namespace {

// Whether a job parked by this process may still come back to it for its
// parked steps, from the job's row (or the next job's, when it is gone).
bool may_come_back(const std::vector<JobRecord>& rows, const ParkedJob& parked, const std::string& owner) {
  if (rows.empty() || rows.front().id != parked.job) return false;
  const JobRecord& job = rows.front();
  if (job.attempt != parked.attempt) return false;
  switch (job.state) {
    case JobState::kScheduled:
    case JobState::kAvailable: return true;
    case JobState::kRunning: return job.lease_owner == owner;
    default: return false;
  }
}

}  // namespace

void Assembly::settle_parked(store::Store& store, const std::string& owner, TimePoint now) {
  constexpr Duration kEvery = std::chrono::seconds(1);
  {
    std::lock_guard lock(settle_mu_);
    // A clock set back settles at once rather than after the gap.
    if (now >= last_settle_ && now - last_settle_ < kEvery) return;
    last_settle_ = now;
  }
  if (!caller_) return;
  const std::vector<ParkedJob> parked = caller_->parked_jobs();
  // In chunks, so the read connection is not held for long behind many
  // parked jobs.
  constexpr std::size_t kChunk = 256;
  for (std::size_t begin = 0; begin < parked.size(); begin += kChunk) {
    const std::size_t end = std::min(parked.size(), begin + kChunk);
    auto gone = store.read([&](store::JobStore& s) {
      std::vector<ParkedJob> out;
      for (std::size_t i = begin; i < end; ++i) {
        // Listing from the id before reads the job's row alone; get() would
        // also read its steps, errors and timeline.
        JobFilter one;
        one.after_id = parked[i].job - 1;
        one.limit = 1;
        if (!may_come_back(s.list(one), parked[i], owner)) out.push_back(parked[i]);
      }
      return out;
    });
    if (!gone) {
      spdlog::debug("could not check parked jobs against the database: {}", gone.error().to_string());
      return;
    }
    for (const auto& p : *gone) caller_->forget_parked(p.job, p.attempt, p.park);
  }
}

}  // namespace ratchet::pipeline

namespace ratchet {
namespace {

// The engine section of a config file with the caller's overrides applied.
EngineOptions options_of(const config::Config& config, const ConfigOverrides& overrides) {
  EngineOptions options = runtime::engine_options(config);
  if (overrides.workers) options.workers = *overrides.workers;
  if (overrides.database) options.database = *overrides.database;
  // An engine's own clock, since anchoring it to the database steps it.
  options.clock = overrides.clock ? overrides.clock : std::make_shared<const SystemClock>();
  options.worker_id = overrides.worker_id;
  options.seed = overrides.seed;
  return options;
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::open_config(const std::filesystem::path& file,
                                                    ConfigOverrides overrides) {
  auto source = config::ConfigSource::open(file);
  if (!source) return fail(pipeline::config_error(source.error()));
  config::ConfigPtr config = (*source)->current();

  EngineOptions options = options_of(*config, overrides);

  auto assembly = pipeline::Assembly::create(std::move(*source), options.database, options.clock,
                                             overrides.seed != 0 ? overrides.seed : 0x5eed);
  if (!assembly) return fail(assembly.error());

  runtime::EngineWiring wiring;
  wiring.caller = (*assembly)->caller();
  auto engine = runtime::open_engine(std::move(options), std::move(wiring));
  if (!engine) return engine;
  for (const auto& [name, spec] : config->jobs) {
    if (auto st = runtime::define_declarative(**engine, spec); !st) return fail(st.error());
  }
  EngineAccess::impl(**engine).assembly = std::move(*assembly);
  EngineAccess::impl(**engine).fill_report = [e = engine->get()](EngineReport& r) {
    r.plugins = e->plugins();
    r.limits = e->limits();
    r.calls = e->call_stats();
  };
  return engine;
}

Result<std::unique_ptr<Engine>> Engine::inspect_config(const std::filesystem::path& file,
                                                       ConfigOverrides overrides) {
  auto source = config::ConfigSource::open(file);
  if (!source) return fail(pipeline::config_error(source.error()));
  config::ConfigPtr config = (*source)->current();

  EngineOptions options = options_of(*config, overrides);
  auto assembly = pipeline::Assembly::without_plugins(std::move(*source), options.database,
                                                      overrides.seed != 0 ? overrides.seed : 0x5eed);

  auto engine = runtime::open_engine(std::move(options), {});
  if (!engine) return engine;
  for (const auto& [name, spec] : config->jobs) {
    if (auto st = runtime::define_declarative(**engine, spec); !st) return fail(st.error());
  }
  EngineAccess::impl(**engine).assembly = std::move(assembly);
  EngineAccess::impl(**engine).start_refusal =
      "this engine was opened without its plugins (Engine::inspect_config) and cannot run jobs; open it with "
      "Engine::open_config";
  return engine;
}

Result<std::string> Engine::reload_config() {
  auto& assembly = impl_->assembly;
  if (!assembly) return fail(Error::invalid_argument("this engine was not opened from a config file"));
  auto changed = assembly->reload();
  if (!changed) return changed;
  const config::ConfigPtr config = assembly->config();  // held: see call_stats()
  for (const auto& [name, spec] : config->jobs) {
    if (auto st = runtime::define_declarative(*this, spec); !st) return fail(st.error());
  }
  return changed;
}

PluginReport Engine::plugins() { return impl_->assembly ? impl_->assembly->plugins() : PluginReport{}; }

std::vector<LimiterInfo> Engine::limits() {
  return impl_->assembly ? impl_->assembly->limits(impl_->clock->now()) : std::vector<LimiterInfo>{};
}

std::vector<PluginCallStats> Engine::call_stats() {
  auto& assembly = impl_->assembly;
  if (!assembly) return {};
  assembly->settle_parked(*impl_->store, impl_->options.worker_id, impl_->clock->now());
  return assembly->call_stats();
}

}  // namespace ratchet
