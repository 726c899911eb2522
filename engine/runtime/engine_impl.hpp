// The state behind ratchet::Engine (reached through EngineAccess), and the
// internal ways to build one that the public header does not offer: from a
// validated config::Config (the integrator's TOML path), with a StepCaller
// that performs plugin calls and the template renderer of the config part,
// and declarative job types.
//
// Thread-safety: as documented for Engine.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>

#include "config/spec.hpp"
#include "config/template.hpp"
#include "ratchet/engine.hpp"
#include "runtime/backoff.hpp"
#include "runtime/engine_access.hpp"
#include "runtime/engine_report.hpp"
#include "runtime/event_bus.hpp"
#include "runtime/job_types.hpp"
#include "runtime/scheduler.hpp"
#include "runtime/step_caller.hpp"
#include "runtime/template_renderer.hpp"
#include "store/crash_record.hpp"
#include "store/open_store.hpp"
#include "store/store.hpp"

namespace ratchet {
namespace pipeline {
class Assembly;
}

class Engine::Impl {
 public:
  EngineOptions options;
  std::shared_ptr<const Clock> clock;
  std::unique_ptr<store::Store> store;
  runtime::JobTypes types;
  runtime::EventBus events;
  std::unique_ptr<runtime::Jitter> jitter;
  std::shared_ptr<runtime::StepCaller> caller;
  runtime::TemplateRenderer render = config::render_template;
  // The plugins, decorators and config of an engine opened from a config
  // file (pipeline/assembly.hpp); null for an engine built in code.
  std::shared_ptr<pipeline::Assembly> assembly;
  // Why start() is refused (an engine opened without its plugins); empty:
  // it runs.
  std::string start_refusal;

  std::mutex scheduler_mu;
  // Opened at the first start(); outlives the scheduler's threads.
  std::unique_ptr<store::CrashRecorder> crashes;
  std::unique_ptr<runtime::Scheduler> scheduler;
  // Writes this engine's report while it runs, with what fill_report gives
  // (set for an engine opened with its plugins: one built in code has
  // nothing only it knows).
  runtime::ReportWriter reports;
  std::function<void(EngineReport&)> fill_report;

  std::mutex done_mu;
  std::condition_variable done_cv;
  std::uint64_t done_count = 0;

  void wake();
  void job_done();
};

namespace runtime {

// What the assembled engine plugs in. Null/empty members keep the defaults:
// no plugin calls, the basic template renderer, the clock of the options.
struct EngineWiring {
  std::shared_ptr<StepCaller> caller;
  TemplateRenderer render;
};

[[nodiscard]] Result<std::unique_ptr<Engine>> open_engine(EngineOptions options, EngineWiring wiring = {});

// The engine section of a config as options; a relative database path
// resolves against the config file's folder.
EngineOptions engine_options(const config::Config& config);
// The store settings of `options`.
store::StoreOptions store_options(const EngineOptions& options);

// Defines (or redefines) a declarative job type.
[[nodiscard]] Status define_declarative(Engine& engine, config::JobTypeSpec spec);

}  // namespace runtime
}  // namespace ratchet
