// Runs one plugin operation: builds the C host-services table over a
// HostServices, calls the operation on its own thread, waits up to the
// timeout, and checks what the plugin returned.
//
// A call that passes its timeout (and a short grace for the answer of a
// request that timed out with it) returns Error::timeout at once and its
// thread is abandoned: it keeps a reference to the Library (so the code it is
// running is never unloaded under it) and to its own buffers, sees
// is_cancelled() == 1, and has every later host service refused. The caller's
// HostServices is never touched after the caller returns.
//
// A plugin that returns garbage (unknown status, a NULL or foreign output
// buffer, output that is not JSON) or lets an exception escape its C function
// gives an Error::plugin naming the plugin, its version and the operation.
//
// Thread-safety: invoke() may be called from many threads at once.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "plugin_host/host_services.hpp"
#include "plugin_host/library.hpp"
#include "ratchet/clock.hpp"
#include "ratchet/status.hpp"

namespace ratchet::plugin_host {

struct Invocation {
  std::shared_ptr<const Library> library;
  std::string operation;
  ratchet_operation_fn fn = nullptr;
  std::string args;    // JSON text
  std::string config;  // JSON text
  CallContext context;
  std::chrono::milliseconds timeout{30000};
  std::size_t max_output_bytes = 64u << 20;
};

[[nodiscard]] Result<CallReply> invoke(Invocation call, HostServices& services, const Clock& clock);

// Abandoned calls whose plugin code has not returned yet, in this process.
// A call stops counting here before it lets go of its library.
std::size_t abandoned_calls_running() noexcept;

// Threads running plugin calls, abandoned or not, in this process; a thread
// stops counting after it let go of its library (for tests and shutdown).
std::size_t call_threads_running() noexcept;

}  // namespace ratchet::plugin_host
