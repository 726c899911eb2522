// The C++ SDK for writing ratchet plugins: ordinary C++ over the C ABI of
// ratchet/plugin.h. Header-only; a plugin links nothing from ratchet.
//
//   #include <ratchet/plugin.hpp>
//   namespace rp = ratchet::plugin;
//   using nlohmann::json;
//
//   json get_rating(rp::Context& ctx, const json& args) {
//     std::string url = ctx.setting("base_url") + "/movies/" + rp::url_encode(rp::string_arg(args, "name"));
//     rp::Response r = ctx.http().get(url, {{"Accept", "application/json"}});
//     r.raise_for_status();  // 429 -> Throttled, 5xx -> Retryable, other -> Fatal
//     json body = r.json();  // malformed -> Fatal, quoting the body
//     if (!body.contains("rating") || !body["rating"].is_number())
//       throw rp::Fatal("no rating in " + rp::printable_prefix(r.body));
//     return {{"rating", body["rating"]}};
//   }
//   RATCHET_PLUGIN("imdb", "1.0.0", RATCHET_OP(get_rating))
//
// Build it as a MODULE library exporting only ratchet_plugin_entry_v1 (link
// with plugins/common/exports.map): hidden symbols keep plugins apart, and a
// library exporting C++ "unique" symbols could never be unloaded.
//
// An operation whose calls cost the plugin's limits different amounts (a
// GraphQL query's points) can say so before each call is admitted, so the
// call waits once, for a slot of its size:
//
//   std::int64_t points(const json& args, const json& config) { return args.value("points", 1); }
//   RATCHET_PLUGIN("graph", "1.0.0", RATCHET_OP_ESTIMATED(query, points))
//
// An operation reports failure by throwing Fatal, Retryable or Throttled;
// any other exception becomes a fatal status with its what(). Nothing is
// thrown across the C boundary: the SDK catches everything on the plugin side.
//
// Ownership: a Context and everything it returns (config, responses) live for
// one call; Response copies what the host returned, so it may be kept.
// Thread-safety: operations run concurrently on different threads; each has
// its own Context, which must not be shared with other threads.
#pragma once

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ratchet/plugin.h"

namespace ratchet::plugin {

// ------------------------------------------------------------ statuses

// Retrying cannot help: bad arguments, bad config, a malformed reply.
class Fatal : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A transient failure (5xx, timeout); the engine's retry policy decides.
class Retryable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The portal asked to slow down, optionally saying for how long.
class Throttled : public std::runtime_error {
 public:
  explicit Throttled(const std::string& message,
                     std::optional<std::chrono::milliseconds> retry_after = std::nullopt)
      : std::runtime_error(message), retry_after_(retry_after) {}
  std::optional<std::chrono::milliseconds> retry_after() const { return retry_after_; }

 private:
  std::optional<std::chrono::milliseconds> retry_after_;
};

// ---------------------------------------------------------------- HTTP

using Headers = std::vector<std::pair<std::string, std::string>>;

namespace detail {
inline std::string_view view(ratchet_str s) {
  return s.size == 0 ? std::string_view{} : std::string_view(s.data, s.size);
}
inline ratchet_str str(std::string_view s) { return ratchet_str{s.data(), s.size()}; }
inline bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}
}  // namespace detail

// At most `limit` bytes of `body` with anything unprintable shown as '?', for
// error messages that quote what a server sent.
inline std::string printable_prefix(std::string_view body, std::size_t limit = 200) {
  std::string out;
  for (char c : body.substr(0, limit)) {
    auto u = static_cast<unsigned char>(c);
    out += (u >= 0x20 && u < 0x7f) ? c : '?';
  }
  if (body.size() > limit) out += "...";
  return out;
}

// Percent-encodes everything except RFC 3986 unreserved characters, so a
// value can be one path segment or query value.
inline std::string url_encode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

// The URL as the SDK's messages quote it: scheme, host, port and path,
// without user info, query string or fragment, where keys and tokens travel.
// "https://u:p@api.x/v1/m?key=s#f" -> "https://api.x/v1/m". (The engine
// masks secrets in every message too; this keeps them out of the text a
// plugin cuts or keeps.)
inline std::string redact_url(std::string_view url) {
  url = url.substr(0, url.find_first_of("?#"));
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return std::string(url);
  const auto authority_begin = scheme_end + 3;
  const auto path_begin = url.find('/', authority_begin);
  const auto authority =
      url.substr(authority_begin, path_begin == std::string_view::npos ? std::string_view::npos
                                                                       : path_begin - authority_begin);
  const auto at = authority.rfind('@');
  std::string out(url.substr(0, authority_begin));
  out += at == std::string_view::npos ? authority : authority.substr(at + 1);
  if (path_begin != std::string_view::npos) out += url.substr(path_begin);
  return out;
}

// A response that arrived (any HTTP status). Transport failures never make a
// Response: Http throws the matching status exception instead.
struct Response {
  int status = 0;
  Headers headers;
  std::string body;
  std::optional<std::chrono::milliseconds> retry_after;  // as the host read the headers
  std::string url;

  // The first header of that name (case-insensitive), if any.
  std::optional<std::string> header(std::string_view name) const {
    for (const auto& [k, v] : headers)
      if (detail::iequals(k, name)) return v;
    return std::nullopt;
  }

  // The usual mapping of a non-2xx status: 429 -> Throttled (with the host's
  // retry-after), 5xx -> Retryable, anything else -> Fatal. The message names
  // the URL (without its query string), the status and the body's first bytes.
  void raise_for_status() const {
    if (status >= 200 && status < 300) return;
    std::string what = "HTTP " + std::to_string(status) + " from " + redact_url(url);
    if (!body.empty()) what += ": " + printable_prefix(body);
    if (status == 429) throw Throttled(what, retry_after);
    if (status >= 500 && status < 600) throw Retryable(what);
    throw Fatal(what);
  }

  // The body parsed as JSON; a malformed body is Fatal, quoting its first bytes.
  nlohmann::json json() const {
    // The parser takes a NUL byte for the end of the text: `{"a": 1}\0junk`
    // would pass. JSON text holds no raw NUL.
    auto parsed = body.find('\0') != std::string_view::npos
                      ? nlohmann::json(nlohmann::json::value_t::discarded)
                      : nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded())
      throw Fatal("malformed JSON from " + redact_url(url) + ": \"" + printable_prefix(body) + "\"");
    return parsed;
  }
};

// HTTP through the engine: its client, this plugin's limiters and retry.
class Http {
 public:
  explicit Http(const ratchet_host_services* host) : host_(host) {}

  Response get(const std::string& url, const Headers& headers = {}) {
    return request("GET", url, headers, {});
  }
  Response post(const std::string& url, std::string_view body, const Headers& headers = {}) {
    return request("POST", url, headers, body);
  }

  // Throws Throttled when the engine refused the request for its limits,
  // Retryable on timeouts and connection failures, Fatal on TLS failures, an
  // oversized response or a cancelled call.
  //
  // `cost` is the units of the plugin's limits the request is expected to
  // cost (0: the operation's declared cost); report_cost() corrects it from
  // the reply.
  Response request(std::string_view method, const std::string& url, const Headers& headers,
                   std::string_view body, std::int64_t cost = 0) {
    std::vector<ratchet_header> raw;
    raw.reserve(headers.size());
    for (const auto& [k, v] : headers) raw.push_back({detail::str(k), detail::str(v)});
    ratchet_http_request req{};
    req.struct_size = sizeof(req);
    req.method = detail::str(method);
    req.url = detail::str(url);
    req.headers = raw.data();
    req.header_count = raw.size();
    req.body = detail::str(body);
    req.cost = cost;
    ratchet_http_response resp{};
    resp.struct_size = sizeof(resp);
    resp.retry_after_ms = RATCHET_NO_RETRY_AFTER;
    host_->http_request(host_->host_data, &req, &resp);

    std::optional<std::chrono::milliseconds> retry_after;
    if (resp.retry_after_ms >= 0) retry_after = std::chrono::milliseconds(resp.retry_after_ms);
    std::string why(detail::view(resp.message));
    std::string where = std::string(method) + " " + redact_url(url);
    switch (resp.transport_error) {
      case RATCHET_HTTP_OK: break;
      case RATCHET_HTTP_REFUSED: throw Throttled(where + " refused by the engine: " + why, retry_after);
      case RATCHET_HTTP_TIMEOUT: throw Retryable(where + " timed out: " + why);
      case RATCHET_HTTP_CONNECT: throw Retryable(where + " connection failed: " + why);
      case RATCHET_HTTP_TLS: throw Fatal(where + " TLS failure: " + why);
      case RATCHET_HTTP_TOO_LARGE: throw Fatal(where + " response too large: " + why);
      case RATCHET_HTTP_CANCELLED: throw Fatal(where + " cancelled: " + why);
      default: throw Retryable(where + " failed: " + why);
    }
    Response out;
    out.status = resp.status;
    out.url = url;
    out.retry_after = retry_after;
    out.body.assign(detail::view(resp.body));
    for (std::size_t i = 0; i < resp.header_count; ++i)
      out.headers.emplace_back(detail::view(resp.headers[i].name), detail::view(resp.headers[i].value));
    return out;
  }

  // The last request really cost `units` (a GraphQL cost field, a header):
  // the engine corrects its limits at once. An engine too old to take it
  // ignores it.
  void report_cost(std::int64_t units) {
    if (host_->struct_size >= offsetof(ratchet_host_services, report_cost) + sizeof(host_->report_cost) &&
        host_->report_cost != nullptr) {
      host_->report_cost(host_->host_data, units);
    }
  }

 private:
  const ratchet_host_services* host_;
};

// ------------------------------------------------------------- logging

class Log {
 public:
  explicit Log(const ratchet_host_services* host) : host_(host) {}
  void debug(std::string_view m) const { write(RATCHET_LOG_DEBUG, m); }
  void info(std::string_view m) const { write(RATCHET_LOG_INFO, m); }
  void warn(std::string_view m) const { write(RATCHET_LOG_WARN, m); }
  void error(std::string_view m) const { write(RATCHET_LOG_ERROR, m); }
  void write(int32_t level, std::string_view m) const { host_->log(host_->host_data, level, detail::str(m)); }

 private:
  const ratchet_host_services* host_;
};

// ------------------------------------------------------------- context

// Everything an operation may use during one call.
class Context {
 public:
  Context(const ratchet_host_services* host, const ratchet_call_context* call, ratchet_str config)
      : host_(host), call_(call), config_text_(detail::view(config)), http_(host), log_(host) {}

  Http& http() { return http_; }
  const Log& log() const { return log_; }

  // The plugin's settings from the engine's config ({} when unconfigured).
  // Secrets from ${ENV} are already resolved here: never log them.
  const nlohmann::json& config() {
    if (!config_) {
      config_ = config_text_.empty()
                    ? nlohmann::json::object()
                    : nlohmann::json::parse(config_text_, nullptr, /*allow_exceptions=*/false);
      if (config_->is_discarded()) throw Fatal("the plugin's config is not valid JSON");
    }
    return *config_;
  }

  // A required string setting; Fatal naming the key when absent.
  std::string setting(const std::string& key) {
    const auto& c = config();
    auto it = c.find(key);
    if (it == c.end() || !it->is_string())
      throw Fatal("setting '" + key +
                  "' is missing or not a string; set it in this plugin's [plugin.NAME] table");
    return it->get<std::string>();
  }

  std::string_view idempotency_key() const { return detail::view(call_->idempotency_key); }
  std::string_view job_id() const { return detail::view(call_->job_id); }
  std::string_view step_name() const { return detail::view(call_->step_name); }
  std::string_view operation() const { return detail::view(call_->operation); }
  bool cancelled() const { return host_->is_cancelled(host_->host_data) != 0; }

 private:
  const ratchet_host_services* host_;
  const ratchet_call_context* call_;
  std::string_view config_text_;
  std::optional<nlohmann::json> config_;
  Http http_;
  Log log_;
};

// A required string argument; Fatal naming the field otherwise.
inline std::string string_arg(const nlohmann::json& args, const std::string& key) {
  auto it = args.find(key);
  if (it == args.end() || !it->is_string()) throw Fatal("argument '" + key + "' is missing or not a string");
  return it->get<std::string>();
}

// ------------------------------------------------------ the C adapter

using Operation = nlohmann::json (*)(Context&, const nlohmann::json&);

// The units a call with these arguments and settings is expected to cost
// (ratchet_estimate_fn): quick, without the host; 0 or less, or throwing:
// the operation's declared cost.
using Estimate = std::int64_t (*)(const nlohmann::json& args, const nlohmann::json& config);

namespace detail {

inline void reply_with(const ratchet_host_services* host, ratchet_reply* reply, int32_t status,
                       std::string_view text) noexcept {
  reply->status = status;
  reply->output = nullptr;
  reply->output_size = 0;
  char* buf = host->alloc(host->host_data, text.size());
  if (buf == nullptr) {
    // The host refused the size; a short fatal message still explains why.
    static constexpr std::string_view kTooBig = "plugin output exceeds the host's bound";
    buf = host->alloc(host->host_data, kTooBig.size());
    if (buf == nullptr) return;
    reply->status = RATCHET_STATUS_FATAL;
    text = kTooBig;
  }
  if (!text.empty()) std::memcpy(buf, text.data(), text.size());
  reply->output = buf;
  reply->output_size = text.size();
}

template <Operation F>
void trampoline(const ratchet_host_services* host, const ratchet_call_context* call, ratchet_str args,
                ratchet_str config, ratchet_reply* reply) noexcept {
  try {
    try {
      Context ctx(host, call, config);
      auto parsed = view(args).empty()
                        ? nlohmann::json::object()
                        : nlohmann::json::parse(view(args), nullptr, /*allow_exceptions=*/false);
      if (parsed.is_discarded()) throw Fatal("the operation's arguments are not valid JSON");
      nlohmann::json out = F(ctx, parsed);
      reply_with(host, reply, RATCHET_STATUS_OK,
                 out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    } catch (const Throttled& e) {
      reply_with(host, reply, RATCHET_STATUS_THROTTLED, e.what());
      if (auto ra = e.retry_after()) reply->retry_after_ms = ra->count();
    } catch (const Retryable& e) {
      reply_with(host, reply, RATCHET_STATUS_RETRYABLE, e.what());
    } catch (const Fatal& e) {
      reply_with(host, reply, RATCHET_STATUS_FATAL, e.what());
    } catch (const std::exception& e) {
      reply_with(host, reply, RATCHET_STATUS_FATAL, e.what());
    }
  } catch (...) {
    reply_with(host, reply, RATCHET_STATUS_FATAL, "unknown exception in plugin operation");
  }
}

template <Estimate E>
int64_t estimate_trampoline(ratchet_str args, ratchet_str config) noexcept {
  try {
    auto parse = [](ratchet_str text) {
      return view(text).empty() ? nlohmann::json::object()
                                : nlohmann::json::parse(view(text), nullptr, /*allow_exceptions=*/false);
    };
    const nlohmann::json a = parse(args);
    const nlohmann::json c = parse(config);
    if (a.is_discarded() || c.is_discarded()) return 0;
    return E(a, c);
  } catch (...) {
    return 0;
  }
}

}  // namespace detail
}  // namespace ratchet::plugin

// One operation for RATCHET_PLUGIN: the function's name is the operation's name.
#define RATCHET_OP(fn) \
  ratchet_operation { #fn, &::ratchet::plugin::detail::trampoline < &fn>, nullptr }

// One operation with an estimate of each call's cost (plugin::Estimate),
// asked before the call is admitted to the plugin's limits.
// clang-format off
#define RATCHET_OP_ESTIMATED(fn, estimate_fn)                                            \
  ratchet_operation {                                                                    \
    #fn, &::ratchet::plugin::detail::trampoline<&fn>,                                    \
    &::ratchet::plugin::detail::estimate_trampoline<&estimate_fn>                        \
  }
// clang-format on

// Declares the plugin: its name (what config calls it), its version and its
// operations. Exports the entry point, the library's only visible symbol.
#define RATCHET_PLUGIN(NAME, VERSION, ...)                                           \
  extern "C" __attribute__((visibility("default"))) const ratchet_plugin_descriptor* \
  ratchet_plugin_entry_v1(void) {                                                    \
    static const ratchet_operation ratchet_ops[] = {__VA_ARGS__};                    \
    static const ratchet_plugin_descriptor ratchet_descriptor = {                    \
        RATCHET_PLUGIN_ABI_VERSION,                                                  \
        sizeof(ratchet_plugin_descriptor),                                           \
        NAME,                                                                        \
        VERSION,                                                                     \
        ratchet_ops,                                                                 \
        static_cast<uint32_t>(sizeof(ratchet_ops) / sizeof(ratchet_ops[0])),         \
        sizeof(ratchet_operation),                                                   \
        nullptr,                                                                     \
        nullptr};                                                                    \
    return &ratchet_descriptor;                                                      \
  }
