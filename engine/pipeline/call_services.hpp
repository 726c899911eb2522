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
// max_wait), because the server counts requests, not operations. A request
// costs the units its plugin estimates (HttpRequest::cost), or the
// operation's declared cost; the first request's slot is corrected to that
// estimate before it leaves, and report_cost() corrects the last request's
// slot to what its reply said it cost.
//
// Right before a request leaves (connected, nothing sent yet) two things are
// checked again, since connecting may take long and the thread may have been
// descheduled or stopped since the call was admitted:
//   - the run's lease still holds (now < lease_until): a run whose lease has
//     run out may have been taken over, and another process may have run
//     and committed this very step. The request waits, unsent, until the
//     heartbeat renews the lease, or the run is stopped (lost);
//   - its limiter start is recent (CallGate::confirm_send): a request that
//     leaves late is counted anew, and waits, unsent, if it no longer fits.
// Either wait is bounded by the attempt's timeout. Room that comes later
// than that is answered as a refusal with its time (the plugin reports the
// call throttled, and the step waits for it without using up an attempt). The last
// response's status and headers are kept so the step caller can hand them
// to the gate (learning limits from them) once the plugin returns.
//
// Ownership: borrows everything; lives on the stack of one step call.
// Thread-safety: used by the one thread that runs the plugin operation.
#pragma once

#include <expected>
#include <functional>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <vector>

#include "common/secret_mask.hpp"
#include "http/client.hpp"
#include "limit/limiter_stack.hpp"
#include "limit/rate_headers.hpp"
#include "plugin_host/host_services.hpp"
#include "ratchet/clock.hpp"
#include "retry/call_gate.hpp"

namespace ratchet::pipeline {

class CallServices final : public plugin_host::HostServices {
 public:
  // Until when the run's lease is known to hold (an epoch value: unknown).
  using LeaseUntil = std::function<TimePoint()>;

  // `first` is the limiter start the call was admitted with (Go::counted);
  // null or empty: its first request is not checked against the limits.
  // An empty `lease_until`: no lease to check. `call` is the call's state
  // at the gate (its keys): its further requests are counted in its keys'
  // limits; null: the gate has no keyed limits.
  CallServices(http::Client& client, retry::CallGate& gate, const Clock& clock, Duration attempt_timeout,
               const common::SecretMask& secrets, std::stop_token stop, limit::Reservation* first = nullptr,
               LeaseUntil lease_until = {}, const retry::CallState* call = nullptr);

  plugin_host::HttpResult http(std::string_view plugin, const plugin_host::HttpRequest& request) override;
  void log(std::string_view plugin, plugin_host::LogLevel level, std::string_view message) override;
  bool cancelled() override { return stop_.stop_requested(); }
  void report_cost(std::string_view plugin, std::int64_t units) override;

  // The last response's status (0 if none arrived) and headers.
  int last_status() const { return last_status_; }
  const std::vector<limit::HttpHeader>& last_headers() const { return last_headers_; }
  // Why the last request produced no response, if it did not.
  std::optional<http::TransportError::Kind> last_transport_error() const { return last_error_; }
  int requests() const { return requests_; }
  // The units the plugin expected its first request to cost, when that was
  // more than the call was admitted with (0 otherwise): the step's next
  // admission should ask for that many (CallState::set_units).
  std::int64_t wanted_units() const { return wanted_units_; }

 private:
  // `units` from the plugin (`what` it was), or 0 (none) when it is more
  // than a call may cost (config::kMaxCost), with a warning.
  static std::int64_t bounded_cost(std::string_view plugin, std::int64_t units, std::string_view what);
  // Takes a limiter slot for a request after the first, waiting in place.
  // With `wait` false, a request that cannot go at once is refused with the
  // time it could: nullopt and `*refused_until` set.
  std::optional<std::string> admit_extra_request(limit::Reservation& counted, std::int64_t units,
                                                 bool wait = true,
                                                 std::optional<TimePoint>* refused_until = nullptr);
  // Sends `req`, holding it back (unsent) while the lease has run out or its
  // start must be counted anew and wait; `counted` may be null.
  std::expected<http::Response, http::TransportError> send(std::string_view plugin, http::Request& req,
                                                           limit::Reservation* counted);

  http::Client& client_;
  retry::CallGate& gate_;
  const Clock& clock_;
  Duration attempt_timeout_;
  const common::SecretMask& secrets_;
  std::stop_token stop_;
  limit::Reservation* first_;
  limit::Reservation last_extra_;            // the slot of the last request after the first
  limit::Reservation* last_slot_ = nullptr;  // the last request's: first_ or &last_extra_
  LeaseUntil lease_until_;
  const retry::CallState* call_;
  std::optional<TimePoint> held_until_;  // the last request was held back for room until then
  int requests_ = 0;
  std::int64_t wanted_units_ = 0;
  int last_status_ = 0;
  std::vector<limit::HttpHeader> last_headers_;
  std::optional<http::TransportError::Kind> last_error_;
};

}  // namespace ratchet::pipeline
