// What the engine offers a plugin during one step call: HTTP through the
// plugin's own client, logging with the plugin's secrets masked, and the
// call's cancellation.
//
// Secrets are masked in everything that comes back to the plugin from a
// server or the client (bodies, header values, transport errors) before the
// plugin can quote, cut or keep it, and in every log line. A request header
// whose value holds a secret is marked as one for the client, which never
// sends it to another origin on a redirect.
//
// The first request of a call runs on the limiter slot the call was admitted
// with; every further request of the same call takes a slot of its own
// through the plugin's gate, waiting in place (bounded by the step's
// max_wait), because the server counts requests, not operations. The last
// response's status and headers are kept so the step caller can hand them
// to the gate (learning limits from them) once the plugin returns.
//
// Ownership: borrows everything; lives on the stack of one step call.
// Thread-safety: used by the one thread that runs the plugin operation.
#pragma once

#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <vector>

#include "http/client.hpp"
#include "limit/rate_headers.hpp"
#include "pipeline/secret_mask.hpp"
#include "plugin_host/host_services.hpp"
#include "ratchet/clock.hpp"
#include "retry/call_gate.hpp"

namespace ratchet::pipeline {

class CallServices final : public plugin_host::HostServices {
 public:
  CallServices(http::Client& client, retry::CallGate& gate, const Clock& clock, Duration attempt_timeout,
               const SecretMask& secrets, std::stop_token stop);

  plugin_host::HttpResult http(std::string_view plugin, const plugin_host::HttpRequest& request) override;
  void log(std::string_view plugin, plugin_host::LogLevel level, std::string_view message) override;
  bool cancelled() override { return stop_.stop_requested(); }

  // The last response's status (0 if none arrived) and headers.
  int last_status() const { return last_status_; }
  const std::vector<limit::HttpHeader>& last_headers() const { return last_headers_; }
  // Why the last request produced no response, if it did not.
  std::optional<http::TransportError::Kind> last_transport_error() const { return last_error_; }
  int requests() const { return requests_; }

 private:
  // Takes a limiter slot for a request after the first, waiting in place.
  std::optional<std::string> admit_extra_request();

  http::Client& client_;
  retry::CallGate& gate_;
  const Clock& clock_;
  Duration attempt_timeout_;
  const SecretMask& secrets_;
  std::stop_token stop_;
  int requests_ = 0;
  int last_status_ = 0;
  std::vector<limit::HttpHeader> last_headers_;
  std::optional<http::TransportError::Kind> last_error_;
};

}  // namespace ratchet::pipeline
