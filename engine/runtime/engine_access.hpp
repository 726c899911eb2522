// How ratchet's own code reaches an Engine's state (Engine::Impl,
// runtime/engine_impl.hpp), which the public API keeps private: the engine's
// openers, the assembly of a config file's plugins, tests and benchmarks.
// Not installed; a host uses the public API only.
//
// Thread-safety: as documented for Engine and its Impl.
#pragma once

#include <memory>

#include "ratchet/engine.hpp"

namespace ratchet {

struct EngineAccess {
  using Impl = Engine::Impl;

  static Impl& impl(Engine& engine) { return *engine.impl_; }
  static std::unique_ptr<Engine> make(std::unique_ptr<Impl> impl) {
    return std::unique_ptr<Engine>(new Engine(std::move(impl)));
  }
};

}  // namespace ratchet
