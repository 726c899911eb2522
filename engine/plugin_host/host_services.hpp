// What the engine offers a plugin during a call, as a C++ interface, and the
// value types of one plugin call (context in, reply out).
//
// The plugin host turns a HostServices into the C table of ratchet/plugin.h
// (see call.hpp) so plugins never see C++ types. The engine implements it with
// its HTTP client wrapped in the plugin's limiters and retry; tests implement
// it in memory.
//
// Thread-safety: a HostServices is called from the thread that runs the
// plugin operation, not the thread that called PluginHost::call; calls for
// one plugin call never overlap. After a call timed out, no further method is
// called for it (the host waits for one already running to return first).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace ratchet::plugin_host {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method = "GET";
  std::string url;
  HttpHeaders headers;
  std::string body;
  // The units of the plugin's limits it is expected to cost; 0: the
  // operation's declared cost.
  std::int64_t cost = 0;
};

// Why a request produced no response; values match RATCHET_HTTP_* of plugin.h.
enum class HttpFailure : std::int32_t {
  kNone = 0,
  kRefused = 1,  // the limiter or breaker refused or throttled it
  kTimeout = 2,
  kConnect = 3,
  kTls = 4,
  kTooLarge = 5,
  kCancelled = 6,
  kOther = 7,
};

// A response (error == kNone) or why none arrived (`message` says more).
struct HttpResult {
  HttpFailure error = HttpFailure::kNone;
  int status = 0;
  HttpHeaders headers;
  std::string body;
  std::string message;
  std::optional<std::chrono::milliseconds> retry_after;  // from Retry-After / reset headers
};

enum class LogLevel : std::int32_t { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

class HostServices {
 public:
  virtual ~HostServices() = default;

  // One HTTP request on behalf of `plugin`. Must not throw.
  virtual HttpResult http(std::string_view plugin, const HttpRequest& request) = 0;
  // One log line from `plugin`. Must not throw.
  virtual void log(std::string_view plugin, LogLevel level, std::string_view message) = 0;
  // True once the work this call belongs to is cancelled.
  virtual bool cancelled() = 0;
  // The last request of this call cost `units` (>= 0), as its reply said.
  // Must not throw. Hosts without limits ignore it.
  virtual void report_cost(std::string_view plugin, std::int64_t units) {
    (void)plugin;
    (void)units;
  }
};

// Who is calling; copied into the call, so it may be a temporary.
struct CallContext {
  std::string idempotency_key;
  std::string job_id;
  std::string step_name;
};

// What a plugin operation reported (a status, not an error of the host).
enum class CallStatus { kOk, kRetryable, kThrottled, kFatal };

std::string_view to_string(CallStatus s) noexcept;

struct CallReply {
  CallStatus status = CallStatus::kOk;
  nlohmann::json output;  // the result when kOk; null otherwise
  std::string message;    // the plugin's message when not kOk
  std::optional<std::chrono::milliseconds> retry_after;
  std::string plugin_version;  // the version that served the call
};

}  // namespace ratchet::plugin_host
