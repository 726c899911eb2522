#include "pipeline/call_services.hpp"

#include <spdlog/spdlog.h>

#include <chrono>

#include "http/url.hpp"
#include "retry/outcome.hpp"

namespace ratchet::pipeline {

CallServices::CallServices(http::Client& client, retry::CallGate& gate, const Clock& clock,
                           Duration attempt_timeout, const SecretMask& secrets, std::stop_token stop)
    : client_(client),
      gate_(gate),
      clock_(clock),
      attempt_timeout_(attempt_timeout),
      secrets_(secrets),
      stop_(std::move(stop)) {}

std::optional<std::string> CallServices::admit_extra_request() {
  retry::StepCall extra(clock_.now());
  for (;;) {
    if (stop_.stop_requested()) return "cancelled while waiting for a rate-limit slot";
    auto admission = gate_.admit(extra, clock_.now());
    if (auto* go = std::get_if<retry::CallGate::Go>(&admission)) {
      // The slot is counted at admission; the ticket only guards the
      // concurrency permit and breaker probe, released with it here.
      gate_.record(extra, std::move(go->ticket), retry::Outcome::ok(), {}, clock_.now());
      return std::nullopt;
    }
    if (auto* f = std::get_if<retry::CallGate::Fail>(&admission)) return f->error.message();
    auto& w = std::get<retry::CallGate::Wait>(admission);
    TimePoint until = w.until.value_or(clock_.now() + std::chrono::milliseconds(5));
    if (!clock_.wait_until(until, stop_)) return "cancelled while waiting for a rate-limit slot";
  }
}

plugin_host::HttpResult CallServices::http(std::string_view plugin, const plugin_host::HttpRequest& request) {
  plugin_host::HttpResult result;
  if (requests_++ > 0) {
    if (auto refused = admit_extra_request()) {
      result.error = plugin_host::TransportError::kRefused;
      result.message = *refused;
      return result;
    }
  }
  http::Request req;
  req.method = request.method;
  req.url = request.url;
  req.headers = request.headers;
  req.body = request.body;
  for (const auto& [name, value] : request.headers) {
    if (secrets_.holds_secret(value)) req.secret_headers.push_back(name);
  }
  req.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(attempt_timeout_);
  auto reply = client_.perform(req, stop_);
  last_headers_.clear();
  if (!reply) {
    using K = http::TransportError::Kind;
    last_status_ = 0;
    last_error_ = reply.error().kind;
    switch (reply.error().kind) {
      case K::kTimeout: result.error = plugin_host::TransportError::kTimeout; break;
      case K::kConnect: result.error = plugin_host::TransportError::kConnect; break;
      case K::kTls: result.error = plugin_host::TransportError::kTls; break;
      case K::kTooLarge: result.error = plugin_host::TransportError::kTooLarge; break;
      case K::kCancelled: result.error = plugin_host::TransportError::kCancelled; break;
      default: result.error = plugin_host::TransportError::kOther; break;
    }
    result.message = secrets_.mask(reply.error().message);
    spdlog::debug("plugin {}: {} {}: {}", plugin, request.method,
                  secrets_.mask(http::redact_url(request.url)), result.message);
    return result;
  }
  last_error_.reset();
  last_status_ = reply->status;
  for (const auto& [name, value] : reply->headers) last_headers_.emplace_back(name, value);
  result.status = reply->status;
  // The plugin may quote or keep what a server sent: a server echoing a key
  // (in a 404 page, in an echo of the URL) must not hand it back unmasked.
  for (const auto& [name, value] : last_headers_) result.headers.emplace_back(name, secrets_.mask(value));
  result.body = secrets_.mask(reply->body);
  auto hint = limit::read_rate_headers(last_headers_, reply->status, clock_.now());
  if (hint.resume_at) {
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(*hint.resume_at - clock_.now());
    result.retry_after = std::max(wait, std::chrono::milliseconds(0));
  }
  return result;
}

void CallServices::log(std::string_view plugin, plugin_host::LogLevel level, std::string_view message) {
  std::string text = secrets_.mask(message);
  switch (level) {
    case plugin_host::LogLevel::kDebug: spdlog::debug("plugin {}: {}", plugin, text); break;
    case plugin_host::LogLevel::kInfo: spdlog::info("plugin {}: {}", plugin, text); break;
    case plugin_host::LogLevel::kWarn: spdlog::warn("plugin {}: {}", plugin, text); break;
    case plugin_host::LogLevel::kError: spdlog::error("plugin {}: {}", plugin, text); break;
  }
}

}  // namespace ratchet::pipeline
