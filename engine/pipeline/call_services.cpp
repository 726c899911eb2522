#include "pipeline/call_services.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <vector>

#include "config/bounds.hpp"
#include "http/url.hpp"
#include "retry/outcome.hpp"

namespace ratchet::pipeline {

namespace {

// How often a request held back for an ended lease looks for its renewal.
constexpr auto kLeasePoll = std::chrono::milliseconds(10);

// Counts of one request that came too late to let it leave, before it is
// held back and made anew.
constexpr int kMaxRecounts = 8;

// The pause before a request none of whose counts came in time is counted
// again: doubled each time up to kMaxStalePause. The counts are database
// commits that take longer than a count may age (a disk busy with other
// writes); counted again at once, the worker spun on them at full speed.
constexpr auto kStalePause = std::chrono::milliseconds(10);
constexpr auto kMaxStalePause = std::chrono::seconds(1);

std::string millis(Duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + "ms";
}

}  // namespace

CallServices::CallServices(http::Client& client, retry::CallGate& gate, const Clock& clock,
                           Duration attempt_timeout, const common::SecretMask& secrets, std::stop_token stop,
                           limit::Reservation* first, LeaseUntil lease_until, const retry::CallState* call)
    : client_(client),
      gate_(gate),
      clock_(clock),
      attempt_timeout_(attempt_timeout),
      secrets_(secrets),
      stop_(std::move(stop)),
      first_(first),
      lease_until_(std::move(lease_until)),
      call_(call) {}

std::expected<http::Response, http::TransportError> CallServices::send(std::string_view plugin,
                                                                       http::Request& req,
                                                                       limit::Reservation* counted) {
  using http::TransportError;
  const TimePoint deadline = clock_.now() + attempt_timeout_;
  held_until_.reset();
  Duration stale_pause = kStalePause;
  int stale_rounds = 0;
  for (;;) {
    std::optional<TimePoint> room_at;
    bool lease_ended = false;
    bool stale = false;  // no count of the request was fresh when it was to leave
    // Logged once the request is out: a log write can block on a busy disk,
    // and nothing may come between a call's count and its leaving.
    std::vector<TimePoint> left_at;
    req.before_send = [&]() -> std::optional<std::string> {
      TimePoint now = clock_.now();
      if (lease_until_) {
        const TimePoint until = lease_until_();
        if (until != TimePoint{} && now >= until) {
          lease_ended = true;
          return std::string("the run's lease ran out before the request was sent");
        }
      }
      if (counted) {
        // A recount is a database commit where a limit has database scope,
        // and a commit can take long (a disk busy with other writes): the
        // call is counted again until a count is still fresh when it leaves.
        for (int recounts = 0;; ++recounts) {
          const TimePoint counted_at = counted->counted_at();
          auto c = gate_.confirm_send(*counted, now);
          if (!c) return c.error().message();
          if (*c) {
            room_at = **c;
            return std::string("the rate limits had no room left when the request was to leave");
          }
          if (counted->counted_at() == counted_at) break;  // counted in time: it goes
          now = clock_.now();
          if (recounts == kMaxRecounts) {
            stale = true;
            return "the rate limits could not count the request in time for it to leave (" +
                   std::to_string(kMaxRecounts + 1) + " counts in a row, the last " +
                   millis(now - counted->counted_at()) + " old when done, more than the " +
                   millis(gate_.parts().send_slack) +
                   " a count may age; is the disk of the limits' database busy?)";
          }
        }
      }
      left_at.push_back(now);
      return std::nullopt;
    };
    auto reply = client_.perform(req, stop_);
    // On the limiters' clock (one timeline for every process of a boot):
    // what the limits were kept against, to set beside a server's count.
    if (spdlog::should_log(spdlog::level::debug)) {
      for (const TimePoint t : left_at) {
        spdlog::debug("plugin {}: request leaves at {} us", plugin,
                      std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count());
      }
    }
    if (reply || reply.error().kind != TransportError::kHeldBack) return reply;
    if (stale) {
      ++stale_rounds;
      const TimePoint until = clock_.now() + stale_pause;
      if (until > deadline) {
        return std::unexpected(
            TransportError{TransportError::kTimeout,
                           reply.error().message + "; counted again " + std::to_string(stale_rounds) +
                               " times, never in time, until the attempt's timeout; nothing sent"});
      }
      spdlog::debug("{}; held back, nothing sent, counted again in {}", reply.error().message,
                    millis(stale_pause));
      if (!clock_.wait_until(until, stop_)) {
        return std::unexpected(TransportError{TransportError::kCancelled,
                                              reply.error().message + "; cancelled while held back"});
      }
      stale_pause = std::min<Duration>(2 * stale_pause, kMaxStalePause);
      req.timeout = std::max(std::chrono::milliseconds(1),
                             std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_.now()));
      continue;
    }
    if (!lease_ended && !room_at) {
      // The limiter could not be asked (its database failed): not a wait.
      return std::unexpected(TransportError{TransportError::kOther, reply.error().message});
    }
    spdlog::debug("{}; held back, nothing sent", reply.error().message);
    const TimePoint until = room_at ? *room_at : clock_.now() + kLeasePoll;
    if (until > deadline) {
      if (room_at) {
        // Throttling, not a failure: the step waits for that room as for any
        // other slot (parked when it is far), without using up an attempt.
        held_until_ = room_at;
        return reply;
      }
      return std::unexpected(TransportError{
          TransportError::kTimeout,
          reply.error().message + ", and the attempt's timeout ends before the lease was renewed"});
    }
    if (!clock_.wait_until(until, stop_)) {
      return std::unexpected(
          TransportError{TransportError::kCancelled, reply.error().message + "; cancelled while held back"});
    }
    req.timeout = std::max(std::chrono::milliseconds(1),
                           std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_.now()));
  }
}

std::optional<std::string> CallServices::admit_extra_request(limit::Reservation& counted, std::int64_t units,
                                                             bool wait,
                                                             std::optional<TimePoint>* refused_until) {
  retry::CallState extra(clock_.now());
  extra.set_units(units);
  extra.further_request_of(call_);
  for (;;) {
    if (stop_.stop_requested()) return "cancelled while waiting for a rate-limit slot";
    auto admission = gate_.admit(extra, clock_.now());
    if (auto* go = std::get_if<retry::CallGate::Go>(&admission)) {
      // The slot is counted (confirmed when the request leaves); the ticket
      // holds no permit or probe (further_request) and is dropped here.
      counted = std::move(go->counted);
      return std::nullopt;
    }
    if (auto* f = std::get_if<retry::CallGate::Fail>(&admission)) return f->error.message();
    auto& w = std::get<retry::CallGate::Wait>(admission);
    TimePoint until = w.until.value_or(clock_.now() + std::chrono::milliseconds(5));
    if (!wait) {
      *refused_until = until;
      return std::nullopt;
    }
    if (!clock_.wait_until(until, stop_)) return "cancelled while waiting for a rate-limit slot";
  }
}

plugin_host::HttpResult CallServices::http(std::string_view plugin, const plugin_host::HttpRequest& request) {
  plugin_host::HttpResult result;
  limit::Reservation extra;
  limit::Reservation* counted = requests_ == 0 ? first_ : &extra;
  // Without an estimate a request costs what its call was admitted with.
  const std::int64_t estimate = bounded_cost(plugin, request.cost, "its request's estimate");
  const std::int64_t units =
      estimate > 0 ? estimate : (first_ != nullptr ? first_->units() : gate_.parts().cost);
  last_slot_ = nullptr;
  if (requests_ == 0 && estimate > 0) gate_.learn_cost(estimate);
  // The call was admitted at the operation's declared cost. A first request
  // the plugin expects to cost more gives that slot back (sent on it, it
  // would be an overdraft) and takes one for its estimate if there is room
  // for it now; otherwise it is refused with the time of that room,
  // and the step asks for its estimate from then on (wanted_units), in its
  // turn. One expected to cost less gives the rest back.
  if (requests_ == 0 && counted && counted->started() && units > counted->units()) {
    wanted_units_ = units;
    if (Status st = counted->give_back_start(); !st)
      spdlog::debug("plugin {}: {}", plugin, st.error().message());
    std::optional<TimePoint> room_at;
    if (auto refused = admit_extra_request(extra, units, false, &room_at)) {
      result.error = plugin_host::HttpFailure::kRefused;
      result.message = *refused;
      return result;
    }
    if (room_at) {
      result.error = plugin_host::HttpFailure::kRefused;
      result.message = "the rate limits have no room now for the " + std::to_string(units) +
                       " units the request is expected to cost";
      result.retry_after = std::chrono::ceil<std::chrono::milliseconds>(
          std::max<Duration>(*room_at - clock_.now(), Duration::zero()));
      held_until_ = room_at;
      last_error_ = http::TransportError::Kind::kHeldBack;  // the server never saw it
      last_status_ = 0;
      last_headers_.clear();
      return result;
    }
    counted = &extra;
    ++requests_;
  } else if (requests_++ > 0) {
    // The request before was answered (or failed): the call goes on, and
    // the opening hold, which waits for a first reply, must not hold it.
    gate_.replied(clock_.now());
    if (auto refused = admit_extra_request(extra, units)) {
      result.error = plugin_host::HttpFailure::kRefused;
      result.message = *refused;
      return result;
    }
  } else if (counted && counted->units() > units) {
    if (Status st = gate_.correct_cost(*counted, units, clock_.now()); !st) {
      result.error = plugin_host::HttpFailure::kOther;
      result.message = st.error().message();
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
  auto reply = send(plugin, req, counted);
  if (counted == &extra) {
    last_extra_ = std::move(extra);
    last_slot_ = &last_extra_;
  } else {
    last_slot_ = counted;
  }
  last_headers_.clear();
  if (!reply) {
    using K = http::TransportError::Kind;
    last_status_ = 0;
    last_error_ = reply.error().kind;
    switch (reply.error().kind) {
      case K::kTimeout: result.error = plugin_host::HttpFailure::kTimeout; break;
      case K::kConnect: result.error = plugin_host::HttpFailure::kConnect; break;
      case K::kTls: result.error = plugin_host::HttpFailure::kTls; break;
      case K::kTooLarge: result.error = plugin_host::HttpFailure::kTooLarge; break;
      case K::kCancelled: result.error = plugin_host::HttpFailure::kCancelled; break;
      case K::kHeldBack:
        result.error = plugin_host::HttpFailure::kRefused;
        if (held_until_) {
          result.retry_after = std::chrono::ceil<std::chrono::milliseconds>(
              std::max<Duration>(*held_until_ - clock_.now(), Duration::zero()));
        }
        break;
      default: result.error = plugin_host::HttpFailure::kOther; break;
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
  auto hint = limit::read_rate_headers(last_headers_, reply->status, clock_.now(), gate_.parts().headers);
  if (hint.resume_at) {
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(*hint.resume_at - clock_.now());
    result.retry_after = std::max(wait, std::chrono::milliseconds(0));
  }
  return result;
}

std::int64_t CallServices::bounded_cost(std::string_view plugin, std::int64_t units, std::string_view what) {
  if (units <= config::kMaxCost) return units;
  // A plugin's bug, or a server's reply it quotes: counted, it would hold
  // the plugin's calls for days, or overflow a limiter's arithmetic.
  spdlog::warn("plugin {}: {} of {} units is more than a call may cost ({}); it is ignored", plugin, what,
               units, config::kMaxCost);
  return 0;
}

void CallServices::report_cost(std::string_view plugin, std::int64_t units) {
  if (last_slot_ == nullptr || !last_slot_->started()) return;  // nothing was counted for it
  if (bounded_cost(plugin, units, "its reported cost") != units) return;
  if (Status st = gate_.correct_cost(*last_slot_, units, clock_.now()); !st) {
    spdlog::warn("plugin {}: its reported cost of {} units was not counted: {}", plugin, units,
                 st.error().message());
  }
  // What a call's first request cost is what the next calls are admitted at.
  if (requests_ == 1) gate_.learn_cost(units);
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
