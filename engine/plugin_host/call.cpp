#include "plugin_host/call.hpp"

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <map>
#include <mutex>
#include <stop_token>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/json_depth.hpp"
#include "ratchet/plugin.h"

namespace ratchet::plugin_host {
namespace {

// The deepest a plugin's output may nest (see common/json_depth.hpp): far
// past any reply a step needs, far under the store's read-back bound.
constexpr int kMaxOutputDepth = 256;

// How long past its timeout a call may take to return (see invoke).
constexpr std::chrono::milliseconds kReplyGrace{2000};

std::atomic<std::size_t> g_abandoned_running{0};
std::atomic<std::size_t> g_threads_running{0};

std::string_view view(ratchet_str s) {
  return s.size == 0 || s.data == nullptr ? std::string_view{} : std::string_view(s.data, s.size);
}
ratchet_str str(std::string_view s) { return ratchet_str{s.data(), s.size()}; }

// Whether a struct the other side sized as `size` has room for `field`.
#define RATCHET_HAS_FIELD(type, size, field) \
  ((size) >= offsetof(type, field) + sizeof(((type*)nullptr)->field))

// A response kept alive, with C views of it, until the call's state dies.
struct StoredResponse {
  HttpResult result;
  std::vector<ratchet_header> headers;
};

// Shared by the caller and the thread that runs the plugin; whichever lets
// go last frees it (and with it, possibly, the library).
struct CallState {
  Invocation call;
  ratchet_host_services table{};
  ratchet_call_context context{};
  ratchet_reply reply{};

  // Only the plugin's thread touches these while it runs; the caller reads
  // them after `done` is set under `mu`.
  std::map<const char*, std::size_t> buffers_by_address;
  std::vector<std::unique_ptr<char[]>> buffers;
  std::size_t buffer_bytes = 0;
  std::deque<StoredResponse> responses;
  bool threw = false;

  std::mutex mu;
  std::condition_variable idle;      // in_service dropped to 0
  HostServices* services = nullptr;  // null once the caller gave up
  int in_service = 0;
  bool done = false;
  std::atomic<bool> cancelled{false};
  std::stop_source finished;

  const std::string& plugin() const { return call.library->name(); }

  // Runs `f(services)` unless the caller has gone; false if it had.
  template <typename F>
  bool with_services(F&& f) {
    HostServices* s = nullptr;
    {
      std::lock_guard lock(mu);
      if (services == nullptr) return false;
      s = services;
      ++in_service;
    }
    try {
      f(*s);
    } catch (...) {
      // HostServices must not throw; if it does, the plugin (C code) must
      // not see it. The caller's lambdas leave their defaults in place.
    }
    std::lock_guard lock(mu);
    if (--in_service == 0) idle.notify_all();
    return true;
  }
};

CallState* state_of(void* host_data) { return static_cast<CallState*>(host_data); }

char* host_alloc(void* host_data, size_t size) {
  CallState* st = state_of(host_data);
  if (size > st->call.max_output_bytes || st->buffer_bytes + size > st->call.max_output_bytes) return nullptr;
  try {
    auto buf = std::make_unique<char[]>(size == 0 ? 1 : size);
    char* p = buf.get();
    st->buffers.push_back(std::move(buf));
    st->buffers_by_address[p] = size;
    st->buffer_bytes += size;
    return p;
  } catch (...) {
    return nullptr;
  }
}

int32_t http_into(CallState* st, const ratchet_http_request* req, ratchet_http_response* resp);

// No exception may reach the plugin's C frames.
int32_t host_http(void* host_data, const ratchet_http_request* req, ratchet_http_response* resp) {
  if (resp == nullptr || !RATCHET_HAS_FIELD(ratchet_http_response, resp->struct_size, transport_error))
    return RATCHET_HTTP_OTHER;
  try {
    return http_into(state_of(host_data), req, resp);
  } catch (...) {
    resp->transport_error = RATCHET_HTTP_OTHER;
    return RATCHET_HTTP_OTHER;
  }
}

int32_t http_into(CallState* st, const ratchet_http_request* req, ratchet_http_response* resp) {
  StoredResponse& stored = st->responses.emplace_back();
  HttpResult& r = stored.result;
  if (req == nullptr || !RATCHET_HAS_FIELD(ratchet_http_request, req->struct_size, body)) {
    r.error = HttpFailure::kOther;
    r.message = "the plugin passed a malformed ratchet_http_request";
  } else if (st->cancelled.load()) {
    r.error = HttpFailure::kCancelled;
    r.message = "the call was cancelled or timed out";
  } else {
    HttpRequest request;
    request.method = view(req->method);
    request.url = view(req->url);
    request.body = view(req->body);
    if (RATCHET_HAS_FIELD(ratchet_http_request, req->struct_size, cost) && req->cost > 0)
      request.cost = req->cost;
    for (size_t i = 0; i < req->header_count && req->headers != nullptr; ++i)
      request.headers.emplace_back(view(req->headers[i].name), view(req->headers[i].value));
    r.error = HttpFailure::kOther;
    r.message = "the engine's HTTP service failed";
    bool ran = st->with_services([&](HostServices& s) { r = s.http(st->plugin(), request); });
    if (!ran) {
      r = HttpResult{};
      r.error = HttpFailure::kCancelled;
      r.message = "the call timed out";
    }
  }
  for (const auto& [k, v] : r.headers) stored.headers.push_back({str(k), str(v)});

  const uint32_t size = resp->struct_size;
  resp->transport_error = static_cast<int32_t>(r.error);
  if (RATCHET_HAS_FIELD(ratchet_http_response, size, status)) resp->status = r.status;
  if (RATCHET_HAS_FIELD(ratchet_http_response, size, headers)) resp->headers = stored.headers.data();
  if (RATCHET_HAS_FIELD(ratchet_http_response, size, header_count))
    resp->header_count = stored.headers.size();
  if (RATCHET_HAS_FIELD(ratchet_http_response, size, body)) resp->body = str(r.body);
  if (RATCHET_HAS_FIELD(ratchet_http_response, size, message)) resp->message = str(r.message);
  if (RATCHET_HAS_FIELD(ratchet_http_response, size, retry_after_ms))
    resp->retry_after_ms = r.retry_after ? r.retry_after->count() : RATCHET_NO_RETRY_AFTER;
  return resp->transport_error;
}

void host_log(void* host_data, int32_t level, ratchet_str message) {
  CallState* st = state_of(host_data);
  if (level < RATCHET_LOG_DEBUG || level > RATCHET_LOG_ERROR) level = RATCHET_LOG_INFO;
  st->with_services(
      [&](HostServices& s) { s.log(st->plugin(), static_cast<LogLevel>(level), view(message)); });
}

void host_report_cost(void* host_data, int64_t units) {
  CallState* st = state_of(host_data);
  if (units < 0) units = 0;
  st->with_services([&](HostServices& s) { s.report_cost(st->plugin(), units); });
}

int32_t host_is_cancelled(void* host_data) {
  CallState* st = state_of(host_data);
  if (st->cancelled.load()) return 1;
  bool yes = false;
  if (!st->with_services([&](HostServices& s) { yes = s.cancelled(); })) return 1;
  return yes ? 1 : 0;
}

void run(const std::shared_ptr<CallState>& st) {
  try {
    st->call.fn(&st->table, &st->context, str(st->call.args), str(st->call.config), &st->reply);
  } catch (...) {
    // Only a raw C plugin can get here; the exception object is destroyed
    // now, while its library is still loaded.
    st->threw = true;
  }
  bool was_abandoned = false;
  {
    std::lock_guard lock(st->mu);
    st->done = true;
    was_abandoned = st->services == nullptr;
  }
  st->finished.request_stop();
  if (was_abandoned) --g_abandoned_running;
}

std::string who(const Invocation& c) {
  return fmt::format("plugin '{}' {} operation '{}'", c.library->name(), c.library->version(), c.operation);
}

Result<CallReply> read_reply(CallState& st) {
  const Invocation& c = st.call;
  if (st.threw)
    return fail(Error::plugin(who(c) +
                              " let a C++ exception escape through the C ABI; the call failed. The plugin "
                              "must catch everything (the C++ SDK does this for you)"));
  const ratchet_reply& r = st.reply;
  if (r.status < RATCHET_STATUS_OK || r.status > RATCHET_STATUS_FATAL)
    return fail(
        Error::plugin(fmt::format("{} returned an unknown status {} (expected 0 ok, 1 retryable, 2 "
                                  "throttled or 3 fatal)",
                                  who(c), r.status)));
  std::string_view text;
  if (r.output == nullptr) {
    if (r.output_size != 0)
      return fail(
          Error::plugin(fmt::format("{} returned a NULL output buffer of {} bytes", who(c), r.output_size)));
  } else {
    auto it = st.buffers_by_address.find(r.output);
    if (it == st.buffers_by_address.end())
      return fail(Error::plugin(who(c) + " returned an output buffer that host->alloc did not allocate"));
    if (r.output_size > it->second)
      return fail(Error::plugin(fmt::format("{} returned {} bytes of output from a buffer of {}", who(c),
                                            r.output_size, it->second)));
    text = std::string_view(r.output, r.output_size);
  }

  CallReply out;
  out.plugin_version = c.library->version();
  if (r.retry_after_ms >= 0) out.retry_after = std::chrono::milliseconds(r.retry_after_ms);
  switch (r.status) {
    case RATCHET_STATUS_OK: {
      if (text.empty()) return fail(Error::plugin(who(c) + " returned ok with no output (expected JSON)"));
      out.status = CallStatus::kOk;
      // Measured before it is parsed: each later copy, mask or dump of the
      // value recurses once per level (a server's 30,000 nested arrays
      // passed through crashed the process), and the store reads back at
      // most 1,000.
      if (const int depth = common::json_text_depth(text); depth > kMaxOutputDepth) {
        return fail(Error::plugin(fmt::format(
            "{} returned ok with output nested {} levels deep, past the {} ratchet takes (a reply passed "
            "through as it came? extract the part the step needs)",
            who(c), depth, kMaxOutputDepth)));
      }
      // The parser stops at a NUL byte as at the end: "{...}\0junk" would
      // pass. JSON text holds no raw NUL.
      out.output = text.find('\0') != std::string_view::npos
                       ? nlohmann::json(nlohmann::json::value_t::discarded)
                       : nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (out.output.is_discarded()) {
        std::string shown;
        for (char ch : text.substr(0, 120)) shown += (ch >= 0x20 && ch < 0x7f) ? ch : '?';
        return fail(Error::plugin(who(c) + " returned ok with output that is not JSON: \"" + shown + "\""));
      }
      break;
    }
    case RATCHET_STATUS_RETRYABLE: out.status = CallStatus::kRetryable; break;
    case RATCHET_STATUS_THROTTLED: out.status = CallStatus::kThrottled; break;
    default: out.status = CallStatus::kFatal; break;
  }
  if (out.status != CallStatus::kOk)
    out.message = text.empty() ? "(the plugin gave no message)" : std::string(text);
  return out;
}

}  // namespace

std::string_view to_string(CallStatus s) noexcept {
  switch (s) {
    case CallStatus::kOk: return "ok";
    case CallStatus::kRetryable: return "retryable";
    case CallStatus::kThrottled: return "throttled";
    case CallStatus::kFatal: return "fatal";
  }
  return "unknown";
}

Result<CallReply> invoke(Invocation call, HostServices& services, const Clock& clock) {
  auto st = std::make_shared<CallState>();
  st->call = std::move(call);
  st->services = &services;

  st->table.struct_size = sizeof(ratchet_host_services);
  st->table.host_data = st.get();
  st->table.alloc = &host_alloc;
  st->table.http_request = &host_http;
  st->table.log = &host_log;
  st->table.is_cancelled = &host_is_cancelled;
  st->table.report_cost = &host_report_cost;

  const CallContext& cc = st->call.context;
  st->context.struct_size = sizeof(ratchet_call_context);
  st->context.idempotency_key = str(cc.idempotency_key);
  st->context.job_id = str(cc.job_id);
  st->context.step_name = str(cc.step_name);
  st->context.operation = str(st->call.operation);

  st->reply.struct_size = sizeof(ratchet_reply);
  st->reply.status = RATCHET_STATUS_FATAL;
  st->reply.retry_after_ms = RATCHET_NO_RETRY_AFTER;

  // The plugin's own requests time out at `timeout` too: it gets a moment
  // past that to return what they said. Watched to the same instant, a
  // server that never answered was blamed on the plugin ("did not return"),
  // and the URL that timed out was lost.
  const TimePoint deadline = clock.now() + st->call.timeout + kReplyGrace;
  std::stop_token finished = st->finished.get_token();
  std::thread worker;
  try {
    ++g_threads_running;
    worker = std::thread([held = st]() mutable {
      run(held);
      held.reset();  // unloads the library if an abandoned call held it last
      --g_threads_running;
    });
  } catch (const std::system_error& e) {
    --g_threads_running;
    return fail(Error::unavailable(who(st->call) + " could not start a thread: " + e.what()));
  }
  clock.wait_until(deadline, finished);

  std::unique_lock lock(st->mu);
  if (!st->done) {
    // Give up: refuse every later service request, wait for one in progress
    // (bounded by the HTTP client's own timeouts) so `services` is never used
    // after we return, and leave the thread holding its library.
    ++g_abandoned_running;  // before `services` is cleared: run() decrements only after that
    st->cancelled.store(true);
    st->services = nullptr;
    st->idle.wait(lock, [&] { return st->in_service == 0; });
    worker.detach();
    return fail(Error::timeout(
        fmt::format("{} did not return within {}ms (and {}ms more); the call failed and its thread was "
                    "abandoned (the plugin should check "
                    "is_cancelled)",
                    who(st->call), st->call.timeout.count(), kReplyGrace.count())));
  }
  st->services = nullptr;
  lock.unlock();
  // Joining makes this caller the last owner, so a library replaced meanwhile
  // is unloaded by the time the call returns, not at some later moment.
  worker.join();
  return read_reply(*st);
}

std::size_t abandoned_calls_running() noexcept { return g_abandoned_running.load(); }
std::size_t call_threads_running() noexcept { return g_threads_running.load(); }

}  // namespace ratchet::plugin_host
