#include "mock_portal/options.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "common/duration.hpp"

namespace ratchet::mock_portal {
namespace {

Error bad(std::string_view key, std::string_view value, std::string_view expected) {
  return Error::invalid_argument("mock portal option " + std::string(key) + "=" + std::string(value) +
                                 ": expected " + std::string(expected));
}

Result<std::int64_t> parse_int(std::string_view key, std::string_view value, std::int64_t min) {
  std::int64_t v = 0;
  auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || ptr != value.data() + value.size() || v < min) {
    return fail(bad(key, value, "an integer >= " + std::to_string(min)));
  }
  return v;
}

// A duration as config files write it, optionally negative ("-30s").
Result<std::chrono::microseconds> parse_signed_duration(std::string_view key, std::string_view value) {
  const bool negative = value.starts_with('-');
  auto d = common::parse_duration(negative ? value.substr(1) : value);
  if (!d) return fail(bad(key, value, "a duration such as 250ms, 10s or -30s"));
  return negative ? -*d : *d;
}

template <typename E>
Result<E> pick(std::string_view key, std::string_view value,
               std::initializer_list<std::pair<std::string_view, E>> choices) {
  std::string names;
  for (const auto& [name, e] : choices) {
    if (name == value) return e;
    names += names.empty() ? "" : ", ";
    names += name;
  }
  return fail(bad(key, value, "one of " + names));
}

}  // namespace

const std::vector<std::string>& portal_names() {
  static const std::vector<std::string> names{"imdb", "rotten_tomatoes", "sify", "netflix", "amazon_prime"};
  return names;
}

std::string_view to_string(Dialect d) noexcept {
  switch (d) {
    case Dialect::kNone: return "none";
    case Dialect::kFixedWindow: return "fixed_window";
    case Dialect::kTokenBucket: return "token_bucket";
    case Dialect::kIetf: return "ietf";
    case Dialect::kBare429: return "bare_429";
    case Dialect::kRetryAfter: return "retry_after_429";
  }
  return "unknown";
}

Status apply_portal_option(PortalOptions& o, std::string_view key, std::string_view value) {
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  if (key == "dialect") {
    auto d = pick<Dialect>(key, value,
                           {{"none", Dialect::kNone},
                            {"fixed_window", Dialect::kFixedWindow},
                            {"token_bucket", Dialect::kTokenBucket},
                            {"ietf", Dialect::kIetf},
                            {"bare_429", Dialect::kBare429},
                            {"retry_after_429", Dialect::kRetryAfter}});
    if (!d) return fail(d.error());
    o.dialect = *d;
  } else if (key == "limit") {
    auto v = parse_int(key, value, 1);
    if (!v) return fail(v.error());
    o.limit = *v;
  } else if (key == "burst") {
    auto v = parse_int(key, value, 1);
    if (!v) return fail(v.error());
    o.burst = *v;
  } else if (key == "window_offset") {
    auto d = common::parse_duration(value);
    if (!d) return fail(bad(key, value, "a duration such as 250ms, less than the window"));
    o.window_offset = duration_cast<milliseconds>(*d);
  } else if (key == "window" || key == "latency") {
    auto d = common::parse_duration(value);
    if (!d || (key == "window" && d->count() <= 0))
      return fail(bad(key, value, "a duration such as 200ms or 1s"));
    (key == "window" ? o.window : o.latency) = duration_cast<milliseconds>(*d);
  } else if (key == "date_skew") {
    auto d = parse_signed_duration(key, value);
    if (!d) return fail(d.error());
    o.date_skew = duration_cast<std::chrono::seconds>(*d);
  } else if (key == "reset") {
    auto r =
        pick<ResetStyle>(key, value, {{"unix", ResetStyle::kUnixTime}, {"delta", ResetStyle::kDeltaSeconds}});
    if (!r) return fail(r.error());
    o.reset_style = *r;
  } else if (key == "retry_after") {
    auto r = pick<RetryAfterStyle>(
        key, value, {{"seconds", RetryAfterStyle::kSeconds}, {"http_date", RetryAfterStyle::kHttpDate}});
    if (!r) return fail(r.error());
    o.retry_after_style = *r;
  } else if (key == "error_rate") {
    double v = -1;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (ec != std::errc() || ptr != value.data() + value.size() || !(v >= 0.0 && v <= 1.0)) {
      return fail(bad(key, value, "a number between 0 and 1"));
    }
    o.error_rate = v;
  } else if (key == "malformed_headers") {
    auto m = pick<MalformedHeaders>(key, value,
                                    {{"none", MalformedHeaders::kNone},
                                     {"garbage", MalformedHeaders::kGarbage},
                                     {"past", MalformedHeaders::kPast},
                                     {"far_future", MalformedHeaders::kFarFuture}});
    if (!m) return fail(m.error());
    o.malformed_headers = *m;
  } else if (key == "malformed_body") {
    auto m = pick<MalformedBody>(key, value,
                                 {{"none", MalformedBody::kNone},
                                  {"truncated", MalformedBody::kTruncated},
                                  {"html", MalformedBody::kHtml},
                                  {"no_rating", MalformedBody::kNoRating}});
    if (!m) return fail(m.error());
    o.malformed_body = *m;
  } else if (key == "fault") {
    auto f = pick<Fault>(key, value,
                         {{"none", Fault::kNone},
                          {"hang", Fault::kHang},
                          {"reset", Fault::kReset},
                          {"garbage", Fault::kGarbage},
                          {"huge", Fault::kHuge}});
    if (!f) return fail(f.error());
    o.fault = *f;
  } else if (key == "fault_every") {
    auto v = parse_int(key, value, 1);
    if (!v) return fail(v.error());
    o.fault_every = *v;
  } else if (key == "account_limit") {
    auto v = parse_int(key, value, 0);
    if (!v) return fail(v.error());
    o.account_limit = *v;
  } else {
    return fail(Error::invalid_argument(
        "unknown mock portal option '" + std::string(key) +
        "' (known: dialect, limit, window, window_offset, burst, reset, retry_after, error_rate, latency, "
        "malformed_headers, malformed_body, date_skew, fault, fault_every, account_limit)"));
  }
  return {};
}

Status apply_json(ServerOptions& options, const nlohmann::json& doc) {
  if (!doc.is_object()) return fail(Error::invalid_argument("mock portal config: expected a JSON object"));
  auto as_text = [](const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
  for (const auto& [key, value] : doc.items()) {
    if (key == "seed" && value.is_number_unsigned()) {
      options.seed = value.get<std::uint64_t>();
    } else if (key == "threads" && value.is_number_integer() && value.get<int>() >= 1) {
      options.threads = value.get<int>();
    } else if (key == "port" && value.is_number_integer() && value.get<int>() >= 0 &&
               value.get<int>() < 65536) {
      options.port = value.get<int>();
    } else if (key == "host" && value.is_string()) {
      options.host = value.get<std::string>();
    } else if (key != "portals") {
      return fail(Error::invalid_argument("mock portal config: bad or unknown key '" + key +
                                          "' (known: seed, threads, port, host, portals)"));
    }
  }
  if (!doc.contains("portals")) return {};
  const auto& portals = doc["portals"];
  if (!portals.is_object())
    return fail(Error::invalid_argument("mock portal config: 'portals' must be an object"));
  const auto& names = portal_names();
  // "*" first, so named portals override it whatever the key order.
  std::vector<std::string> order;
  if (portals.contains("*")) order.push_back("*");
  for (const auto& [name, _] : portals.items()) {
    if (name == "*") continue;
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      return fail(Error::invalid_argument("mock portal config: unknown portal '" + name +
                                          "' (known: imdb, rotten_tomatoes, sify, netflix, amazon_prime)"));
    }
    order.push_back(name);
  }
  for (const auto& name : order) {
    const auto& settings = portals[name];
    if (!settings.is_object()) {
      return fail(Error::invalid_argument("mock portal config: portals." + name + " must be an object"));
    }
    for (const auto& target : name == "*" ? names : std::vector<std::string>{name}) {
      for (const auto& [key, value] : settings.items()) {
        if (auto s = apply_portal_option(options.portals[target], key, as_text(value)); !s) {
          return fail(s.error().with_context("portals." + name));
        }
      }
    }
  }
  return {};
}

}  // namespace ratchet::mock_portal
